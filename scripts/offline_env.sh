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
# Its parts (pack_offline.py --part-mib), carried over several calls: joined once all of
# them are here, and kept only if the whole matches its sum
if [ ! -f "$ort" ] && [ -f "$ort.sha256" ]; then
    mapfile -t ort_parts < <(awk '$2 ~ /\.part[0-9]+$/ { print $2 }' "$ort.sha256")
    ort_have=0
    for ort_part in "${ort_parts[@]}"; do
        [ -f "$(dirname "$ort")/$ort_part" ] && ort_have=$((ort_have + 1))
    done
    if [ "$ort_have" -lt "${#ort_parts[@]}" ]; then
        echo "offline_env.sh: $ort_have of ${#ort_parts[@]} parts of $ort here:" \
            "onnxruntime-gpu is not used until all are" >&2
    else
        (cd "$(dirname "$ort")" && cat "${ort_parts[@]}") >"$ort.joining"
        ort_want=$(awk -v name="$(basename "$ort")" '$2 == name { print $1 }' "$ort.sha256")
        if [ "$(sha256sum <"$ort.joining" | cut -d' ' -f1)" = "$ort_want" ]; then
            mv "$ort.joining" "$ort"
        else
            rm -f "$ort.joining"
            echo "offline_env.sh: the parts of $ort joined do not match its sum" \
                "($ort.sha256): carry them again" >&2
        fi
    fi
fi
if [ -f "$ort" ] && [ ! -d "$dest/onnxruntime-gpu" ]; then
    tar -xJf "$ort" -C "$dest"
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
