# Sourced, not run: unpacks the bundle of scripts/pack_offline.py once (to
# $DEPLOYBENCH_OFFLINE_DIR, default /tmp/deploybench-offline) and puts its Triton server,
# perf_analyzer and Python packages on this shell's paths.
#   . scripts/offline_env.sh .pack/offline-py3.12.tar.xz
dest=${DEPLOYBENCH_OFFLINE_DIR:-/tmp/deploybench-offline}
if [ ! -d "$dest/site" ]; then
    mkdir -p "$dest" && tar -xJf "$1" -C "$dest"
fi
case ":${PYTHONPATH:-}:" in
    *":$dest/site:"*) ;;  # sourced twice: once on the paths is enough
    *) export PYTHONPATH="$dest/site:$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
       export PATH="$dest/bin:$PATH" ;;
esac
export DEPLOYBENCH_SERVER_PYTHONPATH="$dest/stub-site"
export DEPLOYBENCH_SHM_SHIM="$dest/bin/libdeploybench_shm.so"
