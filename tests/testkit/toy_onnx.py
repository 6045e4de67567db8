"""The toy ONNX model's run (tests/conftest.py's toy_repo): one linear layer served by the
python backend."""



RUN = {
    "key": {"model": "toy"},
    "model": {
        "inputs": [{"name": "x", "dtype": "FP32", "dims": [4]}],
        "outputs": [{"name": "y", "dtype": "FP32", "dims": [3]}],
        "triton": {"max_batch_size": 8, "instances": 1, "preferred_batch_sizes": [4],
                   "max_queue_delay_us": 100},
    },
    "gpu": {"kind": "cpu"}, "backend": {"runner": "onnxruntime", "triton_backend": "onnxruntime"},
    "precision": "fp32", "artifact": "model.onnx", "server": {"serve_with": "auto"},
}
