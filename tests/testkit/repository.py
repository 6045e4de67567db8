"""The NGC Triton server's backends, as the repository tests name them."""



NGC_SERVER = ["onnxruntime", "python", "pytorch", "tensorflow", "tensorrt"]  # NGC's
