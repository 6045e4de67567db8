"""The toy TorchScript module the C++ backend serves in the real Triton, and how its tests
serve and query it."""

import mmap
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient

from deploybench.triton import config as triton_config
from deploybench.triton import cpp_backend, install, repository
from deploybench.triton.server import TritonServer


class Toy(torch.nn.Module):
    """Two outputs of different shapes; raises where a request asks it to (a value above
    1e6), unless `checks` is off (a CUDA graph cannot capture the check's synchronisation)."""

    def __init__(self, checks: bool = True):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.checks = checks

    def forward(self, x):
        if self.checks and bool((x > 1e6).any()):
            raise RuntimeError("toy refuses inputs above 1e6")
        return torch.tanh(self.linear(x)), x.sum(dim=1, keepdim=True) * 2


def run_of(runner: str = "torch", kind: str = "cpu", precision: str = "fp32",
           max_batch: int = 8, delay_us: int = 100, instances: int = 1) -> dict:
    return {
        "key": {"model": "toy", "backend": "ts-script"},
        "model": {
            "inputs": [{"name": "x", "dtype": "FP32", "dims": [4]}],
            "outputs": [{"name": "y", "dtype": "FP32", "dims": [3]},
                        {"name": "s", "dtype": "FP32", "dims": [1]}],
            "triton": {"max_batch_size": max_batch, "instances": instances,
                       "preferred_batch_sizes": [max_batch], "max_queue_delay_us": delay_us},
        },
        "gpu": {"kind": kind}, "backend": {"runner": runner, "triton_backend": "pytorch"},
        "precision": precision, "artifact": "model.pt", "server": {"serve_with": "auto"},
    }


@pytest.fixture(scope="module")
def triton():
    """The embedded install, which the set-up gave the C++ backend."""
    prepared = install.prepare()
    assert cpp_backend.NAME in prepared.backends, prepared.cpp_backend
    assert Path(prepared.cpp_backend).name == cpp_backend.LIBRARY
    return prepared


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    torch.manual_seed(0)
    module = Toy().eval()
    work = tmp_path_factory.mktemp("cpp")
    torch.jit.script(module).save(str(work / "model.pt"))
    return work, module


def serve(triton, work: Path, run: dict, name: str = "toy", artifact: Path | None = None):
    repo = work / f"repo-{name}"
    served = repository.create(run, artifact or work / "model.pt", repo, triton.backends, name)
    assert served == cpp_backend.NAME
    assert triton_config.read(repo / name / "config.pbtxt").backend == cpp_backend.NAME
    return TritonServer(triton, repo, work / f"{name}.log", name)


def expected(module, x: np.ndarray, device="cpu", half=False) -> list[np.ndarray]:
    module = module.to(device)
    tensor = torch.from_numpy(x).to(device)
    if half:
        module, tensor = module.half(), tensor.half()
    with torch.inference_mode():
        return [o.float().cpu().numpy() for o in module(tensor)]


def grpc_infer(server, x: np.ndarray, model: str = "toy") -> list[np.ndarray]:
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        tensor = grpcclient.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        result = client.infer(model, [tensor])
        return [result.as_numpy("y"), result.as_numpy("s")]


def _region(server, name: str, size: int) -> mmap.mmap:
    """A system shared-memory region `name` as the server's shim resolves it: a file in
    the server's folder (or in /dev/shm where the server has no shim)."""
    path = (server.shm_dir or Path("/dev/shm")) / name
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, size)
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)
