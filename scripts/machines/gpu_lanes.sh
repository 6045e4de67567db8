#!/usr/bin/env bash
# One lent-machine call on a machine of several GPUs: runs side by side, one lane a GPU,
# each lane pinned to its share of the host's CPUs (as many as a one-GPU machine's) and
# working in a directory of its own, its runs one after another.
#   bash scripts/machines/gpu_lanes.sh SECONDS LANES_FILE [NAME...]
# LANES_FILE: a run a line, `LANE NAME RUNFILES TARGET...` (RUNFILES comma-separated; `#`
# starts a comment; `stop NAME` ends that run); lane n runs on GPU n modulo the GPUs there are, so on fewer GPUs
# lanes share one, their runs one after another in the file's order. Each call starts
# what may start now (a lane's next run once the one before it has ended; every run
# through gpu_session.sh's DETACH=1, so it outlives the call), waits up to SECONDS while
# any runs, and leaves in $OUT/lanes.tar every started run's NAME/ folder: its snakemake.log,
# gpu.txt and results.tgz (its results so far), one file because the device brings back 8
# at most (a run's files past that were lost once, 2026-11-28). A later call with more
# lines adds runs. NAMEs:
# only those runs of the file (a machine of one GPU, given back after 30 minutes held,
# takes one or two; a fresh machine knows nothing of an earlier one's runs). `{gpu}` in a
# TARGET stands for the GPU key that matches this host's GPUs. A configuration
# measured as several runs is put together by scripts/results_tools/assemble_configuration.py.
set -uo pipefail
if [ $# -lt 2 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
    sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'  # this header, as the help
    case ${1:-} in --help | -h) exit 0 ;; *) exit 2 ;; esac
fi
box=$1
lanes=$2
shift 2
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
root=${DEPLOYBENCH_LANES_DIR:-/tmp/deploybench-lanes}
gpus=$(nvidia-smi -L | grep -c '^GPU')
share=$(($(nproc --all) / gpus))
mapfile -t runs < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' -e '/^[[:space:]]*stop[[:space:]]/d' \
    "$lanes")
mapfile -t stops < <(sed -e 's/#.*//' "$lanes" | awk '$1 == "stop" { print $2 }')
if [ $# -gt 0 ]; then
    names=" $(printf '%s\n' "${runs[@]}" | awk '{ print $2 }' | tr '\n' ' ')"
    for name in "$@"; do
        case $names in *" $name "*) ;; *)
            echo "gpu_lanes.sh: no run '$name' in $lanes; its runs:$names" >&2; exit 2 ;;
        esac
    done
    mapfile -t runs < <(printf '%s\n' "${runs[@]}" | awk -v want=" $* " \
        'index(want, " " $2 " ")')
fi
# the runs' paths without this shell's: offline_env.sh puts the live tree's package on them,
# which the next call's copy replaces under a running job (an import failed so, 2026-11-28)
pythonpath=${PYTHONPATH:-}
. scripts/machines/offline_env.sh .pack/offline-py3.12.tar.xz  # unpacked once, before the lanes
# `{gpu}` in a target: the GPU key of this host's GPUs (config/gpus.yaml), so that one file
# measures on whichever machine is lent
if printf '%s\n' "${runs[@]}" | grep -q '{gpu}'; then
    key=$(python3 -c 'import sys, yaml
from deploybench.measurement.device import DeviceMismatch, host_key
try:
    print(host_key(yaml.safe_load(open("config/gpus.yaml"))))
except DeviceMismatch as err:
    sys.exit(f"gpu_lanes.sh: {err}")') || exit 2
    echo "{gpu}: $key"
    runs=("${runs[@]//'{gpu}'/$key}")
fi

state() {  # done, running, or ready: of the run in directory $1
    if [ -f "$1/snakemake.rc" ]; then echo done
    elif [ -f "$1/snakemake.pid" ] && kill -0 "$(cat "$1/snakemake.pid")" 2>/dev/null; then
        echo running
    else echo ready; fi
}

# `stop NAME` lines: a run that cannot end within the device time left is ended (its
# snakemake's session, which ends its jobs) and counts as done, so the lane goes on
for name in "${stops[@]}"; do
    work=$root/$name
    if [ "$(state "$work")" = running ]; then
        pid=$(cat "$work/snakemake.pid")
        kill -TERM -- "-$pid" 2>/dev/null
        for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
        kill -KILL -- "-$pid" 2>/dev/null
    fi
    if [ -d "$work" ] && [ ! -f "$work/snakemake.rc" ]; then echo stopped >"$work/snakemake.rc"; fi
done

start_ready() {  # each GPU's first run that has not ended, where none of its runs runs
    local busy=" " line lane gpu name runfiles targets
    for line in "${runs[@]}"; do
        read -r lane name runfiles targets <<<"$line"
        gpu=$((lane % gpus))
        case $busy in *" $gpu "*) continue ;; esac
        case $(state "$root/$name") in
            done) continue ;;
            ready)
                mkdir -p "$out/$name"
                # shellcheck disable=SC2086  # the targets, one word each
                PYTHONPATH=$pythonpath CUDA_VISIBLE_DEVICES=$gpu \
                    DEPLOYBENCH_WORKDIR=$root/$name OUT=$out/$name \
                    RUNFILE=${runfiles//,/ } DETACH=1 taskset -c \
                    "$((gpu * share))-$((gpu * share + share - 1))" \
                    bash scripts/machines/gpu_session.sh 0 $targets >/dev/null 2>&1
                # the host's GPUs, which gpu_session.sh writes once: sent at every call
                cp "$out/$name/gpu.txt" "$root/$name/" 2>/dev/null ;;
        esac
        busy="$busy$gpu "
    done
}

any_running() {
    local d
    for d in "$root"/*/; do [ "$(state "$d")" = running ] && return 0; done
    return 1
}

end=$((SECONDS + box))
while start_ready && any_running && [ "$SECONDS" -lt "$end" ]; do sleep 5; done
for line in "${runs[@]}"; do
    read -r lane name _ <<<"$line"
    gpu=$((lane % gpus))
    work=$root/$name
    [ -d "$work" ] || { echo "$name (GPU $gpu): waiting"; continue; }
    # packed while it runs and once when it has ended (packing burns a core, which a
    # neighbouring measurement would count as contention), and sent back at every call
    if [ ! -f "$work/packed" ]; then
        [ "$(state "$work")" = done ] && touch "$work/packed"
        bash scripts/machines/pack_results.sh "$work" "$work/results.tgz"
    fi
    mkdir -p "$out/$name"
    cp "$work/snakemake.log" "$work/gpu.txt" "$work/results.tgz" "$out/$name/" 2>/dev/null
    echo "$name (GPU $gpu): $(state "$work") $(cat "$work/snakemake.rc" 2>/dev/null)" \
        "$(grep -c 'Finished jobid' "$work/snakemake.log" 2>/dev/null) jobs done;" \
        "$(grep -E 'Error in rule' "$work/snakemake.log" 2>/dev/null | tr '\n' ' ')"
done
mapfile -t sent < <(cd "$out" && find . -mindepth 1 -maxdepth 1 -type d -printf '%P\n' | sort)
if [ ${#sent[@]} -gt 0 ]; then
    tar -cf "$out/lanes.tar" -C "$out" "${sent[@]}" && (cd "$out" && rm -rf "${sent[@]}")
fi
