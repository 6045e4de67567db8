#!/usr/bin/env bash
# What a lent machine's run has built so far, packed to bring back: its results (logs,
# tables, JSON, reports) and the package lists the provenance names by hash, without the
# converted models, repositories, exports and sources.
#   bash scripts/machines/pack_results.sh WORKDIR TARBALL   (TARBALL: an absolute path)
cd "$1" && tar czf "$2" --exclude=converted --exclude=model_repository \
    --exclude='*/export' --exclude='*/source' --exclude='.*-work' results 2>/dev/null
