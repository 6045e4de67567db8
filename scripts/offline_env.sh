# Sourced, not run: unpacks the bundle of scripts/pack_offline.py once (to
# $DEPLOYBENCH_OFFLINE_DIR, default /tmp/deploybench-offline) and puts its Triton server,
# perf_analyzer and Python packages on this shell's paths.
#   . scripts/offline_env.sh .pack/offline-py3.12.tar.xz
# onnxruntime-gpu's bundle (pack_offline.py --onnxruntime-gpu), where it lies beside that one
# (.pack/onnxruntime-gpu-py3.12.tar.xz) or $DEPLOYBENCH_ORT_GPU_BUNDLE names it, goes in
# front of the machine's CPU onnxruntime, for the pipeline and for the server's models.
dest=${DEPLOYBENCH_OFFLINE_DIR:-/tmp/deploybench-offline}
if [ ! -d "$dest/site" ]; then
    mkdir -p "$dest" && tar -xJf "$1" -C "$dest"
fi
ort=${DEPLOYBENCH_ORT_GPU_BUNDLE:-$(dirname "$1")/onnxruntime-gpu-$(basename "$1" | sed 's/^offline-//')}
# Its parts (pack_offline.py --part-mib), carried over several calls: a lent machine's copy
# of the tree keeps only the latest call's carried files (2026-11-28), so each part that
# matches its sum is kept beside the unpacked bundle, in a folder named by the whole's sum,
# and the whole is joined there once all have come and kept only if it matches too
if [ ! -d "$dest/onnxruntime-gpu" ] && [ ! -f "$ort" ] && [ -f "$ort.sha256" ]; then
    ort_want=$(awk -v name="$(basename "$ort")" '$2 == name { print $1 }' "$ort.sha256")
    ort_kept=$dest/onnxruntime-gpu-parts-${ort_want:0:16}
    mkdir -p "$ort_kept"
    ort_parts=()
    while read -r ort_sum ort_part; do
        case $ort_part in *.part[0-9]*) ;; *) continue ;; esac
        ort_parts+=("$ort_part")
        ort_new=$(dirname "$ort")/$ort_part
        if [ -f "$ort_kept/$ort_part" ] || [ ! -f "$ort_new" ]; then continue; fi
        if [ "$(sha256sum <"$ort_new" | cut -d' ' -f1)" = "$ort_sum" ]; then
            cp "$ort_new" "$ort_kept/$ort_part.copying" && mv "$ort_kept/$ort_part.copying" \
                "$ort_kept/$ort_part"
        else
            echo "offline_env.sh: $ort_new does not match its sum ($ort.sha256):" \
                "carry it again" >&2
        fi
    done <"$ort.sha256"
    ort_have=$(cd "$ort_kept" && ls "${ort_parts[@]}" 2>/dev/null | wc -l)
    if [ "$ort_have" -lt "${#ort_parts[@]}" ]; then
        echo "offline_env.sh: $ort_have of ${#ort_parts[@]} parts of $(basename "$ort") kept" \
            "in $ort_kept: onnxruntime-gpu is not used until all are" >&2
    else
        (cd "$ort_kept" && cat "${ort_parts[@]}") >"$ort_kept/whole.joining"
        if [ "$(sha256sum <"$ort_kept/whole.joining" | cut -d' ' -f1)" = "$ort_want" ]; then
            ort=$ort_kept/$(basename "$ort")
            mv "$ort_kept/whole.joining" "$ort" && (cd "$ort_kept" && rm -f "${ort_parts[@]}")
        else
            rm -rf "$ort_kept"
            echo "offline_env.sh: the parts of $ort joined do not match its sum" \
                "($ort.sha256): carry them all again" >&2
        fi
    fi
fi
if [ -f "$ort" ] && [ ! -d "$dest/onnxruntime-gpu" ]; then  # whole, or not at all
    rm -rf "$dest/.ort" && mkdir "$dest/.ort" && tar -xJf "$ort" -C "$dest/.ort" &&
        mv "$dest/.ort/onnxruntime-gpu" "$dest/" && rm -rf "$dest/.ort"
fi
front="$dest/site"
server_front="$dest/stub-site"
if [ -d "$dest/onnxruntime-gpu" ]; then
    front="$dest/onnxruntime-gpu:$front"
    server_front="$dest/onnxruntime-gpu:$server_front"
fi
case ":${PYTHONPATH:-}:" in
    *":$dest/site:"*) ;;  # sourced twice: once on the paths is enough
    *) export PYTHONPATH="$front:$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
       export PATH="$dest/bin:$PATH" ;;
esac
export DEPLOYBENCH_SERVER_PYTHONPATH="$server_front"
export DEPLOYBENCH_SHM_SHIM="$dest/bin/libdeploybench_shm.so"
