"""The format of every JSON the pipeline writes under results/ (a scenario's offline,
online, floor and rate JSON, native.json, accuracy.json, a search's point.json and
search.json): one version, written first in each, and checked by every reader. A JSON of
another version (an older one, or one a newer deploybench wrote) is refused, naming the
file, its version and the one read here: the readers keep no branch for older formats;
scripts/results_tools/migrate_results.py brings committed JSONs to this one."""

from __future__ import annotations

import json
from pathlib import Path

from . import atomic

# The version of the results' JSON format. Raise it with any change a reader would see
# (a key renamed, moved or newly required), with a step of migrate_results.py that brings
# the committed JSONs to it.
FORMAT = 1
KEY = "format"
MIGRATE = "python scripts/results_tools/migrate_results.py results"


class UnknownFormat(ValueError):
    """A results JSON of a format version this deploybench does not read."""


def text(data: dict) -> str:
    """A results JSON's text: its format version first, then `data` (compact: atomic)."""
    return atomic.json_text({KEY: FORMAT, **{k: v for k, v in data.items() if k != KEY}})


def check(data: dict, path: str | Path) -> dict:
    """`data` (the JSON of `path`) without its version, refused unless it is FORMAT."""
    found = data.get(KEY) if isinstance(data, dict) else None
    if found != FORMAT:
        said = (f"format version {found!r}" if found is not None
                else "no format version (written before results' JSON had one)")
        hint = (f"migrate it: {MIGRATE}" if isinstance(found, int | type(None))
                and (found or 0) < FORMAT else "read it with the deploybench that wrote it")
        raise UnknownFormat(f"{path}: {said}; this deploybench reads format version "
                            f"{FORMAT} only: {hint}")
    return {k: v for k, v in data.items() if k != KEY}


def read(path: str | Path) -> dict:
    """The results JSON at `path`, its version checked (UnknownFormat) and left out."""
    return check(json.loads(Path(path).read_text()), path)
