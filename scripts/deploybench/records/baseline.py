"""What a regression report compares a configuration's measurements with (`compare.baseline`):

- `previous`: for each measurement, its history copy before the current one;
- a history stamp (`20261124T063004Z`): the copy that was current then (the newest at or
  before the stamp: offline, online and native are measured at different times);
- a folder holding the same files, e.g. a committed measurement set; where it holds a
  folder named as the configuration (`<backend>_<precision>`), that one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import layout

PREVIOUS = "previous"
# What compare.md compares: the measurements archived in history/
SCENARIOS = ("offline", "online", "native")
VALID = (f"'{PREVIOUS}', a history stamp (YYYYMMDDTHHMMSSZ, UTC, as history/ names its "
         "copies) or an existing folder holding offline/online/native .csv and .json")


def in_history(setting: str) -> bool:
    """Whether `setting` names a copy in the configuration's own history/ (`previous` or
    a stamp), not a folder."""
    return setting == PREVIOUS or bool(layout.STAMP.fullmatch(setting))


def problem(setting: str) -> str | None:
    """Why `setting` is not a baseline (None when it is one); a folder is looked up
    from the working directory."""
    if in_history(setting) or Path(setting).is_dir():
        return None
    return f"compare.baseline '{setting}' is not a baseline; valid: {VALID}"


@dataclass(frozen=True)
class Measurement:
    """One side of a comparison: a table and its JSON, and where they came from."""

    csv: Path
    json: Path
    label: str  # e.g. "history/offline-20261124T063004Z" or the folder's path


def _stamp_of(current: Path, copies: dict[str, Path]) -> str | None:
    """The stamp of the history copy that is the current measurement (its JSON, with its
    date and provenance, is that copy byte for byte)."""
    data = current.read_bytes()
    return next((s for s, c in reversed(copies.items()) if c.read_bytes() == data), None)


def _history_label(json: Path, stamp: str) -> str:
    """A history copy's name in reports, e.g. "history/offline-20261124T063004Z"."""
    return layout.history_copy(json, stamp).relative_to(json.parent).with_suffix("").as_posix()


def _from_history(csv: Path, stamp: str) -> Measurement | None:
    json = csv.with_suffix(".json")
    copy_csv, copy_json = layout.history_copy(csv, stamp), layout.history_copy(json, stamp)
    if not (copy_csv.is_file() and copy_json.is_file()):
        return None
    return Measurement(copy_csv, copy_json, _history_label(json, stamp))


def measured(csv: Path, json: Path) -> Measurement:
    """A current measurement, its table and JSON; its label names its history copy where
    it has one."""
    stamp = _stamp_of(json, layout.history_copies(json))
    return Measurement(csv, json, _history_label(json, stamp) if stamp else json.name)


def current(folder: Path, scenario: str) -> Measurement | None:
    """The configuration's current measurement of `scenario` (None before one exists)."""
    csv, json = folder / f"{scenario}.csv", folder / f"{scenario}.json"
    if not (csv.is_file() and json.is_file()):
        return None
    return measured(csv, json)


def find(folder: Path, scenario: str, setting: str) -> Measurement | None:
    """The baseline of the configuration in `folder` for `scenario` (offline, online,
    native), or None where it has none yet."""
    if not in_history(setting):
        base = Path(setting)
        own = base / folder.name  # a measurement set with a folder per configuration
        base = own if own.is_dir() else base
        csv, json = base / f"{scenario}.csv", base / f"{scenario}.json"
        return Measurement(csv, json, base.as_posix()) if csv.is_file() and json.is_file() \
            else None
    return in_history_of(folder / f"{scenario}.csv", folder / f"{scenario}.json", setting)


def given(scenario: str, current: Measurement | None, setting: str,
          files: list[Path]) -> Measurement | None:
    """The baseline of a configuration's `scenario` from what a step is given: its current
    measurement's history copies (`previous` or a stamp), or among `files`, a folder
    baseline's (folder_files), the two named as the scenario; None where it has none yet."""
    if in_history(setting):
        return in_history_of(current.csv, current.json, setting) if current else None
    named = {Path(f).name: Path(f) for f in files}
    csv, json = named.get(f"{scenario}.csv"), named.get(f"{scenario}.json")
    return Measurement(csv, json, csv.parent.as_posix()) if csv and json else None


def in_history_of(csv: Path, json: Path, setting: str) -> Measurement | None:
    """The baseline `setting` (`previous` or a stamp) of measurement `csv`, `json` among
    their history copies, or None where they have none."""
    copies = layout.history_copies(json)
    if setting == PREVIOUS:
        # the copy before the current one; all of them where the current has none (it was
        # measured before measurements were archived, or its copy was removed)
        mine = _stamp_of(json, copies) if json.is_file() else None
        earlier = [s for s in copies if mine is None or s < mine]
    else:
        earlier = [s for s in copies if s <= setting]
    for stamp in reversed(earlier):  # the newest with both its files
        found = _from_history(csv, stamp)
        if found:
            return found
    return None


def folder_files(folder: Path, setting: str) -> list[str]:
    """A folder baseline's files for the configuration in `folder` (none for `previous`
    or a stamp): inputs of its report, so that replacing them re-runs it."""
    if in_history(setting):
        return []
    found = (find(folder, s, setting) for s in SCENARIOS)
    return sorted(str(p) for m in found if m for p in (m.csv, m.json))
