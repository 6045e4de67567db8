"""The sparse part of an ensemble: lookups through the cache equal the full table, bad
fractions and ids refused, hit rates read, the export ranks rows by frequency, a batch
becomes one flattened request."""

import numpy as np
import pytest

from deploybench.ensemble import artifact as ensemble_artifact
from deploybench.ensemble import metrics as ensemble_metrics
from deploybench.ensemble import parts as ensemble_parts
from deploybench.ensemble import requests as ensemble_requests
from deploybench.runners.embeddings import (
    RANKING,
    STORAGE,
    HierarchicalEmbeddings,
    fused_keys,
)
from deploybench.source import model as source_model
from testkit.ensemble import DIM, SIZES, full_lookup, sparse_dir
from testkit.workflow import needs


@pytest.mark.parametrize("engine", ["numpy", "torch"])  # torch: the GPU's code, on the CPU
@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.1, 0.5, 1.0])
def test_lookups_through_the_cache_equal_the_full_table(tmp_path, fraction, engine):
    storage, offsets, ranking = sparse_dir(tmp_path / "sparse")
    embeddings = HierarchicalEmbeddings(tmp_path / "sparse", fraction, engine=engine,
                                        placement="cache")
    rng = np.random.default_rng(1)
    # any int64 id: negative, beyond the table, and the ranked (cached) rows themselves
    ids = rng.integers(-10**12, 10**12, size=(300, len(SIZES)))
    ids[:100] = rng.integers(0, 3, size=(100, len(SIZES)))
    expected = full_lookup(storage, offsets, SIZES, ids)
    np.testing.assert_array_equal(embeddings(ids), expected)
    np.testing.assert_array_equal(embeddings(ids.astype(np.int32) % 100),
                                  full_lookup(storage, offsets, SIZES, ids.astype(np.int32) % 100))

    # the cache holds exactly each table's first floor(fraction x rows) ranked rows
    cached = {int(row) for o, n in zip(offsets, SIZES) for row in ranking[o:o + int(fraction * n)]}
    assert len(embeddings.cache) == len(cached) == sum(int(fraction * n) for n in SIZES)
    rows = (np.mod(ids, SIZES) + offsets)
    assert embeddings.lookups.tolist() == [600] * len(SIZES)
    hits = np.isin(rows, list(cached)).sum(axis=0) + np.isin(
        np.mod(ids.astype(np.int32) % 100, SIZES) + offsets, list(cached)).sum(axis=0)
    assert embeddings.hits.tolist() == hits.tolist()
    described = embeddings.describe()
    assert described["cache_bytes"] == len(cached) * DIM * 4
    assert described["storage_bytes"] == storage.nbytes


def test_bad_cache_fractions_and_ids_are_refused(tmp_path):
    sparse_dir(tmp_path / "sparse")
    with pytest.raises(ValueError, match="cache fraction must be within .0, 1., got 1.5"):
        HierarchicalEmbeddings(tmp_path / "sparse", 1.5)
    embeddings = HierarchicalEmbeddings(tmp_path / "sparse", 0.1)
    with pytest.raises(ValueError, match=r"ids of shape \[2, 3\]; expected \[batch, 4\]"):
        embeddings(np.zeros((2, 3), np.int64))


def test_hit_rates_from_the_metrics_text():
    text = "\n".join([
        "# TYPE deploybench_embedding_lookups_total counter",
        'deploybench_embedding_lookups_total{model="m-sparse",table="0"} 100',
        'deploybench_embedding_lookups_total{model="m-sparse",table="1"} 100',
        'deploybench_embedding_cache_hits_total{model="m-sparse",table="1"} 30',
        'deploybench_embedding_cache_hits_total{model="m-sparse",table="0"} 10',
        'nv_inference_count{model="m",version="1"} 5',
    ])
    assert ensemble_metrics.cache_counters(text) == {
        "lookups": 200, "cache_hits": 40, "hit_rate": 0.2, "per_table_hit_rate": [0.1, 0.3]}
    assert ensemble_metrics.cache_counters('nv_inference_count{model="m",version="1"} 5') is None


def test_sparse_export_keeps_the_tables_and_ranks_rows_by_frequency(settings, tmp_path):
    needs("tensorflow")
    from deploybench.steps import source

    model = settings.split_export_settings("dlrm-tiny")
    weights, data = tmp_path / "weights.pt", tmp_path / "data"
    source.weights(model, weights)
    source.generate_data(model, data)
    ensemble_artifact.export_sparse(model, weights, data, tmp_path / "sparse")

    tables, _ = ensemble_parts.split_model(model, source_model.load(model, weights))
    storage = np.load(tmp_path / "sparse" / STORAGE)
    np.testing.assert_array_equal(storage, np.concatenate(tables))
    meta = ensemble_parts.read_metadata(tmp_path / "sparse")
    assert meta["table_sizes"] == [len(t) for t in tables] and meta["embedding_dim"] == 8
    assert meta["frequency_split"] == "train" and meta["frequency_samples"] == 64

    from deploybench.models.dlrm import data as dlrm_data

    _, _, ids, _ = dlrm_data.load(str(data), "train", None)
    ranking = np.load(tmp_path / "sparse" / RANKING)
    offset = 0
    for i, size in enumerate(meta["table_sizes"]):
        ranked = ranking[offset:offset + size] - offset
        assert sorted(ranked.tolist()) == list(range(size))  # a permutation of the table
        counts = np.bincount(np.mod(ids[:, i], size), minlength=size)[ranked]
        assert (np.diff(counts) <= 0).all()  # most frequent first
        offset += size


# ---- reference 003's flattened interface (ensemble.requests) -----------------------------

def test_a_batch_becomes_one_flattened_request(settings):
    model = settings.run("dlrm-tiny", "cpu", "hps-onnx", "fp32")["model"]
    sizes = [50] * 13 + [7] * 13
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rng = np.random.default_rng(0)
    numerical = rng.standard_normal((3, 13)).astype(np.float32)
    ids = rng.integers(-1000, 1000, size=(3, 26)).astype(np.int32)
    keys, count, dense = ensemble_requests.flatten(model, sizes, [numerical, ids])
    # sample by sample, each sample's ids table by table, as rows of the fused table
    assert keys.dtype == np.int64 and keys.shape == (3 * 26,)
    np.testing.assert_array_equal(keys.reshape(3, 26), np.mod(ids, sizes) + offsets)
    assert count.dtype == np.int32 and count.tolist() == [3 * 26]
    np.testing.assert_array_equal(dense, numerical)
    assert ensemble_requests.shapes(model, 3) == {
        "EMB_KEY": [78], "EMB_N_KEY": [1], "numerical_features": [3, 13]}
    assert [(t["name"], t["dtype"], t["dims"]) for t in ensemble_requests.inputs(model)] == [
        ("EMB_KEY", "INT64", [-1]), ("EMB_N_KEY", "INT32", [1]),
        ("numerical_features", "FP32", [-1, 13])]


@pytest.mark.parametrize("engine", ["numpy", "torch"])
def test_lookups_of_the_flattened_keys_equal_the_ids_lookups(tmp_path, engine):
    storage, offsets, _ = sparse_dir(tmp_path / "sparse")
    embeddings = HierarchicalEmbeddings(tmp_path / "sparse", 0.1, engine=engine,
                                        placement="cache")
    ids = np.random.default_rng(2).integers(-10**6, 10**6, size=(40, len(SIZES)))
    keys = fused_keys(ids, SIZES)
    np.testing.assert_array_equal(embeddings.lookup_keys(keys),
                                  full_lookup(storage, offsets, SIZES, ids))
    assert embeddings.lookups.tolist() == [40] * len(SIZES)  # per table, as from the ids
    with pytest.raises(ValueError, match="7 keys are not a whole number of samples of 4"):
        embeddings.lookup_keys(keys[:7])
    with pytest.raises(ValueError, match="keys outside the fused table's 1058 rows"):
        embeddings.lookup_keys(np.full(4, 1058))
