"""The seed's published tables, parsed once into config/reference/ (and kept in sync)."""

import pytest

from conftest import ROOT
from deploybench import seed_tables

SEED = ROOT.parent / "shared" / "seeds" / "002_86a4b5901d69b16e.txt"
COMMITTED = ROOT / "config" / "reference" / "tft_seed_tables.csv"


@pytest.fixture(scope="module")
def parsed():
    if not SEED.is_file():
        pytest.skip(f"seed document {SEED} not beside the repository")
    return seed_tables.parse(SEED)


def test_known_rows(parsed):
    a100 = parsed[(parsed["gpu_key"] == "a100") & (parsed["dataset"] == "electricity")]
    offline = a100[a100["scenario"] == "offline"].set_index(["backend", "Batch"])
    assert offline.loc[("NVIDIA TensorRT", 1024), "Inferences/Second"] == 54061.8
    assert offline.loc[("PyTorch", 1024), "Inferences/Second"] == 25159.9
    assert offline.loc[("PyTorch", 1), "Inferences/Second"] == 205.0
    online = a100[(a100["scenario"] == "online") & (a100["backend"] == "PyTorch")]
    first = online.set_index("Concurrency").loc[8]
    assert first["Batch"] == 16 and first["Inferences/Second"] == 8080.0
    assert len(parsed) == 4 * 2 * 2 * (11 + 32)  # GPUs x backends x datasets x rows


def test_committed_table_is_a_fresh_parse(parsed):
    assert COMMITTED.read_text() == parsed.to_csv(index=False)


def test_malformed_table_names_the_section(tmp_path):
    text = "\n".join(["Offline: NVIDIA T4, PyTorch with FP16, Dataset: x",
                      seed_tables.INTRO, "GPU", "NVIDIA T4", "Results Table",
                      "Batch", "Concurrency", "1", "1", "2"])
    (tmp_path / "bad.txt").write_text(text)
    with pytest.raises(ValueError, match="'Offline: NVIDIA T4, PyTorch with FP16, Dataset: x' "
                                         "has 3 values for 2 columns"):
        seed_tables.parse(tmp_path / "bad.txt")
