"""Bring the results' JSONs (a scenario's offline/online/floor/rate JSON, native.json,
accuracy.json, a search's point.json and search.json, and their history/ copies where
unpacked) to the format the readers read (deploybench.records.formats.FORMAT):

    python scripts/results_tools/migrate_results.py [FOLDER...] [--check]

FOLDER: results/ by default, searched whole. Idempotent: a JSON already of the current
format is left as it is, byte for byte; one of a newer format is refused, as the readers
refuse it. --check writes nothing and exits 1 where a JSON would change. Only structure
changes, never a figure: a key renamed, a fact every reader assumed for an older file
written down. The history copies packed in logs-and-history.tar.xz are read only by a
regression report's `previous` baseline: unpack, migrate and pack them to use one.

Format 1 (2026-12), from the unversioned files before it:
- every JSON: `format` first;
- offline/online/floor: `export_precision` "fp32" where absent (written before exports
  had a precision: the reports read an absent one as FP32);
- rate: `max_rate_within_budget.beyond` "did not keep it" where absent (before
  2026-11-27 the step did not say why the rate above the bracket failed the budget);
- search: the reference's point `seed` renamed `reference`, and `rank` "measured" where
  absent (searches before `search.rank` ranked measured levels).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from deploybench.records import atomic, formats

SCENARIOS = ("offline", "online", "floor")
KINDS = (*SCENARIOS, "rate", "native", "accuracy", "point", "search")


def kind_of(path: Path) -> str | None:
    """A results JSON's kind by its name (a history copy's: `<kind>-<stamp>.json`)."""
    kind = path.stem.split("-")[0]
    return kind if path.suffix == ".json" and kind in KINDS else None


def _renamed(data: dict, old: str, new: str) -> dict:
    """`data` with key `old` named `new`, in its place (absent or done: as it is)."""
    if old not in data or new in data:
        return data
    return {(new if k == old else k): v for k, v in data.items()}


def to_format_1(data: dict, kind: str) -> dict:
    """An unversioned JSON of `kind` in format 1."""
    if kind in SCENARIOS and "export_precision" not in data:
        data = {**data, "export_precision": "fp32"}
    if kind == "rate":
        found = data["max_rate_within_budget"]
        data = {**data, "max_rate_within_budget": {"beyond": "did not keep it", **found}}
    if kind == "search":
        data = _renamed(data, "seed", "reference")
        data = data if "rank" in data else {**data, "rank": "measured"}
    return {formats.KEY: 1, **data}


STEPS = {1: to_format_1}  # the step that writes each version from the one before it


def migrated(data: dict, kind: str, path: Path) -> dict:
    """`data` (the JSON of `path`) in the current format; refused if newer."""
    version = data.get(formats.KEY, 0)
    if not isinstance(version, int) or version > formats.FORMAT:
        formats.check(data, path)  # raises UnknownFormat, naming the file and versions
    for step in range(version + 1, formats.FORMAT + 1):
        data = STEPS[step]({k: v for k, v in data.items() if k != formats.KEY}, kind)
    return data


def migrate(path: Path, check: bool = False) -> bool:
    """Bring the JSON at `path` to the current format; whether it changed (with `check`,
    would change: nothing written)."""
    text = path.read_text()
    new = atomic.json_text(migrated(json.loads(text), kind_of(path), path))
    if new == text:
        return False
    if not check:
        with atomic.output(path) as tmp:
            tmp.write_text(new)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", type=Path, default=[Path("results")])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 where a JSON would change")
    args = parser.parse_args(argv)
    changed, total = [], 0
    for folder in args.folders:
        for path in sorted(folder.rglob("*.json")):
            if kind_of(path) is None or path.name.startswith("."):
                continue
            total += 1
            try:
                if migrate(path, args.check):
                    changed.append(path)
            except formats.UnknownFormat as err:
                print(err, file=sys.stderr)
                return 1
    verb = "would change" if args.check else "migrated"
    print(f"{len(changed)} of {total} JSONs {verb} to format {formats.FORMAT}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
