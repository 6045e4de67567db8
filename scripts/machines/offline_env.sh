# Sourced, not run: unpacks the bundle of scripts/machines/pack_offline.py once (to
# $DEPLOYBENCH_OFFLINE_DIR, default /tmp/deploybench-offline) and puts its Triton server,
# perf_analyzer and Python packages on this shell's paths.
#   . scripts/machines/offline_env.sh .pack/offline-py3.12.tar.xz
# The bundles of their own (pack_offline.py --onnxruntime-gpu, --tensorflow), where they lie
# beside that one (.pack/onnxruntime-gpu-py3.12.tar.xz, .pack/tensorflow-cpu-py3.12.tar.xz;
# $DEPLOYBENCH_ORT_GPU_BUNDLE may name the first elsewhere), go in front of the machine's
# packages: onnxruntime-gpu for the pipeline and the server's models, tensorflow-cpu for the
# Keras models' build steps alone.
dest=${DEPLOYBENCH_OFFLINE_DIR:-/tmp/deploybench-offline}
if [ ! -d "$dest/site" ]; then
    mkdir -p "$dest" && tar -xJf "$1" -C "$dest"
fi
# _offline_extra NAME BUNDLE: unpacks a bundle of its own to $dest/NAME once. Its parts
# (pack_offline.py --part-mib), carried over several calls: a lent machine's copy of the
# tree keeps only the latest call's carried files (2026-11-28), so each part that matches
# its sum is kept beside the unpacked bundle, in a folder named by the whole's sum, and the
# whole is joined there once all have come and kept only if it matches too
_offline_extra() {
    local name=$1 bundle=$2 want kept sum part new have parts=()
    [ -d "$dest/$name" ] && return
    if [ ! -f "$bundle" ] && [ -f "$bundle.sha256" ]; then
        want=$(awk -v name="$(basename "$bundle")" '$2 == name { print $1 }' "$bundle.sha256")
        kept=$dest/$name-parts-${want:0:16}
        mkdir -p "$kept"
        while read -r sum part; do
            case $part in *.part[0-9]*) ;; *) continue ;; esac
            parts+=("$part")
            new=$(dirname "$bundle")/$part
            if [ -f "$kept/$part" ] || [ ! -f "$new" ]; then continue; fi
            if [ "$(sha256sum <"$new" | cut -d' ' -f1)" = "$sum" ]; then
                cp "$new" "$kept/$part.copying" && mv "$kept/$part.copying" "$kept/$part"
            else
                echo "offline_env.sh: $new does not match its sum ($bundle.sha256):" \
                    "carry it again" >&2
            fi
        done <"$bundle.sha256"
        have=0  # counted without a failing command: offline_run.sh sources this under set -e
        for part in "${parts[@]}"; do
            if [ -f "$kept/$part" ]; then have=$((have + 1)); fi
        done
        if [ "$have" -lt "${#parts[@]}" ]; then
            echo "offline_env.sh: $have of ${#parts[@]} parts of $(basename "$bundle") kept" \
                "in $kept: $name is not used until all are" >&2
            return
        fi
        (cd "$kept" && cat "${parts[@]}") >"$kept/whole.joining"
        if [ "$(sha256sum <"$kept/whole.joining" | cut -d' ' -f1)" != "$want" ]; then
            rm -rf "$kept"
            echo "offline_env.sh: the parts of $bundle joined do not match its sum" \
                "($bundle.sha256): carry them all again" >&2
            return
        fi
        bundle=$kept/$(basename "$bundle")
        mv "$kept/whole.joining" "$bundle" && (cd "$kept" && rm -f "${parts[@]}")
    fi
    if [ -f "$bundle" ]; then  # whole, or not at all
        rm -rf "$dest/.$name" && mkdir "$dest/.$name" && tar -xJf "$bundle" -C "$dest/.$name" &&
            mv "$dest/.$name/$name" "$dest/" && rm -rf "$dest/.$name"
    fi
}
python_tag=$(basename "$1" | sed 's/^offline-//')  # py3.12.tar.xz
_offline_extra onnxruntime-gpu "${DEPLOYBENCH_ORT_GPU_BUNDLE:-$(dirname "$1")/onnxruntime-gpu-$python_tag}"
_offline_extra tensorflow-cpu "$(dirname "$1")/tensorflow-cpu-$python_tag"
unset -f _offline_extra
front="$dest/site"
server_front="$dest/stub-site"
if [ -d "$dest/onnxruntime-gpu" ]; then
    front="$dest/onnxruntime-gpu:$front"
    server_front="$dest/onnxruntime-gpu:$server_front"
fi
# on the path of the Keras models' build steps alone (deploybench.source.model)
if [ -d "$dest/tensorflow-cpu" ]; then export DEPLOYBENCH_TENSORFLOW_SITE="$dest/tensorflow-cpu"; fi
case ":${PYTHONPATH:-}:" in
    *":$dest/site:"*) ;;  # sourced twice: once on the paths is enough
    *) export PYTHONPATH="$front:$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"
       export PATH="$dest/bin:$PATH" ;;
esac
export DEPLOYBENCH_SERVER_PYTHONPATH="$server_front"
export DEPLOYBENCH_SHM_SHIM="$dest/bin/libdeploybench_shm.so"
