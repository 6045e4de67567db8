"""The Temporal Fusion Transformer (Lim et al., 2019) as DeepLearningExamples deploys it.

Module and parameter names follow DeepLearningExamples' PyTorch TFT, so its checkpoints
load with strict=True. Written for deployment: TorchScript (trace and script) and ONNX
export, FP16 after `.half()` (no hard-coded dtypes inside forward).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def tft_config(hparams: dict) -> SimpleNamespace:
    """The hyper-parameters plus the variable counts DeepLearningExamples derives."""
    c = SimpleNamespace(**hparams)
    c.num_static_vars = c.static_continuous_inp_size + len(c.static_categorical_inp_lens)
    c.num_future_vars = c.temporal_known_continuous_inp_size + len(
        c.temporal_known_categorical_inp_lens)
    c.num_historic_vars = (c.num_future_vars + c.temporal_observed_continuous_inp_size
                           + c.temporal_target_size + len(c.temporal_observed_categorical_inp_lens))
    return c


class MaybeLayerNorm(nn.Module):
    def __init__(self, output_size: Optional[int], hidden_size: int, eps: float):
        super().__init__()
        if output_size == 1:
            self.ln = nn.Identity()
        else:
            self.ln = nn.LayerNorm(output_size if output_size else hidden_size, eps=eps)

    def forward(self, x: Tensor) -> Tensor:
        return self.ln(x)


class GLU(nn.Module):
    def __init__(self, hidden_size: int, output_size: int):
        super().__init__()
        self.lin = nn.Linear(hidden_size, output_size * 2)

    def forward(self, x: Tensor) -> Tensor:
        return F.glu(self.lin(x))


class GRN(nn.Module):
    """Gated residual network, with an optional context vector."""

    def __init__(self, input_size: int, hidden_size: int, output_size: Optional[int] = None,
                 context_hidden_size: Optional[int] = None, dropout: float = 0.0):
        super().__init__()
        self.layer_norm = MaybeLayerNorm(output_size, hidden_size, eps=1e-3)
        self.lin_a = nn.Linear(input_size, hidden_size)
        self.has_context = context_hidden_size is not None
        if context_hidden_size is not None:
            self.lin_c = nn.Linear(context_hidden_size, hidden_size, bias=False)
        else:
            self.lin_c = nn.Identity()
        self.lin_i = nn.Linear(hidden_size, hidden_size)
        self.glu = GLU(hidden_size, output_size if output_size else hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.has_proj = bool(output_size)
        self.out_proj = nn.Linear(input_size, output_size) if output_size else nn.Identity()

    def forward(self, a: Tensor, c: Optional[Tensor] = None) -> Tensor:
        x = self.lin_a(a)
        if c is not None and self.has_context:
            x = x + self.lin_c(c).unsqueeze(1)
        x = self.glu(self.dropout(self.lin_i(F.elu(x))))
        return self.layer_norm(x + self.out_proj(a))


class TFTEmbedding(nn.Module):
    """Embeds the seven input groups into [..., n_vars, hidden] tensors."""

    def __init__(self, c: SimpleNamespace):
        super().__init__()
        h = c.hidden_size

        def embeddings(lens):
            return nn.ModuleList([nn.Embedding(n, h) for n in lens]) if lens else None

        def vectors(n):
            return nn.Parameter(nn.init.xavier_normal_(torch.empty(n, h))) if n else None

        def bias(n):
            return nn.Parameter(torch.zeros(n, h)) if n else None

        self.s_cat_embed = embeddings(c.static_categorical_inp_lens)
        self.t_cat_k_embed = embeddings(c.temporal_known_categorical_inp_lens)
        self.t_cat_o_embed = embeddings(c.temporal_observed_categorical_inp_lens)
        self.s_cont_embedding_vectors = vectors(c.static_continuous_inp_size)
        self.t_cont_k_embedding_vectors = vectors(c.temporal_known_continuous_inp_size)
        self.t_cont_o_embedding_vectors = vectors(c.temporal_observed_continuous_inp_size)
        self.t_tgt_embedding_vectors = vectors(c.temporal_target_size)
        self.s_cont_embedding_bias = bias(c.static_continuous_inp_size)
        self.t_cont_k_embedding_bias = bias(c.temporal_known_continuous_inp_size)
        self.t_cont_o_embedding_bias = bias(c.temporal_observed_continuous_inp_size)
        self.t_tgt_embedding_bias = bias(c.temporal_target_size)

    @staticmethod
    def _join(cat: Optional[Tensor], cont: Optional[Tensor], cont_emb: Optional[Tensor],
              cont_bias: Optional[Tensor]) -> Optional[Tensor]:
        """Concatenate categorical embeddings and scaled continuous vectors of one group."""
        if cont is not None and cont_emb is not None and cont_bias is not None:
            e_cont = cont.unsqueeze(-1) * cont_emb + cont_bias
            return e_cont if cat is None else torch.cat([cat, e_cont], dim=-2)
        return cat

    def forward(self, s_cat: Optional[Tensor], s_cont: Optional[Tensor], k_cat: Optional[Tensor],
                k_cont: Optional[Tensor], o_cat: Optional[Tensor], o_cont: Optional[Tensor],
                target: Tensor):
        # One loop per group: TorchScript iterates a ModuleList only as an attribute.
        s_cat_e: Optional[Tensor] = None
        k_cat_e: Optional[Tensor] = None
        o_cat_e: Optional[Tensor] = None
        if s_cat is not None and self.s_cat_embed is not None:
            s_cat = s_cat[:, 0, :]  # static inputs repeat over time; the first step has them
            parts: list[Tensor] = []
            for i, emb in enumerate(self.s_cat_embed):
                parts.append(emb(s_cat[..., i]))
            s_cat_e = torch.stack(parts, dim=-2)
        if k_cat is not None and self.t_cat_k_embed is not None:
            parts: list[Tensor] = []
            for i, emb in enumerate(self.t_cat_k_embed):
                parts.append(emb(k_cat[..., i]))
            k_cat_e = torch.stack(parts, dim=-2)
        if o_cat is not None and self.t_cat_o_embed is not None:
            parts: list[Tensor] = []
            for i, emb in enumerate(self.t_cat_o_embed):
                parts.append(emb(o_cat[..., i]))
            o_cat_e = torch.stack(parts, dim=-2)
        s_cont = s_cont[:, 0, :] if s_cont is not None else None
        s_inp = self._join(s_cat_e, s_cont, self.s_cont_embedding_vectors,
                           self.s_cont_embedding_bias)
        t_known = self._join(k_cat_e, k_cont, self.t_cont_k_embedding_vectors,
                             self.t_cont_k_embedding_bias)
        t_observed = self._join(o_cat_e, o_cont, self.t_cont_o_embedding_vectors,
                                self.t_cont_o_embedding_bias)
        assert self.t_tgt_embedding_vectors is not None and self.t_tgt_embedding_bias is not None
        t_tgt = target.unsqueeze(-1) * self.t_tgt_embedding_vectors + self.t_tgt_embedding_bias
        return s_inp, t_known, t_observed, t_tgt


class VariableSelectionNetwork(nn.Module):
    def __init__(self, c: SimpleNamespace, num_inputs: int):
        super().__init__()
        self.joint_grn = GRN(c.hidden_size * num_inputs, c.hidden_size, output_size=num_inputs,
                             context_hidden_size=c.hidden_size)
        self.var_grns = nn.ModuleList(
            [GRN(c.hidden_size, c.hidden_size, dropout=c.dropout) for _ in range(num_inputs)])

    def forward(self, x: Tensor, context: Optional[Tensor] = None):
        weights = F.softmax(self.joint_grn(torch.flatten(x, start_dim=-2), c=context), dim=-1)
        embedded = torch.stack([m(x[..., i, :]) for i, m in enumerate(self.var_grns)], dim=-1)
        # batched matrix-vector product: [..., hidden, vars] x [..., vars, 1]
        return torch.matmul(embedded, weights.unsqueeze(-1)).squeeze(-1), weights


class StaticCovariateEncoder(nn.Module):
    def __init__(self, c: SimpleNamespace):
        super().__init__()
        self.vsn = VariableSelectionNetwork(c, c.num_static_vars)
        self.context_grns = nn.ModuleList(
            [GRN(c.hidden_size, c.hidden_size, dropout=c.dropout) for _ in range(4)])

    def forward(self, x: Tensor):
        ctx, _ = self.vsn(x)
        # variable selection, enrichment, LSTM state h, LSTM state c
        cs, ce, ch, cc = [m(ctx) for m in self.context_grns]
        return cs, ce, ch, cc


class InterpretableMultiHeadAttention(nn.Module):
    """Heads share the value projection; their attention vectors are averaged."""

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
        causal = torch.triu(torch.full((c.example_length, c.example_length), float("-inf")), 1)
        self.register_buffer("_mask", causal.unsqueeze(0))

    def forward(self, x: Tensor):
        bs, t, _ = x.shape
        q, k, v = self.qkv_linears(x).split(
            (self.n_head * self.d_head, self.n_head * self.d_head, self.d_head), dim=-1)
        q = q.view(bs, t, self.n_head, self.d_head).permute(0, 2, 1, 3)
        k = k.view(bs, t, self.n_head, self.d_head).permute(0, 2, 3, 1)
        # the mask buffer follows the module dtype (.half()); no dtype cast to bake in a trace
        score = torch.matmul(q, k) * self.scale + self._mask[:, :t, :t]
        prob = self.attn_dropout(F.softmax(score, dim=3))
        attn_vec = torch.matmul(prob, v.view(bs, t, self.d_head).unsqueeze(1))
        out = self.out_dropout(self.out_proj(torch.mean(attn_vec, dim=1)))
        return out, attn_vec


class TemporalFusionTransformer(nn.Module):
    """forward(s_cat, s_cont, k_cat, k_cont, o_cat, o_cont, target) with None for absent
    input groups -> quantile forecasts [batch, example_length - encoder_length, quantiles]."""

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
        s_inp, t_known, t_observed, t_tgt = self.embedding(
            s_cat, s_cont, k_cat, k_cont, o_cat, o_cont, target)
        assert s_inp is not None and t_known is not None
        cs, ce, ch, cc = self.static_encoder(s_inp)
        enc = self.encoder_length
        history_parts = [t_known[:, :enc, :], t_tgt[:, :enc, :]]
        if t_observed is not None:
            history_parts.insert(0, t_observed[:, :enc, :])
        historical = torch.cat(history_parts, dim=-2)
        future_inputs = t_known[:, enc:]

        historical_features, _ = self.history_vsn(historical, cs)
        history, state = self.history_encoder(
            historical_features, (ch.unsqueeze(0), cc.unsqueeze(0)))
        future_features, _ = self.future_vsn(future_inputs, cs)
        future, _ = self.future_encoder(future_features, state)

        # gated skip connection over the LSTM layer
        input_embedding = torch.cat([historical_features, future_features], dim=1)
        temporal = torch.cat([history, future], dim=1)
        temporal = self.input_gate_ln(self.input_gate(temporal) + input_embedding)

        enriched = self.enrichment_grn(temporal, c=ce)  # static enrichment
        x, _ = self.attention(enriched)
        # only the forecast horizon is decoded
        x, temporal, enriched = x[:, enc:, :], temporal[:, enc:, :], enriched[:, enc:, :]
        x = self.attention_ln(self.attention_gate(x) + enriched)
        x = self.positionwise_grn(x)
        x = self.decoder_ln(self.decoder_gate(x) + temporal)
        return self.quantile_proj(x)


class TritonTFT(nn.Module):
    """The Triton-facing model: the eight tensors of the seed's deployment, where absent
    input groups arrive as [batch, 1] dummies (known from the hyper-parameters, not from
    shapes, so tracing and ONNX export bake no shape-dependent branch)."""

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
