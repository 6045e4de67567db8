"""Files the user points the pipeline at never run code when loaded: crafted checkpoints and
data files carrying payloads that would write a marker file, against every loader that
unpickles (torch checkpoints of the plug-ins, DLE's TFT data), a main config asking
Snakemake for YTE templating, and a config value full of shell syntax that reaches a rule
(no step runs a shell). A config file of nested aliases (billion laughs) is refused at once."""

import io
import os
import pickle
import time
import zipfile
from pathlib import Path

import pytest
import torch
import yaml

from deploybench import plugins
from deploybench.models import bert, fastpitch, tft
from deploybench.settings.config_files import ConfigError, load_yaml
from deploybench.settings.resolve import Settings
from testkit.security import TFT_TINY, alias_bomb
from testkit.workflow import ROOT, corrupt_tensor_bytes, main_config


class Payload:
    """Unpickled, it runs a shell command that creates `marker`."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch '{self.marker}'",)


def legacy_payload(path: Path, marker: Path) -> Path:
    """A legacy (non-zip) torch file whose first pickle is the payload: the old TFT loader
    read that one with the plain pickle.load."""
    with open(path, "wb") as f:
        pickle.dump(Payload(marker), f)
    return path


def _short(text: str) -> bytes:
    data = text.encode()
    return b"\x8c" + bytes([len(data)]) + data  # SHORT_BINUNICODE


def dotted_global_payload(path: Path, marker: Path) -> Path:
    """A zip checkpoint whose pickle names `torch` . `os.system` (protocol 4 resolves the
    dotted name): the old TFT loader let any global under torch through."""
    torch.save({"model": {"w": torch.zeros(1)}}, path)
    pickled = (b"\x80\x04" + _short("torch") + _short("os.system") + b"\x93"
               + _short(f"touch '{marker}'") + b"\x85R.")
    entries = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            entries[name] = pickled if name.endswith("/data.pkl") else z.read(name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return path


@pytest.mark.parametrize("craft", [legacy_payload, dotted_global_payload],
                         ids=["legacy-file", "dotted-global"])
def test_a_tft_checkpoint_runs_no_code(tmp_path, craft):
    marker = tmp_path / "payload-ran"
    checkpoint = craft(tmp_path / "checkpoint.pt", marker)
    with pytest.raises(ValueError, match=f"TFT checkpoint '{checkpoint}' is not a readable"):
        tft.build_model(TFT_TINY, str(checkpoint), 0)
    assert not marker.exists()


@pytest.mark.parametrize("craft", [legacy_payload, dotted_global_payload],
                         ids=["legacy-file", "dotted-global"])
def test_bert_and_fastpitch_checkpoints_run_no_code(tmp_path, craft):
    marker = tmp_path / "payload-ran"
    folder = tmp_path / "bert"
    folder.mkdir()
    craft(folder / "pytorch_model.bin", marker)
    hparams = yaml.safe_load((ROOT / "tests/config/models/bert-tiny.yaml").read_text())["hparams"]
    with pytest.raises(ValueError, match="pytorch_model.bin' is not a readable torch file"):
        bert.build_model(hparams, str(folder), 0)
    hparams = yaml.safe_load(
        (ROOT / "tests/config/models/fastpitch-tiny.yaml").read_text())["hparams"]
    with pytest.raises(ValueError, match="fastpitch.pt' is not a readable torch file"):
        fastpitch.build_model(hparams, str(craft(tmp_path / "fastpitch.pt", marker)), 0)
    assert not marker.exists()


def test_a_checkpoint_with_damaged_tensor_bytes_is_refused(tmp_path):
    """torch reads a zip checkpoint's tensors without checking their CRC: a damaged copy
    would load as other weights. Every torch checkpoint is read by read_torch_file, which
    checks them first."""
    import torch

    checkpoint = tmp_path / "checkpoint.pt"
    torch.save({"model": tft.build_model(TFT_TINY, None, 3).model.state_dict()}, checkpoint)
    tft.build_model(TFT_TINY, str(checkpoint), 0)  # intact, it loads
    corrupt_tensor_bytes(checkpoint)
    torch.load(checkpoint, weights_only=True)  # torch alone loads it, silently
    with pytest.raises(ValueError, match=rf"TFT checkpoint '{checkpoint}' is corrupt: its "
                                         r"entry 'checkpoint/data/\d+' fails the zip CRC"):
        tft.build_model(TFT_TINY, str(checkpoint), 0)
    with pytest.raises(ValueError, match=f"FastPitch checkpoint '{checkpoint}' is corrupt"):
        plugins.read_torch_file(checkpoint, "FastPitch")


def test_a_tft_data_file_runs_no_code(tmp_path):
    data = tmp_path / "data"
    tft.generate_dataset(TFT_TINY, str(data), seed=1, n_ids=3, n_timesteps=40)
    tft.load_split(TFT_TINY, str(data), "test", 4)  # the generated files load
    marker = tmp_path / "payload-ran"
    with open(data / "test.bin", "wb") as f:
        pickle.dump([Payload(marker)], f)
    with pytest.raises(ValueError, match=r"test\.bin' is not a pickle of numpy arrays: "
                                         r"refused global posix\.system"):
        tft.load_split(TFT_TINY, str(data), "test", 4)
    assert not marker.exists()
    (data / "test.bin").write_text("a CSV, not DLE's binary format\n")
    with pytest.raises(ValueError, match=r"TFT dataset file '.*test\.bin' is not a pickle"):
        tft.load_split(TFT_TINY, str(data), "test", 4)


def test_a_dle_checkpoint_still_loads_its_config_as_plain_values(tmp_path):
    """What the weights-only reader allows of DLE's classes: attribute holders."""
    state = tft.build_model(TFT_TINY, None, 3).model.state_dict()
    buffer = io.BytesIO()
    torch.save({"model": state}, buffer)
    (tmp_path / "bare.pt").write_bytes(buffer.getvalue())
    loaded = tft.build_model(TFT_TINY, str(tmp_path / "bare.pt"), 0)
    assert torch.equal(loaded.model.quantile_proj.weight, state["quantile_proj.weight"])


def test_an_alias_bomb_in_a_model_config_is_refused_at_once(tmp_path):
    """Five levels: past the bound, yet small enough for a regression to fail, not hang."""
    models = tmp_path / "models"
    models.mkdir()
    alias_bomb(models / "tft-tiny.yaml", key="hparams", levels=5)
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"tft-tiny\.yaml': its aliases .* more than 10,000"):
        Settings(main_config(models_dir=str(models))).check_all([])
    assert time.monotonic() - start < 1


def test_a_few_anchors_still_load_and_a_cycle_is_refused(tmp_path):
    shared = tmp_path / "shared.yaml"
    shared.write_text("a: &x {b: [1, 2]}\nc: *x\nd: {<<: *x, e: 3}\n")
    assert load_yaml(shared) == {"a": {"b": [1, 2]}, "c": {"b": [1, 2]},
                                 "d": {"b": [1, 2], "e": 3}}
    cycle = tmp_path / "cycle.yaml"
    cycle.write_text("a: &x [1, *x]\n")
    with pytest.raises(ConfigError, match=r"cycle.yaml': the alias \*x is inside the node"):
        load_yaml(cycle)
