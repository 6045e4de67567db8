"""A measurement's record: its table and JSON written whole, and their dated copies under
history/ (the baselines of the next regression report)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path

import pandas as pd

from ..measurement import device
from ..records import atomic, formats, layout


def archive(*paths: Path) -> None:
    """Keep a dated copy of a finished measurement under history/: Snakemake deletes a
    job's old outputs when it re-runs it, and a failed re-run must not lose them."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime(layout.STAMP_FORMAT)
    for path in paths:
        # on disk before its name: a full disk leaves no short file that passes for a copy
        with (atomic.output(layout.history_copy(path, stamp)) as tmp,
              open(path, "rb") as src, open(tmp, "wb") as dest):
            shutil.copyfileobj(src, dest)
            dest.flush()
            os.fsync(dest.fileno())


def write(table: pd.DataFrame, report: dict, out_csv: Path, out_json: Path) -> None:
    """A scenario's table and JSON, both whole or neither, and their dated copies; none
    where the step's device lock was split meanwhile (device.verify_held)."""
    device.verify_held()
    with atomic.output(out_csv) as tmp_csv, atomic.output(out_json) as tmp_json:
        table.round(4).to_csv(tmp_csv, index=False)
        tmp_json.write_text(formats.text(report))
    archive(out_csv, out_json)
    print(table.to_string(index=False))
