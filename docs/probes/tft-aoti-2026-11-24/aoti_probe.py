"""Which AOTInductor packages load on this machine: tiny CUDA models, one feature each
(a parameter only, a float buffer, a bool buffer like TFT's attention mask, an LSTM like
TFT's encoders, a dynamic batch), each compiled, packaged, loaded and run in a fresh
process so that a segfault names its case."""
import subprocess
import sys
import tempfile

CASES = ["linear", "float_buffer", "bool_buffer", "lstm", "dynamic", "lstm_fp16_dynamic"]

BODY = r'''
import sys, time, torch
case, path = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.lstm = torch.nn.LSTM(16, 16, batch_first=True) if "lstm" in case else None
        if case == "float_buffer":
            self.register_buffer("scale", torch.full((16,), 2.0))
        if case == "bool_buffer":
            self.register_buffer("mask", torch.triu(torch.ones(16, 16, dtype=torch.bool), 1))
    def forward(self, x):
        y = self.lin(x)
        if case == "float_buffer":
            y = y * self.scale
        if case == "bool_buffer":
            y = y.masked_fill(self.mask[: y.shape[1], :16], 0.0)
        if self.lstm is not None:
            y, _ = self.lstm(y)
        return y
m = M().cuda().eval()
x = torch.randn(4, 8, 16, device="cuda")
if case.endswith("fp16_dynamic"):
    m, x = m.half(), x.half()
dyn = {"x": {0: torch.export.Dim("batch", min=1, max=64)}} if "dynamic" in case else None
t0 = time.time()
prog = torch.export.export(m, (x,), dynamic_shapes=dyn)
torch._inductor.aoti_compile_and_package(prog, package_path=path)
print(case, "compiled in", round(time.time() - t0, 1), "s", flush=True)
loaded = torch._inductor.aoti_load_package(path, device_index=0)
print(case, "loaded", flush=True)
with torch.inference_mode():
    out = loaded(x)
    ref = m(x)
print(case, "ran, max |diff|", float((out - ref).abs().max()), flush=True)
'''

for case in sys.argv[1:] or CASES:
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", BODY, case,
                            f"{tmp}/{case}.pt2"], capture_output=True, text=True, timeout=300)
        lines = [line for line in (r.stdout + r.stderr).splitlines() if "Warning" not in line]
        print(f"== {case}: exit {r.returncode}")
        print("\n".join(lines[-8:]), flush=True)
