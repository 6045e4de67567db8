"""The tiny FastPitch: its hparams, LJSpeech-like lines, its generated data and a run of it."""

import pytest
import torch
import yaml

from deploybench.models import fastpitch
from testkit.workflow import ROOT

TINY = yaml.safe_load(
    (ROOT / "tests/config/models/fastpitch-tiny.yaml").read_text())["hparams"]
# Lines of DLE's filelists/ljs_audio_text_test_filelist.txt (LJSpeech, public domain).
LJS_LINES = [
    "wavs/LJ045-0096.wav|Mrs. De Mohrenschildt thought that Oswald,",
    "wavs/LJ049-0022.wav|The Secret Service believed that it was very doubtful that any "
    "President would ride regularly in a vehicle with a fixed top, even though transparent.",
    "wavs/LJ033-0042.wav|Between the hours of eight and nine p.m. they were occupied with "
    "the children in the bedrooms located at the extreme east end of the house.",
]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("fastpitch_data")
    fastpitch.generate_dataset(TINY, str(out), seed=3, samples=24)
    return out


def run(model, inputs):
    with torch.no_grad():
        return [o.numpy() for o in model(*[torch.from_numpy(a) for a in inputs])]
