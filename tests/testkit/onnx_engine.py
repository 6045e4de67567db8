"""The ONNX graph the C++ backend's engines serve in the real Triton, and how their tests
serve and query it."""

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
from onnx import TensorProto, helper

from deploybench.ensemble.metrics import cache_counters
from deploybench.runners.embeddings import METADATA, RANKING, STORAGE
from deploybench.triton import config as triton_config
from deploybench.triton import cpp_backend, install, repository
from deploybench.triton.server import TritonServer


def graph(path, width: int = 4) -> None:
    """y = tanh(x W + b) * (i + 1), s = sum(x): x FP32 [B, width], i INT64 [B, 1]."""
    rng = np.random.default_rng(0)
    weight = helper.make_tensor("W", TensorProto.FLOAT, [width, 3],
                                rng.standard_normal((width, 3)).astype(np.float32).ravel())
    bias = helper.make_tensor("b", TensorProto.FLOAT, [3], [0.1, -0.2, 0.3])
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["h"]),
             helper.make_node("Tanh", ["h"], ["t"]),
             helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["f", "one"], ["g"]),
             helper.make_node("Mul", ["t", "g"], ["y"]),
             helper.make_node("ReduceSum", ["x"], ["s"], axes=[1], keepdims=1)]
    model = helper.make_model(helper.make_graph(
        nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", width]),
                       helper.make_tensor_value_info("i", TensorProto.INT64, ["B", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 3]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, ["B", 1])],
        [weight, bias, one]), opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    onnx.save(model, str(path))


def run_of(max_batch: int = 8, delay_us: int = 100, x_dims=(4,), kind: str = "cpu",
           precision: str = "fp32") -> dict:
    return {
        "key": {"model": "two", "backend": "onnx"},
        "model": {
            "inputs": [{"name": "x", "dtype": "FP32", "dims": list(x_dims)},
                       {"name": "i", "dtype": "INT64", "dims": [1]},
                       {"name": "unread", "dtype": "FP32", "dims": [2]}],
            "outputs": [{"name": "y", "dtype": "FP32", "dims": [3]},
                        {"name": "s", "dtype": "FP32", "dims": [1]}],
            "triton": {"max_batch_size": max_batch, "instances": 1,
                       "preferred_batch_sizes": [max_batch], "max_queue_delay_us": delay_us},
        },
        "gpu": {"kind": kind},
        "backend": {"runner": "onnxruntime", "triton_backend": "onnxruntime"},
        "precision": precision, "artifact": "model.onnx", "server": {"serve_with": "auto"},
    }


@pytest.fixture(scope="module")
def triton():
    prepared = install.prepare()
    assert cpp_backend.NAME in prepared.backends, prepared.cpp_backend
    return prepared


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ort")
    graph(folder / "model.onnx")
    return folder


def serve(triton, work, run, name):
    repo = work / f"repo-{name}"
    assert repository.create(run, work / "model.onnx", repo, triton.backends, name) == \
        cpp_backend.NAME
    config = triton_config.read(repo / name / "config.pbtxt")
    assert config.parameters["runner"].string_value == "onnxruntime"
    return TritonServer(triton, repo, work / f"{name}.log", name)


def samples(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((n, 4)).astype(np.float32),
            "i": rng.integers(0, 5, (n, 1)).astype(np.int64),
            "unread": np.full((n, 2), 7, np.float32)}


def in_process(work, feed: dict, providers=("CPUExecutionProvider",)) -> list[np.ndarray]:
    """ONNX Runtime in this process, FP32 strict as the engine serves an FP32 model (the CUDA
    provider's default allows TF32: 1e-3 apart from the engine on an H200, 2026-11-29)."""
    options = [{"use_tf32": "0"} if p == "CUDAExecutionProvider" else {} for p in providers]
    session = ort.InferenceSession(str(work / "model.onnx"), providers=list(providers),
                                   provider_options=options)
    return session.run(["y", "s"], {k: feed[k] for k in ("x", "i")})


def infer(client_module, url: str, model: str, feed: dict) -> list[np.ndarray]:
    with client_module.InferenceServerClient(url) as client:
        tensors = []
        for name, array in feed.items():
            tensor = client_module.InferInput(name, list(array.shape),
                                              "FP32" if array.dtype == np.float32 else "INT64")
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        result = client.infer(model, tensors)
        return [result.as_numpy("y"), result.as_numpy("s")]


# ---- the embedding store ----------------------------------------------------------------

SIZES, DIM = [500, 300, 200], 8


def sparse_folder(path):
    rng = np.random.default_rng(5)
    path.mkdir(parents=True)
    storage = rng.standard_normal((sum(SIZES), DIM)).astype(np.float32)
    np.save(path / STORAGE, storage)
    np.save(path / RANKING, np.arange(sum(SIZES), dtype=np.int64))  # row 0 the most frequent
    (path / METADATA).write_text(json.dumps({"table_sizes": SIZES, "embedding_dim": DIM}))
    return storage


def sparse_repository(repo, placement: str, kind: str) -> None:
    version = repo / "sparse" / repository.VERSION
    config = triton_config.sparse_config(
        "sparse", {"gpu": {"kind": kind}, "model": {"triton": {"instances": 1}}},
        [{"name": "EMB_KEY", "dtype": "INT64", "dims": [-1]},
         {"name": "EMB_N_KEY", "dtype": "INT32", "dims": [1]}],
        {"name": "LOOKUP", "dtype": "FP32", "dims": [-1, len(SIZES) * DIM]},
        {"runner": "embeddings", "artifact": "sparse", "placement": placement,
         "cache_fraction": "0.1", "device_share": "0.5"}, cpp_backend.NAME)
    sparse_folder(version / "sparse")
    triton_config.write(config, repo / "sparse" / "config.pbtxt")


def lookup(url: str, keys: np.ndarray) -> np.ndarray:
    with grpcclient.InferenceServerClient(url) as client:
        key = grpcclient.InferInput("EMB_KEY", [len(keys)], "INT64")
        key.set_data_from_numpy(keys)
        count = grpcclient.InferInput("EMB_N_KEY", [1], "INT32")
        count.set_data_from_numpy(np.array([len(keys)], np.int32))
        return client.infer("sparse", [key, count]).as_numpy("LOOKUP")


def check_the_embedding_store(triton, tmp_path, placement, kind):
    """Skewed keys (a tenth of them past the ranked rows): through the cache or the whole
    table, on the CPU or a GPU, every row equals the table's; the metrics count every
    lookup, and the hits are fewer than the lookups through a cache, all of them with the
    tables whole."""
    repo = tmp_path / "repo"
    sparse_repository(repo, placement, kind)
    storage = np.load(repo / "sparse/1/sparse" / STORAGE)
    offsets = np.cumsum([0, *SIZES[:-1]])
    rng = np.random.default_rng(6)
    with TritonServer(triton, repo, tmp_path / "server.log", "sparse") as server:
        for _ in range(30):
            ids = np.minimum(rng.geometric(3 / np.array(SIZES), (16, len(SIZES))),
                             np.array(SIZES) - 1)
            keys = (ids + offsets).reshape(-1).astype(np.int64)
            np.testing.assert_array_equal(lookup(server.grpc_url, keys),
                                          storage[keys].reshape(16, -1))
        counters = cache_counters(server.metrics())
        with pytest.raises(Exception, match=r"keys outside the fused table's 1000 rows "
                                            r"\(min 0, max 1000\)"):
            lookup(server.grpc_url, np.array([0, 1, 1000], np.int64))
        with pytest.raises(Exception, match=r"outside the fused table's 1000 rows \(min -1"):
            lookup(server.grpc_url, np.array([-1, 1, 2], np.int64))
        # served on, the failed lookups not counted (on a GPU they were, until checked)
        np.testing.assert_array_equal(lookup(server.grpc_url, keys), storage[keys].reshape(16, -1))
        after = cache_counters(server.metrics())
    assert counters["lookups"] == 30 * 16 * len(SIZES)
    assert after["lookups"] == 31 * 16 * len(SIZES)
    if placement == "cache":
        assert 0 < counters["hit_rate"] < 1, counters
    else:
        assert counters["hit_rate"] == 1, counters
    log = (tmp_path / "server.log").read_text()
    device = "cpu" if kind == "cpu" else "cuda:0"
    assert ("1000 rows of 8 (0 MiB) whole on " + device in log) == (placement == "fit"), log
    assert ("in host memory, 100 rows cached on " + device in log) == (placement == "cache")
