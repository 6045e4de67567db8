"""The tiny TFT: its hparams and generated data."""

import pytest

from deploybench.models import tft

# The TFT at a tiny size: electricity's layout, short series, narrow hidden size.
TINY = {
    "hidden_size": 16, "n_head": 2, "dropout": 0.1, "attn_dropout": 0.0,
    "example_length": 24, "encoder_length": 16, "quantiles": [0.1, 0.5, 0.9],
    "static_categorical_inp_lens": [7], "temporal_known_categorical_inp_lens": [],
    "temporal_observed_categorical_inp_lens": [], "static_continuous_inp_size": 0,
    "temporal_known_continuous_inp_size": 3, "temporal_observed_continuous_inp_size": 0,
    "temporal_target_size": 1, "dataset_stride": 1,
}
N_IDS, STEPS = 7, 40


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("tft_data")
    tft.generate_dataset(TINY, str(out), seed=3, n_ids=N_IDS, n_timesteps=STEPS)
    return out
