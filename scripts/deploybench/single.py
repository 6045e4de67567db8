"""One model of a run (a whole model, or an ensemble's dense part): its conversion for the
run's runner and precision, and that runner in-process."""

from __future__ import annotations

from pathlib import Path

from . import deployments, runners
from .backends import CASTING_RUNNERS, EXPORT_PRECISION, export_precision
from .files import copy_artifact


def device_id(gpu: dict) -> int | None:
    """CUDA device 0 for a GPU key, None (CPU) for the cpu key or a stand-in node whose
    GPU-key check was overridden."""
    if gpu["kind"] == "cpu":
        return None
    import torch

    return 0 if torch.cuda.is_available() else None


def options(run: dict) -> runners.Options:
    """The runner options of a run: its tensors, precision, device and engine builds."""
    model = run["model"]
    triton = model["triton"]
    max_batch = triton["max_batch_size"]
    return runners.Options(
        inputs=tuple(t["name"] for t in model["inputs"]),
        outputs=tuple(t["name"] for t in model["outputs"]),
        precision=run["precision"],
        device_id=device_id(run["gpu"]),
        max_batch_size=max_batch,
        input_dims=tuple(tuple(t["dims"]) for t in model["inputs"]),
        output_dims=tuple(tuple(t["dims"]) for t in model["outputs"]),
        output_dtypes=tuple(t["dtype"] for t in model["outputs"]),
        opt_batch_size=triton.get("trt_opt_batch_size",
                                  max(triton.get("preferred_batch_sizes", [max_batch]))),
        fixed_batches=deployments.fixed_batches(model),
        workspace_mb=triton.get("trt_workspace_mb", runners.Options.workspace_mb),
        compile_mode=model.get("compile_mode", "default"),
    )


def convert(run: dict, exported: Path, out: Path) -> None:
    """`out`: the exported model converted for the run's runner and precision (the export
    itself where the runner serves it as it is: an FP16 export where the conversion would
    only cast an FP32 one to FP16)."""
    runner = run["backend"]["runner"]
    # an FP16 export serves only FP16 runs (config.Settings.export_precision): no second cast
    as_exported = export_precision(run) != EXPORT_PRECISION and runner in CASTING_RUNNERS
    if as_exported or not runners.convert(runner, exported, out, options(run)):
        copy_artifact(exported, out)


def runner(artifact: Path, run: dict) -> runners.Runner:
    return runners.load(run["backend"]["runner"], artifact, options(run))
