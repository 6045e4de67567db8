"""The tiny Wide & Deep (the tf extra): its config, features and generated data."""

import pytest
import yaml

from deploybench.models import widedeep  # noqa: E402
from testkit.workflow import ROOT, needs

tf = needs("tensorflow")
keras = needs("keras")
TINY_CONFIG = yaml.safe_load((ROOT / "tests/config/models/widedeep-tiny.yaml").read_text())
TINY = TINY_CONFIG["hparams"]
CATS = TINY["categorical_features"]
NUMS = TINY["numerical_features"]
C = len(CATS)  # 13 one-hot, then 3 multi-hot
HOT = [f.get("hotness", 1) for f in CATS]
MULTI = [i for i, h in enumerate(HOT) if h > 1]
SIZES = [min(f["cardinality"], 50) for f in CATS]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("outbrain")
    widedeep.generate_dataset(TINY, str(out), seed=3, n_train=40, n_valid=100)
    return out
