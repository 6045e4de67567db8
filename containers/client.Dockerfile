# The client/tooling image: the server image plus everything the pipeline's steps run
# (torch, ONNX tooling, tritonclient with perf_analyzer, snakemake, this project), so one
# image serves `snakemake --software-deployment-method apptainer` (config key `container`)
# with server: {kind: binary, binary: /opt/tritonserver/bin/tritonserver}: every step,
# the server and perf_analyzer then run in the same container on the job's GPU.
#   docker build -f containers/server.Dockerfile -t deploybench-server .
#   docker build -f containers/client.Dockerfile -t deploybench .
#   apptainer build deploybench.sif docker-daemon://deploybench:latest
FROM deploybench-server
COPY pyproject.toml /opt/deploybench/
COPY scripts /opt/deploybench/scripts
RUN pip install --no-cache-dir "/opt/deploybench" "tritonclient[all]==2.50.0"
