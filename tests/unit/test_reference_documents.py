"""The reference documents' published tables (../shared/seeds), parsed once into
config/reference/tables.csv (kept in sync). A fresh clone (CI's) has no ../shared beside it:
documents' excerpts committed in tests/data/reference_documents (whole lines of each, in
order: a section of every layout and unit, the deploy commands the settings tests read) are
parsed on every run; the whole documents where they are there."""

import io
from pathlib import Path

import pandas as pd
import pytest
import reference_tables

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ROOT.parent / "shared" / "seeds"
EXCERPTS = ROOT / "tests" / "data" / "reference_documents"
TFT = "002_86a4b5901d69b16e.txt"
COMMITTED = ROOT / "config" / "reference" / "tables.csv"

needs_documents = pytest.mark.skipif(
    not (DOCUMENTS / "INDEX.md").is_file(),
    reason=f"reference documents not beside the repository ({DOCUMENTS} is absent; their "
           "excerpts' tests run instead)")


@pytest.fixture(scope="module")
def tft():
    return reference_tables.parse_document(EXCERPTS / TFT)


@pytest.fixture(scope="module")
def excerpts():
    return reference_tables.parse_documents(EXCERPTS)


@pytest.fixture(scope="module")
def committed():
    return pd.read_csv(COMMITTED, low_memory=False)


@pytest.fixture(scope="module")
def all_documents():
    return reference_tables.parse_documents(DOCUMENTS)


def test_tft_known_rows(tft, committed):
    """TFT's linear layout: the A100 electricity sections as the document prints them."""
    assert set(tft["document"]) == {TFT}
    assert set(tft["model"]) == {"TFT (electricity, traffic)"}
    a100 = tft[(tft["gpu_key"] == "a100") & (tft["dataset"] == "electricity")]
    assert set(a100["gpu"]) == {"NVIDIA DGX A100 (1x A100 80GB)"}
    offline = a100[a100["scenario"] == "offline"].set_index(["backend", "batch"])
    assert offline.loc[("NVIDIA TensorRT", 1024), "Inferences/Second"] == 54061.8
    assert offline.loc[("PyTorch", 1024), "Inferences/Second"] == 25159.9
    row = offline.loc[("PyTorch", 1)]
    assert row["Inferences/Second"] == 205.0 and row["precision"] == "FP16"
    assert row["concurrency"] == 1 and row["max_batch_size"] == 1024
    online = a100[(a100["scenario"] == "online") & (a100["backend"] == "PyTorch")]
    at8 = online.set_index("concurrency").loc[8]
    assert at8["batch"] == 16 and at8["Inferences/Second"] == 8080.0
    assert list(tft.columns[-15:]) == reference_tables.KEYS + reference_tables.METRICS
    # the whole document: 4 GPUs x 2 backends x 2 datasets x (11 offline batch sizes + 32
    # online concurrencies)
    assert (committed["document"] == TFT).sum() == 4 * 2 * 2 * (11 + 32)


def test_every_document_irregularities(excerpts, committed):
    counts = committed.groupby(["document", "scenario"]).size().to_dict()
    assert counts == {
        ("000_ed20038684edc44b.txt", "offline"): 72, ("000_ed20038684edc44b.txt", "online"): 256,
        ("001_a05501836336c82b.txt", "offline"): 32, ("001_a05501836336c82b.txt", "online"): 128,
        ("002_86a4b5901d69b16e.txt", "offline"): 176, ("002_86a4b5901d69b16e.txt", "online"): 512,
        ("003_c41fefe0334b576a.txt", "offline"): 60, ("004_0e3f950e04427afa.txt", "offline"): 48,
    }
    by_doc = excerpts.set_index("document")
    # 003 publishes microseconds under unit-less headers ("696" at batch 256 and 3.64e+05
    # inferences/s: 256 / 364,000 s = 0.703 ms): converted to ms
    dlrm = by_doc.loc["003_c41fefe0334b576a.txt"]
    first = dlrm.iloc[0]
    assert first["model_architecture"] == "DLRM" and first["batch"] == 256
    assert first["Inferences/Second"] == 364000.0 and first["avg latency (ms)"] == 0.696
    assert (first["Client Send (ms)"], first["p99 latency (ms)"]) == (0.022, 0.794)
    # 001: Client Batch Size / Concurrent client requests, scenario-wide parameters; its
    # unit-less times are milliseconds ("12.22" at batch 1, 81.8/s: 12.2 ms), kept as they are
    fastpitch = by_doc.loc["001_a05501836336c82b.txt"]
    offline = fastpitch[fastpitch["scenario"] == "offline"].iloc[0]
    assert (offline["batch"], offline["avg latency (ms)"]) == (1, 12.22)
    online = fastpitch[fastpitch["scenario"] == "online"].iloc[0]
    assert online["concurrency"] == 1 and online["Inferences/Second"] == 82.1
    assert online["sequence_length"] == 128 and online["triton_preferred_batch_sizes"] == "4 8"
    assert online["model_format"] == "TorchScript"  # the section's own value wins
    assert set(committed["gpu_key"]) == {"a30", "a40", "a100", "v100", "t4"}


def test_every_committed_row_obeys_littles_law_in_milliseconds(committed):
    """avg latency (ms) = batch x concurrency / throughput x 1000, as the documents' runners
    measure it (a client's own time between requests aside): a table read in the wrong unit
    is off by 1000. A table without a batch or concurrency column (FastPitch's) ran at 1."""
    predicted = committed["batch"].fillna(1) * committed["concurrency"].fillna(1) / committed[
        "Inferences/Second"] * 1000
    ratio = committed["avg latency (ms)"] / predicted
    assert ratio.between(0.5, 2).all(), committed[~ratio.between(0.5, 2)]


def test_the_committed_rows_of_the_excerpts_sections_are_a_fresh_parse(excerpts, committed):
    """What CI can check of the committed table without the documents: every row of the
    excerpted sections, parsed now, equals its committed row, every column, every unit."""
    fresh = pd.read_csv(io.StringIO(reference_tables.to_csv_text(excerpts)), low_memory=False)
    rows = committed[committed["section"].isin(set(fresh["section"]))]
    rows = rows.dropna(axis=1, how="all").reset_index(drop=True)
    assert len(fresh) == len(rows) == 123
    pd.testing.assert_frame_equal(fresh.dropna(axis=1, how="all")[rows.columns], rows,
                                  check_dtype=False)


@needs_documents
def test_the_excerpts_are_the_documents_own_lines():
    """Each excerpt is whole lines of its document, in their order (the index whole)."""
    assert (EXCERPTS / "INDEX.md").read_text() == (DOCUMENTS / "INDEX.md").read_text()
    for excerpt in sorted(EXCERPTS.glob("*.txt")):
        lines = iter((DOCUMENTS / excerpt.name).read_text(encoding="utf-8").splitlines())
        for line in excerpt.read_text(encoding="utf-8").splitlines():
            assert any(line == whole for whole in lines), (excerpt.name, line)


@needs_documents
def test_committed_table_is_a_fresh_parse(all_documents):
    assert COMMITTED.read_text() == reference_tables.to_csv_text(all_documents), (
        "stale: python scripts/results_tools/reference_tables.py ../shared/seeds "
        "config/reference/tables.csv")


