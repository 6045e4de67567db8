"""Settings merged over each other: parsed YAML (dicts, lists, scalars), copied by plain
recursion (copy.deepcopy's memo and dispatch cost a sixth of planning one configuration
under load: every key's settings are merged)."""

from __future__ import annotations


def copied(value):
    """A copy of parsed YAML."""
    if isinstance(value, dict):
        return {k: copied(v) for k, v in value.items()}
    return [copied(v) for v in value] if isinstance(value, list) else value


def deep_merge(base: dict, override: dict) -> dict:
    """`override` over a copy of `base`: nested dicts merged, anything else replaced whole."""
    merged = copied(base)
    _merge_into(merged, override)
    return merged


def _merge_into(merged: dict, override: dict) -> None:
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            _merge_into(merged[key], value)
        else:
            merged[key] = copied(value)
