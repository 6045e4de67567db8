#!/usr/bin/env bash
# One call on a lent GPU machine (the device tool): unpack the offline bundle, build the
# given targets within a time box (the next call goes on where it stopped, while the
# machine is warm), and leave in $OUT what came of it: logs and the configurations'
# results, without converted models and repositories.
#   bash scripts/gpu_session.sh SECONDS TARGET...
set -uo pipefail
box=$1
shift
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_MAX_AUTOTUNE=0 DEPLOYBENCH_PROFILE_EVERY=500
out=${OUT:-/tmp/out}
mkdir -p "$out"
dest=${DEPLOYBENCH_OFFLINE_DIR:-/tmp/deploybench-offline}
[ -d "$dest/site" ] || { mkdir -p "$dest" && tar -xJf .pack/offline-py3.12.tar.xz -C "$dest"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/gpu.txt" 2>&1
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' >>"$out/gpu.txt"
if [ -n "${GPU_TESTS:-}" ]; then  # the GPU runners' tests first (GPU_TESTS=1)
    PYTHONPATH="$dest/site:$PWD/scripts" timeout 240 python3 -m pytest -q -p no:cacheprovider \
        tests/test_gpu_runners.py >"$out/gpu_runners.log" 2>&1
    tail -3 "$out/gpu_runners.log"
fi
timeout "$box" bash scripts/offline_run.sh .pack/offline-py3.12.tar.xz \
    --configfile config/runs/h100.yaml -c16 --keep-going --rerun-incomplete "$@" \
    >"$out/snakemake.log" 2>&1
echo "snakemake exit: $?"
grep -E "Finished jobid|Error in rule|error:" "$out/snakemake.log" | tail -25
tar czf "$out/results.tgz" --exclude=converted --exclude=model_repository \
    --exclude='*/export' --exclude='*/source' results/*/h100 2>/dev/null
ls -la "$out"
