#!/usr/bin/env bash
# The passes of scripts/machines/two_gpus.sh (which says what each does), in order, in the workdir
# $work with the tree's copy in $work/.repo: PASSES, AGAIN and SEARCH as it sets them.
set -uo pipefail
work=${work:?the workdir, as scripts/machines/two_gpus.sh sets it}
repo=$work/.repo
cfgs=()
measured=()
cd "$work" || exit
gpu=h100
nvidia-smi -L | grep -q H200 && gpu=h200
runfile=$work/two-gpus.yaml
sed "s/gpu: h100/gpu: $gpu/" "$repo/config/runs/two-gpus.yaml" >"$runfile"
# the run file's targets, `- {model: M, gpu: G, backend: B, precision: P}`, as folders
target="^ *- {model: \([a-z0-9-]*\), gpu: $gpu, backend: \([a-z0-9-]*\)"
target="$target, precision: \(fp[0-9]*\)}.*"
mapfile -t cfgs < <(sed -n "s|$target|results/\1/$gpu/\2_\3|p" "$runfile")
for c in "${cfgs[@]}"; do measured+=("$c/offline.json" "$c/online.json"); done
pin=()  # a command the next pass runs under (taskset)
pass() {  # NAME SLOTS TARGET...: one snakemake run, its wall time in phases.tsv
    local name=$1 slots=$2 start rc
    shift 2
    start=$(date +%s)
    DEPLOYBENCH_BENCH_SLOTS=$slots "${pin[@]}" bash "$repo/scripts/machines/offline_run.sh" \
        "$repo/.pack/offline-py3.12.tar.xz" --snakefile "$repo/Snakefile" \
        --directory "$work" --configfile "$runfile" --cores "$(nproc)" "$@" \
        >>"snakemake-$name.log" 2>&1  # a pass of several runs: all of them
    rc=$?
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$slots" "$start" "$(date +%s)" "$rc" \
        >>phases.tsv
}
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
[ -f phases.tsv ] || printf 'pass\tbench slots\tstart\tend\trc\n' >phases.tsv
case " $PASSES " in *" prepare "*) pass prepare 2 "${cfgs[@]/%//accuracy.csv}" ;; esac
case " $PASSES " in *" together "*) pass together 2 "${measured[@]}" ;; esac
case " $PASSES " in *" alone "*) apart alone together "${cfgs[@]}" ;; esac
case " $PASSES " in *" again "*)
    again=()
    for c in "${cfgs[@]}"; do  # AGAIN: models, as `tft bert`; unset or empty: every one
        model=${c#results/}
        case " ${AGAIN:-${model%%/*}} " in *" ${model%%/*} "*) again+=("$c") ;; esac
    done
    apart again alone "${again[@]}" ;;
esac
case " $PASSES " in *" scaling "*)
    pass scaling 1 "results/${SEARCH%%/*}/$gpu/${SEARCH#*/}/search/README.md" ;;
esac
