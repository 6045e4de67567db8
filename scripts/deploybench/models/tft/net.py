"""The Temporal Fusion Transformer (Lim et al., 2019) as DeepLearningExamples deploys it.

Submodule and parameter names follow DeepLearningExamples' PyTorch TFT (`modeling.py`),
so a state_dict of its `TemporalFusionTransformer` loads here with strict=True, and
modules are created in the same order, so one seed gives the same initial weights.
Written for deployment: eval-mode forward that traces, scripts and exports to ONNX, and
runs in FP16 after `.half()` (no dtype is fixed inside forward; the causal mask is a
buffer, so it follows the module's dtype).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# The input groups in the order of DeepLearningExamples' FEAT_NAMES (and Triton's tensors).
INPUT_NAMES = ("s_cat", "s_cont", "k_cat", "k_cont", "o_cat", "o_cont", "target", "id")


def tft_config(hparams: dict) -> SimpleNamespace:
    """The hyper-parameters plus the variable counts DeepLearningExamples derives in its
    configuration classes (num_static_vars, num_future_vars, num_historic_vars)."""
    c = SimpleNamespace(**hparams)
    if c.hidden_size % c.n_head:
        raise ValueError(f"hidden_size {c.hidden_size} is not a multiple of n_head {c.n_head}")
    if not 0 < c.encoder_length < c.example_length:
        raise ValueError(f"encoder_length {c.encoder_length} must lie inside example_length "
                         f"{c.example_length}: the decoder needs at least one future step")
    c.num_static_vars = c.static_continuous_inp_size + len(c.static_categorical_inp_lens)
    c.num_future_vars = (c.temporal_known_continuous_inp_size
                         + len(c.temporal_known_categorical_inp_lens))
    c.num_historic_vars = (c.num_future_vars + c.temporal_observed_continuous_inp_size
                           + len(c.temporal_observed_categorical_inp_lens)
                           + c.temporal_target_size)
    if c.num_static_vars == 0 or c.num_future_vars == 0:
        # the static encoder and the future VSN have nothing to select from otherwise
        raise ValueError("TFT needs at least one static and one known (future) input")
    return c


class MaybeLayerNorm(nn.Module):
    """LayerNorm, except over a single feature, where it would zero the output."""

    def __init__(self, output_size: Optional[int], hidden_size: int, eps: float):
        super().__init__()
        if output_size == 1:
            self.ln = nn.Identity()
        else:
            self.ln = nn.LayerNorm(output_size or hidden_size, eps=eps)

    def forward(self, x: Tensor) -> Tensor:
        return self.ln(x)


class GLU(nn.Module):
    def __init__(self, hidden_size: int, output_size: int):
        super().__init__()
        self.lin = nn.Linear(hidden_size, output_size * 2)

    def forward(self, x: Tensor) -> Tensor:
        return F.glu(self.lin(x))


class GRN(nn.Module):
    """Gated residual network: LN(a' + GLU(W_i ELU(W_a a + W_c c))), where a' is `a`
    projected to the output size when that differs from the input size."""

    def __init__(self, input_size: int, hidden_size: int, output_size: Optional[int] = None,
                 context_hidden_size: Optional[int] = None, dropout: float = 0.0):
        super().__init__()
        self.layer_norm = MaybeLayerNorm(output_size, hidden_size, eps=1e-3)
        self.lin_a = nn.Linear(input_size, hidden_size)
        # Identity stand-ins have no parameters, so the state_dict keys stay DLE's.
        if context_hidden_size is not None:
            self.lin_c = nn.Linear(context_hidden_size, hidden_size, bias=False)
        else:
            self.lin_c = nn.Identity()
        self.lin_i = nn.Linear(hidden_size, hidden_size)
        self.glu = GLU(hidden_size, output_size or hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(input_size, output_size) if output_size else nn.Identity()

    def forward(self, a: Tensor, c: Optional[Tensor] = None) -> Tensor:
        x = self.lin_a(a)
        if c is not None:
            x = x + self.lin_c(c).unsqueeze(1)  # one context vector for all time steps
        x = self.glu(self.dropout(self.lin_i(F.elu(x))))
        return self.layer_norm(x + self.out_proj(a))


def _embedding_list(lens: list[int], hidden: int) -> Optional[nn.ModuleList]:
    return nn.ModuleList([nn.Embedding(n, hidden) for n in lens]) if lens else None


def _vectors(n: int, hidden: int) -> Optional[nn.Parameter]:
    # Uninitialised here and filled by reset_parameters, in DLE's order (same RNG draws).
    return nn.Parameter(torch.empty(n, hidden)) if n else None


def _bias(n: int, hidden: int) -> Optional[nn.Parameter]:
    return nn.Parameter(torch.zeros(n, hidden)) if n else None


class TFTEmbedding(nn.Module):
    """Turns each input variable into a `hidden_size` vector: an embedding per categorical
    variable, a learned vector scaled by the value (plus a bias) per continuous one.
    Returns [B, n_static, H], [B, T, n_known, H], [B, T, n_observed, H] (or None),
    [B, T, n_target, H]."""

    def __init__(self, c: SimpleNamespace):
        super().__init__()
        h = c.hidden_size
        self.s_cat_embed = _embedding_list(c.static_categorical_inp_lens, h)
        self.t_cat_k_embed = _embedding_list(c.temporal_known_categorical_inp_lens, h)
        self.t_cat_o_embed = _embedding_list(c.temporal_observed_categorical_inp_lens, h)
        self.s_cont_embedding_vectors = _vectors(c.static_continuous_inp_size, h)
        self.t_cont_k_embedding_vectors = _vectors(c.temporal_known_continuous_inp_size, h)
        self.t_cont_o_embedding_vectors = _vectors(c.temporal_observed_continuous_inp_size, h)
        self.t_tgt_embedding_vectors = nn.Parameter(torch.empty(c.temporal_target_size, h))
        self.s_cont_embedding_bias = _bias(c.static_continuous_inp_size, h)
        self.t_cont_k_embedding_bias = _bias(c.temporal_known_continuous_inp_size, h)
        self.t_cont_o_embedding_bias = _bias(c.temporal_observed_continuous_inp_size, h)
        self.t_tgt_embedding_bias = nn.Parameter(torch.zeros(c.temporal_target_size, h))
        for vectors in (self.s_cont_embedding_vectors, self.t_cont_k_embedding_vectors,
                        self.t_cont_o_embedding_vectors, self.t_tgt_embedding_vectors):
            if vectors is not None:
                nn.init.xavier_normal_(vectors)

    @staticmethod
    def _continuous(x: Optional[Tensor], vectors: Optional[Tensor],
                    bias: Optional[Tensor]) -> Optional[Tensor]:
        if x is None or vectors is None or bias is None:
            return None
        return x.unsqueeze(-1) * vectors + bias

    @staticmethod
    def _join(cat: Optional[Tensor], cont: Optional[Tensor]) -> Optional[Tensor]:
        """Categorical variables first, then continuous ones, as DLE orders them."""
        if cat is None:
            return cont
        if cont is None:
            return cat
        return torch.cat([cat, cont], dim=-2)

    def forward(self, s_cat: Optional[Tensor], s_cont: Optional[Tensor],
                k_cat: Optional[Tensor], k_cont: Optional[Tensor], o_cat: Optional[Tensor],
                o_cont: Optional[Tensor], target: Tensor):
        # Static inputs repeat over time; DLE reads them at the first step.
        if s_cat is not None:
            s_cat = s_cat[:, 0, :]
        if s_cont is not None:
            s_cont = s_cont[:, 0, :]
        # One loop per group: TorchScript iterates a ModuleList only as a module attribute.
        s_cat_e: Optional[Tensor] = None
        if s_cat is not None and self.s_cat_embed is not None:
            parts: list[Tensor] = []
            for i, embed in enumerate(self.s_cat_embed):
                parts.append(embed(s_cat[..., i]))
            s_cat_e = torch.stack(parts, dim=-2)
        k_cat_e: Optional[Tensor] = None
        if k_cat is not None and self.t_cat_k_embed is not None:
            parts = []
            for i, embed in enumerate(self.t_cat_k_embed):
                parts.append(embed(k_cat[..., i]))
            k_cat_e = torch.stack(parts, dim=-2)
        o_cat_e: Optional[Tensor] = None
        if o_cat is not None and self.t_cat_o_embed is not None:
            parts = []
            for i, embed in enumerate(self.t_cat_o_embed):
                parts.append(embed(o_cat[..., i]))
            o_cat_e = torch.stack(parts, dim=-2)

        s_inp = self._join(s_cat_e, self._continuous(
            s_cont, self.s_cont_embedding_vectors, self.s_cont_embedding_bias))
        t_known = self._join(k_cat_e, self._continuous(
            k_cont, self.t_cont_k_embedding_vectors, self.t_cont_k_embedding_bias))
        t_observed = self._join(o_cat_e, self._continuous(
            o_cont, self.t_cont_o_embedding_vectors, self.t_cont_o_embedding_bias))
        t_target = target.unsqueeze(-1) * self.t_tgt_embedding_vectors + self.t_tgt_embedding_bias
        return s_inp, t_known, t_observed, t_target


class VariableSelectionNetwork(nn.Module):
    """Weights the variables (softmax of a GRN over all of them, with an optional context)
    and sums their per-variable GRN outputs: [..., n_vars, H] -> [..., H]."""

    def __init__(self, c: SimpleNamespace, num_inputs: int):
        super().__init__()
        self.joint_grn = GRN(c.hidden_size * num_inputs, c.hidden_size, output_size=num_inputs,
                             context_hidden_size=c.hidden_size)
        self.var_grns = nn.ModuleList(
            [GRN(c.hidden_size, c.hidden_size, dropout=c.dropout) for _ in range(num_inputs)])

    def forward(self, x: Tensor, context: Optional[Tensor] = None):
        weights = F.softmax(self.joint_grn(torch.flatten(x, start_dim=-2), c=context), dim=-1)
        transformed = torch.stack([m(x[..., i, :]) for i, m in enumerate(self.var_grns)], dim=-1)
        # [..., H, n_vars] @ [..., n_vars, 1]: the weighted sum over variables
        return torch.matmul(transformed, weights.unsqueeze(-1)).squeeze(-1), weights


class StaticCovariateEncoder(nn.Module):
    """Static variables -> four context vectors: variable selection (cs), enrichment (ce),
    and the LSTM's initial hidden (ch) and cell (cc) states."""

    def __init__(self, c: SimpleNamespace):
        super().__init__()
        self.vsn = VariableSelectionNetwork(c, c.num_static_vars)
        self.context_grns = nn.ModuleList(
            [GRN(c.hidden_size, c.hidden_size, dropout=c.dropout) for _ in range(4)])

    def forward(self, x: Tensor):
        selected, _ = self.vsn(x)
        cs, ce, ch, cc = [m(selected) for m in self.context_grns]
        return cs, ce, ch, cc


class InterpretableMultiHeadAttention(nn.Module):
    """Causal self-attention whose heads share one value projection; the heads' outputs
    are averaged (so the attention weights stay interpretable) before the projection."""

    def __init__(self, c: SimpleNamespace):
        super().__init__()
        self.n_head = c.n_head
        self.d_head = c.hidden_size // c.n_head
        self.qkv_linears = nn.Linear(c.hidden_size, (2 * self.n_head + 1) * self.d_head,
                                     bias=False)
        self.out_proj = nn.Linear(self.d_head, c.hidden_size, bias=False)
        self.attn_dropout = nn.Dropout(c.attn_dropout)
        self.out_dropout = nn.Dropout(c.dropout)
        self.scale = self.d_head ** -0.5
        # A buffer (in DLE's state_dict too): it follows .half() and .to(device).
        mask = torch.triu(torch.full((c.example_length, c.example_length), float("-inf")), 1)
        self.register_buffer("_mask", mask.unsqueeze(0))

    def forward(self, x: Tensor):
        bs, t, _ = x.shape
        q, k, v = self.qkv_linears(x).split(
            (self.n_head * self.d_head, self.n_head * self.d_head, self.d_head), dim=-1)
        q = q.view(bs, t, self.n_head, self.d_head).permute(0, 2, 1, 3)  # [B, n, T, d]
        k = k.view(bs, t, self.n_head, self.d_head).permute(0, 2, 3, 1)  # [B, n, d, T]
        v = v.view(bs, t, self.d_head).unsqueeze(1)  # [B, 1, T, d]: shared by all heads
        score = torch.matmul(q, k) * self.scale + self._mask  # t == example_length
        prob = self.attn_dropout(F.softmax(score, dim=3))
        heads = torch.matmul(prob, v)
        out = self.out_dropout(self.out_proj(torch.mean(heads, dim=1)))
        return out, prob


def _state(x: Tensor) -> Tensor:
    """An LSTM state of one layer, [1, B, H]."""
    return x.reshape(1, -1, x.shape[-1])


class TemporalFusionTransformer(nn.Module):
    """forward(s_cat, s_cont, k_cat, k_cont, o_cat, o_cont, target), None for absent input
    groups -> quantile forecasts [B, example_length - encoder_length, n_quantiles].

    DLE's forward takes a dict; positional Optional tensors trace, script and export
    the same graph without dict plumbing."""

    def __init__(self, c: SimpleNamespace):
        super().__init__()
        self.encoder_length = c.encoder_length
        self.embedding = TFTEmbedding(c)
        self.static_encoder = StaticCovariateEncoder(c)
        self.history_vsn = VariableSelectionNetwork(c, c.num_historic_vars)
        self.history_encoder = nn.LSTM(c.hidden_size, c.hidden_size, batch_first=True)
        self.future_vsn = VariableSelectionNetwork(c, c.num_future_vars)
        self.future_encoder = nn.LSTM(c.hidden_size, c.hidden_size, batch_first=True)
        self.input_gate = GLU(c.hidden_size, c.hidden_size)
        self.input_gate_ln = nn.LayerNorm(c.hidden_size, eps=1e-3)
        self.enrichment_grn = GRN(c.hidden_size, c.hidden_size,
                                  context_hidden_size=c.hidden_size, dropout=c.dropout)
        self.attention = InterpretableMultiHeadAttention(c)
        self.attention_gate = GLU(c.hidden_size, c.hidden_size)
        self.attention_ln = nn.LayerNorm(c.hidden_size, eps=1e-3)
        self.positionwise_grn = GRN(c.hidden_size, c.hidden_size, dropout=c.dropout)
        self.decoder_gate = GLU(c.hidden_size, c.hidden_size)
        self.decoder_ln = nn.LayerNorm(c.hidden_size, eps=1e-3)
        self.quantile_proj = nn.Linear(c.hidden_size, len(c.quantiles))

    def forward(self, s_cat: Optional[Tensor], s_cont: Optional[Tensor],
                k_cat: Optional[Tensor], k_cont: Optional[Tensor], o_cat: Optional[Tensor],
                o_cont: Optional[Tensor], target: Tensor) -> Tensor:
        s_inp, t_known, t_observed, t_target = self.embedding(
            s_cat, s_cont, k_cat, k_cont, o_cat, o_cont, target)
        assert s_inp is not None and t_known is not None  # checked by tft_config
        cs, ce, ch, cc = self.static_encoder(s_inp)

        # The past sees observed, known and target variables; the future the known ones.
        enc = self.encoder_length
        past = [t_known[:, :enc], t_target[:, :enc]]
        if t_observed is not None:
            past.insert(0, t_observed[:, :enc])
        historical_features, _ = self.history_vsn(torch.cat(past, dim=-2), cs)
        # The LSTMs' states as [1, B, H], written as reshapes: torch.export's tracing makes
        # unsqueeze(0) of the static context, and (torch 2.11) the encoder's returned
        # states, 4-D, which the LSTM refuses; the values are the same.
        history, (h, c) = self.history_encoder(historical_features, (_state(ch), _state(cc)))
        future_features, _ = self.future_vsn(t_known[:, enc:], cs)
        future, _ = self.future_encoder(future_features, (_state(h), _state(c)))

        # Gated skip connection around the LSTM encoder-decoder.
        input_embedding = torch.cat([historical_features, future_features], dim=1)
        temporal = torch.cat([history, future], dim=1)
        temporal = self.input_gate_ln(self.input_gate(temporal) + input_embedding)

        enriched = self.enrichment_grn(temporal, c=ce)  # static enrichment
        x, _ = self.attention(enriched)

        # Only the forecast horizon is decoded.
        x, temporal, enriched = x[:, enc:], temporal[:, enc:], enriched[:, enc:]
        x = self.attention_ln(self.attention_gate(x) + enriched)
        x = self.positionwise_grn(x)
        x = self.decoder_ln(self.decoder_gate(x) + temporal)
        return self.quantile_proj(x)


class TFTWrapper(nn.Module):
    """The Triton-facing model, like DLE's triton/model.py: eight tensors in FEAT_NAMES
    order, absent feature groups as [B, 1] dummies, `id` unused by the network.

    DLE tells a dummy by its shape (`x.shape[1] == 1`); here the hyper-parameters say
    which groups exist, so a trace or an ONNX export bakes no shape test, and a real
    input of one time step could not be mistaken for a dummy."""

    def __init__(self, c: SimpleNamespace):
        super().__init__()
        self.model = TemporalFusionTransformer(c)
        self.has_s_cat = bool(c.static_categorical_inp_lens)
        self.has_s_cont = bool(c.static_continuous_inp_size)
        self.has_k_cat = bool(c.temporal_known_categorical_inp_lens)
        self.has_k_cont = bool(c.temporal_known_continuous_inp_size)
        self.has_o_cat = bool(c.temporal_observed_categorical_inp_lens)
        self.has_o_cont = bool(c.temporal_observed_continuous_inp_size)

    def forward(self, s_cat: Tensor, s_cont: Tensor, k_cat: Tensor, k_cont: Tensor,
                o_cat: Tensor, o_cont: Tensor, target: Tensor, id: Tensor) -> Tensor:
        return self.model(
            s_cat if self.has_s_cat else None, s_cont if self.has_s_cont else None,
            k_cat if self.has_k_cat else None, k_cont if self.has_k_cont else None,
            o_cat if self.has_o_cat else None, o_cont if self.has_o_cont else None, target)
