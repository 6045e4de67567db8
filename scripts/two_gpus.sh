#!/usr/bin/env bash
# config/runs/two-gpus.yaml on a lent machine of two GPUs, over consecutive calls (each
# waits up to SECONDS; the passes run in a session of their own, so they outlive a call):
#   bash scripts/two_gpus.sh SECONDS
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
# $OUT gets phases.tsv, each pass's snakemake log and results.tgz (results so far).
set -uo pipefail
box=$1
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/out}
work=${DEPLOYBENCH_WORKDIR:-/tmp/deploybench-two}
mkdir -p "$out" "$work"
[ -x /usr/bin/g++ ] && export CXX=/usr/bin/g++  # as scripts/gpu_session.sh says why
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 TORCHINDUCTOR_MAX_AUTOTUNE=0
export PASSES=${PASSES:-prepare together alone scaling} SEARCH=${SEARCH:-tft/aoti-cg_fp16}

passes() {  # run in the background: the passes in order, from the tree's copy in $work
    local repo=$work/.repo gpu runfile key cfgs=() measured=() c
    cd "$work" || return
    gpu=h100
    nvidia-smi -L | grep -q H200 && gpu=h200
    runfile=$work/two-gpus.yaml
    sed "s/gpu: h100/gpu: $gpu/" "$repo/config/runs/two-gpus.yaml" >"$runfile"
    # the run file's targets, `- {model: M, gpu: G, backend: B, precision: P}`, as folders
    local target="^ *- {model: \([a-z0-9-]*\), gpu: $gpu, backend: \([a-z0-9-]*\)"
    target="$target, precision: \(fp[0-9]*\)}.*"
    mapfile -t cfgs < <(sed -n "s|$target|results/\1/$gpu/\2_\3|p" "$runfile")
    for c in "${cfgs[@]}"; do measured+=("$c/offline.json" "$c/online.json"); done
    pin=()  # a command the next pass runs under (taskset)
    pass() {  # NAME SLOTS TARGET...: one snakemake run, its wall time in phases.tsv
        local name=$1 slots=$2 start rc
        shift 2
        start=$(date +%s)
        DEPLOYBENCH_BENCH_SLOTS=$slots "${pin[@]}" bash "$repo/scripts/offline_run.sh" \
            "$repo/.pack/offline-py3.12.tar.xz" --snakefile "$repo/Snakefile" \
            --directory "$work" --configfile "$runfile" --cores "$(nproc)" "$@" \
            >>"snakemake-$name.log" 2>&1  # a pass of several runs: all of them
        rc=$?
        printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$slots" "$start" "$(date +%s)" "$rc" \
            >>phases.tsv
    }
    [ -f phases.tsv ] || printf 'pass\tbench slots\tstart\tend\trc\n' >phases.tsv
    case " $PASSES " in *" prepare "*) pass prepare 2 "${cfgs[@]/%//accuracy.csv}" ;; esac
    case " $PASSES " in *" together "*) pass together 2 "${measured[@]}" ;; esac
    apart() {  # PASS KEPT CONFIGURATION...: each one's steps measured again, one at a time
        local name=$1 kept=$2 t uuid k share c key
        shift 2
        for c in "$@"; do  # the outputs so far kept, then measured again
            key=$(dirname "$c")
            mkdir -p "$key/$kept/$(basename "$c")"
            cp -r "$c"/{offline,online}.{csv,json} "$c/logs" "$c/benchmarks" \
                "$key/$kept/$(basename "$c")/" && rm -f "$c"/{offline,online}.{csv,json}
        done
        # each step where it ran together: its GPU alone visible, that GPU's share of the
        # CPUs (the claim pinned it there), so only the neighbour differs
        share=$(($(nproc) / $(nvidia-smi -L | grep -c '^GPU')))
        for c in "$@"; do
            for t in "$c/offline.json" "$c/online.json"; do
                uuid=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))
                    ["provenance"]["device"])' "$(dirname "$c")/together/${t#*/*/*/}")
                k=$(nvidia-smi -L | grep -n "$uuid" | cut -d: -f1)
                k=$((k - 1))
                pin=(taskset -c "$((k * share))-$((k * share + share - 1))")
                CUDA_VISIBLE_DEVICES=$uuid pass "$name" 1 "$t"
            done
        done
        pin=()
    }
    case " $PASSES " in *" alone "*) apart alone together "${cfgs[@]}" ;; esac
    case " $PASSES " in *" again "*)
        local again=() model
        for c in "${cfgs[@]}"; do  # AGAIN: models, as `tft bert`
            model=${c#results/}
            case " ${AGAIN:-${model%%/*}} " in *" ${model%%/*} "*) again+=("$c") ;; esac
        done
        apart again alone "${again[@]}" ;;
    esac
    case " $PASSES " in *" scaling "*)
        pass scaling 1 "results/${SEARCH%%/*}/$gpu/${SEARCH#*/}/search/README.md" ;;
    esac
}

running() { [ -f "$work/passes.pid" ] && kill -0 "$(cat "$work/passes.pid")" 2>/dev/null; }
if [ ! -f "$work/passes.pid" ]; then
    mkdir -p "$work/.repo" && tar -c --exclude=./results . | tar -x -C "$work/.repo"
    nvidia-smi -L >"$out/gpus.txt"
    export -f passes
    export work
    setsid bash -c passes >"$work/passes.log" 2>&1 </dev/null &
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
bash scripts/pack_results.sh "$work" "$out/results.tgz"
