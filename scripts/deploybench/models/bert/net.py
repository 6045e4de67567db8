"""BERT for extractive question answering, as DeepLearningExamples deploys it.

Submodule and parameter names follow DeepLearningExamples' PyTorch BERT (`modeling.py`,
`BertForQuestionAnswering`): `bert.embeddings.*`, `bert.encoder.layer.N.*` (with its
fused `intermediate.dense_act`) and `qa_outputs`, so its state_dict loads strictly. The
pooler is left out: question answering never reads it (DLE's distilled QA students are
built without one; `bert.read_checkpoint` drops it where a checkpoint has one).
Written for deployment: int32 inputs as Triton sends them, an eval-mode forward that
traces, scripts and exports to ONNX, and FP16 after `.half()` or ONNX FP16 conversion
(the additive mask is a float buffer at BERT's -10000, which FP16 holds).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# config.json keys of a DLE checkpoint that shape the network (all in the hparams).
ARCH_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size", "max_position_embeddings", "type_vocab_size")
LAYER_NORM_EPS = 1e-12


def embedding_rows(vocab_size: int) -> int:
    """DLE pads the vocabulary to a multiple of 8 (tensor cores) before building the
    model (run_squad.py, triton/model.py): 30522 tokens -> 30528 embedding rows."""
    return vocab_size + (-vocab_size) % 8


class BertEmbeddings(nn.Module):
    def __init__(self, h: dict):
        super().__init__()
        hidden = h["hidden_size"]
        self.word_embeddings = nn.Embedding(embedding_rows(h["vocab_size"]), hidden)
        self.position_embeddings = nn.Embedding(h["max_position_embeddings"], hidden)
        self.token_type_embeddings = nn.Embedding(h["type_vocab_size"], hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)
        # A buffer, not arange(device=...) in forward: a trace would fix that device. Not
        # persistent, so the state_dict keeps DLE's keys.
        self.register_buffer("position_ids", torch.arange(h["max_position_embeddings"]),
                             persistent=False)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor) -> Tensor:
        positions = self.position_ids[: input_ids.size(1)]
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions).unsqueeze(0)
             + self.token_type_embeddings(token_type_ids))
        return self.LayerNorm(x)


class BertSelfAttention(nn.Module):
    def __init__(self, h: dict):
        super().__init__()
        hidden, self.heads = h["hidden_size"], h["num_attention_heads"]
        if hidden % self.heads:
            raise ValueError(f"hidden_size {hidden} is not a multiple of num_attention_heads "
                             f"{self.heads}")
        self.head_size = hidden // self.heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def split_heads(self, x: Tensor) -> Tensor:  # [N, S, H] -> [N, heads, S, head_size]
        return x.view(x.size(0), x.size(1), self.heads, self.head_size).transpose(1, 2)

    def forward(self, x: Tensor, additive_mask: Tensor) -> Tensor:
        q, k, v = self.split_heads(self.query(x)), self.split_heads(self.key(x)), \
            self.split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_size)
        probs = F.softmax(scores + additive_mask, dim=-1)
        context = torch.matmul(probs, v).transpose(1, 2)
        return context.reshape(x.size(0), x.size(1), self.heads * self.head_size)


class BertSelfOutput(nn.Module):
    def __init__(self, h: dict):
        super().__init__()
        self.dense = nn.Linear(h["hidden_size"], h["hidden_size"])
        self.LayerNorm = nn.LayerNorm(h["hidden_size"], eps=LAYER_NORM_EPS)

    def forward(self, x: Tensor, residual: Tensor) -> Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class BertAttention(nn.Module):
    def __init__(self, h: dict):
        super().__init__()
        self.self = BertSelfAttention(h)  # DLE's (and Google's) name
        self.output = BertSelfOutput(h)

    def forward(self, x: Tensor, additive_mask: Tensor) -> Tensor:
        return self.output(self.self(x, additive_mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, h: dict):
        super().__init__()
        # DLE fuses bias and GELU in a LinearActivation named dense_act
        self.dense_act = nn.Linear(h["hidden_size"], h["intermediate_size"])
        self.gelu_approximate: str = h.get("gelu_approximate", "none")

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(self.dense_act(x), approximate=self.gelu_approximate)


class BertOutput(nn.Module):
    def __init__(self, h: dict):
        super().__init__()
        self.dense = nn.Linear(h["intermediate_size"], h["hidden_size"])
        self.LayerNorm = nn.LayerNorm(h["hidden_size"], eps=LAYER_NORM_EPS)

    def forward(self, x: Tensor, residual: Tensor) -> Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class BertLayer(nn.Module):
    def __init__(self, h: dict):
        super().__init__()
        self.attention = BertAttention(h)
        self.intermediate = BertIntermediate(h)
        self.output = BertOutput(h)

    def forward(self, x: Tensor, additive_mask: Tensor) -> Tensor:
        x = self.attention(x, additive_mask)
        return self.output(self.intermediate(x), x)


class BertEncoder(nn.Module):
    def __init__(self, h: dict):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(h) for _ in range(h["num_hidden_layers"])])

    def forward(self, x: Tensor, additive_mask: Tensor) -> Tensor:
        for layer in self.layer:
            x = layer(x, additive_mask)
        return x


class BertModel(nn.Module):
    def __init__(self, h: dict):
        super().__init__()
        self.embeddings = BertEmbeddings(h)
        self.encoder = BertEncoder(h)
        # BERT's additive mask, (1 - mask) * -10000, looked up by mask value (0 padding,
        # 1 token) rather than cast from it: the buffer follows .half(), a traced
        # .to(dtype) would not, and onnxconverter-common leaves an ONNX Cast to float at
        # FP32 when it converts the graph to FP16. Not persistent: DLE's keys stay.
        self.register_buffer("mask_values", torch.tensor([-10000.0, 0.0]), persistent=False)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor, attention_mask: Tensor) -> Tensor:
        x = self.embeddings(input_ids, token_type_ids)
        additive = self.mask_values[attention_mask.long()]  # [N, S]
        return self.encoder(x, additive.unsqueeze(1).unsqueeze(2))  # [N, 1, 1, S]


class BertForQuestionAnswering(nn.Module):
    """forward(input_ids, token_type_ids, attention_mask), int32 or int64 [N, S] ->
    (start_logits, end_logits) [N, S], the order of DLE's triton/ model (input__0..2,
    output__0..1)."""

    def __init__(self, hparams: dict):
        super().__init__()
        if hparams.get("gelu_approximate", "none") not in ("none", "tanh"):
            raise ValueError(f"gelu_approximate must be 'none' (erf) or 'tanh', not "
                             f"{hparams['gelu_approximate']!r}")
        self.bert = BertModel(hparams)
        self.qa_outputs = nn.Linear(hparams["hidden_size"], 2)
        self.initializer_range = float(hparams.get("initializer_range", 0.02))
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        # BERT's initialisation (DLE's init_bert_weights)
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=self.initializer_range)
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor,
                attention_mask: Tensor) -> tuple[Tensor, Tensor]:
        # Triton sends int32; embedding lookups need int64
        hidden = self.bert(input_ids.long(), token_type_ids.long(), attention_mask)
        start, end = self.qa_outputs(hidden).split(1, dim=-1)
        return start.squeeze(-1), end.squeeze(-1)
