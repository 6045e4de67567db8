#!/usr/bin/env bash
# Run the pipeline on an offline GPU machine from the bundle of scripts/pack_offline.py:
#   bash scripts/offline_run.sh .pack/offline-py3.12.tar.xz --configfile config/runs/h100.yaml -c8
# Unpacks the bundle (Triton server, perf_analyzer, snakemake and the other Python
# packages the machine lacks) to /tmp/deploybench-offline and runs snakemake with it.
set -euo pipefail
bundle=$1
shift
cd "$(dirname "$0")/.."
dest=${DEPLOYBENCH_OFFLINE_DIR:-/tmp/deploybench-offline}
if [ ! -d "$dest/site" ]; then
  mkdir -p "$dest"
  tar -xJf "$bundle" -C "$dest"
fi
export PYTHONPATH="$dest/site:$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$dest/bin:$PATH"
export DEPLOYBENCH_SERVER_PYTHONPATH="$dest/stub-site"
export DEPLOYBENCH_SHM_SHIM="$dest/bin/libdeploybench_shm.so"
exec python3 -m snakemake "$@" --resources bench_slot=1  # last: it takes several values
