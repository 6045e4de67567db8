"""AOTInductor: the exported program (torch.export, FP32, CPU) compiled ahead of time for
the configuration's device and precision (FP16, or a quantized one: quantization.py) into a
.pt2 package by the convert step, and that package run (the runner `aoti`), or replayed as
CUDA graphs (`aoti-cudagraph`)."""

from __future__ import annotations

from pathlib import Path

from . import quantization
from .base import Options, RunnerUnavailable
from .cudagraph import CudaGraphs
from .torchscript import TorchRunner, device, set_precision


def exported_on(exported: Path, dev):
    """The exported program moved to `dev`. torch.export burns the device it ran on (the
    CPU) into the program, e.g. in the metadata asserts of an integer input's cast: moving
    only the weights, BERT's and FastPitch's fail to trace on a GPU."""
    import torch
    from torch.export.passes import move_to_device_pass

    program = torch.export.load(str(exported))
    if dev.type != "cpu":
        program = move_to_device_pass(program, dev)
    return program


def without_float_asserts(module):
    """The module without the asserts torch.export writes before each cast of a floating
    tensor (its dtype when traced, FP32): in FP16 they fail (FastPitch on an H100,
    2026-11-24). Integer ones stay."""
    import torch

    target = torch.ops.aten._assert_tensor_metadata.default
    for graph_module in module.modules():
        if not isinstance(graph_module, torch.fx.GraphModule):
            continue
        for node in list(graph_module.graph.nodes):
            dtype = node.kwargs.get("dtype")
            if node.target is target and dtype is not None and dtype.is_floating_point:
                graph_module.graph.erase_node(node)
        graph_module.recompile()
    return module


def for_device(exported: Path, options: Options):
    """The exported program's module and example inputs on the options' device, in their
    precision (FP16: weights and floating inputs in half; a quantized precision: its linear
    layers quantized, FP32 inputs)."""
    dev = device(options)
    program = exported_on(exported, dev)
    module = program.module().to(dev)
    args = [a.to(dev) for a in program.example_inputs[0]]
    if options.precision == "fp16":
        module = without_float_asserts(module).half()
        args = [a.half() if a.is_floating_point() else a for a in args]
    elif options.precision in quantization.SCHEMES:
        quantization.quantize(module, options.precision, dev)
    return module, args


def convert(name: str, exported: Path, out: Path, options: Options) -> bool:
    """Re-export on the device at the precision (batch dynamic up to the max batch size)
    and compile the package; its compile time is the convert job's benchmark."""
    import torch

    set_precision(options)
    module, args = for_device(exported, options)
    batch = torch.export.Dim("batch", min=1, max=options.max_batch_size)
    program = torch.export.export(module, tuple(args),
                                  dynamic_shapes=tuple({0: batch} for _ in args))
    torch._inductor.aoti_compile_and_package(program, package_path=str(out))
    check_cxx_runtime(out)
    return True


def own_cxx_runtime(package: Path) -> list[str]:
    """The package's libraries that carry a copy of the C++ runtime of their own (linked
    with -static-libstdc++: they define std::locale)."""
    import subprocess
    import tempfile
    import zipfile

    found = []
    with zipfile.ZipFile(package) as archive, tempfile.TemporaryDirectory() as tmp:
        for name in archive.namelist():
            if name.endswith(".so"):
                symbols = subprocess.run(["nm", "-D", "--defined-only", archive.extract(name, tmp)],
                                         capture_output=True, text=True, check=True).stdout
                if "_ZNSt6locale" in symbols:
                    found.append(name)
    return found


def check_cxx_runtime(package: Path) -> None:
    """Refuse a package that would crash when loaded: its own libstdc++ beside the shared one
    torch loads mixes the two's locale facets, and the loader segfaults in std::regex
    (torch's parse_device_str). Seen on the H100 image of 2026-11-24, whose CXX
    (/opt/gcc/bin/g++) links libstdc++ statically (results/tft/h100/aoti-2026-11-24/)."""
    import os

    libraries = own_cxx_runtime(package)
    if libraries:
        raise ValueError(
            f"the AOTInductor package {package.name} links its own copy of libstdc++ into "
            f"{', '.join(libraries)} (compiler: CXX={os.environ.get('CXX', 'g++')}); loaded "
            "beside torch's shared libstdc++ it segfaults. Set CXX to a g++ that links "
            "libstdc++ shared (on that image: CXX=/usr/bin/g++) and convert again")


class AotiRunner(TorchRunner):
    def __init__(self, artifact: Path, options: Options, single_threaded: bool = False):
        super().__init__(options)
        # a package of a scheme this device cannot run fails only at its first call
        refused = quantization.refusal(options.precision, self.device)
        if refused:
            raise RunnerUnavailable(refused)
        index = -1 if options.device_id is None else options.device_id
        self.model = self.torch._inductor.aoti_load_package(
            str(artifact), run_single_threaded=single_threaded, device_index=index)


def load(name: str, artifact: Path, options: Options) -> AotiRunner:
    if name != "aoti-cudagraph":
        return AotiRunner(artifact, options)
    if options.device_id is None:
        raise ValueError("runner aoti-cudagraph needs a GPU instance")
    # Single-threaded: the package's container otherwise waits on its last run's event
    # before each run, which a capturing stream does not permit (H100, 2026-11-24)
    runner = AotiRunner(artifact, options, single_threaded=True)
    runner.model = CudaGraphs(runner.model, options.max_batch_size)
    runner.aliased = True
    return runner
