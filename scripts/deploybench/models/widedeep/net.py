"""The Wide & Deep network in Keras 3, after DeepLearningExamples'
TensorFlow2/Recommendation/WideAndDeep (`trainer/model/widedeep.py`, the NVTabular
Outbrain version the seed deploys).

One Triton input per feature, each [B, 1]: the categorical features' ids (any integer
dtype) first, then the numerical features (float), in the order of `hparams`.

- `WideLinear`: the wide part, a linear model over the categorical features (one weight
  per id of each feature: an embedding of dimension 1, summed, plus a bias) -> [B, 1].
- `DeepEmbeddings`: the deep part's input, the concatenation of the categorical
  features' embeddings (DLE's per-feature dimensions) and the numerical features.
- `WideDeepModel`: sigmoid(wide logit + deep logit), the deep logit being the last
  (linear, 1 unit) layer of a ReLU MLP (DLE's deep_hidden_units, 1024 x 5) over the deep
  input: the click probability [B, 1] float32 (the seed's `wide_deep_model` output).

Ids are reduced modulo their table's size (floor mod, negative ids too), so tables scaled
down from DLE's hash bucket sizes still take any INT64 id.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from ...plugins import Seeds


def _ids(x, rows: int):
    return ops.mod(ops.reshape(ops.cast(x, "int64"), (-1,)), rows)


class WideLinear(keras.layers.Layer):
    """The wide part: sum over features of w_f[id_f], plus a bias -> [B, 1].

    DLE's linear model starts from zeros; here the weights are seeded N(0, 0.05) so that
    an untrained model's wide part contributes (tests and conversion checks see it)."""

    def __init__(self, table_sizes: list[int], seed: int = 0, **kwargs):
        kwargs.setdefault("name", "wide_linear")
        super().__init__(dtype="float32", **kwargs)
        self.table_sizes = [int(n) for n in table_sizes]
        self.seed = int(seed)
        seeds = Seeds(seed)
        self.tables = [
            self.add_weight(shape=(n, 1), name=f"wide_weights_{i}", dtype="float32",
                            initializer=keras.initializers.RandomNormal(0.0, 0.05,
                                                                        seed=seeds()))
            for i, n in enumerate(self.table_sizes)]
        self.bias = self.add_weight(shape=(1,), name="wide_bias", initializer="zeros",
                                    dtype="float32")

    def call(self, ids: list):
        total = self.bias
        for x, table, n in zip(ids, self.tables, self.table_sizes):
            total = total + ops.take(table, _ids(x, n), axis=0)
        return total

    def compute_output_shape(self, input_shape):
        return (input_shape[0][0], 1)

    def get_config(self):
        return {**super().get_config(), "table_sizes": self.table_sizes, "seed": self.seed}


class DeepEmbeddings(keras.layers.Layer):
    """The deep part's input: [emb_0[id_0], ..., emb_k[id_k], numerical...] [B, D],
    D = sum of the embedding dimensions + the number of numerical features. Tables are
    initialised as TF's embedding_column does: truncated normal, stddev 1/sqrt(dim)."""

    def __init__(self, table_sizes: list[int], embedding_dims: list[int], seed: int = 0,
                 **kwargs):
        kwargs.setdefault("name", "deep_embeddings")
        super().__init__(dtype="float32", **kwargs)
        self.table_sizes = [int(n) for n in table_sizes]
        self.embedding_dims = [int(d) for d in embedding_dims]
        self.seed = int(seed)
        seeds = Seeds(seed)
        self.tables = [
            self.add_weight(shape=(n, d), name=f"embedding_table_{i}", dtype="float32",
                            initializer=keras.initializers.TruncatedNormal(
                                0.0, 1.0 / math.sqrt(d), seed=seeds()))
            for i, (n, d) in enumerate(zip(self.table_sizes, self.embedding_dims))]

    def call(self, ids: list, numerical: list):
        parts = [ops.take(table, _ids(x, n), axis=0)
                 for x, table, n in zip(ids, self.tables, self.table_sizes)]
        parts += [ops.reshape(ops.cast(x, "float32"), (-1, 1)) for x in numerical]
        return ops.concatenate(parts, axis=1)

    def get_config(self):
        return {**super().get_config(), "table_sizes": self.table_sizes,
                "embedding_dims": self.embedding_dims, "seed": self.seed}


class WideDeepModel(keras.Model):
    """The whole model as Triton serves it: called with the list of per-feature inputs
    (categorical ids [B, 1], then numerical [B, 1]), returns the click probability
    [B, 1] float32."""

    def __init__(self, table_sizes: list[int], embedding_dims: list[int], num_numerical: int,
                 hidden_units: list[int], seed: int = 0, **kwargs):
        kwargs.setdefault("name", "wide_deep_model")
        super().__init__(**kwargs)
        self.num_categorical = len(table_sizes)
        self.num_numerical = int(num_numerical)
        seeds = Seeds(seed + 2)
        self.wide = WideLinear(table_sizes, seed=seed)
        self.deep_input = DeepEmbeddings(table_sizes, embedding_dims, seed=seed + 1)
        # DLE's deep tower: Dense + ReLU layers (Glorot uniform kernels, zero biases),
        # then a linear 1-unit layer: the deep logit
        self.deep_mlp = [
            keras.layers.Dense(int(units), activation="relu", dtype="float32",
                               kernel_initializer=keras.initializers.GlorotUniform(
                                   seed=seeds()), name=f"deep_{i}")
            for i, units in enumerate(hidden_units)]
        self.deep_logit_layer = keras.layers.Dense(
            1, dtype="float32", name="deep_output",
            kernel_initializer=keras.initializers.GlorotUniform(seed=seeds()))

    def _split(self, inputs):
        inputs = list(inputs)
        expected = self.num_categorical + self.num_numerical
        if len(inputs) != expected:
            raise ValueError(f"Wide & Deep takes {expected} inputs ({self.num_categorical} "
                             f"categorical, {self.num_numerical} numerical), got "
                             f"{len(inputs)}")
        return inputs[:self.num_categorical], inputs[self.num_categorical:]

    def wide_logit(self, inputs):
        ids, _ = self._split(inputs)
        return self.wide(ids)

    def deep_logit(self, inputs):
        ids, numerical = self._split(inputs)
        x = self.deep_input(ids, numerical)
        for layer in self.deep_mlp:
            x = layer(x)
        return self.deep_logit_layer(x)

    def call(self, inputs, training=None):
        logit = self.wide_logit(inputs) + self.deep_logit(inputs)
        return ops.cast(ops.sigmoid(logit), "float32")


def categorical(hparams: dict) -> list[dict]:
    """The categorical features ({name, cardinality, embedding_dim}) in input order."""
    return [dict(f) for f in hparams["categorical_features"]]


def numerical(hparams: dict) -> list[str]:
    return [str(n) for n in hparams["numerical_features"]]


def table_sizes(hparams: dict) -> list[int]:
    """Rows per table: each feature's cardinality capped at `max_table_size` (null: the
    full cardinality)."""
    cap = hparams.get("max_table_size")
    sizes = [int(f["cardinality"]) if cap is None else min(int(f["cardinality"]), int(cap))
             for f in categorical(hparams)]
    if any(n < 1 for n in sizes):
        raise ValueError(f"embedding table sizes must be positive, got {sizes}")
    return sizes


def build(hparams: dict, seed: int) -> WideDeepModel:
    """The (unbuilt) model of `hparams`, seeded."""
    return WideDeepModel(table_sizes(hparams),
                         [int(f["embedding_dim"]) for f in categorical(hparams)],
                         len(numerical(hparams)),
                         [int(u) for u in hparams["deep_hidden_units"]], seed=seed)
