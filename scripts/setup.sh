#!/usr/bin/env bash
# Set up the project's virtual environment (.venv) on a fresh machine.
#   bash scripts/setup.sh          the main job's needs: PyTorch and ONNX models, the bundled Triton
#   bash scripts/setup.sh tf       also TensorFlow (Wide & Deep, DLRM, DCNv2: config/runs/cpu.yaml)
#   bash scripts/setup.sh test     everything the tests need (TensorFlow, the cluster
#                                  executors, the linters, Playwright)
# The embedded Triton (nvidia-pytriton's tritonserver) is installed without its Python
# dependencies: only its server binary and python backend are used.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
    "") extras="" ;;
    tf) extras="[tf]" ;;
    test) extras="[test,cluster,tf]" ;;  # cluster: the Slurm and Kubernetes tests' executors
    *) echo "setup.sh: unknown argument '$1': none (the main job), 'tf' or 'test'" >&2; exit 2 ;;
esac
python3 -m venv .venv
.venv/bin/pip install -q torch==2.13.0  # the CPU build; a plain 'torch' pulls CUDA (GBs)
.venv/bin/pip install -q -e ".$extras"
.venv/bin/pip install -q --no-deps nvidia-pytriton==0.7.0
.venv/bin/python -c "from deploybench.triton import install; print('Triton:', install.prepare().describe())"
