#!/usr/bin/env bash
# Every GPU-only test (tests/gpu, whose tests tests/conftest.py marks `gpu`; FP16 included)
# on a lent GPU machine, in the offline bundle's environment (onnxruntime-gpu's too where its
# bundle is there: without it the ONNX Runtime GPU tests are skipped, and say so).
#   bash scripts/machines/gpu_tests.sh [PYTEST_ARGS...]   (paths default to tests/gpu)
# Leaves in $OUT: gpu_tests.log (pytest -rA: every test's outcome by name), gpu_tests.xml
# (JUnit) and gpu.txt (the machine, torch and the commit), to commit under
# tests/gpu-results/<date>-<gpu>/ with a README of the session. BACKGROUND=1: runs in a
# session of its own and returns at once (a device call then carries on with other work;
# a later call's `BACKGROUND=1 ... --wait SECONDS` waits for it and brings the files).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
mkdir -p "$out"
state=${DEPLOYBENCH_GPU_TESTS_DIR:-/tmp/deploybench-gpu-tests}
if [ "${1:-}" = "--wait" ]; then  # a background run's end (up to SECONDS), its files to $OUT
    end=$((SECONDS + ${2:-0}))
    while [ ! -f "$state/rc" ] && [ "$SECONDS" -lt "$end" ]; do sleep 5; done
    cp "$state"/gpu_tests.* "$state/gpu.txt" "$out/" 2>/dev/null
    if [ -f "$state/rc" ]; then echo "gpu tests exit: $(cat "$state/rc")"; else echo "gpu tests running"; fi
    tail -5 "$state/gpu_tests.log" 2>/dev/null
    exit 0
fi
if [ -n "${BACKGROUND:-}" ]; then
    rm -rf "$state" && mkdir -p "$state"
    OUT=$state setsid bash -c 'bash "$0" "$@"; echo $? >"$1/rc"' "$0" "$state" "$@" \
        >/dev/null 2>&1 </dev/null &
    exit 0
fi
[ "${1:-}" = "$state" ] && shift  # the background run's own call
[ -x /usr/bin/g++ ] && export CXX=/usr/bin/g++  # as gpu_session.sh: AOTInductor's packages
. scripts/machines/offline_env.sh .pack/offline-py3.12.tar.xz
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
    python3 -c 'import onnxruntime as o; print("onnxruntime", o.__version__, o.get_available_providers())'
    echo "code $(python3 -c 'from deploybench.measurement.provenance import code_digest; print(code_digest())' 2>&1)"
} >"$out/gpu.txt" 2>&1
python3 -m pytest -m gpu -rA -p no:cacheprovider --junitxml="$out/gpu_tests.xml" "${@:-tests/gpu}" \
    >"$out/gpu_tests.log" 2>&1
rc=$?
tail -3 "$out/gpu_tests.log"
exit $rc
