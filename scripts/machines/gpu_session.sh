#!/usr/bin/env bash
# One call on a lent GPU machine (the device tool): unpack the offline bundle, build the
# given targets within a time box, and leave in $OUT what came of it: logs and the
# configurations' results, without converted models and repositories.
#   bash scripts/machines/gpu_session.sh SECONDS TARGET...
# The pipeline works in $DEPLOYBENCH_WORKDIR (default /tmp/deploybench-work), outside the
# copied working tree, so that a call made while the machine is still warm goes on from
# what the last one built. AFTER="command" runs a command in the bundle's environment once
# the targets are built (e.g. scripts/benchmarks/bench_served_variants.py --directory "$work"), its
# output in $OUT/after.txt. DETACH=1: snakemake runs in a session of its own, from a copy
# of the tree, and goes on after the call returns (the device keeps such a process while
# the machine is held): a later DETACH=1 call waits on that run instead of starting one,
# so a job longer than a call (a slow key's offline sweep) completes over several calls.
# RUNFILE: the run files (default config/runs/h100.yaml; several, space-separated, are
# merged in order), whose targets order the jobs.
set -uo pipefail
box=$1
shift
cd "$(dirname "$0")/../.."
repo=$PWD
# TORCH_LOGS: dynamo's recompiles (and their guards), Inductor's reasons for skipping
# CUDA graphs and its graph recordings, in the server logs (torch-compile's online levels
# did not settle on 2026-11-24)
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 TORCHINDUCTOR_MAX_AUTOTUNE=0 \
    DEPLOYBENCH_PROFILE_EVERY=500 TORCH_LOGS=recompiles,perf_hints,cudagraphs
# The image's CXX (/opt/gcc/bin/g++) links libstdc++ statically into AOTInductor packages,
# which then segfault on load (runners/aoti.check_cxx_runtime): the system g++ links it shared
[ -x /usr/bin/g++ ] && export CXX=/usr/bin/g++
out=${OUT:-/tmp/out}
work=${DEPLOYBENCH_WORKDIR:-/tmp/deploybench-work}
read -ra runfiles <<<"${RUNFILE:-config/runs/h100.yaml}"
mkdir -p "$out" "$work"
pythonpath=${PYTHONPATH:-}
. scripts/machines/offline_env.sh .pack/offline-py3.12.tar.xz
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/gpu.txt" 2>&1
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' >>"$out/gpu.txt"
if [ -n "${GPU_TESTS:-}" ]; then  # the GPU tests first (GPU_TESTS=1, or the test files)
    tests=$GPU_TESTS
    [ "$tests" = 1 ] && tests="tests/gpu/test_gpu_runners.py tests/e2e/test_cpp_backend.py tests/gpu/test_cpp_backend_gpu.py tests/unit/test_cpp_install.py"
    # shellcheck disable=SC2086  # the files, one word each
    timeout 240 python3 -m pytest -q -p no:cacheprovider $tests >"$out/gpu_tests.log" 2>&1
    tail -3 "$out/gpu_tests.log"
fi
running() { [ -f "$work/snakemake.pid" ] && kill -0 "$(cat "$work/snakemake.pid")" 2>/dev/null; }
if [ -n "${DETACH:-}" ]; then
    if ! running; then
        rm -rf "$work/.snakemake/locks" "$work/snakemake.rc" "$work/.repo"
        # its own copy of the tree: the next call's copy replaces this one's files under it
        mkdir -p "$work/.repo" && tar -c --exclude=./.pack --exclude=./results . |
            tar -x -C "$work/.repo"
        # the copy's package first on the paths (this shell's put the tree's there)
        PYTHONPATH=$pythonpath setsid bash -c \
            'bash "$0/.repo/scripts/machines/offline_run.sh" "$@"; echo $? >"$0/snakemake.rc"' \
            "$work" "$repo/.pack/offline-py3.12.tar.xz" --snakefile "$work/.repo/Snakefile" \
            --directory "$work" --configfile "${runfiles[@]/#/$work/.repo/}" --cores "$(nproc)" \
            --keep-going --rerun-incomplete "$@" >"$work/snakemake.log" 2>&1 </dev/null &
        echo $! >"$work/snakemake.pid"
    fi
    end=$((SECONDS + box))
    while running && [ "$SECONDS" -lt "$end" ]; do sleep 5; done
    cp "$work/snakemake.log" "$out/snakemake.log"
    if running; then echo "snakemake still running"; else
        echo "snakemake exit: $(cat "$work/snakemake.rc" 2>/dev/null)"; fi
elif running; then
    echo "a detached snakemake runs here: call with DETACH=1 to wait on it" >&2
    exit 1
else
    # The last call's snakemake, killed at its time box, leaves its lock.
    rm -rf "$work/.snakemake/locks"
    # SECONDS: at most about 520 within the device's 600-s call: snakemake's stop (then a
    # kill 10 s later) and the packing below follow the box (a 565-s box once lost a
    # call's results).
    timeout -k 10 "$box" bash scripts/machines/offline_run.sh .pack/offline-py3.12.tar.xz \
        --snakefile "$repo/Snakefile" --directory "$work" \
        --configfile "${runfiles[@]/#/$repo/}" --cores "$(nproc)" --keep-going \
        --rerun-incomplete "$@" >"$out/snakemake.log" 2>&1
    echo "snakemake exit: $?"
fi
grep -E "Finished jobid|Error in rule|error:" "$out/snakemake.log" | tail -25
if [ -n "${AFTER:-}" ] && ! running; then
    (export work && eval "$AFTER") >"$out/after.txt" 2>&1
    echo "after exit: $?"
    tail -30 "$out/after.txt"
fi
bash scripts/machines/pack_results.sh "$work" "$out/results.tgz"
ls -la "$out"
