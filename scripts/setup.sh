#!/usr/bin/env bash
# Set up the project's virtual environment (.venv) on a fresh machine.
# The embedded Triton (nvidia-pytriton's tritonserver) is installed without its Python
# dependencies: only its server binary and python backend are used.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q torch==2.13.0  # the CPU build; a plain 'torch' pulls CUDA (GBs)
.venv/bin/pip install -q -e '.[test,cluster,tf]'  # cluster: the Slurm test's executor; tf: TF models
.venv/bin/pip install -q --no-deps nvidia-pytriton==0.7.0
.venv/bin/python -c "from deploybench.triton import install; print('Triton:', install.prepare().describe())"
