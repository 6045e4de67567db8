"""Served against native in each shared-memory mode: system shared memory beside the host
arrays' native figure, CUDA shared memory beside the device-resident one, inputs in the
requests (none) beside the host arrays'; each ratio worked out by hand."""


import pandas as pd

from deploybench.records import formats
from deploybench.records.tables import COMPONENT_SUM, DEVICE_THROUGHPUT, SHARED_MEMORY, THROUGHPUT
from deploybench.reporting.served_native import at_max_batch, served_vs_native

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
    ratio = served_vs_native(*write(tmp_path / "b", served, native))
    assert ratio["Batch"].tolist() == [1] and ratio["served/native"].tolist() == [0.333]
