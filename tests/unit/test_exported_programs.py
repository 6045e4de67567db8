"""Exported programs and AOTInductor packages, without a server: a model torch.export cannot
take is refused with the exporter's own message, an exported program moves to another device
with its asserts and runs in FP16, a package with its own libstdc++ is refused."""

import subprocess
import zipfile

import pytest
import torch

from deploybench.steps.export import _torch_export
from testkit.workflow import ROOT


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # a branch on a value: torch.export cannot trace it
            return x * 2
        return x


def test_a_model_torch_export_cannot_take_is_refused_with_the_exporters_message():
    with pytest.raises(ValueError) as refused:
        _torch_export({"plugin": "toy"}, DataDependent(), (torch.ones(2, 3),))
    message = str(refused.value)
    assert message.startswith("model 'toy' cannot be exported with torch.export, which the "
                              "backends aoti and torch-compile are built from")
    assert "exporter said:" in message and str(refused.value.__cause__) in message


def test_an_exported_program_moves_to_another_device_with_its_asserts(tmp_path):
    """BERT's integer inputs are cast inside the model: torch.export (on the CPU) asserts
    their device there, which torch.compile and AOTInductor trace on the GPU (the H100 run
    of 2026-11-24 failed so). The meta device stands in for a GPU here."""
    import yaml

    from deploybench.models import bert
    from deploybench.runners.aoti import exported_on

    hparams = yaml.safe_load((ROOT / "tests/config/models/bert-tiny.yaml").read_text())["hparams"]
    x = tuple(torch.ones(2, hparams["max_seq_length"], dtype=torch.int32) for _ in range(3))
    path = tmp_path / "model.pt2"
    torch.export.save(_torch_export({"plugin": "bert"}, bert.build_model(hparams, None, 0), x),
                      str(path))
    meta = tuple(t.to("meta") for t in x)
    with pytest.raises(Exception, match="Tensor device mismatch! Expected: cpu, Got: meta"):
        torch.export.export(torch.export.load(str(path)).module().to("meta"), meta)
    moved = exported_on(path, torch.device("meta")).module()
    start, end = torch.export.export(moved, meta).module()(*meta)
    assert start.device.type == "meta" and start.shape == end.shape == meta[0].shape


def test_an_fp32_exported_program_runs_in_fp16(tmp_path):
    """torch.export asserts the FP32 dtype of each cast's floating input; the FP16 module
    must not fail them (FastPitch's did on the H100, 2026-11-24), its integer ones stay."""
    from deploybench.runners.aoti import for_device
    from deploybench.runners.base import Options

    class Casts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.arange(4.0))

        def forward(self, x, n):
            return (x * self.w).to(torch.float32).sum(-1) + n.float()

    x, n = torch.ones(2, 4), torch.tensor([1, 2])
    path = tmp_path / "model.pt2"
    torch.export.save(torch.export.export(Casts(), (x, n)), str(path))
    with pytest.raises(Exception, match="Tensor dtype mismatch"):
        torch.export.load(str(path)).module().half()(x.half(), n)
    module, (hx, hn) = for_device(path, Options(inputs=("x", "n"), precision="fp16"))
    assert hx.dtype == torch.float16 and hn.dtype == torch.int64
    out = module(hx, hn)
    assert out.dtype == torch.float32 and out.tolist() == [7.0, 8.0]
    with pytest.raises(Exception, match="Tensor dtype mismatch"):
        module(hx, n.int())  # the integer input's assert kept


@pytest.mark.parametrize("static", [False, True])
def test_a_package_with_its_own_libstdcxx_is_refused(tmp_path, static):
    """A library in the package linked with -static-libstdc++ (the H100 image's CXX did so)
    segfaults on load beside torch's libstdc++: the convert step refuses it, naming it."""
    from deploybench.runners.aoti import check_cxx_runtime

    source = tmp_path / "wrapper.cpp"  # std::regex, as torch's parse_device_str
    source.write_text('#include <regex>\n#include <string>\nextern "C" int parse(const char* s) '
                      '{ return std::regex_match(std::string(s), std::regex("cuda:[0-9]+")); }\n')
    library = tmp_path / "model.wrapper.so"
    flags = ["-static-libstdc++"] if static else []
    subprocess.run(["g++", "-shared", "-fPIC", *flags, "-o", str(library), str(source)],
                   check=True)
    package = tmp_path / "model.pt2"
    with zipfile.ZipFile(package, "w") as pt2:
        pt2.write(library, "model/data/aotinductor/model/model.wrapper.so")
    if not static:
        check_cxx_runtime(package)
        return
    with pytest.raises(ValueError, match=r"model\.pt2 links its own copy of libstdc\+\+ into "
                       r"model/data/aotinductor/model/model\.wrapper\.so .*CXX=/usr/bin/g\+\+"):
        check_cxx_runtime(package)
