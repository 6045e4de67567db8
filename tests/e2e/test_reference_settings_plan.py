"""Every published table dry-runs to the configuration that reproduces it."""

import re

import yaml

from deploybench.settings.resolve import Settings
from testkit.workflow import ROOT


# the real Snakemake, a dry run
def test_every_published_table_dry_runs_to_the_configuration_that_reproduces_it(tmp_path):
    """`snakemake references`: each GPU key of each reference table, paired by reference.pairs."""
    import subprocess
    import sys

    import pandas as pd

    from deploybench.records.tables import REFERENCE_SERIES, reference_series

    settings = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    published = pd.read_csv(ROOT / "config/reference/tables.csv", low_memory=False)
    expected = set()
    for model in settings.models:
        reference = settings.reference(model)
        rows = published[published["document"] == reference["document"]]
        for column, value in reference.get("where", {}).items():
            rows = rows[rows[column].astype(str).isin({str(value), f"{value}.0"})]
        for (gpu, *series), _ in rows.groupby(["gpu_key", *REFERENCE_SERIES], dropna=False):
            backend, precision = reference["pairs"][reference_series(*series)].rsplit("_", 1)
            expected.add((model, gpu, backend, precision))
    assert set(settings.reference_targets()) == expected
    assert {"a40"} <= {gpu for _, gpu, _, _ in expected}  # FastPitch's A40 tables
    assert ("tft", "a100", "ts-trace", "fp32") in expected  # the "PyTorch FP16" rows
    assert ("widedeep", "t4", "tf-savedmodel", "fp16") in expected  # "TensorFlow FP32" (AMP)

    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
         "--directory", str(tmp_path), "-n", "references"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    planned = set(re.findall(r"output: results/([\w-]+)/(\w+)/([\w-]+)_(fp\d\d)/README\.md",
                             result.stdout))
    assert planned == expected
