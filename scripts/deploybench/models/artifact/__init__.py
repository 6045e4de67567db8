"""A user's own model, from its file or folder alone (`deploybench add-model`): no plug-in
of its own.

hparams (written by add-model, deploybench.add_model):
  artifact: the file (ONNX, TorchScript, a torch.export `.pt2` package) or folder (a
      TensorFlow SavedModel; a Triton model repository's model folder)
  format: onnx | torchscript | pt2 | savedmodel | triton-repository
  sha256: its digest when it was added (a folder's: every file's path and bytes): one
      changed since is refused (add it again), so that every result names the model it
      measured
  inputs, outputs: aliases of the config's tensors (the source model feeds and reads them
      by name)
  source: a repository's source model, {artifact, format, sha256} of a file or folder of
      the formats above, or null (then no source model: no accuracy step)
The source model every check compares with is the user's file run in-process (ONNX Runtime
for ONNX, TensorFlow's loader for a SavedModel, torch for the others; for a repository,
its `source`); its own format is exported as the file or folder itself, byte for byte. Data: an
`.npz` (an array per input name, in `data.path`): the user's, or the one add-model generated
from the tensor specs. There is no task metric: accuracy is the served outputs against the
source model's. A plug-in imports nothing of the pipeline: add-model
(deploybench.add_model) does what needs the pipeline's tensor specs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

# The export format that is the user's file or folder itself, per format of it
OWN_EXPORT = {"onnx": "onnx", "torchscript": "ts-script", "pt2": "torch-export",
              "savedmodel": "tf-savedmodel", "triton-repository": "triton-repository"}
REPOSITORY = "triton-repository"
DATA_FILE = "data.npz"


def digest(path: Path) -> str:
    """A file's sha256; a folder's: of each file's path (relative, in order) and bytes."""
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    sha = hashlib.sha256()
    for file in files:
        if path.is_dir():
            sha.update(file.relative_to(path).as_posix().encode() + b"\0")
        with open(file, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                sha.update(block)
    return sha.hexdigest()


def _checked(added: dict) -> Path:
    """The file or folder add-model recorded (`added`: hparams, or a repository's source),
    refused where it is gone or changed."""
    path = Path(added["artifact"])
    what = "folder" if added["format"] in ("savedmodel", REPOSITORY) else "file"
    if not path.exists():
        raise FileNotFoundError(f"the model {what} '{path}' is not there (add-model recorded "
                                "it)")
    if digest(path) != added["sha256"]:
        raise ValueError(f"the model {what} '{path}' changed since it was added (sha256 "
                         f"{added['sha256'][:12]}...): add it again (deploybench add-model) "
                         "so that its results are the new one's")
    return path


def _names(hparams: dict, key: str) -> list[str] | None:
    return [t["name"] for t in hparams[key]] if key in hparams else None


def _onnx_source(path: Path, inputs: list[str], outputs: list[str] | None):
    """An ONNX file run by ONNX Runtime on the CPU as a torch module (tensors in, by the
    config's input names; a tuple of tensors out, in its outputs' order; no weights of its
    own: the file's, checked by its digest)."""
    import onnxruntime as ort
    import torch

    class OnnxSource(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

        def forward(self, *tensors):
            feed = {n: t.numpy() for n, t in zip(inputs, tensors)}
            return tuple(torch.from_numpy(o) for o in self.session.run(outputs, feed))

    return OnnxSource().eval()


def _savedmodel_source(path: Path, inputs: list[str], outputs: list[str]):
    """A SavedModel's serving signature, loaded by TensorFlow's own loader (its graph and
    variables: no Python of the folder), run on the CPU as a torch module: the config's
    inputs by name in, its outputs in their order out."""
    import torch

    try:
        import tensorflow as tf
    except ImportError as err:
        raise RuntimeError("a SavedModel is run with TensorFlow, which is not installed "
                           "here: bash scripts/setup.sh tf (or pip install -e '.[tf]')") from err

    class SavedModelSource(torch.nn.Module):
        def __init__(self):
            super().__init__()
            with tf.device("/CPU:0"):
                loaded = tf.saved_model.load(str(path))
            # a plain attribute: the module holds no torch weights
            object.__setattr__(self, "loaded", loaded)
            object.__setattr__(self, "signature", loaded.signatures["serving_default"])

        def forward(self, *tensors):
            with tf.device("/CPU:0"):
                result = self.signature(**{n: tf.constant(t.numpy())
                                           for n, t in zip(inputs, tensors)})
            return tuple(torch.from_numpy(np.array(result[n])) for n in outputs)

    return SavedModelSource().eval()


def _held(program):
    """torch.export's module behind a plain module: it refuses train()/eval(), which the
    pipeline calls on a source model; its weights stay the file's (checked by digest)."""
    import torch

    class Held(torch.nn.Module):
        def __init__(self):
            super().__init__()
            object.__setattr__(self, "program", program)  # not a child: no eval() reaches it

        def forward(self, *tensors):
            return self.program(*tensors)

    return Held().eval()


def source_refusal(hparams: dict) -> str | None:
    """Why the model has no source model to compare with (a repository added without
    one), None where it has."""
    if hparams["format"] == REPOSITORY and not hparams.get("source"):
        return (f"the Triton model repository '{hparams['artifact']}' was added without a "
                "source model: nothing in-process to compare its served outputs with (add it "
                "again with --source FILE, the model it serves, to check them)")
    return None


def build_model(hparams: dict, checkpoint: str | None, seed: int):
    """The user's file, loaded for in-process runs (checkpoint and seed: the file's); a
    repository's source model."""
    refused = source_refusal(hparams)
    if refused:
        raise ValueError(refused)
    added = hparams["source"] if hparams["format"] == REPOSITORY else hparams
    path, fmt = _checked(added), added["format"]
    inputs, outputs = _names(hparams, "inputs"), _names(hparams, "outputs")
    if fmt == "onnx":
        return _onnx_source(path, inputs, outputs)
    if fmt == "savedmodel":
        return _savedmodel_source(path, inputs, outputs)
    import torch

    if fmt == "torchscript":
        return torch.jit.load(str(path), map_location="cpu").eval()
    if fmt == "pt2":
        return _held(torch.export.load(str(path)).module())
    raise ValueError(f"format '{fmt}' is not one a source model comes in; valid: "
                     f"{', '.join(f for f in OWN_EXPORT if f != REPOSITORY)}")


def own_export(hparams: dict, fmt: str) -> Path | None:
    """The user's own file or folder where `fmt` is its format (the export is a copy of
    it); None where the export is made from the loaded model instead."""
    return _checked(hparams) if OWN_EXPORT[hparams["format"]] == fmt else None


def generate_dataset(hparams: dict, out_dir: str, seed: int = 0, **size) -> None:
    raise ValueError("a user's model takes its samples from data.path, which add-model "
                     "writes (generated from the tensor specs, or your --data file)")


def describe_weights(hparams: dict) -> str:
    what = {"savedmodel": "SavedModel", REPOSITORY: "Triton model repository"}.get(
        hparams["format"], "model file")
    text = f"the {what} {hparams['artifact']} (sha256 {hparams['sha256'][:12]})"
    source = hparams.get("source")
    return text + (f"; its source model {source['artifact']} (sha256 "
                   f"{source['sha256'][:12]})" if source else "")


def load_split(hparams: dict, data_dir: str, split: str,
               max_samples: int | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The inputs of the data file (the user's .npz, or the generated one in `data_dir`),
    in the config's order; no targets."""
    path = Path(data_dir)
    path = path / DATA_FILE if path.is_dir() else path
    return [a[:max_samples] for a in input_arrays(path, hparams["inputs"])], []


def input_arrays(path: Path, inputs: list[dict]) -> list[np.ndarray]:
    """The data file's array of each input, in the inputs' order (no code runs: no pickles)."""
    with np.load(path, allow_pickle=False) as npz:
        missing = [s["name"] for s in inputs if s["name"] not in npz.files]
        if missing:
            raise ValueError(f"data file '{path}' has no array for input(s) "
                             f"{', '.join(missing)}; it holds {', '.join(npz.files)}")
        return [npz[s["name"]] for s in inputs]


def evaluate(hparams: dict, predictions: list[np.ndarray],
             targets: list[np.ndarray]) -> dict[str, float]:
    return {}  # no task metric: the deviation from the user's file is the check
