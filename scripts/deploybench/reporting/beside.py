"""Which measured columns stand beside a model's published tables, and what differs, in
words: a configuration stands there only where its recorded settings are its document's
protocol (reporting.protocol); the others are named with how each ran otherwise, and each
column that stands there says on what GPU and by which backend it ran, against the
published rows'."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..records import formats
from ..records.tables import reference_rows
from .headline import served_by
from .markdown import markdown_table
from .protocol import differences
from .reference import configuration_label

# The published tables' backends as Triton's backends name themselves
TRITON_BACKENDS = {"PyTorch": "pytorch", "ONNX Runtime": "onnxruntime",
                   "NVIDIA TensorRT": "tensorrt", "TensorFlow": "tensorflow"}

NOT_A_REPRODUCTION = ("Where a column's GPU or serving backend differs from the published "
                      "rows' (below, column by column), it stands beside the tables, not as a "
                      "reproduction of them.")


def columns_beside(columns: list[Path], reference: dict) -> tuple[list[Path], dict]:
    """The columns (configuration READMEs) whose recorded settings are the document's
    protocol, and the others with how each differs (README -> differences)."""
    found = {readme: differences(Path(readme).parent, reference) for readme in columns}
    return [r for r, d in found.items() if not d], {r: d for r, d in found.items() if d}


def otherwise_section(otherwise: dict) -> str:
    """The configurations kept from beside the published tables, each difference said."""
    if not otherwise:
        return ""
    lines = [f"- **{configuration_label(Path(readme).parent)}**: " + "; ".join(found)
             for readme, found in otherwise.items()]
    return ("\n\n## Measured otherwise: not beside the published tables\n\nThese "
            "configurations ran with settings other than their document's protocol (the "
            "parameters its tables state, else its runner's: `reference.protocol`), so no "
            "table here puts them beside the published rows and the frontier plots leave out "
            "those of a GPU key; the configuration table above and their own reports have "
            "their figures.\n\n" + "\n".join(lines))


def _ran_on(folder: Path) -> tuple[str, str]:
    """The device a configuration's offline scenario ran on, and who served it."""
    prov = formats.read(folder / "offline.json")["provenance"]
    gpus = prov.get("gpus") or []
    return (gpus[0]["name"] if gpus else prov.get("cpu", "a CPU"),
            served_by(prov, notes=False))


def hardware_section(beside: list[Path], reference: dict) -> str:
    """What each column beside the published tables ran on and was served by, against
    the published rows' GPUs and backends, and what of it differs."""
    if not beside:
        return ""
    rows = reference_rows(Path(reference["path"]), reference["document"],
                          reference.get("where", {}))
    gpus, backends = sorted(set(rows["gpu"])), sorted(set(rows["backend"]))
    served_there = {TRITON_BACKENDS.get(b, b) for b in backends}
    table = []
    for readme in beside:
        device, server = _ran_on(Path(readme).parent)
        differs = [what for what, other in (("GPU", device not in gpus),
                                            ("serving backend",
                                             server.split()[0] not in served_there)) if other]
        table.append({"Column": configuration_label(Path(readme).parent), "Ran on": device,
                      "Served by": server, "Differs in": " and ".join(differs) or "nothing"})
    return ("\n\n## Other hardware, other serving\n\nThe published rows ran on "
            f"{', '.join(gpus)}; their tables name the backends {', '.join(backends)}. "
            f"{NOT_A_REPRODUCTION}\n\n" + markdown_table(pd.DataFrame(table)))
