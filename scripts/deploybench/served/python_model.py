"""Triton python-backend model that serves a converted artifact with its runner.

What it serves comes from the `parameters` of config.pbtxt: `artifact` (a file or folder
in the version folder), `runner` (a name of deploybench.runners.RUNNERS), `precision`
(fp32, fp16 or a quantized one) and `compile_mode` (torch-compile). The requests of one
execute() call (dynamic batching) are concatenated, run as one batch and split back; a batch
that fails is run again request by request, so that one request's bad value fails that
request alone.

Two data paths: inputs in host memory (HTTP, system shared memory) go through numpy and
outputs come back as numpy arrays; inputs Triton hands over in GPU memory (CUDA shared
memory, with FORCE_CPU_ONLY_INPUT_TENSORS off) are taken through DLPack by a torch runner,
which leaves its outputs on the GPU for Triton to copy to the client's region, or, with the
parameter `output_memory: cpu`, copies them to host memory first (the python backend moves a
GPU output through a second round trip with the stub and two synchronised copies).
"""

import json
import locale
import os
import re
import sys
import time
import traceback
from pathlib import Path

# The stub's isolated Python keeps the C locale (ASCII text files): torch.compile reads its
# UTF-8 kernel templates with the locale's encoding.
try:
    locale.setlocale(locale.LC_CTYPE, "C.UTF-8")
except locale.Error:  # a C library without the C.UTF-8 locale
    pass

# The stub runs Python isolated (PYTHONPATH ignored): the runners bundled beside this file,
# then the pipeline's packages from DEPLOYBENCH_STUB_PATH (deploybench.triton.install).
for _path in reversed([str(Path(__file__).parent),
                       *os.environ.get("DEPLOYBENCH_STUB_PATH", "").split(os.pathsep)]):
    if _path and _path not in sys.path:
        sys.path.insert(0, _path)

import numpy as np  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402
from deploybench_runners import RUNNERS, Options, load  # noqa: E402
from deploybench_runners.torchscript import torch_dtype  # noqa: E402

# An absolute path of two parts at least, not inside a word or a relative path
_PATH = re.compile(r"(?<![\w.~/-])/[^\s'\")\],]*/[^\s'\")\],]*")


def client_text(text: str) -> str:
    """An error as a client may see it: a traceback (TorchScript's, in the message) cut to
    its last line, the error itself, and every absolute path of the server's replaced."""
    if "Traceback" in text:
        first = text.split("\n", 1)[0]
        last = [line for line in text.splitlines() if line.strip()][-1].strip()
        text = (first[:first.index(": ") + 2] if ": " in first else "") + last
    return _PATH.sub("<server path>", text)


class TritonPythonModel:
    def initialize(self, args):
        if int(np.__version__.split(".")[0]) >= 2:
            # Seen with Triton 2.51's stub: numpy 2 responses carry empty output tensors.
            raise pb_utils.TritonModelException(
                f"numpy {np.__version__} in the python backend stub: Triton 2.51 returns "
                "empty outputs with numpy 2; set DEPLOYBENCH_SERVER_PYTHONPATH to a folder "
                "with numpy<2 (scripts/machines/offline_run.sh does)"
            )
        config = json.loads(args["model_config"])
        self.name = args["model_name"]
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.inputs = [t["name"] for t in config["input"]]
        self.outputs = [t["name"] for t in config["output"]]
        self.output_dtypes = [
            pb_utils.triton_string_to_numpy(t["data_type"]) for t in config["output"]
        ]
        on_gpu = args["model_instance_kind"] == "GPU"
        # CPU instances share the cores evenly, so that two instances do not oversubscribe.
        cpu_instances = sum(g["count"] for g in config["instance_group"] if g["kind"] == "KIND_CPU")
        options = Options(
            inputs=tuple(self.inputs), outputs=tuple(self.outputs),
            precision=params.get("precision", "fp32"),
            device_id=int(args["model_instance_device_id"]) if on_gpu else None,
            threads=0 if on_gpu else max(1, (os.cpu_count() or 1) // max(1, cpu_instances)),
            max_batch_size=max(1, config.get("max_batch_size", 1)),
            output_dims=tuple(tuple(t["dims"]) for t in config["output"]),
            output_dtypes=tuple(t["data_type"].removeprefix("TYPE_") for t in config["output"]),
            compile_mode=params.get("compile_mode", "default"),
            cuda_graphs=int(params.get("cuda_graphs", 0)) if on_gpu else 0,
        )
        artifact = Path(args["model_repository"]) / args["model_version"] / params["artifact"]
        started = time.perf_counter()
        self.runner = load(params["runner"], artifact, options)
        # in the server log: the runner's share of an instance's load (a search point on the
        # H100 waited 22-30 s for its instances, 2026-11-25), the rest the stub's start
        print(f"deploybench: instance {args['model_instance_name']} loaded its {params['runner']} "
              f"runner in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
        # DEPLOYBENCH_PROFILE_EVERY=N: every N executions, where their time went (stderr,
        # i.e. the server log): taking the inputs, running the model, making the responses
        self.profile_every = int(os.environ.get("DEPLOYBENCH_PROFILE_EVERY", "0"))
        self.phases, self.executions = [0.0, 0.0, 0.0], 0
        self.torch = None
        if on_gpu and RUNNERS[params["runner"]].device_tensors:
            import torch
            import torch.utils.dlpack

            self.torch = torch
            self.device = torch.device(f"cuda:{options.device_id}")
            self.torch_dtypes = [torch_dtype(np.dtype(d)) for d in self.output_dtypes]
            self.host_outputs = params.get("output_memory", "gpu") == "cpu"

    def _phase(self, i: int, since: float) -> float:
        now = time.perf_counter()
        self.phases[i] += now - since
        return now

    def _profiled(self, responses):
        self.executions += 1
        if self.profile_every and self.executions % self.profile_every == 0:
            inputs, run, outputs = (1e3 * p / self.profile_every for p in self.phases)
            print(f"deploybench profile: {self.profile_every} executions, mean ms: inputs "
                  f"{inputs:.3f}, run {run:.3f}, outputs {outputs:.3f}", file=sys.stderr,
                  flush=True)
            self.phases = [0.0, 0.0, 0.0]
        return responses

    def execute(self, requests):
        """The requests run as one batch; where it fails (one request's bad value fails them
        all), each alone, so that only the requests that fail alone get an error, cut for
        the client (client_text; the server log has the traceback)."""
        try:
            return self._execute(requests)
        except Exception:
            if len(requests) == 1:
                return [self._failed()]
            print(f"deploybench: model '{self.name}' failed a batch of {len(requests)} "
                  f"requests, each is run alone:\n{traceback.format_exc()}", file=sys.stderr,
                  flush=True)
        responses = []
        for request in requests:
            try:
                responses += self._execute([request])
            except Exception:
                responses.append(self._failed())
        return responses

    def _failed(self):
        """The error response of the exception being handled; its traceback to the log."""
        err = sys.exc_info()[1]
        print(f"deploybench: model '{self.name}' failed a request:\n{traceback.format_exc()}",
              file=sys.stderr, flush=True)
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(
            client_text(f"model '{self.name}': {type(err).__name__}: {err}")))

    def _execute(self, requests):
        t = time.perf_counter()
        per_request = [[pb_utils.get_input_tensor_by_name(r, name) for name in self.inputs]
                       for r in requests]
        if self.torch is not None and not per_request[0][0].is_cpu():
            return self._profiled(self._execute_on_device(per_request, t))
        arrays = [[x.as_numpy() for x in tensors] for tensors in per_request]
        sizes = [a[0].shape[0] for a in arrays]
        batch = [p[0] if len(p) == 1 else np.concatenate(p) for p in zip(*arrays)]
        t = self._phase(0, t)
        outputs = self.runner(batch)
        t = self._phase(1, t)
        responses = self._host_responses(sizes, outputs)
        self._phase(2, t)
        return self._profiled(responses)

    def _host_responses(self, sizes: list[int], outputs: list[np.ndarray]) -> list:
        responses, start = [], 0
        for size in sizes:
            tensors = [
                pb_utils.Tensor(name, np.ascontiguousarray(out[start : start + size], dtype=dtype))
                for name, out, dtype in zip(self.outputs, outputs, self.output_dtypes)
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            start += size
        return responses

    def _execute_on_device(self, per_request, t: float):
        """Inputs in GPU memory through DLPack, outputs left on the GPU (no host copy)."""
        torch = self.torch
        tensors = [[torch.utils.dlpack.from_dlpack(x.to_dlpack()) for x in request]
                   for request in per_request]
        sizes = [x[0].shape[0] for x in tensors]
        batch = [p[0] if len(p) == 1 else torch.cat(p) for p in zip(*tensors)]
        t = self._phase(0, t)
        outputs = [out.to(dtype) for out, dtype in
                   zip(self.runner.run_tensors(batch), self.torch_dtypes)]
        if self.host_outputs:
            outputs = [out.cpu().numpy() for out in outputs]
            t = self._phase(1, t)
            responses = self._host_responses(sizes, outputs)
            self._phase(2, t)
            return responses
        torch.cuda.synchronize(self.device)  # Triton reads the outputs after we return
        t = self._phase(1, t)
        responses, start = [], 0
        for size in sizes:
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor.from_dlpack(name, torch.utils.dlpack.to_dlpack(
                    out[start:start + size].contiguous()))
                for name, out in zip(self.outputs, outputs)]))
            start += size
        self._phase(2, t)
        return responses
