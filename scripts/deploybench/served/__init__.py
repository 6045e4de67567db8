"""The files Triton's python backend loads as `model.py`.

Each runs inside the backend's stub process and imports only numpy, its engine and
`deploybench_runners`: the copy of deploybench.runners that the model repository bundles
beside it (deploybench.triton.repository), so the served model and the in-process native
step run the same runner code. The pipeline never imports these model files.
"""

from __future__ import annotations

from pathlib import Path

SERVED = Path(__file__).resolve().parent
RUNNERS_DIR = SERVED.parent / "runners"
RUNNERS_BUNDLE = "deploybench_runners"  # the name the served files import it by


def bundled_code() -> list[Path]:
    """Every file a model repository may bundle: a change to one re-runs the repositories
    and what was measured on them."""
    return sorted([*SERVED.glob("*_model.py"), *RUNNERS_DIR.glob("*.py")])
