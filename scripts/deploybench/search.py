"""The serving-configuration search of a configuration (model × gpu × backend × precision).

A model's `search:` section (overridable per backend and GPU key or kind, as any setting;
its `strategy` and `p99_budget_ms` also from the main config: `--config 'search={...}'`)
lists the values to try of the dimensions below. A **point** is one combination: the
configuration's settings with those values in `triton` (and the search's own `offline` and
`online` scenario settings), named from its values only, e.g. `i2-q100-p512_1024`: adding a
value to a list adds new names and keeps the others, so Snakemake builds only the new
points. `point_name` and `parse_point` are the one mapping between a name and its values.

Strategies: `grid` measures every point; `descent` is coordinate descent from the reference's
configuration (each dimension's value nearest the configuration's own): it measures one
dimension's values with the others fixed at the best so far, keeps the best, and goes on to
the next (one pass by default; `descent_passes` more, until a pass changes nothing). Its
points are the grid's (the same files), so nothing it measured is measured again by a grid
run, and the other way round.
A point's score is its online throughput within the p99 budget, ranked as `rank` says:
`interpolated` (the default) or `measured` (see at_budget).
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from collections.abc import Callable
from functools import cache

from .backends import BACKENDS
from .settings.config import ConfigError, deep_merge
from .settings.deployments import gpu_count, per_batch
from .settings.resolve import Settings
from .settings.run_facts import shared_memory_modes
from .settings.step_specs import step_spec

# dimension (a `triton` setting) -> its letter in a point's name, in naming order
DIMENSIONS = {"instances": "i", "max_queue_delay_us": "q", "preferred_batch_sizes": "p",
              "max_batch_size": "m", "gpus": "g"}
_LETTERS = {letter: dim for dim, letter in DIMENSIONS.items()}
STRATEGIES = ("grid", "descent")
# A point's name: its searched dimensions' letters and values, joined by '-' (the letters
# from DIMENSIONS: a dimension added there is named and parsed without another edit)
_LETTER = f"[{''.join(DIMENSIONS.values())}]"
POINT = rf"{_LETTER}[0-9_]+(-{_LETTER}[0-9_]+)*"
OK, FAILED = "ok", "failed"
# what a point measures, in order: online first (the ranking's scenario, and the one whose
# dynamic batcher Triton checks at load); `search.scenarios` may leave offline out
SCENARIOS = ("online", "offline")
# how a point's throughput within the budget is read from its levels (at_budget); the
# first is the default
RANKS = ("interpolated", "measured")
RANK = RANKS[0]


def point_name(values: dict) -> str:
    """The name of a point from its values (only the searched dimensions)."""
    parts = []
    for dim, letter in DIMENSIONS.items():
        if dim in values:
            value = values[dim]
            text = "_".join(map(str, value)) if isinstance(value, list) else str(value)
            parts.append(f"{letter}{text}")
    return "-".join(parts)


def parse_point(name: str) -> dict:
    """The values of a point from its name (point_name's inverse)."""
    if not re.fullmatch(POINT, name):
        raise ConfigError(f"'{name}' is not a search point name (e.g. i2-q100-p512_1024: "
                          f"{', '.join(f'{k} {d}' for d, k in DIMENSIONS.items())})")
    values = {}
    for part in name.split("-"):
        dim = _LETTERS[part[0]]
        numbers = [int(x) for x in part[1:].split("_") if x]
        if not numbers or (dim != "preferred_batch_sizes" and len(numbers) != 1):
            raise ConfigError(f"search point '{name}': bad value '{part}' of {dim}")
        values[dim] = numbers if dim == "preferred_batch_sizes" else numbers[0]
    if point_name(values) != name:
        raise ConfigError(f"search point '{name}' is not in its canonical form "
                          f"('{point_name(values)}')")
    return values


def of_model(model_settings: dict, main: dict | None = None) -> dict:
    """A configuration's search: the model's `search` section (its overrides merged) with
    the main config's `search` (strategy, budget) over it. Empty: no search configured."""
    search = model_settings.get("search") or {}
    if not search:
        return {}
    search = deep_merge(search, (main or {}).get("search") or {})  # a copy of both
    search.setdefault("strategy", "grid")
    search.setdefault("rank", RANK)
    return search


def lists(search: dict) -> dict:
    """dimension -> the values to try, in naming order (the searched dimensions only)."""
    return {dim: search[dim] for dim in DIMENSIONS if search.get(dim)}


def grid(search: dict) -> list[str]:
    """Every point's name, in the lists' order."""
    values = lists(search)
    return [point_name(dict(zip(values, combo)))
            for combo in itertools.product(*values.values())]


def reference_point(search: dict, triton: dict) -> str:
    """The point of the configuration's own values (the value nearest it, in each list):
    where the descent starts."""
    def nearest(dim, options):
        own = gpu_count(triton) if dim == "gpus" else triton[dim]
        if own in options:
            return own
        scale = (lambda v: sum(v) / len(v)) if dim == "preferred_batch_sizes" else float
        return min(options, key=lambda v: abs(math.log1p(scale(v)) - math.log1p(scale(own))))

    return point_name({dim: nearest(dim, options) for dim, options in lists(search).items()})


def check(search: dict, model_settings: dict, where: str, device_kind: str) -> None:
    """Refuse values that no point of the search could serve, naming them and what would
    be valid. A combination that only some points make impossible (a preferred batch size
    above one of the searched max batch sizes) is left to Triton, which refuses to load
    it: that point is recorded as failed with Triton's reason, the others are measured."""
    if not search:
        return
    strategy = search.get("strategy", "grid")
    if strategy not in STRATEGIES:
        raise ConfigError(f"{where}: search.strategy '{strategy}' is unknown; valid "
                          f"strategies: {', '.join(STRATEGIES)}")
    rank = search.get("rank", RANK)
    if rank not in RANKS:
        raise ConfigError(f"{where}: search.rank '{rank}' is unknown; valid ranks: "
                          f"{', '.join(RANKS)}")
    budget = search.get("p99_budget_ms")
    if budget is not None and not (isinstance(budget, (int, float)) and budget > 0):
        raise ConfigError(f"{where}: search.p99_budget_ms '{budget}' must be a number of "
                          "milliseconds above 0")
    values = lists(search)
    if not values:
        raise ConfigError(f"{where}: the search lists no values to try; list at least one "
                          f"of {', '.join(DIMENSIONS)}")
    if "gpus" in values and device_kind != "gpu":
        raise ConfigError(f"{where}: search.gpus needs a GPU key (this one serves on the "
                          "host's CPUs); remove it, or search on a GPU key")
    triton = model_settings["triton"]
    max_batches = values.get("max_batch_size", [triton["max_batch_size"]])
    if "max_batch_size" in values and per_batch(model_settings):
        raise ConfigError(f"{where}: search.max_batch_size cannot be searched with "
                          "triton.deployments 'per_batch' (each deployment's max batch is "
                          "its offline batch size)")
    for preferred in values.get("preferred_batch_sizes", [triton["preferred_batch_sizes"]]):
        too_big = [b for b in preferred if b > max(max_batches)]
        if too_big:
            raise ConfigError(
                f"{where}: search.preferred_batch_sizes {preferred}: {too_big} exceed every "
                f"max batch size searched ({', '.join(map(str, max_batches))}); valid "
                f"preferred batch sizes are 1 to {max(max_batches)}")
    online = deep_merge(model_settings["online"], search.get("online") or {})
    too_small = [m for m in max_batches if m < online["batch_size"]]
    if too_small:
        raise ConfigError(
            f"{where}: search.max_batch_size {too_small} below the online batch size "
            f"{online['batch_size']} (every point is measured online); valid max batch "
            f"sizes are {online['batch_size']} and above")
    offline = deep_merge(model_settings["offline"], search.get("offline") or {})
    if device_kind != "gpu" and "cuda" in shared_memory_modes(offline):
        raise ConfigError(f"{where}: search.offline.shared_memory 'cuda' needs a GPU key; "
                          f"this key is {device_kind}; valid modes here: system, none")


def point_model(model_settings: dict, search: dict, name: str) -> dict:
    """The model settings of a point: its values in `triton`, the search's `offline` and
    `online` settings over the configuration's, the offline batch sizes cut to the
    point's max batch size (its largest when none fits)."""
    values = parse_point(name)
    searched = lists(search)
    unknown = {dim: v for dim, v in values.items()
               if dim not in searched or v not in searched[dim]}
    if unknown or set(values) != set(searched):
        raise ConfigError(
            f"'{name}' is not a point of this search; its points: {', '.join(grid(search))}")
    triton = {**model_settings["triton"], **copy.deepcopy(values)}
    offline = deep_merge(model_settings["offline"], search.get("offline") or {})
    fits = [b for b in offline["batch_sizes"] if b <= triton["max_batch_size"]]
    offline["batch_sizes"] = fits or [triton["max_batch_size"]]
    online = deep_merge(model_settings["online"], search.get("online") or {})
    return {**model_settings, "triton": triton, "offline": offline, "online": online}


@cache
def configured(settings: Settings, model: str, gpu: str, backend: str) -> dict:
    """The validated search of a model on a GPU key and backend (empty: none)."""
    model_settings = settings.model_settings(model, gpu, backend)
    search = of_model(model_settings, settings.config)
    check(search, model_settings, f"model '{model}' on GPU key '{gpu}', backend '{backend}'",
          settings.gpus[gpu]["kind"])
    return search


def check_all(settings: Settings) -> None:
    """Refuse a bad search of any model on any GPU key and backend at start-up."""
    for model, raw in settings.models.items():
        for gpu in settings.gpus:
            for backend in raw["backends"]:
                configured(settings, model, gpu, backend)


def required(settings: Settings, model: str, gpu: str, backend: str) -> dict:
    """The search of a configuration, refused when it has none."""
    search = configured(settings, model, gpu, backend)
    if not search:
        raise ConfigError(f"model '{model}' has no search on GPU key '{gpu}', backend "
                          f"'{backend}': add a `search:` section to its config (or under its "
                          "device_overrides / backend_overrides)")
    if BACKENDS[backend].dense:
        raise ConfigError(f"backend '{backend}' of model '{model}' cannot be searched: an "
                          "ensemble has no online scenario (its batch is inside its tensors, "
                          "max_batch_size 0), and a search ranks its points online")
    if BACKENDS[backend].runner is None:
        raise ConfigError(f"backend '{backend}' of model '{model}' cannot be searched: a "
                          "Triton model repository is served as it is, with its own "
                          "config.pbtxt, and a search writes a config per point (edit the "
                          "repository's config and add it again to measure another)")
    return search


@cache
def point_run(settings: Settings, model: str, gpu: str, backend: str, precision: str,
              point: str) -> dict:
    """The run of one point: the configuration's run with the point's model settings, and
    the point's name and values (`search_point`), read-only."""
    run = settings.run(model, gpu, backend, precision)
    search = required(settings, model, gpu, backend)
    scenarios = [s for s in SCENARIOS if s in search.get("scenarios", SCENARIOS)]
    return {**run, "model": point_model(run["model"], search, point),
            "search_point": {"name": point, "values": parse_point(point),
                             "scenarios": scenarios}}


def point_step_spec(run: dict, step: str) -> dict:
    """What a point's step depends on (step_specs.step_spec), without the offline settings
    where the point is measured online only."""
    spec = step_spec(run, step)
    if "offline" not in run["search_point"]["scenarios"]:
        spec["model"].pop("offline", None)
    return spec


# --- results: what a measured point's point.json holds, and how points are ranked ---------

def peak(result: dict, budget_ms: float | None) -> dict | None:
    """A point's online level of highest throughput within the p99 budget (of every level
    without a budget); None for a failed point or one with no level within it."""
    if result.get("status") != OK:
        return None
    levels = [r for r in result.get("online", [])
              if budget_ms is None or r["p99_ms"] <= budget_ms]
    return max(levels, key=lambda r: r["throughput"], default=None)


def at_budget(result: dict, budget_ms: float | None, rank: str = RANK) -> dict | None:
    """A point's throughput within the p99 budget as `rank` reads it. `measured`: its best
    level within the budget (peak). `interpolated`: where higher, the throughput at the
    budget itself, linear in p99 between a level within the budget and the next level (by
    concurrency) beyond it, as a row with `between` (the two levels' concurrencies) instead
    of a concurrency. A p99 that crosses the budget by a millisecond then moves the score by
    a millisecond's share of the step between two levels, not by the whole step (on the
    H100 search, repeats of one point scored 35.6k and 57.5k inf/s measured, 44.7k-57.9k
    interpolated). Nothing is extrapolated beyond the levels measured; None where peak is
    None."""
    top = peak(result, budget_ms)
    if top is None or budget_ms is None or rank == "measured":
        return top
    levels = sorted(result["online"], key=lambda r: r["concurrency"])
    for low, high in zip(levels, levels[1:]):
        if low["p99_ms"] <= budget_ms < high["p99_ms"]:
            share = (budget_ms - low["p99_ms"]) / (high["p99_ms"] - low["p99_ms"])
            throughput = low["throughput"] + share * (high["throughput"] - low["throughput"])
            if throughput > top["throughput"]:
                top = {"throughput": throughput, "p99_ms": budget_ms,
                       "between": [low["concurrency"], high["concurrency"]]}
    return top


def score(result: dict, budget_ms: float | None, rank: str = RANK) -> float:
    """A point's throughput within the budget (at_budget; -inf where it has none): how
    points are ranked."""
    top = at_budget(result, budget_ms, rank)
    return -math.inf if top is None else top["throughput"]


def best(results: dict[str, dict], budget_ms: float | None, rank: str = RANK) -> str | None:
    """The point of highest score (ties: the first name in sorted order); None when no
    point has a level within the budget."""
    ranked = sorted(results, key=lambda n: (-score(results[n], budget_ms, rank), n))
    if not ranked or score(results[ranked[0]], budget_ms, rank) == -math.inf:
        return None
    return ranked[0]


def descent(search: dict, triton: dict, measure: Callable[[str], dict],
            budget_ms: float | None, rank: str = RANK) -> tuple[list[str], str | None]:
    """Coordinate descent from the reference's point: the names it measured, in order, and its
    pick. `measure(name)` gives a point's result (in the workflow, a checkpoint's output:
    it raises until the point is built, and Snakemake calls the walk again). One pass by
    default (`descent_passes`): each dimension's line once, 1 + sum(values - 1) points;
    another pass walks the lines again through the point reached, until one changes
    nothing."""
    max_passes = search.get("descent_passes", 1)
    values = lists(search)
    current = parse_point(reference_point(search, triton))
    visited: dict[str, dict] = {}

    def result(name):
        if name not in visited:
            visited[name] = measure(name)
        return visited[name]

    def standing(name):  # within the budget first, then throughput at any latency
        return score(result(name), budget_ms, rank), score(result(name), None)

    standing(point_name(current))
    for _ in range(max_passes):
        changed = False
        for dim, options in values.items():
            line = {point_name({**current, dim: v}): v for v in options}
            top = max(line, key=lambda n: (standing(n), n == point_name(current)))
            if line[top] != current[dim]:
                current = {**current, dim: line[top]}
                changed = True
        if not changed:
            break
    order = list(visited)
    return order, best(visited, budget_ms, rank)
