"""Whether a model's batches fit its device, decided while planning (deploybench.settings.config; no
torch): a batch's inputs and outputs, and what the model's forward pass holds per sample
beyond them (its working memory), a lower bound from the hyper-parameters of the plug-ins
whose network is known here (a plug-in without an estimate counts its inputs and outputs
alone). Batch 262,144 of a TFT used to run for minutes before failing without naming its
size."""

from __future__ import annotations

import math

IO_COPIES = 3  # a request's inputs and outputs at once: the client's, the request, the server's
ITEM_BYTES = {"BOOL": 1, "INT8": 1, "UINT8": 1, "INT16": 2, "FP16": 2, "INT32": 4, "FP32": 4,
              "INT64": 8, "FP64": 8}


def _tft(hparams: dict) -> int:
    """TFT's elements a sample holds at once, at the least: the attention's scores, their
    softmax and dropout (n_head x T x T each), and 13 activations of T x hidden_size (T the
    example length). On the CPU, the tiny TFT's peak was 1.15-1.3 times this at T 24 and 48,
    hidden 16 and 32 (resident memory over a forward pass at batch 2,048-8,192, 2026-12-07)."""
    steps = hparams["example_length"]
    return 3 * hparams["n_head"] * steps * steps + 13 * steps * hparams["hidden_size"]


ESTIMATES = {"tft": _tft}


def working_bytes_per_sample(plugin: str, hparams: dict, precision: str) -> int:
    """The lower bound of a sample's working memory, in bytes (0 where none is known)."""
    estimate = ESTIMATES.get(plugin)
    return estimate(hparams) * (2 if precision == "fp16" else 4) if estimate else 0


def refusal(model: str, gpu: str, device: dict, settings: dict, precision: str) -> str | None:
    """Why a batch the run uses cannot fit the key's device (None where every one fits): its
    inputs and outputs (IO_COPIES of them, a variable dimension counted as 1) and its working
    memory, against the registry's memory_gib, or for the cpu key without one, this host's."""
    if device.get("memory_gib"):
        limit = device["memory_gib"] * 2**30
        where = f"GPU key '{gpu}' has {device['memory_gib']} GiB (its registry's memory_gib)"
    elif device["kind"] == "cpu":
        import psutil  # the planning host's memory: where a local run measures

        limit = psutil.virtual_memory().total
        where = (f"this host has {limit / 2**30:.1f} GiB (the cpu key's registry entry gives "
                 "no memory_gib)")
    else:
        return None
    io = sum(math.prod(max(d, 1) for d in t["dims"]) * ITEM_BYTES.get(t["dtype"], 4)
             for t in [*settings["inputs"], *settings["outputs"]])
    working = working_bytes_per_sample(settings["plugin"], settings["hparams"], precision)
    used = {"offline.batch_sizes": settings["offline"]["batch_sizes"],
            "online.batch_size": [settings["online"]["batch_size"]],
            "triton.max_batch_size": [settings["triton"]["max_batch_size"]]}
    if "accuracy" in settings:
        used["accuracy.batch_size"] = [settings["accuracy"]["batch_size"]]
    for setting, batches in used.items():
        for batch in batches:
            need = batch * (io * IO_COPIES + working)
            if need > limit:
                return (f"model '{model}' on GPU key '{gpu}': {setting} {batch:,} needs "
                        f"{need / 2**30:.1f} GiB at the least ({batch:,} samples x ({io:,} bytes "
                        f"of inputs and outputs x {IO_COPIES} copies + {working:,} bytes of the "
                        f"model's working memory, estimated from its hparams)), but {where}; "
                        "lower the batch size (and triton.max_batch_size), or measure on a "
                        "larger device")
    return None
