"""Configuration files as read from disk, refused before anything walks or evaluates them,
with the file named: YAML whose aliases expand past a bound (a billion-laughs file of
2.7 kB took 118 s of validation, then all memory), a file that is not a mapping of
settings, and a main config asking Snakemake for YTE templating (`__use_yte__`), which
would run the Python in it even in a dry run.

Snakemake reads the files named with --configfile before the Snakefile runs, so the
workflow profiles (profiles/*/config.yaml) call `check_command_line()`: Snakemake reads a
profile before those files."""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from pathlib import Path

import yaml

# Nodes that aliases may add to a file (each alias counted as the node it names, itself
# expanded): anchors shared between a few settings add tens, a billion-laughs file billions.
MAX_ALIASED_NODES = 10_000

# libyaml's loader where PyYAML has it: planning reads every model config.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ConfigError(ValueError):
    """Bad configuration or an invalid run key."""


def _check_aliases(text: str, path: Path) -> None:
    """Count what aliases would add from the parser's events, expanding nothing."""
    sizes: dict[str, int] = {}  # anchor -> its node's size, aliases in it expanded
    anchors, counts = [], [0]  # the collections being read, outermost first
    added = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in anchors:
                raise ConfigError(f"configuration file '{path}': the alias *{event.anchor} "
                                  "is inside the node it names (a cycle); anchors may name "
                                  "only nodes before them")
            size = sizes.get(event.anchor, 0)  # undefined: the loader says so
            added += size
            counts[-1] += size
            if added > MAX_ALIASED_NODES:
                raise ConfigError(
                    f"configuration file '{path}': its aliases (*{event.anchor} and those "
                    f"before it) expand to more than {MAX_ALIASED_NODES:,} nodes; write the "
                    "settings out or alias fewer, smaller nodes")
        elif isinstance(event, yaml.CollectionStartEvent):
            anchors.append(event.anchor)
            counts.append(1)
        elif isinstance(event, (yaml.ScalarEvent, yaml.CollectionEndEvent)):
            if isinstance(event, yaml.ScalarEvent):
                anchor, size = event.anchor, 1
            else:
                anchor, size = anchors.pop(), counts.pop()
            if anchor:
                sizes[anchor] = size
            counts[-1] += size


def load_yaml(path: str | Path) -> dict:
    """The mapping a YAML file holds, refused naming the file where it is not one."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"configuration file '{path}' does not exist")
    text = path.read_text()
    try:
        if "*" in text:  # an alias needs one
            _check_aliases(text, path)
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as err:
        raise ConfigError(f"configuration file '{path}' is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        held = "is empty" if data is None else f"holds a {type(data).__name__}"
        raise ConfigError(f"configuration file '{path}' {held}; a mapping of settings is "
                          "expected (`key: value` lines at the top level)")
    return data


def check_main_files(paths) -> None:
    """Main config files Snakemake is to read (--configfile, the Snakefile's configfile)."""
    for path in paths:
        if "__use_yte__" in load_yaml(path):
            raise ConfigError(
                f"configuration file '{path}' sets __use_yte__: Snakemake would evaluate it "
                "as a YTE template, running the Python in it; a deploybench config is plain "
                "YAML (remove the key)")


def check_command_line(argv: list[str] | None = None) -> None:
    """Check the main config files named on Snakemake's command line before it reads
    them; exits with the message where one is refused."""
    parser = ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--configfile", "--configfiles", nargs="+", action="extend",
                        default=[])
    named = parser.parse_known_args(sys.argv[1:] if argv is None else argv)[0].configfile
    try:
        check_main_files(named)
    except ConfigError as err:
        sys.exit(f"Error: {err}")
