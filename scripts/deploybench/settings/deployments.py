"""The Triton models a configuration deploys, and which one each scenario sends to.

`triton.deployments: single` (default): one model named after the model key, with the
configured max batch size. `per_batch`: one model per offline batch size N, named
`<model>_b<N>`, max batch size N (a TensorRT plan's profile fixed at N), as reference 004's
runner deploys ONNX, ONNX + TensorRT and TensorRT once per batch size. Offline measures
each batch on its own deployment; online sends to the largest (its dynamic batcher forms
batches up to that max); accuracy to the smallest whose max batch covers its batches.
"""

from __future__ import annotations

from typing import NamedTuple

SINGLE, PER_BATCH = "single", "per_batch"
BATCHES = "deployment_batches"  # set by resolve(), not by a config file


class Deployment(NamedTuple):
    name: str  # the Triton model's name
    max_batch_size: int
    profile: int | None = None  # the TensorRT optimisation profile it runs (per batch)


def graph_batch(run: dict) -> int:
    """The largest batch ONNX Runtime on a GPU captures CUDA graphs up to, one per power-of-two
    bucket kept where it pays (`triton.cuda_graphs`, the reference's TensorRT setting): the
    model's max batch, or the batch an ensemble's unbatched dense part was split from; 0 where
    the model asks for none or its runs are not ONNX Runtime on a GPU."""
    triton = run["model"]["triton"]
    if not (triton.get("cuda_graphs") and run["backend"]["runner"] == "onnxruntime"
            and run["gpu"]["kind"] == "gpu"):
        return 0
    return int(triton.get("split_from_batch") or triton["max_batch_size"])


def gpu_count(triton: dict) -> int:
    """The GPUs a deployment's instance groups span (a model's `triton.gpus`; 1 unset)."""
    return triton.get("gpus", 1)


def per_batch(model: dict) -> bool:
    """Whether a model's settings (a run's `model`) deploy once per offline batch size."""
    return model["triton"].get("deployments", SINGLE) == PER_BATCH


def of(run: dict, name: str | None = None) -> list[Deployment]:
    """A run's deployments of the Triton model `name` (default the model key), smallest
    max batch first."""
    name, model = name or run["key"]["model"], run["model"]
    if not per_batch(model):
        return [Deployment(name, model["triton"]["max_batch_size"])]
    return [Deployment(f"{name}_b{batch}", batch, i)
            for i, batch in enumerate(fixed_batches(model))]


def resolve(model: dict) -> dict:
    """A model's settings with the batch sizes of its per-batch deployments written into
    `triton` (BATCHES): the offline batch sizes, so that the steps that read `triton` but
    not `offline` (convert, repository, accuracy) see them and re-run when they change."""
    if not per_batch(model):
        return model
    batches = sorted(set(model["offline"]["batch_sizes"]))
    return {**model, "triton": {**model["triton"], BATCHES: batches}}


def fixed_batches(model: dict) -> tuple[int, ...]:
    """The batch sizes of per-batch deployments, each a TensorRT profile min = opt = max
    (empty for a single deployment: its profile spans 1 to the max batch)."""
    return tuple(model["triton"].get(BATCHES, ()))


def covering(run: dict, batch: int) -> Deployment:
    """The smallest deployment whose max batch size takes `batch` (config.py checks that
    one does for every batch a run sends)."""
    fits = [d for d in of(run) if d.max_batch_size >= batch]
    if not fits:
        raise ValueError(f"no deployment of '{run['key']['model']}' takes batch {batch} "
                         f"(max batch sizes {[d.max_batch_size for d in of(run)]})")
    return fits[0]


def for_scenario(run: dict, scenario: str, batch: int) -> Deployment:
    """Where a scenario sends a batch: offline and accuracy to the smallest deployment
    that covers it (offline per batch: its own), online to the largest."""
    return of(run)[-1] if scenario == "online" else covering(run, batch)


def triton_settings(model: dict, deployment: Deployment) -> dict:
    """`model.triton` of one deployment: its max batch size, and the dynamic batcher's
    preferred sizes scaled to it (DLE's per-batch runner configs: 16 -> 8 16, 8 -> 4 8,
    1 -> 1)."""
    triton = model["triton"]
    top = triton["max_batch_size"]
    if deployment.max_batch_size == top:
        return triton
    n = deployment.max_batch_size
    preferred = sorted({max(1, p * n // top) for p in triton["preferred_batch_sizes"]})
    return {**triton, "max_batch_size": n, "preferred_batch_sizes": preferred}


def describe(deployment: Deployment) -> dict:
    """A deployment as the JSON reports name it."""
    return {"model": deployment.name, "max_batch_size": deployment.max_batch_size}
