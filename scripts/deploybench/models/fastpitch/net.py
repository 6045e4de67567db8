"""FastPitch (Łańcucki, 2020) as DeepLearningExamples (DLE) deploys it on Triton.

Submodule and parameter names follow DLE's `fastpitch/model.py`, `transformer.py` and
`common/layers.py` of its 2021 Triton release (FastPitch 1.0: no energy predictor, no
alignment module), so the state_dict of a DLE `FastPitch` loads here with strict=True;
modules are created in DLE's order, so one seed gives DLE's initial weights.

The forward is DLE's `infer` (predicted durations and pitch, pace 1, durations clamped
to `max_duration`) with these deviations, all for Triton's dynamic batcher, which joins
requests along dim 0 and splits the outputs back, so a request's outputs must not depend
on its batch-mates:
  - the mel (and the length regulator) span a fixed `max_mel_frames`, not the longest
    sample of the batch; frames past a sample's length are zero (DLE leaves the output
    projection's bias there) and a longer mel is cut, its length clamped, as DLE clamps
    to `mel_max_len` in training;
  - the length regulator rounds durations half up before summing (DLE's later fix of
    `regulate_len`), so a mel length is the sum of the rounded durations;
  - attention splits heads per sample (DLE's reshape mixes samples when n_head > 1;
    with the reference single head both are the same);
  - a sequence with no valid position attends to all of its (zeroed) positions instead
    of none, so an empty text gives an empty mel rather than NaN;
  - the positional angles are computed in FP32 also in an FP16 model.
Every sample is padded here, which also removes a batch dependence of DLE's: there the
longest sample of a batch ends at the tensor's edge, so the convolutions at its last
frame see zeros where a padded sample's see the padding's (nonzero) hidden activations.
Text positions are valid where the symbol is not padding, as in DLE's encoder, and lies
within the sample's text length (INPUT__1, which DLE's model receives but ignores).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .text import PAD_ID, symbols


def check_hparams(hp: dict) -> None:
    for prefix in ("in_fft", "out_fft"):
        if hp[f"{prefix}_output_size"] != hp["symbols_embedding_dim"]:
            raise ValueError(f"{prefix}_output_size must equal symbols_embedding_dim")
    if hp["symbols_embedding_dim"] % 2:
        raise ValueError("symbols_embedding_dim must be even (sine and cosine halves)")
    if hp["max_mel_frames"] < 1 or hp["text_length"] < 1:
        raise ValueError("text_length and max_mel_frames must be positive")


class PositionalEmbedding(nn.Module):
    def __init__(self, demb: int):
        super().__init__()
        inv_freq = 1 / (10000 ** (torch.arange(0.0, demb, 2.0) / demb))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, positions: Tensor) -> Tensor:
        """[1, T, demb] for integer positions [T]. Angles in FP32 even in an FP16 model
        (in FP16 they would be off by up to half a radian at position 1000)."""
        sinusoid = positions.float().unsqueeze(1) * self.inv_freq.float().unsqueeze(0)
        return torch.cat([sinusoid.sin(), sinusoid.cos()], dim=1).unsqueeze(0)


class PositionwiseConvFF(nn.Module):
    def __init__(self, d_model: int, d_inner: int, kernel_size: int, dropout: float):
        super().__init__()
        self.CoreNet = nn.Sequential(
            nn.Conv1d(d_model, d_inner, kernel_size, 1, kernel_size // 2),
            nn.ReLU(),
            nn.Conv1d(d_inner, d_model, kernel_size, 1, kernel_size // 2),
            nn.Dropout(dropout),
        )
        self.layer_norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor) -> Tensor:
        core = self.CoreNet(x.transpose(1, 2)).transpose(1, 2)
        return self.layer_norm(x + core)


class MultiHeadAttn(nn.Module):
    def __init__(self, n_head: int, d_model: int, d_head: int, dropout: float, dropatt: float):
        super().__init__()
        self.n_head, self.d_head = n_head, d_head
        self.scale = 1 / math.sqrt(d_head)
        self.qkv_net = nn.Linear(d_model, 3 * n_head * d_head)
        self.drop = nn.Dropout(dropout)
        self.dropatt = nn.Dropout(dropatt)
        self.o_net = nn.Linear(n_head * d_head, d_model, bias=False)
        self.layer_norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, key_mask: Tensor) -> Tensor:
        """x [B, T, d_model]; key_mask [B, T] bool, False where a key is hidden."""
        b, t = x.size(0), x.size(1)
        # qkv_net's output is [q | k | v], each n_head blocks of d_head (DLE's layout)
        q, k, v = self.qkv_net(x).view(b, t, 3, self.n_head, self.d_head).permute(
            2, 0, 3, 1, 4).unbind(0)  # each [B, n_head, T, d_head]
        score = torch.matmul(q, k.transpose(2, 3)) * self.scale
        score = score.masked_fill(~key_mask[:, None, None, :], -float("inf"))
        prob = self.dropatt(F.softmax(score, dim=3))
        out = torch.matmul(prob, v).transpose(1, 2).reshape(b, t, self.n_head * self.d_head)
        return self.layer_norm(x + self.drop(self.o_net(out)))


class TransformerLayer(nn.Module):
    def __init__(self, n_head: int, d_model: int, d_head: int, d_inner: int,
                 kernel_size: int, dropout: float, dropatt: float):
        super().__init__()
        self.dec_attn = MultiHeadAttn(n_head, d_model, d_head, dropout, dropatt)
        self.pos_ff = PositionwiseConvFF(d_model, d_inner, kernel_size, dropout)

    def forward(self, x: Tensor, mask: Tensor, key_mask: Tensor) -> Tensor:
        """mask [B, T, 1] in x's dtype: padded positions leave every layer as zeros."""
        x = self.dec_attn(x, key_mask) * mask
        return self.pos_ff(x) * mask


class FFTransformer(nn.Module):
    """DLE's feed-forward Transformer: an optional symbol embedding, sinusoidal positions
    and `n_layer` blocks of self-attention plus a 1-D convolution."""

    def __init__(self, n_layer: int, n_head: int, d_model: int, d_head: int, d_inner: int,
                 kernel_size: int, dropout: float, dropatt: float, dropemb: float,
                 n_embed: int = 0, padding_idx: int = PAD_ID):
        super().__init__()
        self.word_emb = nn.Embedding(n_embed, d_model, padding_idx=padding_idx) \
            if n_embed else None
        self.pos_emb = PositionalEmbedding(d_model)
        self.drop = nn.Dropout(dropemb)
        self.layers = nn.ModuleList([
            TransformerLayer(n_head, d_model, d_head, d_inner, kernel_size, dropout, dropatt)
            for _ in range(n_layer)
        ])

    def forward(self, x: Tensor, valid: Tensor, positions: Tensor,
                conditioning: Tensor) -> Tensor:
        """x: [B, T] symbol ids (with a word embedding) or [B, T, d_model] features;
        valid: [B, T] bool; positions: [T] int64."""
        if self.word_emb is not None:
            x = self.word_emb(x)
        mask = valid.unsqueeze(2).type_as(x)
        # An all-hidden row would softmax to NaN: let such a sequence see its zeros.
        key_mask = valid | ~valid.any(dim=1, keepdim=True)
        out = self.drop(x + self.pos_emb(positions).type_as(x) * mask + conditioning)
        for layer in self.layers:
            out = layer(out, mask, key_mask)
        return out


class ConvReLUNorm(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dropout: float):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size,
                              padding=kernel_size // 2)
        self.norm = nn.LayerNorm(out_channels)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.conv(x))
        return self.dropout(self.norm(out.transpose(1, 2)).transpose(1, 2))


class TemporalPredictor(nn.Module):
    """One value per text position (log duration or normalised pitch); zero at padding."""

    def __init__(self, input_size: int, filter_size: int, kernel_size: int, dropout: float,
                 n_layers: int):
        super().__init__()
        self.layers = nn.Sequential(*[
            ConvReLUNorm(input_size if i == 0 else filter_size, filter_size, kernel_size,
                         dropout)
            for i in range(n_layers)
        ])
        self.fc = nn.Linear(filter_size, 1, bias=True)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        out = self.layers((x * mask).transpose(1, 2)).transpose(1, 2)
        return (self.fc(out) * mask).squeeze(2)


def regulate_length(durations: Tensor, enc_out: Tensor,
                    frame_ids: Tensor) -> tuple[Tensor, Tensor]:
    """Repeat each text position round(duration) times (halves up) into the fixed grid
    of frames `frame_ids` (0 .. F-1): frame f takes position i where start_i <= f < end_i.
    One comparison grid and one matmul for the whole batch, so it traces and exports.
    Returns the frames [B, F, D] and the lengths [B] (int64, clamped to F)."""
    reps = torch.floor(durations.float() + 0.5)
    ends = torch.cumsum(reps, dim=1)  # exact: integers far below 2**24 in float32
    starts = ends - reps
    frame = frame_ids.view(1, -1, 1)
    pick = (starts.unsqueeze(1) <= frame) & (frame < ends.unsqueeze(1))  # [B, F, T]
    frames = torch.matmul(pick.type_as(enc_out), enc_out)
    lengths = torch.minimum(ends[:, -1].long(), frame_ids[-1] + 1)
    return frames, lengths


class FastPitch(nn.Module):
    """forward(text [B, T] int64, text_lengths [B, 1] int64) ->
    (mel [B, n_mel, max_mel_frames], mel_lengths [B, 1] int64, durations [B, T],
    pitch [B, T]): DLE's Triton outputs, fixed-size."""

    def __init__(self, hp: dict):
        super().__init__()
        check_hparams(hp)
        dim = hp["symbols_embedding_dim"]
        self.max_duration = float(hp["max_duration"])
        self.padding_idx = PAD_ID
        self.encoder = FFTransformer(
            hp["in_fft_n_layers"], hp["in_fft_n_heads"], dim, hp["in_fft_d_head"],
            hp["in_fft_conv1d_filter_size"], hp["in_fft_conv1d_kernel_size"],
            hp["p_in_fft_dropout"], hp["p_in_fft_dropatt"], hp["p_in_fft_dropemb"],
            n_embed=len(symbols(hp["symbol_set"])), padding_idx=PAD_ID)
        n_speakers = hp.get("n_speakers", 1)
        self.speaker_emb = nn.Embedding(n_speakers, dim) if n_speakers > 1 else None
        self.speaker_emb_weight = float(hp.get("speaker_emb_weight", 1.0))
        self.duration_predictor = TemporalPredictor(
            dim, hp["dur_predictor_filter_size"], hp["dur_predictor_kernel_size"],
            hp["p_dur_predictor_dropout"], hp["dur_predictor_n_layers"])
        self.decoder = FFTransformer(
            hp["out_fft_n_layers"], hp["out_fft_n_heads"], dim, hp["out_fft_d_head"],
            hp["out_fft_conv1d_filter_size"], hp["out_fft_conv1d_kernel_size"],
            hp["p_out_fft_dropout"], hp["p_out_fft_dropatt"], hp["p_out_fft_dropemb"])
        self.pitch_predictor = TemporalPredictor(
            dim, hp["pitch_predictor_filter_size"], hp["pitch_predictor_kernel_size"],
            hp["p_pitch_predictor_dropout"], hp["pitch_predictor_n_layers"])
        kernel = hp["pitch_embedding_kernel_size"]
        self.pitch_emb = nn.Conv1d(1, dim, kernel_size=kernel, padding=(kernel - 1) // 2)
        # LJSpeech pitch statistics of the training data (DLE keeps them in the model)
        self.register_buffer("pitch_mean", torch.zeros(1))
        self.register_buffer("pitch_std", torch.zeros(1))
        self.proj = nn.Linear(dim, hp["n_mel_channels"], bias=True)
        # Position grids and a zero conditioning as buffers (not in DLE's state_dict):
        # tensors made in forward would fix the trace's device and dtype, and an export
        # traced on the CPU in FP32 runs on a GPU in FP16.
        self.register_buffer("text_ids", torch.arange(hp["text_length"]), persistent=False)
        self.register_buffer("frame_ids", torch.arange(hp["max_mel_frames"]),
                             persistent=False)
        self.register_buffer("no_conditioning", torch.zeros(1), persistent=False)

    def forward(self, text: Tensor, text_lengths: Tensor):
        positions = self.text_ids[: text.size(1)]
        valid = (text != self.padding_idx) & (positions.unsqueeze(0) < text_lengths.view(-1, 1))
        conditioning = self.no_conditioning
        if self.speaker_emb is not None:  # DLE's infer: speaker 0
            conditioning = self.speaker_emb.weight[0] * self.speaker_emb_weight
        enc_out = self.encoder(text, valid, positions, conditioning)
        mask = valid.unsqueeze(2).type_as(enc_out)

        log_dur = self.duration_predictor(enc_out, mask)
        durations = torch.clamp(torch.exp(log_dur) - 1, 0.0, self.max_duration)
        pitch = self.pitch_predictor(enc_out, mask)
        enc_out = enc_out + self.pitch_emb(pitch.unsqueeze(1)).transpose(1, 2)

        frames, mel_lengths = regulate_length(durations, enc_out, self.frame_ids)
        frame_valid = self.frame_ids.unsqueeze(0) < mel_lengths.unsqueeze(1)
        dec_out = self.decoder(frames, frame_valid, self.frame_ids, self.no_conditioning)
        mel = self.proj(dec_out) * frame_valid.unsqueeze(2).type_as(dec_out)
        return mel.transpose(1, 2), mel_lengths.unsqueeze(1), durations, pitch
