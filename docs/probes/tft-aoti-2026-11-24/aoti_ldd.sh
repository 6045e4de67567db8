# Why a trivial AOTInductor package segfaults on load here: the toolchain, the package's
# shared object's links and unresolved symbols, and the runner loaded without the package
set -u
gcc --version | head -1; g++ --version | head -1; which nvcc; nvcc --version 2>/dev/null | tail -2
python3 - <<'PY'
import torch, zipfile, subprocess, glob, os
m = torch.nn.Linear(16, 16).cuda().eval()
x = torch.randn(4, 16, device="cuda")
prog = torch.export.export(m, (x,))
torch._inductor.aoti_compile_and_package(prog, package_path="/tmp/lin.pt2")
zipfile.ZipFile("/tmp/lin.pt2").extractall("/tmp/lin")
sos = glob.glob("/tmp/lin/**/*.so", recursive=True)
print("files:", [f.replace("/tmp/lin/", "") for f in glob.glob("/tmp/lin/**/*", recursive=True) if os.path.isfile(f)][:20])
for so in sos:
    print("== ldd -r", so)
    print(subprocess.run(["ldd", "-r", so], capture_output=True, text=True).stdout[-3000:])
print("torch lib:", os.path.dirname(torch.__file__) + "/lib")
PY
echo "== runner on the .so directly"
python3 -X faulthandler - <<'PY' 2>&1 | grep -v "^Extension" | tail -8
import glob, torch
so = glob.glob("/tmp/lin/**/*.so", recursive=True)[0]
r = torch._C._aoti.AOTIModelContainerRunnerCuda(so, 1, "cuda", "/tmp/lin/" + so.split("/tmp/lin/")[1].rsplit("/", 1)[0])
print("runner made", type(r))
PY
echo "== legacy aot_compile + aot_load"
python3 -X faulthandler - <<'PY' 2>&1 | grep -v "^Extension" | tail -8
import torch
m = torch.nn.Linear(16, 16).cuda().eval()
x = torch.randn(4, 16, device="cuda")
so = torch._export.aot_compile(m, (x,))
print("so", so)
f = torch._export.aot_load(so, "cuda")
print("ran", float((f(x) - m(x)).abs().max()))
PY
