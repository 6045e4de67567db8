# Triton deployment benchmarks: model × GPU × backend × precision as file targets.
#   snakemake -c2 results/tft/cpu/onnx_fp32/offline.csv
# Rules wire files (paths from deploybench.records.layout); every rule's step is the function of
# deploybench.steps named as the rule, run by scripts/run_step.py.
import atexit
from pathlib import Path

from snakemake.utils import min_version, validate

from deploybench.settings.config import check_main
from deploybench.settings.config_files import check_main_files
from deploybench.settings.invocation import invocation

min_version("9.0")


# `snakemake --report report.html`: its front page; what it lists is marked by reported()
# (rules/targets.smk).
report: "report/workflow.rst"


# No YTE, aliases bounded, a mapping (deploybench.settings.config_files): config/config.yaml before
# Snakemake reads it; the --configfile files, which the workflow profile checked before
# Snakemake read them, again for a run without one (--workflow-profile none).
check_main_files(
    [*invocation(workflow).configfiles, Path(workflow.basedir) / "config" / "config.yaml"]
)


configfile: Path(workflow.basedir) / "config" / "config.yaml"


# --config hands values over as strings: numbers and booleans where the schema says so;
# then Snakemake's validation fills the schema's defaults.
check_main(config)
validate(config, "config/schema/config.schema.yaml")


# Every rule's software environment: envs/deploybench.yaml (conda:, per rule) or, with
# --software-deployment-method apptainer, the client/tooling image (containers/).
if config.get("container"):

    container: config["container"]


include: "rules/common.smk"
include: "rules/inputs.smk"
include: "rules/targets.smk"
include: "rules/search_common.smk"
include: "rules/source.smk"
include: "rules/convert.smk"
include: "rules/serve.smk"
include: "rules/report.smk"
include: "rules/search.smk"


rule all:
    default_target: True
    input:
        default_targets(),


# The run's last lines: the reports it was asked for and the HTML report's command (printed
# at exit, after Snakemake's own closing lines).
onsuccess:
    atexit.register(print, run_summary())


onerror:
    atexit.register(print, run_summary(failed=True))


# `snakemake references`: every published table of the reference documents, re-created by the
# configuration that reproduces it on the GPU key it was measured on.
rule references:
    input:
        lambda w: reference_targets(),
