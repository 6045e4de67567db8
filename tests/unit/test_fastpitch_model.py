"""The FastPitch plug-in: DLE's parameter layout and checkpoints, its text front end and
LJSpeech filelists, the fixed-length outputs Triton's dynamic batching needs (length
invariants, batch independence) and the TorchScript and ONNX exports."""

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
import yaml

from deploybench.models import fastpitch
from deploybench.models.fastpitch import data as fastpitch_data
from deploybench.models.fastpitch.net import FastPitch
from deploybench.settings.config import validate
from testkit.fastpitch import (
    LJS_LINES,
    TINY,
    data,  # noqa: F401 (a fixture)
    run,
)
from testkit.workflow import reference_opset

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = yaml.safe_load((ROOT / "config/models/fastpitch.yaml").read_text())["hparams"]
NAMES_IN = ["INPUT__0", "INPUT__1"]
NAMES_OUT = ["OUTPUT__0", "OUTPUT__1", "OUTPUT__2", "OUTPUT__3"]


def dle_layout(hp: dict) -> list[tuple[str, tuple[int, ...]]]:
    """The state_dict of DLE's FastPitch 1.0 (fastpitch/model.py, transformer.py,
    common/layers.py at the 2021 Triton release; one speaker): keys in order, shapes."""
    dim, mel = hp["symbols_embedding_dim"], hp["n_mel_channels"]

    def fft(prefix, side, embed):
        n, dh, k, f = (hp[f"{side}_fft_{x}"] for x in (
            "n_heads", "d_head", "conv1d_kernel_size", "conv1d_filter_size"))
        keys = [(f"{prefix}.word_emb.weight", (148, dim))] if embed else []
        keys.append((f"{prefix}.pos_emb.inv_freq", (dim // 2,)))
        for i in range(hp[f"{side}_fft_n_layers"]):
            layer = f"{prefix}.layers.{i}"
            keys += [(f"{layer}.dec_attn.qkv_net.weight", (3 * n * dh, dim)),
                     (f"{layer}.dec_attn.qkv_net.bias", (3 * n * dh,)),
                     (f"{layer}.dec_attn.o_net.weight", (dim, n * dh)),
                     (f"{layer}.dec_attn.layer_norm.weight", (dim,)),
                     (f"{layer}.dec_attn.layer_norm.bias", (dim,)),
                     (f"{layer}.pos_ff.CoreNet.0.weight", (f, dim, k)),
                     (f"{layer}.pos_ff.CoreNet.0.bias", (f,)),
                     (f"{layer}.pos_ff.CoreNet.2.weight", (dim, f, k)),
                     (f"{layer}.pos_ff.CoreNet.2.bias", (dim,)),
                     (f"{layer}.pos_ff.layer_norm.weight", (dim,)),
                     (f"{layer}.pos_ff.layer_norm.bias", (dim,))]
        return keys

    def predictor(prefix, kind):
        f, k = hp[f"{kind}_predictor_filter_size"], hp[f"{kind}_predictor_kernel_size"]
        keys = []
        for i in range(hp[f"{kind}_predictor_n_layers"]):
            keys += [(f"{prefix}.layers.{i}.conv.weight", (f, dim if i == 0 else f, k)),
                     (f"{prefix}.layers.{i}.conv.bias", (f,)),
                     (f"{prefix}.layers.{i}.norm.weight", (f,)),
                     (f"{prefix}.layers.{i}.norm.bias", (f,))]
        return keys + [(f"{prefix}.fc.weight", (1, f)), (f"{prefix}.fc.bias", (1,))]

    k = hp["pitch_embedding_kernel_size"]
    return ([("pitch_mean", (1,)), ("pitch_std", (1,))]  # the root's buffers come first
            + fft("encoder", "in", True) + predictor("duration_predictor", "dur")
            + fft("decoder", "out", False) + predictor("pitch_predictor", "pitch")
            + [("pitch_emb.weight", (dim, 1, k)), ("pitch_emb.bias", (dim,)),
               ("proj.weight", (mel, dim)), ("proj.bias", (mel,))])


@pytest.fixture(scope="module")
def tiny_model():
    return fastpitch.build_model(TINY, None, seed=0)


def batch(texts, hp=TINY):
    ids, full = fastpitch_data.encode(texts, hp["symbol_set"], hp["text_length"])
    return [ids, np.minimum(full, hp["text_length"])[:, None]]


# --- layout and checkpoints ---------------------------------------------------------

def test_state_dict_has_dles_layout_at_reference_size():
    with torch.device("meta"):  # 45M parameters, no memory
        model = FastPitch(REFERENCE)
    got = [(k, tuple(v.shape)) for k, v in model.state_dict().items()]
    assert got == dle_layout(REFERENCE)
    assert len(got) == 161
    assert sum(p.numel() for p in model.parameters()) == 44_766_546


def test_tiny_layout_and_seeded_build(tiny_model):
    assert [(k, tuple(v.shape)) for k, v in tiny_model.state_dict().items()] == dle_layout(TINY)
    assert not tiny_model.training
    assert all(p.dtype == torch.float32 for p in tiny_model.state_dict().values())
    again, other = (fastpitch.build_model(TINY, None, s) for s in (0, 1))
    state, state2, state3 = (m.state_dict() for m in (tiny_model, again, other))
    assert all(torch.equal(state[k], state2[k]) for k in state)
    assert not torch.equal(state["proj.weight"], state3["proj.weight"])
    # the padding symbol embeds to zeros, as DLE's nn.Embedding(padding_idx=0)
    assert not state["encoder.word_emb.weight"][0].any()
    bias = float(state["duration_predictor.fc.bias"])
    assert bias == pytest.approx(np.log1p(TINY["init_frames_per_symbol"]))


def dle_checkpoint(path, model, config=None, prefix="module."):
    """A checkpoint as DLE's train.py saves it from a DistributedDataParallel model."""
    torch.save({"epoch": 1500, "iteration": 0, "config": config,
                "state_dict": {prefix + k: v for k, v in model.state_dict().items()},
                "ema_state_dict": None, "optimizer": {"state": {}, "param_groups": []}}, path)


def dle_config(hp):
    keys = [k for k in hp if k.startswith(("in_fft", "out_fft", "p_", "dur_", "pitch_"))]
    return {**{k: hp[k] for k in keys}, "n_mel_channels": hp["n_mel_channels"],
            "max_seq_len": 2048, "n_symbols": 148, "padding_idx": 0,
            "symbols_embedding_dim": hp["symbols_embedding_dim"], "n_speakers": 1,
            "speaker_emb_weight": 1.0}


def test_dle_checkpoint_loads_strictly(tmp_path, data):
    trained = fastpitch.build_model(TINY, None, seed=5)
    with torch.no_grad():
        trained.pitch_mean.fill_(214.7)
        trained.pitch_std.fill_(65.7)
    dle_checkpoint(tmp_path / "checkpoint.pt", trained, dle_config(TINY))
    loaded = fastpitch.build_model(TINY, str(tmp_path / "checkpoint.pt"), seed=0)
    assert not loaded.training
    assert all(torch.equal(v, trained.state_dict()[k]) for k, v in loaded.state_dict().items())
    inputs, _ = fastpitch.load_split(TINY, str(data), "test", 6)
    for got, want in zip(run(loaded, inputs), run(trained, inputs)):
        np.testing.assert_array_equal(got, want)
    # a bare state_dict (no config, no prefix) loads too
    torch.save(trained.state_dict(), tmp_path / "bare.pt")
    bare = fastpitch.build_model(TINY, str(tmp_path / "bare.pt"), seed=0)
    assert torch.equal(bare.proj.weight, trained.proj.weight)


def test_unfit_checkpoints_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope/nvidia_fastpitch_200518.pt"):
        fastpitch.build_model(TINY, str(tmp_path / "nope/nvidia_fastpitch_200518.pt"), 0)
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match="junk.pt' is not a readable torch file"):
        fastpitch.build_model(TINY, str(tmp_path / "junk.pt"), 0)
    wider = {**TINY, "symbols_embedding_dim": 48, "in_fft_output_size": 48,
             "out_fft_output_size": 48}
    dle_checkpoint(tmp_path / "wider.pt", fastpitch.build_model(wider, None, 0))
    with pytest.raises(ValueError, match=r"wider.pt' does not fit the configured hparams: "
                                         r"tensors 44 of another shape: encoder.word_emb."
                                         r"weight \[148, 48\] \(model \[148, 32\]\)"):
        fastpitch.build_model(TINY, str(tmp_path / "wider.pt"), 0)
    deeper = {**TINY, "in_fft_n_layers": 3}
    dle_checkpoint(tmp_path / "deeper.pt", fastpitch.build_model(deeper, None, 0))
    with pytest.raises(ValueError, match=r"tensors 11 unexpected: encoder.layers.2.dec_attn"):
        fastpitch.build_model(TINY, str(tmp_path / "deeper.pt"), 0)
    # two heads of 8 have the same shapes as one of 16: only the saved config tells
    heads = {**TINY, "in_fft_n_heads": 2, "in_fft_d_head": 8}
    dle_checkpoint(tmp_path / "heads.pt", fastpitch.build_model(heads, None, 0),
                   dle_config(heads))
    with pytest.raises(ValueError, match="another configuration: in_fft_n_heads: "
                                         "checkpoint 2, hparams 1; in_fft_d_head"):
        fastpitch.build_model(TINY, str(tmp_path / "heads.pt"), 0)
    torch.save({"state_dict": {}}, tmp_path / "empty.pt")
    with pytest.raises(ValueError, match="holds no state_dict"):
        fastpitch.build_model(TINY, str(tmp_path / "empty.pt"), 0)


# --- outputs ------------------------------------------------------------------------

def check_invariants(hp, inputs, outputs):
    mel, mel_lengths, durations, pitch = outputs
    n, length = inputs[0].shape
    assert mel.shape == (n, hp["n_mel_channels"], hp["max_mel_frames"])
    assert mel_lengths.shape == (n, 1) and mel_lengths.dtype == np.int64
    assert durations.shape == pitch.shape == (n, length)
    assert np.isfinite(mel).all() and np.isfinite(durations).all()
    valid = np.arange(length) < inputs[1]
    assert not durations[~valid].any() and not pitch[~valid].any()
    assert (durations >= 0).all() and (durations <= hp["max_duration"]).all()
    rounded = np.floor(durations.astype(np.float64) + 0.5).sum(axis=1)
    np.testing.assert_array_equal(mel_lengths[:, 0], np.minimum(rounded, hp["max_mel_frames"]))
    frames = np.arange(hp["max_mel_frames"])
    for i in range(n):
        assert not mel[i][:, frames >= mel_lengths[i, 0]].any()  # zero past the length


def test_output_shapes_and_length_invariants(data, tiny_model):
    inputs, targets = fastpitch.load_split(TINY, str(data), "test", None)
    outputs = run(tiny_model, inputs)
    check_invariants(TINY, inputs, outputs)
    lengths = outputs[1][:, 0]
    assert (lengths > 0).all()
    for i in range(len(lengths)):  # every valid frame carries a spectrum
        assert np.abs(outputs[0][i, :, : lengths[i]]).sum(axis=0).min() > 0
    stats = fastpitch.evaluate(TINY, outputs, targets)
    assert 4 < stats["frames_per_symbol"] < 8  # the seeded duration bias: LJSpeech's rate
    assert stats["length_mismatch_fraction"] == 0.0
    assert stats["mel_in_range_fraction"] == 1.0


def test_cut_at_max_frames_empty_text_and_explicit_lengths(tiny_model):
    short = {**TINY, "max_mel_frames": 40}
    model = fastpitch.build_model(short, None, seed=0)
    inputs = batch([LJS_LINES[1].split("|")[1], "Hi.", ""], short)
    mel, lengths, durations, _ = outputs = run(model, inputs)
    check_invariants(short, inputs, outputs)
    assert lengths[0, 0] == 40 and durations[0].sum() > 40  # cut and clamped
    assert 0 < lengths[1, 0] < 40
    assert lengths[2, 0] == 0 and not mel[2].any()  # empty text: empty mel, no NaN
    # INPUT__1 shorter than the text: the model reads that many symbols, as if padded
    text = batch([LJS_LINES[0].split("|")[1]])
    cut = [text[0].copy(), np.array([[10]])]
    cut[0][0, 10:] = 0
    for got, want in zip(run(tiny_model, [text[0], np.array([[10]])]), run(tiny_model, cut)):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("heads", [1, 2])
def test_a_samples_outputs_do_not_depend_on_its_batch(data, heads):
    """Triton's dynamic batcher runs requests together and splits the outputs by rows:
    each row must be what the sample gives alone."""
    hp = {**TINY, "in_fft_n_heads": heads, "out_fft_n_heads": heads,
          "in_fft_d_head": 16 // heads, "out_fft_d_head": 16 // heads, "max_mel_frames": 160}
    model = fastpitch.build_model(hp, None, seed=1)
    inputs, _ = fastpitch.load_split(hp, str(data), "val", 6)
    empty = [np.zeros((1, 32), np.int64), np.zeros((1, 1), np.int64)]
    inputs = [np.concatenate([a, e]) for a, e in zip(inputs, empty)]
    together = run(model, inputs)
    assert together[1].min() == 0 and together[1].max() == 160  # empty and cut samples
    for i in range(len(inputs[0])):
        alone = run(model, [a[i : i + 1] for a in inputs])
        np.testing.assert_array_equal(alone[1], together[1][i : i + 1])
        for got, want in zip(alone, together):
            np.testing.assert_allclose(got, want[i : i + 1], rtol=1e-5, atol=1e-5)


def test_exports_reproduce_the_model(data, tiny_model, tmp_path):
    inputs, _ = fastpitch.load_split(TINY, str(data), "test", 8)
    x = tuple(torch.from_numpy(a) for a in inputs)
    example = tuple(t[:2] for t in x)  # exported at batch 2, run at batch 8
    expected = run(tiny_model, inputs)
    with torch.no_grad():
        exported = [torch.jit.trace(tiny_model, example), torch.jit.script(tiny_model)]
        for module in exported:
            got = [o.numpy() for o in module(*x)]
            assert [g.dtype for g in got] == [np.float32, np.int64, np.float32, np.float32]
            np.testing.assert_array_equal(got[1], expected[1])
            for g, e in zip(got, expected):
                np.testing.assert_allclose(g, e, rtol=0, atol=1e-5)
        torch.onnx.export(tiny_model, example, str(tmp_path / "m.onnx"), input_names=NAMES_IN,
                          output_names=NAMES_OUT, opset_version=reference_opset("fastpitch"),
                          dynamo=False,
                          dynamic_axes={n: {0: "batch"} for n in NAMES_IN + NAMES_OUT})
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == NAMES_IN  # INPUT__1 is read
    got = session.run(None, dict(zip(NAMES_IN, inputs)))
    assert got[1].dtype == np.int64
    np.testing.assert_array_equal(got[1], expected[1])
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=0, atol=1e-4)


def test_reference_size_speaks_at_a_typical_rate():
    model = fastpitch.build_model(REFERENCE, None, seed=0)
    texts = [line.split("|")[1] for line in LJS_LINES[1:]]
    inputs = batch(texts, REFERENCE)
    outputs = run(model, inputs)
    check_invariants(REFERENCE, inputs, outputs)
    frames_per_symbol = outputs[1][:, 0] / inputs[1][:, 0]
    assert ((frames_per_symbol > 3) & (frames_per_symbol < 8)).all()


def test_trace_fixes_no_device_or_dtype(data, tiny_model, tmp_path):
    """The toolkit traces on the CPU in FP32, then loads the trace on a GPU and calls
    .half() for FP16: the graph must not pin the device or the floating dtype."""
    inputs, _ = fastpitch.load_split(TINY, str(data), "test", 4)
    x = tuple(torch.from_numpy(a) for a in inputs)
    with torch.no_grad():
        torch.jit.save(torch.jit.trace(tiny_model, x[:2]), str(tmp_path / "m.pt"))
    traced = torch.jit.load(str(tmp_path / "m.pt"))
    graph = str(traced.inlined_graph)
    assert 'value="cpu"' not in graph  # a factory's device (torch.arange(device=...))
    with torch.no_grad():
        half = [o.numpy() for o in traced.half()(*x)]
    assert half[0].dtype == np.float16 and np.isfinite(half[0]).all()
    expected = run(tiny_model, inputs)
    assert np.abs(half[1] - expected[1]).max() <= 4  # a duration near x.5 may round over
    np.testing.assert_allclose(half[2], expected[2], rtol=5e-2, atol=5e-2)


# --- statistics and configs ---------------------------------------------------------

def test_evaluate_on_known_outputs():
    hp = {**TINY, "text_length": 4, "max_mel_frames": 10}
    durations = np.array([[2.4, 2.5, 0.0, 0.0], [6.0, 6.0, 1.0, 0.0]], np.float32)
    pitch = np.array([[1.0, 3.0, 0.0, 0.0], [-1.0, -1.0, -1.0, 0.0]], np.float32)
    lengths = np.array([[5], [10]])  # 2 + 3, and 6 + 6 + 1 cut to 10
    mel = np.zeros((2, 80, 10), np.float32)
    mel[0, 3, 5:] = 99.0  # out of DLE's range, but past the length: not counted
    mel[1, 7, 9] = -15.5  # out of range
    used, full = np.array([2, 3]), np.array([2, 7])
    stats = fastpitch.evaluate(hp, [mel, lengths, durations, pitch], [used, full])
    assert stats == pytest.approx({"mel_in_range_fraction": 0.5,
        "mel_frames_total": 15, "mel_frames_mean": 7.5, "frames_per_symbol": 3.0,
        "at_max_frames_fraction": 0.5, "length_mismatch_fraction": 0.0,
        "duration_mean": 17.9 / 5, "pitch_mean": 1 / 5, "truncated_text_fraction": 0.5})
    assert isinstance(stats["mel_frames_total"], int)
    wrong = fastpitch.evaluate(hp, [mel, lengths - 1, durations, pitch], [used, full])
    assert wrong["length_mismatch_fraction"] == 1.0
    with pytest.raises(ValueError, match="targets for 3"):
        fastpitch.evaluate(hp, [mel, lengths, durations, pitch], [np.ones(3), np.ones(3)])


@pytest.mark.parametrize("path", ["config/models/fastpitch.yaml",
                                  "tests/config/models/fastpitch-tiny.yaml"])
def test_model_configs_fit_the_plugin(path):
    config = yaml.safe_load((ROOT / path).read_text())
    validate(config, "model.schema.yaml", path)
    hp = config["hparams"]
    assert [t["name"] for t in config["inputs"]] == NAMES_IN
    assert [t["name"] for t in config["outputs"]] == NAMES_OUT
    assert [(t["dtype"], t["dims"]) for t in config["inputs"]] == [
        ("INT64", [hp["text_length"]]), ("INT64", [1])]
    assert [(t["dtype"], t["dims"]) for t in config["outputs"]] == [
        ("FP32", [hp["n_mel_channels"], hp["max_mel_frames"]]), ("INT64", [1]),
        ("FP32", [hp["text_length"]]), ("FP32", [hp["text_length"]])]
