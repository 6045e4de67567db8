"""Wide & Deep's data: the generated layout, the loader's round trip, the reference era's
folder, learnable clicks, and MAP@12."""

import math

import numpy as np
import pandas as pd
import pytest
import yaml

from deploybench.models import widedeep  # noqa: E402
from deploybench.models.widedeep import data as widedeep_data  # noqa: E402
from testkit.widedeep import (
    CATS,
    HOT,
    MULTI,
    NUMS,
    SIZES,
    TINY,
    C,
    data,  # noqa: F401 (a fixture)
)


def test_generated_data_has_the_documented_layout(data, tmp_path):
    spec = yaml.safe_load((data / "feature_spec.yaml").read_text())
    assert set(spec) == {"feature_spec", "source_spec", "channel_spec", "metadata"}
    assert spec["channel_spec"]["categorical"] == [f["name"] for f in CATS]
    assert spec["channel_spec"]["numerical"] == NUMS
    assert spec["channel_spec"]["label"] == ["clicked"]
    assert spec["channel_spec"]["display_id"] == ["display_id"]
    assert spec["feature_spec"]["ad_id"] == {"dtype": "int8", "cardinality": 50}
    assert spec["feature_spec"]["platform"] == {"dtype": "int8", "cardinality": 4}
    assert spec["feature_spec"]["topic_id_list"] == {"dtype": "int8", "cardinality": 50,
                                                     "max_hotness": 3}
    columns = [f["name"] for f in CATS] + NUMS + ["display_id", "clicked"]
    for split, n in (("train", 40), ("valid", 100)):
        assert sorted(p.name for p in (data / split).iterdir()) == ["part_0.parquet"]
        table = pd.read_parquet(data / split / "part_0.parquet")
        assert list(table.columns) == columns and len(table) == n
        assert table["ad_id"].dtype == np.int8 and table["clicked"].dtype == np.int8
        # multi-hot: lists of 0 to 3 ids within the table, as NVTabular writes them
        for i in MULTI:
            lists = table[CATS[i]["name"]]
            assert {len(ids) for ids in lists} == {0, 1, 2, 3}
            ids = np.concatenate(list(lists))
            assert ids.dtype == np.int8 and 0 <= ids.min() and ids.max() < SIZES[i]
    assert widedeep_data.categorical_dtype(127) == np.int16
    widedeep.generate_dataset(TINY, str(tmp_path / "a"), seed=3, n_train=40, n_valid=100)
    widedeep.generate_dataset(TINY, str(tmp_path / "b"), seed=4, n_train=40, n_valid=100)

    def ctr(root):
        return pd.read_parquet(root / "valid/part_0.parquet")["ad_id_ctr"].to_numpy()

    same = ctr(tmp_path / "a")
    np.testing.assert_array_equal(same, ctr(data))
    assert not np.array_equal(ctr(tmp_path / "b"), same)


def test_load_split_round_trips_what_was_generated(data):
    rng = np.random.default_rng(3)
    widedeep_data.synthesize(rng, 40, SIZES, HOT, 13)  # train comes first
    ids, num, display, clicked = widedeep_data.synthesize(rng, 100, SIZES, HOT, 13)
    inputs, targets = widedeep.load_split(TINY, str(data), "valid", None)
    assert [a.dtype for a in inputs] == [np.int32] * C + [np.float32] * 13
    assert [a.shape for a in inputs] == [(100, h) for h in HOT] + [(100, 1)] * 13
    for got, want in zip(inputs[:C], ids):  # short lists padded with -1, as DLE feeds them
        np.testing.assert_array_equal(got, want)
    assert all((inputs[i] == -1).any() and (inputs[i][:, 0] >= 0).any() for i in MULTI)
    np.testing.assert_array_equal(np.concatenate(inputs[C:], axis=1), num)
    label, disp = targets
    assert label.shape == disp.shape == (100, 1)
    assert label.dtype == np.float32 and disp.dtype == np.int64
    np.testing.assert_array_equal(label[:, 0], clicked)
    # validation display ids follow the training ones; one click per display of 2..6 ads
    train_disp = pd.read_parquet(data / "train/part_0.parquet")["display_id"].to_numpy()
    assert disp.min() == train_disp.max() + 1
    _, counts = np.unique(disp, return_counts=True)
    assert counts[:-1].min() >= 2 and counts.max() <= 6
    assert all(label[disp[:, 0] == d].sum() == 1 for d in np.unique(disp))
    first, first_t = widedeep.load_split(TINY, str(data), "valid", 10)
    np.testing.assert_array_equal(first[0], inputs[0][:10])
    np.testing.assert_array_equal(first_t[1], disp[:10])
    with pytest.raises(ValueError, match="no split 'test'"):
        widedeep.load_split(TINY, str(data), "test", None)
    with pytest.raises(FileNotFoundError, match="neither a feature_spec.yaml"):
        widedeep.load_split(TINY, str(data / "valid"), "valid", None)


def test_reference_era_folder_without_a_feature_spec(data, tmp_path):
    """The reference reads ${DATASETS_DIR}/outbrain/valid/*.parquet, NVTabular's output with no
    feature spec: every file of the split, in name order; longer lists are cut to 3."""
    table = pd.read_parquet(data / "valid/part_0.parquet")
    topics = list(table["topic_id_list"])
    table["topic_id_list"] = [np.array([5, 6, 7, 8], np.int8)] + topics[1:]
    (tmp_path / "valid").mkdir()
    table.iloc[:60].to_parquet(tmp_path / "valid/part_0.parquet", index=False)
    table.iloc[60:].to_parquet(tmp_path / "valid/part_1.parquet", index=False)
    inputs, targets = widedeep.load_split(TINY, str(tmp_path), "valid", None)
    expected, _ = widedeep.load_split(TINY, str(data), "valid", None)
    i = MULTI[0]
    np.testing.assert_array_equal(inputs[i][0], [5, 6, 7])
    inputs[i][0], expected[i][0] = 0, 0
    for got, want in zip(inputs, expected):
        np.testing.assert_array_equal(got, want)
    assert widedeep_data.padded(np.array([None, [3]], object), 3).tolist() == [
        [-1, -1, -1], [3, -1, -1]]


def test_generated_clicks_are_learnable():
    """The click follows the features: ranking by a logistic fit on the training half
    beats a random ranking's MAP@12 by a clear margin."""
    rng = np.random.default_rng(0)
    ids, num, display, clicked = widedeep_data.synthesize(rng, 20000, SIZES, HOT, 13)
    x = np.c_[num, np.ones(len(num))]
    half = len(x) // 2
    w = np.zeros(x.shape[1])
    for _ in range(300):  # gradient descent on the log loss
        p = 1 / (1 + np.exp(-x[:half] @ w))
        w -= 0.5 * x[:half].T @ (p - clicked[:half]) / half
    fitted = widedeep.map_at_k(display[half:], clicked[half:], x[half:] @ w)
    chance = widedeep.map_at_k(display[half:], clicked[half:], rng.random(len(x) - half))
    assert fitted > chance + 0.05


def test_map_at_12_on_hand_made_examples():
    display = np.array([5, 5, 5, 9, 9, 7, 7, 7, 7])
    clicked = np.array([0, 1, 0, 1, 0, 0, 0, 0, 1])
    perfect = clicked * 0.5 + 0.1
    assert widedeep.map_at_k(display, clicked, perfect) == 1.0
    # display 5: clicked ad ranked 2nd (1/2); 9: 1st (1); 7: 4th (1/4)
    scores = np.array([0.9, 0.5, 0.1, 0.8, 0.2, 0.9, 0.8, 0.7, 0.6])
    assert widedeep.map_at_k(display, clicked, scores) == pytest.approx((0.5 + 1 + 0.25) / 3)
    # rank beyond 12: 0; ties: the earlier ad ranks higher; displays without clicks skipped
    d = np.r_[np.zeros(13, int), [1, 1], [2, 2]]
    c = np.r_[np.zeros(12), [1], [0, 1], [0, 0]]
    s = np.r_[np.arange(13, 0, -1), [0.5, 0.5], [0.3, 0.1]]
    assert widedeep.map_at_k(d, c, s) == pytest.approx((0 + 0.5) / 2)
    # shuffled samples: grouped by display id all the same
    order = np.random.default_rng(0).permutation(len(display))
    assert widedeep.map_at_k(display[order], clicked[order], scores[order]) == pytest.approx(
        (0.5 + 1 + 0.25) / 3)
    metrics = widedeep.evaluate(TINY, [scores.reshape(-1, 1).astype(np.float32)],
                                [clicked.reshape(-1, 1).astype(np.float32),
                                 display.reshape(-1, 1)])
    assert metrics == {"map_at_12": pytest.approx((0.5 + 1 + 0.25) / 3)}
    assert math.isnan(widedeep.map_at_k(np.array([1, 1]), np.array([0, 0]), np.array([1, 2])))
