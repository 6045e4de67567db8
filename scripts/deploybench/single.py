"""One model of a run (a whole model, or an ensemble's dense part): its conversion for the
run's runner and precision, that runner in-process, and as artifacts.of(run) serves a
single model (deploybench.ensemble.model has the same functions): its deployments in a
model repository, its requests as perf_analyzer and the clients send them."""

from __future__ import annotations

from pathlib import Path

from . import runners
from .backends import EXPORT_PRECISION, export_precision
from .records import atomic
from .records.files import copy_artifact
from .settings import deployments
from .triton import repository as triton_repository


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
        cuda_graphs=deployments.graph_batch(run) if device_id(run["gpu"]) is not None else 0,
    )


def convert(run: dict, exported: Path, out: Path, sparse: Path | None = None) -> None:
    """`out` (written whole or not at all): the exported model converted for the run's
    runner and precision (the export itself where the runner serves it as it is: an FP16
    export where the conversion would only cast an FP32 one to FP16). A single model has
    no `sparse` part."""
    runner = run["backend"]["runner"]
    # an FP16 export serves only FP16 runs (config.Configuration.export_precision): no second cast
    as_exported = (export_precision(run) != EXPORT_PRECISION
                   and runners.RUNNERS[runner].casts_only)
    with atomic.output(out) as tmp:
        if as_exported or not runners.convert(runner, exported, tmp, options(run)):
            copy_artifact(exported, tmp)


def runner(artifact: Path, run: dict) -> runners.Runner:
    return runners.load(run["backend"]["runner"], artifact, options(run))


def repository(run: dict, converted: Path, out: Path, available: list[str]) -> str:
    """The model's deployments in the repository `out`; returns who serves it."""
    return triton_repository.create(run, converted, out, available)


def request_encoder(run: dict, config_pbtxt: Path) -> None:
    """None: a client sends the samples as they are."""
    return None


def request_shapes(run: dict, batch: int) -> dict[str, list[int]]:
    """None to give: perf_analyzer's -b is the batch."""
    return {}


def request_data(run: dict, config_pbtxt: Path, perf_data: Path, data_dir: Path | None,
                 work: Path) -> tuple[dict, dict]:
    """Nothing beside the perf data, one entry per sample, which -b batches."""
    return {}, {}


def cache_warmup(run: dict, data_dir: Path | None):
    """No cache to warm: (None, nothing)."""
    return None, iter(())
