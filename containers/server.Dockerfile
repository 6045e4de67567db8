# The Triton server image: NGC Triton 24.10 (Triton 2.51, the version the embedded default
# bundles) with its native backends (onnxruntime, tensorrt, pytorch, tensorflow, python),
# plus what the python-backend fallback (scripts/deploybench/served/python_model.py) imports
# for the backend keys without a native backend (ts-trace-cg).
#   docker build -f containers/server.Dockerfile -t deploybench-server .
#   apptainer build deploybench-server.sif docker-daemon://deploybench-server:latest
# Use it with server: {kind: container, image: deploybench-server, engine: docker}.
FROM nvcr.io/nvidia/tritonserver:24.10-py3
# numpy<2: Triton 2.51's python backend stub returns empty outputs under numpy 2.
RUN pip install --no-cache-dir "numpy<2" torch onnxruntime-gpu
