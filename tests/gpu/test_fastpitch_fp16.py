"""The tiny FastPitch in FP16 on a GPU."""

import numpy as np
import torch

from deploybench.models import fastpitch
from testkit.fastpitch import (
    TINY,
    data,  # noqa: F401 (a fixture)
    run,
)


# FP16 needs a GPU
def test_fp16_on_gpu(data):
    inputs, _ = fastpitch.load_split(TINY, str(data), "test", 8)
    model = fastpitch.build_model(TINY, None, seed=0)
    x = [torch.from_numpy(a) for a in inputs]
    expected = run(model, inputs)
    with torch.no_grad():
        traced = torch.jit.trace(model, tuple(x)).cuda().half()
        got = [o.float().cpu().numpy() for o in traced(*[t.cuda() for t in x])]
    assert np.isfinite(got[0]).all()
    # a duration near x.5 may round the other way: lengths agree within a few frames
    assert np.abs(got[1] - expected[1]).max() <= 4
    np.testing.assert_allclose(got[2], expected[2], rtol=5e-2, atol=5e-2)
