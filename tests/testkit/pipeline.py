"""The tiny build's default configuration folder."""



RUN = "results/tft-tiny/cpu/onnx_fp32"
