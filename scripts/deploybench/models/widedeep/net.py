"""The Wide & Deep network in Keras 3, after DeepLearningExamples'
TensorFlow2/Recommendation/WideAndDeep (`trainer/model/widedeep.py` and `layers.py`, the
NVTabular Outbrain version the reference deploys).

One Triton input per feature, in the order of `hparams`: the categorical features' ids
first (any integer dtype; [B, 1] for a one-hot feature, [B, hotness] for a multi-hot
one), then the numerical features (float, [B, 1]).

- `WideLinear`: the wide part, a linear model over the categorical features (one weight
  per id of each feature: an embedding of dimension 1; a multi-hot feature sums the
  weights of its ids, as DLE's LinearFeatures does), summed, plus a bias -> [B, 1].
- `DeepEmbeddings`: the deep part's input, the concatenation of the categorical
  features' embeddings (DLE's per-feature dimensions; a multi-hot feature's ids combined
  by `combiner`, DLE's --combiner) and the numerical features.
- `WideDeepModel`: sigmoid(wide logit + deep logit), the deep logit being the last
  (linear, 1 unit) layer of a ReLU MLP (DLE's deep_hidden_units, 1024 x 5) over the deep
  input: the click probability [B, 1] float32 (the reference's `wide_deep_model` output).

A one-hot id is reduced modulo its table's size (floor mod, negative ids too), so tables
scaled down from DLE's hash bucket sizes still take any id. In a multi-hot list a
negative id is padding (DLE pads short lists with -1) and is left out; the others are
reduced modulo the table size.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from ...plugins import Seeds
from .features import categorical, hotness, numerical, table_sizes

COMBINERS = ("sum", "mean")  # DLE's --combiner choices for multi-hot features


def _lookup(table, x, rows: int, hotness: int, combiner: str = "sum"):
    """The rows of `table` that ids `x` select, [B, dim]: one row per sample for a
    one-hot feature; for a multi-hot one the rows of its non-negative ids, summed or
    averaged (a list of padding only gives zeros, as DLE's divide_no_nan)."""
    ids = ops.cast(x, "int64")
    if hotness == 1:
        return ops.take(table, ops.mod(ops.reshape(ids, (-1,)), rows), axis=0)
    ids = ops.reshape(ids, (-1, hotness))
    valid = ops.cast(ids >= 0, "float32")
    rows_of_ids = ops.take(table, ops.mod(ids, rows), axis=0)  # [B, hotness, dim]
    total = ops.sum(rows_of_ids * ops.expand_dims(valid, -1), axis=1)
    if combiner == "mean":
        return total / ops.maximum(ops.sum(valid, axis=1, keepdims=True), 1.0)
    return total


class WideLinear(keras.layers.Layer):
    """The wide part: sum over features of w_f[id_f] (a multi-hot feature: summed over
    its ids), plus a bias -> [B, 1].

    DLE's linear model starts from zeros; here the weights are seeded N(0, 0.05) so that
    an untrained model's wide part contributes (tests and conversion checks see it)."""

    def __init__(self, table_sizes: list[int], hotness: list[int], seed: int = 0, **kwargs):
        kwargs.setdefault("name", "wide_linear")
        super().__init__(dtype="float32", **kwargs)
        self.table_sizes = [int(n) for n in table_sizes]
        self.hotness = [int(h) for h in hotness]
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
        for x, table, n, h in zip(ids, self.tables, self.table_sizes, self.hotness):
            total = total + _lookup(table, x, n, h)
        return total

    def compute_output_shape(self, input_shape):
        return (input_shape[0][0], 1)

    def get_config(self):
        return {**super().get_config(), "table_sizes": self.table_sizes,
                "hotness": self.hotness, "seed": self.seed}


class DeepEmbeddings(keras.layers.Layer):
    """The deep part's input: [emb_0[id_0], ..., emb_k[id_k], numerical...] [B, D] (a
    multi-hot feature's rows combined by `combiner`),
    D = sum of the embedding dimensions + the number of numerical features. Tables are
    initialised as TF's embedding_column does: truncated normal, stddev 1/sqrt(dim)."""

    def __init__(self, table_sizes: list[int], embedding_dims: list[int], hotness: list[int],
                 combiner: str = "sum", seed: int = 0, **kwargs):
        kwargs.setdefault("name", "deep_embeddings")
        super().__init__(dtype="float32", **kwargs)
        if combiner not in COMBINERS:
            raise ValueError(f"combiner '{combiner}' is not one of {', '.join(COMBINERS)}")
        self.table_sizes = [int(n) for n in table_sizes]
        self.embedding_dims = [int(d) for d in embedding_dims]
        self.hotness = [int(h) for h in hotness]
        self.combiner = combiner
        self.seed = int(seed)
        seeds = Seeds(seed)
        self.tables = [
            self.add_weight(shape=(n, d), name=f"embedding_table_{i}", dtype="float32",
                            initializer=keras.initializers.TruncatedNormal(
                                0.0, 1.0 / math.sqrt(d), seed=seeds()))
            for i, (n, d) in enumerate(zip(self.table_sizes, self.embedding_dims))]

    def call(self, ids: list, numerical: list):
        parts = [_lookup(table, x, n, h, self.combiner)
                 for x, table, n, h in zip(ids, self.tables, self.table_sizes, self.hotness)]
        parts += [ops.reshape(ops.cast(x, "float32"), (-1, 1)) for x in numerical]
        return ops.concatenate(parts, axis=1)

    def get_config(self):
        return {**super().get_config(), "table_sizes": self.table_sizes,
                "embedding_dims": self.embedding_dims, "hotness": self.hotness,
                "combiner": self.combiner, "seed": self.seed}


class WideDeepModel(keras.Model):
    """The whole model as Triton serves it: called with the list of per-feature inputs
    (categorical ids [B, hotness], then numerical [B, 1]), returns the click probability
    [B, 1] float32."""

    def __init__(self, table_sizes: list[int], embedding_dims: list[int], hotness: list[int],
                 num_numerical: int, hidden_units: list[int], combiner: str = "sum",
                 seed: int = 0, **kwargs):
        kwargs.setdefault("name", "wide_deep_model")
        super().__init__(**kwargs)
        self.num_categorical = len(table_sizes)
        self.num_numerical = int(num_numerical)
        seeds = Seeds(seed + 2)
        self.wide = WideLinear(table_sizes, hotness, seed=seed)
        self.deep_input = DeepEmbeddings(table_sizes, embedding_dims, hotness, combiner,
                                         seed=seed + 1)
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


def build(hparams: dict, seed: int) -> WideDeepModel:
    """The (unbuilt) model of `hparams`, seeded."""
    return WideDeepModel(table_sizes(hparams),
                         [int(f["embedding_dim"]) for f in categorical(hparams)],
                         hotness(hparams), len(numerical(hparams)),
                         [int(u) for u in hparams["deep_hidden_units"]],
                         combiner=hparams["combiner"], seed=seed)
