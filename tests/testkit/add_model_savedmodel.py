"""A user's TensorFlow SavedModel for `deploybench add-model`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from testkit.add_model import deploybench


def weights() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.standard_normal((10, 4)).astype(np.float32),
            rng.standard_normal((4, 2)).astype(np.float32))


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """mine.savedmodel (its serving signature) and nosig.savedmodel (none)."""
    import tensorflow as tf

    emb, w = weights()

    class Mine(tf.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.w = tf.Variable(emb), tf.Variable(w)

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x"),
                                      tf.TensorSpec([None, 3], tf.int64, name="ids")])
        def serve(self, x, ids):
            y = tf.matmul(x + tf.reduce_sum(tf.gather(self.emb, ids), axis=1), self.w)
            return {"y": y, "label": tf.argmax(y, axis=1, output_type=tf.int64)[:, None]}

    folder, model = tmp_path_factory.mktemp("saved"), Mine()
    tf.saved_model.save(model, str(folder / "mine.savedmodel"),
                        signatures={"serving_default": model.serve})
    tf.saved_model.save(model, str(folder / "nosig.savedmodel"), signatures={})
    return folder


def add(saved: Path, name: str, folder: str = "mine.savedmodel", *extra):
    models = saved / "models"
    result = deploybench("add-model", name, saved / folder, "--models-dir", models,
                         "--range", "ids=0:10", *extra)
    return result, models / f"{name}.yaml"
