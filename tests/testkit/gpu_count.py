"""The two-GPU run's config."""

from testkit.workflow import ROOT

TWO_GPUS = ROOT / "config/runs/two-gpus.yaml"
