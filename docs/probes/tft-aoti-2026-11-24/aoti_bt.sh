# A native backtrace of the AOTInductor load segfault (cuda-gdb: the image has no gdb)
cd /tmp && python3 - <<'PY'
import torch
m = torch.nn.Linear(16, 16).cuda().eval()
x = torch.randn(4, 16, device="cuda")
prog = torch.export.export(m, (x,))
torch._inductor.aoti_compile_and_package(prog, package_path="/tmp/lin.pt2")
print("compiled")
PY
cat > /tmp/load.py <<'PY'
import torch
loaded = torch._inductor.aoti_load_package("/tmp/lin.pt2", device_index=0)
print("loaded", loaded(torch.randn(4, 16, device="cuda")).shape)
PY
timeout 150 cuda-gdb -q -batch -ex "set pagination off" -ex run -ex bt -ex "info sharedlibrary" \
    --args python3 /tmp/load.py 2>&1 | grep -v "^\[New Thread\|^\[Thread" | head -120
echo "== mounts"; mount | grep -E " /tmp | / " ; ulimit -a | head -20
