"""The tiny TFT in FP16 on a GPU."""

import torch

from deploybench.models import tft
from testkit.tft import (
    TINY,
    data,  # noqa: F401 (a fixture)
)


# FP16 needs a GPU
def test_fp16_on_gpu(data):
    inputs, _ = tft.load_split(TINY, str(data), "test", max_samples=8)
    model = tft.build_model(TINY, None, seed=0)
    x = [torch.from_numpy(a) for a in inputs]
    with torch.no_grad():
        expected = model(*x)
        half = [t.cuda().half() if t.is_floating_point() else t.cuda() for t in x]
        traced = torch.jit.trace(model, tuple(x)).cuda().half()
        for fp16 in (model.cuda().half(), traced):
            got = fp16(*half)
            assert got.dtype == torch.float16
            torch.testing.assert_close(got.float().cpu(), expected, rtol=0, atol=5e-2)
