# Which process state makes loading TFT's AOTInductor package crash (run by gpu_session.sh AFTER, H100, 2026-11-24)
p=$work/results/tft/h100/aoti_fp16/converted/model.pt2
ls -la "$p" || exit 1
for pre in "pass" "torch.zeros(1, device='cuda')" "import pandas" "import tritonclient.http" \
    "import tritonclient.grpc" "import deploybench.artifacts" \
    "import deploybench.artifacts; torch.zeros(1, device='cuda')"; do
  echo "== import torch; $pre; then load"
  timeout 120 python3 -X faulthandler -c "import torch
$pre
m = torch._inductor.aoti_load_package('$p', device_index=0)
x = m.loader.get_call_spec() if hasattr(m, 'loader') else None
print('loaded', type(m).__name__)" 2>&1 | grep -v Extension | tail -4
  echo "exit $?"
done
echo "== CUDA initialised, then load and run the example inputs"
timeout 120 python3 -X faulthandler -c "import torch
torch.zeros(1, device='cuda')
m = torch._inductor.aoti_load_package('$p', device_index=0)
prog = torch.export.load('$work/results/tft/export/torch-export/model.pt2')
args = [a.cuda().half() if a.is_floating_point() else a.cuda() for a in prog.example_inputs[0]]
out = m(*args)
print('ran', [tuple(o.shape) for o in (out if isinstance(out, (list, tuple)) else [out])])" 2>&1 | grep -v Extension | tail -4
echo "exit $?"
