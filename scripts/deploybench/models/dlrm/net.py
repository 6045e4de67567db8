"""DLRM and DCNv2 networks in Keras 3, after DeepLearningExamples'
TensorFlow2/Recommendation/DLRM_and_DCNv2 (`nn/embedding.py`, `nn/dense_model.py`,
`nn/interaction.py`, `nn/dcn.py`).

The network is split as DLE's deployment splits it (Merlin HPS or TF sparse submodel +
TensorRT dense submodel in a Triton ensemble):

- `SparseEmbeddings`: categorical ids [B, T] -> the looked-up vectors, flattened
  [B, T * dim] (DLE's sparse model output, the ensemble's `LOOKUP_VECTORS`).
- `DenseDLRM` / `DenseDCNv2`: (numerical features [B, 13], lookup vectors [B, T * dim])
  -> click logit [B, 1] (DLE's `DenseModel`, Triton inputs `args_0`, `args_1`).
- `RecommenderModel`: both, then a sigmoid: the click probability [B, 1] FP32.

As in DLE, the bottom MLP's input is zero-padded to a multiple of 8 features and the top
MLP's input too (DLRM: 479 -> 480), so the kernels have DLE's shapes. Ids are reduced
modulo their table's size (floor mod, so negative ids are valid too): tables scaled down
from Criteo's cardinalities still take any id (INT32 as served, INT64 too), as DLE's
hashing does.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from ...plugins import Seeds
from .features import table_sizes

ARCHITECTURES = ("dlrm", "dcnv2")


def _pad_to(n: int, multiple: int = 8) -> int:
    return math.ceil(n / multiple) * multiple - n


def _mlp(dims: list[int], prefix: str, seeds: Seeds, last_linear: bool) -> list:
    """DLE's MLP layers: GlorotNormal kernels, N(0, 1/dim) biases, ReLU (the last one
    linear for the top MLP)."""
    layers = []
    for i, dim in enumerate(dims):
        linear = last_linear and i == len(dims) - 1
        layers.append(keras.layers.Dense(
            dim, activation=None if linear else "relu",
            kernel_initializer=keras.initializers.GlorotNormal(seed=seeds()),
            bias_initializer=keras.initializers.RandomNormal(stddev=math.sqrt(1.0 / dim),
                                                             seed=seeds()),
            dtype="float32", name=f"{prefix}_{i}"))
    return layers


class SparseEmbeddings(keras.layers.Layer):
    """The sparse part: one embedding table per categorical feature; ids [B, T] (any
    integer dtype) -> [B, T * dim] float32, table-major per sample (feature 0's vector
    first), as DLE's sparse submodel reshapes its lookups."""

    def __init__(self, table_sizes: list[int], embedding_dim: int, seed: int = 0, **kwargs):
        kwargs.setdefault("name", "sparse_embeddings")
        super().__init__(dtype="float32", **kwargs)
        self.table_sizes = [int(n) for n in table_sizes]
        self.embedding_dim = int(embedding_dim)
        self.seed = int(seed)
        seeds = Seeds(seed)
        # DLE's EmbeddingInitializer: U(-sqrt(1/rows), sqrt(1/rows)) per table
        self.tables = [
            self.add_weight(shape=(n, self.embedding_dim), name=f"embedding_table_{i}",
                            initializer=keras.initializers.RandomUniform(
                                -math.sqrt(1.0 / n), math.sqrt(1.0 / n), seed=seeds()),
                            dtype="float32")
            for i, n in enumerate(self.table_sizes)]

    def call(self, ids):
        # 32-bit ids (DLE's INT32) stay 32-bit, so the exported graphs have no INT64
        # arithmetic; wider ids are reduced as INT64. Either way: the same rows.
        wide = keras.backend.standardize_dtype(ids.dtype) in ("int64", "uint32", "uint64")
        ids = ops.cast(ids, "int64" if wide else "int32")
        lookups = [ops.take(table, ops.mod(ids[:, i], n), axis=0)
                   for i, (table, n) in enumerate(zip(self.tables, self.table_sizes))]
        return ops.concatenate(lookups, axis=1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], len(self.table_sizes) * self.embedding_dim)

    def get_config(self):
        return {**super().get_config(), "table_sizes": self.table_sizes,
                "embedding_dim": self.embedding_dim, "seed": self.seed}


class _DenseBase(keras.layers.Layer):
    """Shared: the bottom MLP over the zero-padded numerical features."""

    def __init__(self, num_numerical: int, num_tables: int, embedding_dim: int,
                 bottom_mlp_dims: list[int], top_mlp_dims: list[int], seed: int, **kwargs):
        super().__init__(dtype="float32", **kwargs)
        self.num_numerical = int(num_numerical)
        self.num_tables = int(num_tables)
        self.embedding_dim = int(embedding_dim)
        self.bottom_mlp_dims = [int(d) for d in bottom_mlp_dims]
        self.top_mlp_dims = [int(d) for d in top_mlp_dims]
        if self.top_mlp_dims[-1] != 1:
            raise ValueError(f"the top MLP must end in 1 unit (the click logit), got "
                             f"{self.top_mlp_dims}")
        self._seeds = Seeds(seed)
        self.bottom_padding = _pad_to(self.num_numerical)
        self.bottom_mlp = _mlp(self.bottom_mlp_dims, "bottom_mlp", self._seeds, False)

    def _bottom(self, numerical):
        x = ops.cast(ops.reshape(numerical, (-1, self.num_numerical)), "float32")
        x = ops.pad(x, [[0, 0], [0, self.bottom_padding]])
        for layer in self.bottom_mlp:
            x = layer(x)
        return x

    def _top(self, x):
        x = ops.pad(x, [[0, 0], [0, self.top_padding]])
        for layer in self.top_mlp:
            x = layer(x)
        return x

    def compute_output_shape(self, input_shape):
        return (input_shape[0][0], 1)


class DenseDLRM(_DenseBase):
    """DLRM's dense part: bottom MLP, dot interaction (the strictly lower triangle of
    the pairwise dot products of [bottom MLP output, embeddings], row-major, as DLE's
    DotInteractionGather), concatenated after the bottom MLP output, then the top MLP."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("name", "dlrm_dense")
        super().__init__(*args, **kwargs)
        if self.bottom_mlp_dims[-1] != self.embedding_dim:
            raise ValueError(f"DLRM: the bottom MLP must end in embedding_dim "
                             f"({self.embedding_dim}) units, got {self.bottom_mlp_dims}")
        n = self.num_tables + 1
        self.interaction_indices = [i * n + j for i in range(n) for j in range(i)]
        top_in = len(self.interaction_indices) + self.bottom_mlp_dims[-1]
        self.top_padding = _pad_to(top_in)
        self.top_mlp = _mlp(self.top_mlp_dims, "top_mlp", self._seeds, True)

    def call(self, numerical, embeddings):
        bottom = self._bottom(numerical)
        n = self.num_tables + 1
        features = ops.concatenate(
            [ops.expand_dims(bottom, 1),
             ops.reshape(embeddings, (-1, self.num_tables, self.embedding_dim))], axis=1)
        dots = ops.matmul(features, ops.transpose(features, (0, 2, 1)))
        dots = ops.take(ops.reshape(dots, (-1, n * n)), self.interaction_indices, axis=1)
        return self._top(ops.concatenate([bottom, dots], axis=1))


class DenseDCNv2(_DenseBase):
    """DCNv2's dense part (DLE's DenseModel with interaction='cross'): bottom MLP,
    concatenated before the embeddings, a stack of low-rank cross layers
    x_{l+1} = x0 * (V (U x_l) + b) + x_l (U: dim -> projection_dim, no bias; truncated
    normal kernels, zero bias), then the top MLP on the cross network's output."""

    def __init__(self, *args, num_cross_layers: int = 3, projection_dim: int | None = 512,
                 **kwargs):
        kwargs.setdefault("name", "dcnv2_dense")
        super().__init__(*args, **kwargs)
        self.num_cross_layers = int(num_cross_layers)
        self.projection_dim = None if projection_dim is None else int(projection_dim)
        width = self.bottom_mlp_dims[-1] + self.num_tables * self.embedding_dim
        self.cross_u, self.cross_v = [], []
        for i in range(self.num_cross_layers):
            if self.projection_dim is not None:
                self.cross_u.append(keras.layers.Dense(
                    self.projection_dim, use_bias=False, dtype="float32",
                    kernel_initializer=keras.initializers.TruncatedNormal(seed=self._seeds()),
                    name=f"cross_{i}_u"))
            self.cross_v.append(keras.layers.Dense(
                width, dtype="float32", bias_initializer="zeros",
                kernel_initializer=keras.initializers.TruncatedNormal(seed=self._seeds()),
                name=f"cross_{i}_v"))
        self.top_padding = _pad_to(width)
        self.top_mlp = _mlp(self.top_mlp_dims, "top_mlp", self._seeds, True)

    def call(self, numerical, embeddings):
        bottom = self._bottom(numerical)
        x0 = ops.concatenate(
            [bottom, ops.reshape(embeddings, (-1, self.num_tables * self.embedding_dim))],
            axis=1)
        x = x0
        for i, v in enumerate(self.cross_v):
            projected = self.cross_u[i](x) if self.cross_u else x
            x = x0 * v(projected) + x
        return self._top(x)


class RecommenderModel(keras.Model):
    """The whole model as Triton serves it: called with [numerical_features [B, 13]
    float, categorical_features [B, 26] integer], returns the click probability [B, 1]
    float32 (sigmoid of the dense part's logit)."""

    def __init__(self, sparse: SparseEmbeddings, dense: _DenseBase, **kwargs):
        super().__init__(**kwargs)
        self.sparse = sparse
        self.dense_part = dense

    def call(self, inputs, training=None):
        numerical, categorical = inputs
        logits = self.dense_part(numerical, self.sparse(categorical))
        return ops.cast(ops.sigmoid(logits), "float32")

    def logits(self, numerical, categorical):
        return self.dense_part(numerical, self.sparse(categorical))


class DenseModel(keras.Model):
    """The dense part alone, as the ensemble's dense model serves it: called with
    [numerical_features [B, 13], lookup vectors [B, T * dim]], returns the click
    probability [B, 1] float32 (the same layers, so the same weights, as the whole model)."""

    def __init__(self, dense: _DenseBase, **kwargs):
        kwargs.setdefault("name", f"{dense.name}_model")
        super().__init__(**kwargs)
        self.dense_part = dense

    def call(self, inputs, training=None):
        numerical, lookups = inputs
        return ops.cast(ops.sigmoid(self.dense_part(numerical, lookups)), "float32")


def build(hparams: dict, seed: int) -> RecommenderModel:
    """The (unbuilt) model of `hparams["architecture"]`, seeded."""
    arch = hparams.get("architecture", "dlrm")
    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown architecture '{arch}'; valid: {', '.join(ARCHITECTURES)}")
    sizes = table_sizes(hparams)
    dim = int(hparams["embedding_dim"])
    common = dict(num_numerical=int(hparams["num_numerical_features"]),
                  num_tables=len(sizes), embedding_dim=dim,
                  bottom_mlp_dims=hparams["bottom_mlp_dims"],
                  top_mlp_dims=hparams["top_mlp_dims"], seed=seed + 1)
    if arch == "dlrm":
        dense = DenseDLRM(**common)
    else:
        dense = DenseDCNv2(**common, num_cross_layers=hparams.get("num_cross_layers", 3),
                           projection_dim=hparams.get("cross_layer_projection_dim", 512))
    return RecommenderModel(SparseEmbeddings(sizes, dim, seed=seed), dense,
                            name=f"{arch}_model")
