"""Benchmark: your own model, from its file to its report, on this machine. A small model
that is none of the references' (a float input and an int32 one, a dynamic batch) is saved
as ONNX, TorchScript and a torch.export package; each goes through `deploybench add-model`
then `deploybench run` of its configuration's report on the CPU key (export, conversion
and its check, repository, accuracy against the file, offline, online, rate, native,
floor). Prints each one's wall time and its ratio to the 5 minutes the issue allows.

    python scripts/benchmarks/bench_add_model.py [--formats onnx pt pt2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

BUDGET_S = 300.0
BIN = Path(sys.executable).parent
# the TorchScript file does not say its inputs; ids in [0, 16)
ADD = {"onnx": [], "pt": ["--input", "features:FP32:6", "--input", "ids:INT32:2"],
       "pt2": []}


def save(folder: Path) -> None:
    """The model in the three formats."""
    import torch

    class Scored(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Embedding(16, 6)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(),
                                           torch.nn.Linear(8, 1))

        def forward(self, features, ids):
            return torch.sigmoid(self.mlp(features * self.table(ids.long()).mean(1)))

    torch.manual_seed(1)
    model = Scored().eval()
    example = (torch.randn(2, 6), torch.randint(0, 16, (2, 2), dtype=torch.int32))
    torch.onnx.export(model, example, str(folder / "scored.onnx"), dynamo=False,
                      input_names=["features", "ids"], output_names=["score"],
                      dynamic_axes={"features": {0: "b"}, "ids": {0: "b"}, "score": {0: "b"}})
    torch.jit.save(torch.jit.script(model), str(folder / "scored.pt"))
    batch = torch.export.Dim("batch", min=1, max=1024)
    torch.export.save(torch.export.export(model, example,
                                          dynamic_shapes=({0: batch}, {0: batch})),
                      str(folder / "scored.pt2"))


def deploybench(*args) -> None:
    result = subprocess.run([str(BIN / "deploybench"), *map(str, args)], capture_output=True,
                            text=True)
    if result.returncode:
        sys.exit(f"deploybench {args[0]} failed:\n{result.stdout[-3000:]}\n"
                 f"{result.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--formats", nargs="+", default=list(ADD), choices=list(ADD))
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-add-model-"))
    work.mkdir(parents=True, exist_ok=True)
    save(work)
    models = work / "models"
    print(f"{'format':<7} {'backend':<10} {'add-model (s)':>14} {'run (s)':>9} "
          f"{'of 5 minutes':>13}")
    for fmt in args.formats:
        name = f"scored-{fmt}"
        start = time.perf_counter()
        deploybench("add-model", name, work / f"scored.{fmt}", "--models-dir", models,
                    "--range", "ids=0:16", "--force", *ADD[fmt])
        added = time.perf_counter() - start
        backend = yaml.safe_load((models / f"{name}.yaml").read_text())["backends"][0]
        run_file = work / f"run-{fmt}.yaml"
        run_file.write_text(yaml.safe_dump({  # the user's model alone: targets of its own
            "models_dir": str(models), "matrix": {"models": [name]},
            "targets": [{"model": name, "gpu": "cpu", "backend": backend,
                         "precision": "fp32"}]}))
        deploybench("run", "-m", name, "-g", "cpu", "-b", backend, "-p", "fp32",
                     "-c", run_file, "--", "--directory", work, "--cores", "2")
        total = time.perf_counter() - start
        report = work / f"results/{name}/cpu/{backend}_fp32/README.md"
        if "- **Accuracy** against the source model: passed" not in report.read_text():
            sys.exit(f"{report}: the accuracy check did not pass")
        print(f"{fmt:<7} {backend:<10} {added:>14.1f} {total - added:>9.1f} "
              f"{total / BUDGET_S:>13.2f}")
    print(f"(work: {work})")


if __name__ == "__main__":
    main()
