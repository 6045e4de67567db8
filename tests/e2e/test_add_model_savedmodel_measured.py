"""A user's TensorFlow SavedModel measured end to end."""

from __future__ import annotations

import re

import numpy as np

from deploybench.reporting.headline import CONTENDED_MARK, UNSTABLE_MARK
from testkit.add_model import RATES_OF_PEAK, deploybench, short_run
from testkit.add_model_savedmodel import (
    add,
    saved,  # noqa: F401 (a fixture)
    weights,
)


def expected(x: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The model's outputs computed here, apart from TensorFlow: (label, y)."""
    emb, w = weights()
    y = (x + emb[ids].sum(1)) @ w
    return y.argmax(1)[:, None], y


def _headline(readme: str, label: str) -> str:
    return next(line for line in readme.splitlines() if line.startswith(f"- **{label}**"))


def test_a_savedmodel_is_measured_end_to_end(saved, tmp_path):
    """`deploybench run` on the CPU key: every stage, and the report's numbers are its
    tables': offline and online peaks, the rate levels offered at fractions of the online
    peak, served/native, the accuracy check against the SavedModel run in-process (whose
    outputs are the model's, computed here apart)."""
    import pandas as pd

    result, path = add(saved, "mine-sm", "mine.savedmodel", "--force")
    assert result.returncode == 0, result.stderr
    run_file = short_run(saved / "models", "mine-sm", "tf-savedmodel", tmp_path / "run.yaml")
    result = deploybench("run", "-m", "mine-sm", "-g", "cpu", "-b", "tf-savedmodel", "-p",
                         "fp32", "-c", run_file, "--", "--directory", tmp_path, "--cores", "2")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    folder = tmp_path / "results/mine-sm/cpu/tf-savedmodel_fp32"
    readme = (folder / "README.md").read_text()
    # the source model is the SavedModel: its outputs are the model's
    with np.load(tmp_path / "results/mine-sm/source/eval.npz") as npz:
        label, y = expected(npz["x"], npz["ids"])
        assert np.abs(npz["reference:y"] - y).max() < 1e-5
        assert (npz["reference:label"] == label).all()
    accuracy = pd.read_csv(folder / "accuracy.csv").set_index("name")
    assert accuracy.loc["max_abs_deviation:y", "triton"] < 1e-5
    assert accuracy.loc["agreement:label", "triton"] == 1.0
    assert _headline(readme, "Accuracy").startswith(
        "- **Accuracy** against the source model: passed")
    assert pd.read_csv(folder / "conversion_check.csv")["max_abs_error"].max() < 1e-6
    # its export is the folder itself, byte for byte (and Snakemake's mark of a folder)
    exported = tmp_path / "results/mine-sm/export/tf-savedmodel/model.savedmodel"
    given = {p.relative_to(saved / "mine.savedmodel"): p.read_bytes()
             for p in (saved / "mine.savedmodel").rglob("*") if p.is_file()}
    copied = {p.relative_to(exported): p.read_bytes() for p in exported.rglob("*")
              if p.is_file() and p.name != ".snakemake_timestamp"}
    assert copied == given and len(given) == 4
    assert _headline(readme, "Served by").startswith("- **Served by**: python backend")
    offline = pd.read_csv(folder / "offline.csv")
    assert offline["Batch"].tolist() == [1, 8, 32]
    best = offline.loc[offline["Inferences/Second"].idxmax()]
    marks = "|".join(re.escape(m) for m in (CONTENDED_MARK, UNSTABLE_MARK))
    assert re.match(rf"- \*\*Offline\*\* .*: {best['Inferences/Second']:,.0f} inf/s({marks})* at "
                    rf"batch {int(best['Batch'])}$", _headline(readme, "Offline"))
    online = pd.read_csv(folder / "online.csv")
    assert online["Concurrency"].tolist() == [1, 2, 4]
    assert f"{online['Inferences/Second'].max():,.0f} inf/s" in _headline(readme, "Online")
    peak = online.loc[online["Stable"], "Inferences/Second"].max()
    rate = pd.read_csv(folder / "rate.csv")
    assert rate["Offered (req/s)"].tolist() == [float(f"{f * peak:.3g}") for f in RATES_OF_PEAK]
    # served/native at the largest batch: the offline figure over the in-process one
    native = pd.read_csv(folder / "native.csv").set_index("Batch")
    assert native.index.tolist() == [1, 8, 32]
    served = offline.set_index("Batch").loc[32, "Inferences/Second"]
    ratio = round(served / native.loc[32, "Inferences/Second"], 3)
    line = _headline(readme, "Served/native")
    assert f"{ratio:.3g} at batch 32" in line or "left out" in line, (line, ratio)
