"""Served against native in each shared-memory mode: system shared memory beside the host
arrays' native figure, CUDA shared memory beside the device-resident one, inputs in the
requests (none) beside the host arrays'; each ratio worked out by hand."""


import pandas as pd
import pytest

from deploybench.records import facts, formats
from deploybench.records.tables import COMPONENT_SUM, DEVICE_THROUGHPUT, SHARED_MEMORY, THROUGHPUT
from deploybench.reporting.served_native import (
    CONTENDED,
    OTHER_STORE,
    UNMATCHED,
    _cached,
    at_max_batch,
    left_out,
    served_vs_native,
    served_vs_native_table,
)

PROV = {"device": "GPU-1", "server": {"served_by": "deploybench"}}


def write(folder, served_rows, native_rows):
    folder.mkdir()
    pd.DataFrame(served_rows).to_csv(folder / "offline.csv", index=False)
    pd.DataFrame(native_rows).to_csv(folder / "native.csv", index=False)
    levels = [{"Batch": r["Batch"], "Concurrency": 1, SHARED_MEMORY: r[SHARED_MEMORY],
               "contended": False} for r in served_rows]
    (folder / "offline.json").write_text(formats.text({"provenance": PROV, "host_load": levels}))
    (folder / "native.json").write_text(formats.text({"provenance": PROV,
                                                    "host_load": {"contended": False}}))
    return folder / "offline.csv", folder / "native.csv"


def test_each_shared_memory_mode_is_divided_by_its_own_native_figure(tmp_path):
    """Native at batch 8: 1,000/s host arrays, 1,600/s device-resident. Served 800/s in
    system shared memory (0.8 of the host figure), 1,200/s in CUDA's (0.75 of the device
    figure, not 1.2 of the host one), 500/s in the requests (0.5 of the host figure)."""
    served = [{"Batch": 8, "Concurrency": 1, THROUGHPUT: t, SHARED_MEMORY: mode,
               COMPONENT_SUM: 1.0}
              for t, mode in ((800.0, "system"), (1200.0, "cuda"), (500.0, "none"))]
    native = [{"Batch": 8, THROUGHPUT: 1000.0, DEVICE_THROUGHPUT: 1600.0}]
    ratio = served_vs_native(*write(tmp_path / "a", served, native)).set_index(SHARED_MEMORY)
    assert ratio["served/native"].to_dict() == {"system": 0.8, "cuda": 0.75, "none": 0.5}
    assert ratio[f"{THROUGHPUT} native"].to_dict() == {"system": 1000.0, "cuda": 1600.0,
                                                       "none": 1000.0}
    assert ratio["native column"].to_dict() == {"system": THROUGHPUT, "cuda": DEVICE_THROUGHPUT,
                                                "none": THROUGHPUT}
    # the headline's row: the largest batch in the references' mode (system), not CUDA's
    assert at_max_batch(ratio.reset_index())[SHARED_MEMORY] == "system"


def test_a_batch_native_did_not_measure_has_no_row_and_ratios_round_to_three(tmp_path):
    """Batch 1: 333/s served over 999/s native = 0.3333 -> 0.333; batch 4 has no native
    figure: no row (never a ratio over a missing number)."""
    served = [{"Batch": b, "Concurrency": 1, THROUGHPUT: t, SHARED_MEMORY: "system",
               COMPONENT_SUM: 1.0}
              for b, t in ((1, 333.0), (4, 900.0))]
    native = [{"Batch": 1, THROUGHPUT: 999.0, DEVICE_THROUGHPUT: None}]
    offline, native_csv = write(tmp_path / "b", served, native)
    ratio = served_vs_native(offline, native_csv)
    assert ratio["Batch"].tolist() == [1] and ratio["served/native"].tolist() == [0.333]
    native_csv.with_suffix(".json").unlink()  # a native table without its JSON: read as {}
    assert served_vs_native(offline, native_csv)["served/native"].tolist() == [0.333]


def test_why_a_row_is_left_out_names_the_side_that_ran_beside_load():
    def row(contended):
        return pd.Series({CONTENDED: contended})

    assert left_out(row("served")) == "left out: served ran beside other load, native did not"
    assert left_out(row("native")) == "left out: native ran beside other load, served did not"
    assert left_out(row("both")) == "" and left_out(row("")) == ""  # both contended: kept
    assert left_out(row(UNMATCHED)).startswith(f"left out: {UNMATCHED} (")
    assert left_out(row(OTHER_STORE)).startswith(f"left out: {OTHER_STORE}, the served")
    # an ensemble's lookups through a cache: the native store not whole, or a served miss
    whole, missed = {"sparse_store": {"whole_on_device": True}}, {"embedding_cache": {
        "hit_rate": 0.999}}
    assert not _cached({}, {}) and not _cached({"embedding_cache": {"hit_rate": 1.0}}, whole)
    assert _cached(missed, whole) and _cached({}, {"sparse_store": {"whole_on_device": False}})


def test_served_and_native_of_two_devices_are_not_divided(tmp_path):
    """Native measured on another GPU than the served rows: no ratio, the refusal says which
    devices (a ratio across two machines would compare the machines)."""
    served = [{"Batch": 8, "Concurrency": 1, THROUGHPUT: 800.0, SHARED_MEMORY: "system",
               COMPONENT_SUM: 1.0}]
    offline, native = write(tmp_path / "c", served, [{"Batch": 8, THROUGHPUT: 1000.0}])
    native.with_suffix(".json").write_text(formats.text(
        {"provenance": {**PROV, "device": "GPU-2"}, "host_load": {"contended": False}}))
    with pytest.raises(facts.DifferentDevices, match="device 'GPU-1' against 'GPU-2'"):
        served_vs_native(offline, native)
    assert served_vs_native_table(offline, native) == (
        "**served/native not computed: measured on different devices: device 'GPU-1' "
        "against 'GPU-2'**")
