"""The results' JSON format: one version written first in every JSON, every reader refusing
another, and the migration of the committed JSONs (scripts/results_tools/migrate_results.py)
that brings an unversioned one to it, idempotent."""

import json
import shutil

import migrate_results as mr
import pytest

from deploybench.records import formats
from deploybench.reporting import protocol
from testkit.workflow import ROOT

COMMITTED = {kind: sorted((ROOT / "results").rglob(f"{kind}.json"))[0] for kind in mr.KINDS}


def test_every_committed_json_is_of_the_current_format():
    found = {path: json.loads(path.read_text()).get(formats.KEY)
             for path in (ROOT / "results").rglob("*.json")}
    assert found and all(version == formats.FORMAT for version in found.values()), \
        [str(p) for p, v in found.items() if v != formats.FORMAT][:5]


def test_a_written_json_says_its_format_first_and_reads_back_without_it(tmp_path):
    text = formats.text({"scenario": "offline", formats.KEY: 0})
    assert text.startswith(f'{{"{formats.KEY}":{formats.FORMAT},"scenario"')
    (tmp_path / "offline.json").write_text(text)
    assert formats.read(tmp_path / "offline.json") == {"scenario": "offline"}


@pytest.mark.parametrize("version, said, hint", [
    (formats.FORMAT + 1, f"format version {formats.FORMAT + 1}", "the deploybench that wrote it"),
    (None, "no format version", "migrate_results.py"),
    ("1", "format version '1'", "the deploybench that wrote it"),
])
def test_a_json_of_another_format_is_refused_naming_the_file_and_both_versions(
        tmp_path, version, said, hint):
    folder = tmp_path / "results/m/cpu/onnx_fp32"
    shutil.copytree(COMMITTED["offline"].parent, folder)
    data = json.loads((folder / "offline.json").read_text())
    data = {k: v for k, v in data.items() if k != formats.KEY}
    (folder / "offline.json").write_text(json.dumps(
        data if version is None else {formats.KEY: version, **data}))
    with pytest.raises(formats.UnknownFormat) as refused:
        protocol.scenarios_ran(folder)  # a reader of the reports
    message = str(refused.value)
    assert str(folder / "offline.json") in message and said in message and hint in message
    assert f"reads format version {formats.FORMAT} only" in message
    assert mr.main([str(tmp_path)]) == (0 if version is None else 1)


def _unversioned(data: dict, kind: str) -> dict:
    """A current JSON as the unversioned format wrote it (what format 1 added, taken out)."""
    old = {k: v for k, v in data.items() if k != formats.KEY}
    if kind in mr.SCENARIOS and old["export_precision"] == "fp32":
        del old["export_precision"]
    if kind == "rate" and old["max_rate_within_budget"]["beyond"] == "did not keep it":
        old["max_rate_within_budget"] = {
            k: v for k, v in old["max_rate_within_budget"].items() if k != "beyond"}
    if kind == "search":
        old = {("seed" if k == "reference" else k): v for k, v in old.items()
               if not (k == "rank" and v == "measured")}
    return old


@pytest.mark.parametrize("kind", mr.KINDS)
def test_the_migration_brings_an_old_json_to_the_format_and_then_changes_nothing(tmp_path,
                                                                                  kind):
    committed = COMMITTED[kind]
    current = committed.read_text()
    assert not mr.migrate(committed, check=True)  # the committed one: already done
    old = tmp_path / kind / committed.name
    old.parent.mkdir()
    old.write_text(json.dumps(_unversioned(json.loads(current), kind)))
    assert mr.migrate(old)
    assert json.loads(old.read_text()) == json.loads(current)
    migrated = old.read_text()
    assert not mr.migrate(old) and old.read_text() == migrated  # idempotent
    # a history copy is migrated as its kind
    copy = old.parent / "history" / f"{kind}-20261201T000000Z.json"
    copy.parent.mkdir()
    copy.write_text(json.dumps(_unversioned(json.loads(current), kind)))
    assert mr.kind_of(copy) == kind and mr.main([str(old.parent)]) == 0
    assert json.loads(copy.read_text()) == json.loads(current)
