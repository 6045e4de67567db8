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
