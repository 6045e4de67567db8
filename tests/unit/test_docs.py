"""The README is a map: short, its layout table matching the tree, and every relative link
of it and of the guide (docs/) pointing at a file that exists."""

import re
import subprocess
from pathlib import Path

import pytest

from testkit.workflow import ROOT

README = ROOT / "README.md"
PACKAGE = ROOT / "scripts" / "deploybench"
MAX_README_LINES = 250
CODE = re.compile(r"`([^`]+)`")
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def listed_files() -> list[str]:
    """The checkout's files as git sees them: tracked, and new ones not ignored."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard"],
            check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"no git checkout to list: {e}")
    return [line for line in out.splitlines() if line]


def layout_tables() -> list[tuple[Path, list[str]]]:
    """The README's "## Layout" tables: each one's base folder (the repository, or the
    package where the header's first cell names scripts/deploybench) and the names in
    backticks in its rows' first cells."""
    text = README.read_text()
    section = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert section, "README.md has no '## Layout' section"
    tables, rows = [], []
    for line in [*section.group(1).splitlines(), ""]:
        if line.startswith("|"):
            rows.append(line)
            continue
        if rows:
            header, body = rows[0], rows[2:]  # rows[1]: the |---| line
            base = PACKAGE if "scripts/deploybench" in header.split("|")[1] else ROOT
            names = [n for row in body for n in CODE.findall(row.split("|")[1])]
            tables.append((base, names))
            rows = []
    assert tables, "README.md's Layout section has no table"
    return tables


def test_readme_is_a_map():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_layout_names_every_folder_and_module():
    files = listed_files()
    folders = {f.split("/")[0] for f in files if "/" in f}
    prefix = "scripts/deploybench/"
    modules = set()
    for f in files:
        if f.startswith(prefix):
            rest = f[len(prefix):]
            if "/" in rest:
                modules.add(rest.split("/")[0])
            elif rest.endswith(".py") and rest != "__init__.py":
                modules.add(rest)
    named = {ROOT: set(), PACKAGE: set()}
    for base, names in layout_tables():
        named[base].update(n.rstrip("/") for n in names)
    assert not folders - named[ROOT], \
        f"top-level folders missing from the README's layout: {sorted(folders - named[ROOT])}"
    assert not modules - named[PACKAGE], \
        f"modules of {prefix} missing from the README's layout: {sorted(modules - named[PACKAGE])}"


def test_layout_names_only_what_exists():
    missing = []
    for base, names in layout_tables():
        for name in names:
            path = base / name
            if not (path.is_dir() if name.endswith("/") else path.exists()):
                missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"the README's layout names what does not exist: {missing}"


def relative_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    text = re.sub(r"(`+).+?\1", "", text, flags=re.S)  # inline code is not a link
    targets = []
    for target in LINK.findall(text):
        if target.startswith("#") or re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):
            continue  # in-page anchor, http(s), mailto
        targets.append(target)
    return targets


def test_relative_links_point_at_files():
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    assert len(pages) > 1, "no docs/*.md"
    broken = []
    for page in pages:
        for target in relative_links(page):
            path = target.split("#")[0].split("?")[0]
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, f"relative links to nothing: {broken}"


def test_link_parsing(tmp_path):
    # the parser the link test relies on: anchors and URLs skipped, code ignored
    page = tmp_path / "page.md"
    page.write_text("[a](x.md#s) ![b](img/p.png \"t\") [c](https://e.org) [d](#top)\n"
                    "`[e](not-a-link.md)`\n```\n[f](nor-this.md)\n```\n")
    assert relative_links(page) == ["x.md#s", "img/p.png"]
