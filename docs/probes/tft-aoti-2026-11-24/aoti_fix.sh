# Which way of loading an AOTInductor package survives on this image (see aoti_bt.txt)
cd /tmp && python3 - <<'PY' 2>&1 | grep -v Warn
import torch
import torch._inductor.config as c
print({k: getattr(c.aot_inductor, k) for k in dir(c.aot_inductor) if any(s in k for s in ("static", "link", "standalone", "cpp_only", "precompile", "embed"))})
m = torch.nn.Linear(16, 16).cuda().eval()
prog = torch.export.export(m, (torch.randn(4, 16, device="cuda"),))
torch._inductor.aoti_compile_and_package(prog, package_path="/tmp/lin.pt2")
print("compiled")
PY
mkdir -p /tmp/linx && cd /tmp/linx && python3 -m zipfile -e /tmp/lin.pt2 . && so=$(find . -name "*wrapper.so" | head -1)
echo "== readelf NEEDED"; readelf -d $so | grep -E "NEEDED|RPATH|RUNPATH|FLAGS"
echo "== defined std symbols in the wrapper"; nm -DC --defined-only $so | grep -c "std::"; nm -DC --defined-only $so | grep -E "codecvt|locale::|ctype<char>::id|collate<char>::id" | head -8
echo "== which libstdc++"; ldd $so | grep -E "stdc|gcc_s"; ls -la /lib/x86_64-linux-gnu/libstdc++.so.6*; find /opt/torch/.venv -name "libstdc++*" | head
cat > /tmp/load.py <<'PY'
import sys, ctypes
if "global" in sys.argv: ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
import torch
loaded = torch._inductor.aoti_load_package("/tmp/lin.pt2", device_index=0)
print("LOADED, ran:", loaded(torch.randn(4, 16, device="cuda")).shape)
PY
echo "== plain";  timeout 60 python3 /tmp/load.py 2>&1 | tail -1
echo "== LC_ALL=C"; LC_ALL=C timeout 60 python3 /tmp/load.py 2>&1 | tail -1
echo "== libstdc++ RTLD_GLOBAL"; timeout 60 python3 /tmp/load.py global 2>&1 | tail -1
echo "== LD_PRELOAD libstdc++"; LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6 timeout 60 python3 /tmp/load.py 2>&1 | tail -1
echo "== env"; env | grep -E "^LANG|^LC_|LD_" 
