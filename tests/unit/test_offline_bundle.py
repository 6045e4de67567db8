"""The bundles of their own (onnxruntime-gpu, tensorflow-cpu) in parts
(scripts/machines/pack_offline.py --part-mib), carried to an offline GPU machine over several calls
and joined there by scripts/machines/offline_env.sh; what goes in tensorflow-cpu's, and a Keras
model's steps without TensorFlow and with that bundle."""

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from pack_offline import split, tensorflow_requirements

from testkit.workflow import ROOT, needs


def _source(pack: Path, dest: Path) -> subprocess.CompletedProcess:
    """offline_env.sh sourced as the lent-machine scripts source it (offline_run.sh under
    `set -euo pipefail`), the first bundle already unpacked in `dest`; prints the paths it
    set."""
    # sourced on a line of its own: in a list (`. ... &&`), bash would not apply set -e
    script = (f'set -euo pipefail\n. "{ROOT}/scripts/machines/offline_env.sh" '
              f'"{pack}/offline-py3.12.tar.xz"\n'
              'echo "PYTHONPATH=$PYTHONPATH"; echo "SERVER=$DEPLOYBENCH_SERVER_PYTHONPATH"; '
              'echo "TENSORFLOW=${DEPLOYBENCH_TENSORFLOW_SITE:-}"')
    env = {**os.environ, "DEPLOYBENCH_OFFLINE_DIR": str(dest), "PYTHONPATH": ""}
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("name", ["onnxruntime-gpu", "tensorflow-cpu"])
def test_the_parts_are_kept_as_they_come_and_joined_once_all_have(tmp_path, name):
    """A lent machine's copy of the tree holds only the latest call's carried part
    (2026-11-28): each part that matches its sum is kept on the machine until all are;
    onnxruntime-gpu then goes in front for the pipeline and the server, tensorflow-cpu to
    the Keras models' build steps alone."""
    bundle = f"{name}-py3.12.tar.xz"
    pack, dest = tmp_path / "pack", tmp_path / "offline"
    pack.mkdir()
    (dest / "site").mkdir(parents=True)  # the first bundle, as if unpacked
    marker = os.urandom(50_000)  # incompressible: several parts
    with tarfile.open(pack / bundle, "w:xz") as tar:
        info = tarfile.TarInfo(f"{name}/package/marker.bin")
        info.size = len(marker)
        tar.addfile(info, io.BytesIO(marker))
    parts = split(pack / bundle, 20_000)
    assert len(parts) == 3 and sum(p.stat().st_size for p in parts) == \
        (pack / bundle).stat().st_size
    sums = (pack / f"{bundle}.sha256").read_text().splitlines()
    assert [line.split()[1] for line in sums] == [*(p.name for p in parts), bundle]
    (pack / bundle).unlink()  # the machine has only what was carried
    held = {p.name: p.read_bytes() for p in parts}

    def carry(name: str, data: bytes) -> subprocess.CompletedProcess:
        """One call: its copy of the tree has this part alone, and the sums."""
        for part in pack.glob(f"{bundle}.part*"):
            part.unlink()
        (pack / name).write_bytes(data)
        return _source(pack, dest)

    first, second, last = (p.name for p in parts)
    done = carry(first, held[first])
    assert "1 of 3 parts" in done.stderr
    # a bundle still in parts stops nothing: a run started then goes on without it (a
    # count of the parts that failed under set -e once ended every run, 2026-11-28)
    assert done.returncode == 0 and f"PYTHONPATH={dest}/site:" in done.stdout, done
    damaged = held[second][:-1] + bytes([held[second][-1] ^ 1])
    done = carry(second, damaged)  # arrived damaged: not kept
    assert f"{second} does not match its sum" in done.stderr, done.stderr
    assert "1 of 3 parts" in done.stderr, done.stderr
    assert "2 of 3 parts" in carry(second, held[second]).stderr
    assert not (dest / "onnxruntime-gpu").exists()

    done = carry(last, held[last])
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert (dest / f"{name}/package/marker.bin").read_bytes() == marker
    paths = dict(line.split("=", 1) for line in done.stdout.splitlines())
    if name == "onnxruntime-gpu":
        assert paths["PYTHONPATH"].startswith(f"{dest}/{name}:{dest}/site:"), paths
        assert paths["SERVER"] == f"{dest}/{name}:{dest}/stub-site", paths
        assert paths["TENSORFLOW"] == "", paths
    else:  # for the Keras models' build steps alone (deploybench.source.model)
        assert paths["PYTHONPATH"].startswith(f"{dest}/site:"), paths
        assert paths["SERVER"] == f"{dest}/stub-site", paths
        assert paths["TENSORFLOW"] == f"{dest}/{name}", paths
    assert not list(dest.glob("*/*.part*")) and not (dest / ".ort").exists()
    assert "parts" not in _source(pack, dest).stderr  # later calls: unpacked, nothing to do


def test_the_tensorflow_bundle_takes_the_tf_extras_pins_and_what_the_target_lacks():
    """pyproject.toml's tf extra is the one place of the versions; its pyarrow (the target
    has one) and the other platform's TensorFlow stay out."""
    needs("tensorflow")  # the versions of what the target lacks: those installed here
    wanted = tensorflow_requirements("3.12")
    pins = [r for r in wanted if r.split("==")[0] in ("tensorflow-cpu", "keras", "tf2onnx")]
    text = (ROOT / "pyproject.toml").read_text()
    assert len(pins) == 3 and all(f'"{pin}' in text for pin in pins), pins
    assert not any(r.startswith(("tensorflow==", "pyarrow", "libclang")) for r in wanted)
    assert {r.split("==")[0] for r in wanted} >= {"optree", "namex", "gast", "astunparse"}


def test_a_tensorflow_model_without_tensorflow_is_refused_by_name(monkeypatch, tmp_path):
    """The lent GPU machine has no TensorFlow (2026-11-28: DLRM's weights step failed there
    with "No module named 'keras'"): the step names the model and what it needs."""
    from deploybench.source import model as source_model

    monkeypatch.setitem(sys.modules, "keras", None)  # importing it raises ImportError
    with pytest.raises(RuntimeError) as refused:
        source_model.save_weights({"plugin": "dlrm"}, tmp_path / "weights.pt")
    assert str(refused.value) == (
        "model 'dlrm' is a TensorFlow (Keras) model, and keras is not installed here: its "
        "weights, evaluation set and exports need TensorFlow (bash scripts/setup.sh tf; on "
        "an offline machine, the tensorflow-cpu bundle: docs/gpus.md)")
    assert not (tmp_path / "weights.pt").exists()


def test_the_tensorflow_bundle_reaches_a_keras_models_steps_alone(tmp_path):
    """DEPLOYBENCH_TENSORFLOW_SITE (scripts/machines/offline_env.sh: the tensorflow-cpu bundle) goes
    first on the path of a process that builds a Keras model, and of no other."""
    site = tmp_path / "tensorflow-cpu"
    for package in ("keras", "tensorflow"):
        (site / package).mkdir(parents=True)
        (site / package / "__init__.py").write_text("BUNDLED = True\n")
    code = (
        "import sys\n"
        "from deploybench.source import model as source_model\n"
        f"assert {str(site)!r} not in sys.path\n"
        "assert source_model._require({'plugin': 'tft'}) == 'torch'\n"
        f"assert {str(site)!r} not in sys.path\n"
        "assert source_model._require({'plugin': 'dlrm'}) == 'tensorflow'\n"
        "import keras, tensorflow\n"
        "assert keras.BUNDLED and tensorflow.BUNDLED\n"
    )
    env = {**os.environ, "DEPLOYBENCH_TENSORFLOW_SITE": str(site)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env)
    assert result.returncode == 0, result.stderr[-2000:]
