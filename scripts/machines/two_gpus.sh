#!/usr/bin/env bash
# config/runs/two-gpus.yaml on a lent machine of two GPUs, over consecutive calls (each
# waits up to SECONDS; the passes run in a session of their own, so they outlive a call):
#   bash scripts/machines/two_gpus.sh SECONDS
# Passes (PASSES, default "prepare together alone scaling", in this order), each a
# snakemake run in one workdir, timed in phases.tsv:
#   prepare   the run file's configurations converted, checked and accurate
#   together  their offline and online steps, two at once, each on a GPU of its own
#   alone     the same steps again, one at a time, each on the GPU and CPUs it had
#             together (their first outputs kept under results/<model>/<gpu>/together/
#             and removed, so that they are measured again)
#   again     the alone pass once more, for the models AGAIN names (default all;
#             the alone pass's outputs kept under .../alone/): the run-to-run noise of
#             a fresh server on the same GPU, which together / alone is weighed against
#   scaling   the search over 1 and 2 GPUs of SEARCH (default tft/aoti-cg_fp16), a point
#             at a time
# The passes run from scripts/machines/two_gpus_passes.sh. $OUT gets phases.tsv, each pass's snakemake
# log and results.tgz (results so far).
set -uo pipefail
box=$1
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
work=${DEPLOYBENCH_WORKDIR:-/tmp/deploybench-two}
mkdir -p "$out" "$work"
[ -x /usr/bin/g++ ] && export CXX=/usr/bin/g++  # as scripts/machines/gpu_session.sh says why
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 TORCHINDUCTOR_MAX_AUTOTUNE=0
export PASSES=${PASSES:-prepare together alone scaling} SEARCH=${SEARCH:-tft/aoti-cg_fp16}

running() { [ -f "$work/passes.pid" ] && kill -0 "$(cat "$work/passes.pid")" 2>/dev/null; }
if [ ! -f "$work/passes.pid" ]; then
    mkdir -p "$work/.repo" && tar -c --exclude=./results . | tar -x -C "$work/.repo"
    nvidia-smi -L >"$out/gpus.txt"
    export work AGAIN=${AGAIN:-}
    setsid bash "$work/.repo/scripts/machines/two_gpus_passes.sh" >"$work/passes.log" 2>&1 </dev/null &
    echo $! >"$work/passes.pid"
fi
end=$((SECONDS + box))
while running && [ "$SECONDS" -lt "$end" ]; do sleep 5; done
running && echo "passes still running" || echo "passes ended"
cp "$work"/phases.tsv "$work"/passes.log "$work"/snakemake-*.log "$out/" 2>/dev/null
cat "$work/phases.tsv"
for log in "$work"/snakemake-*.log; do
    echo "$log: $(grep -c 'Finished jobid' "$log") jobs done;" \
        "$(grep -E 'Error in rule' "$log" | tr '\n' ' ')"
done
bash scripts/machines/pack_results.sh "$work" "$out/results.tgz"
