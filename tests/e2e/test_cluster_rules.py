"""The rules' cluster resources, as the real Snakemake reads them."""

import re

from testkit.workflow import snakemake


def test_rules_carry_the_resources(tmp_path):
    """The dry-run's resources of a GPU target: the registry's placement, no bench_slot
    needed by the cluster, and no GPU for the export."""
    out = snakemake(tmp_path, "-n", "results/tft-tiny/a30/trt_fp16/offline.csv").stdout
    # (a measuring step is shown inside its group job, indented)
    jobs = dict(re.findall(r"^ *rule (\w+):.*?^ +resources: ([^\n]*)", out, re.M | re.S))
    assert "slurm_partition=a30" in jobs["offline"] and "gpu_model=a30" in jobs["offline"]
    assert "gpu_model=a30" in jobs["convert"]  # the TensorRT build
    assert "gpu" not in jobs["export"] and "slurm" not in jobs["export"]
