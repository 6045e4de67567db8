# Is the wrapper's static libstdc++ g++'s fallback for a missing libstdc++.so? Link it
# against the shared one (LIBRARY_PATH) and load again; then the pipeline's TFT aoti.
echo "== g++ finds"; g++ -print-file-name=libstdc++.so; g++ -print-file-name=libstdc++.a
ls -la /usr/lib/gcc/x86_64-linux-gnu/13/ | grep -E "stdc"
mkdir -p /tmp/shlib && ln -sf /lib/x86_64-linux-gnu/libstdc++.so.6 /tmp/shlib/libstdc++.so
export LIBRARY_PATH=/tmp/shlib
cd /tmp && rm -rf /tmp/torchinductor_root && python3 - <<'PY' 2>&1 | grep -v -i warn
import torch
m = torch.nn.Linear(16, 16).cuda().eval()
prog = torch.export.export(m, (torch.randn(4, 16, device="cuda"),))
torch._inductor.aoti_compile_and_package(prog, package_path="/tmp/lin2.pt2")
print("compiled")
PY
rm -rf /tmp/lin2x && mkdir -p /tmp/lin2x && cd /tmp/lin2x && python3 -m zipfile -e /tmp/lin2.pt2 . && so=$(find . -name "*wrapper.so" | head -1)
readelf -d $so | grep NEEDED; nm -DC --defined-only $so | grep -c "std::"
sed -i 's#/tmp/lin.pt2#/tmp/lin2.pt2#' /tmp/load.py 2>/dev/null || cat > /tmp/load.py <<'PY'
import torch
loaded = torch._inductor.aoti_load_package("/tmp/lin2.pt2", device_index=0)
print("LOADED, ran:", loaded(torch.randn(4, 16, device="cuda")).shape)
PY
timeout 60 python3 /tmp/load.py 2>&1 | grep -v -i warn | tail -3; echo "load exit ${PIPESTATUS[0]}"
