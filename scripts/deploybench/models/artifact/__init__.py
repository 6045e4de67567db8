"""A user's own model, from its file alone (`deploybench add-model`): no plug-in of its own.

hparams (written by add-model, deploybench.add_model):
  artifact: the file (ONNX, TorchScript, or a torch.export `.pt2` package)
  format: onnx | torchscript | pt2
  sha256: the file's digest when it was added: a file changed since is refused (add it
      again), so that every result names the model it measured
The source model every check compares with is the user's file run in-process (ONNX Runtime
for ONNX, torch for the others); its own format is exported as the file itself, byte for
byte. Data: an `.npz` (an array per input name, in `data.path`): the user's, or the one
add-model generated from the tensor specs. There is no task metric: accuracy is the served
outputs against the file's own. A plug-in imports nothing of the pipeline: add-model
(deploybench.add_model) does what needs the pipeline's tensor specs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

# The export format that is the file itself, per format of a user's file
OWN_EXPORT = {"onnx": "onnx", "torchscript": "ts-script", "pt2": "torch-export"}
DATA_FILE = "data.npz"


def digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _checked(hparams: dict) -> Path:
    path = Path(hparams["artifact"])
    if not path.is_file():
        raise FileNotFoundError(f"the model file '{path}' is not there (add-model recorded it)")
    if digest(path) != hparams["sha256"]:
        raise ValueError(f"the model file '{path}' changed since it was added (sha256 "
                         f"{hparams['sha256'][:12]}...): add it again (deploybench add-model) "
                         "so that its results are the new file's")
    return path


def _onnx_source(path: Path):
    """An ONNX file run by ONNX Runtime on the CPU as a torch module (tensors in, a tuple
    of tensors out, no weights of its own: the file's, checked by its digest): the source
    model of an ONNX user's model."""
    import onnxruntime as ort
    import torch

    class OnnxSource(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            self.names = [i.name for i in self.session.get_inputs()]

        def forward(self, *tensors):
            feed = {n: t.numpy() for n, t in zip(self.names, tensors)}
            return tuple(torch.from_numpy(o) for o in self.session.run(None, feed))

    return OnnxSource().eval()


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


def build_model(hparams: dict, checkpoint: str | None, seed: int):
    """The user's file, loaded for in-process runs (checkpoint and seed: the file's)."""
    path = _checked(hparams)
    fmt = hparams["format"]
    if fmt == "onnx":
        return _onnx_source(path)
    import torch

    if fmt == "torchscript":
        return torch.jit.load(str(path), map_location="cpu").eval()
    if fmt == "pt2":
        return _held(torch.export.load(str(path)).module())
    raise ValueError(f"format '{fmt}' is not one a user's model comes in; valid: "
                     f"{', '.join(OWN_EXPORT)}")


def own_export(hparams: dict, fmt: str) -> Path | None:
    """The user's own file where `fmt` is its format (the export is a copy of it); None
    where the export is made from the loaded model instead."""
    return _checked(hparams) if OWN_EXPORT[hparams["format"]] == fmt else None


def generate_dataset(hparams: dict, out_dir: str, seed: int = 0, **size) -> None:
    raise ValueError("a user's model takes its samples from data.path, which add-model "
                     "writes (generated from the tensor specs, or your --data file)")


def describe_weights(hparams: dict) -> str:
    return f"the model file {hparams['artifact']} (sha256 {hparams['sha256'][:12]})"


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
