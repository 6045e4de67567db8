#!/usr/bin/env bash
# Run the pipeline on an offline GPU machine from the bundle of scripts/machines/pack_offline.py:
#   bash scripts/machines/offline_run.sh .pack/offline-py3.12.tar.xz --configfile config/runs/h100.yaml -c8
# The bundle brings the Triton server, perf_analyzer, snakemake and the other Python
# packages the machine lacks (scripts/machines/offline_env.sh puts them on the paths).
set -euo pipefail
bundle=$1
shift
cd "$(dirname "$0")/../.."
. scripts/machines/offline_env.sh "$bundle"
# the workflow profile (profiles/default, found from this folder) sets the bench slots:
# one a GPU this shell may use (DEPLOYBENCH_BENCH_SLOTS to say otherwise)
exec python3 -m snakemake "$@"
