"""The rule → step adapter (deploybench.steps.run): what a rule names reaches its step."""

import json
from types import SimpleNamespace

import pytest

from deploybench import steps


class Named(dict):
    """As Snakemake's named lists: items by name, and as attributes."""

    __getattr__ = dict.__getitem__


def _job(rule: str, tmp_path, **inputs) -> SimpleNamespace:
    log = tmp_path / "logs" / f"{rule}.log"
    return SimpleNamespace(rule=rule, input=Named(inputs),
                           output=Named(out=str(tmp_path / "out.pt")),
                           log=Named(log=str(log)),
                           params=Named(spec=json.dumps({}), code="abc"))


def test_an_input_its_step_does_not_take_is_refused_by_name(tmp_path):
    """A rule's input renamed without its step's parameter (which has a default) used to
    run the step without the file, silently: now the job fails, naming both."""
    job = _job("weights", tmp_path, checkpoints=str(tmp_path / "stamp"))
    with pytest.raises(TypeError, match=r"rule weights: checkpoints named in the rule but "
                       r"not taken by its step source:weights \(takes spec, out"):
        steps.run(job)


def test_a_trigger_only_input_is_not_refused(tmp_path, monkeypatch):
    """The checkpoint's content stamp only re-runs the step (TRIGGERS): it passes."""
    seen = {}
    monkeypatch.setattr(steps, "step_function",
                        lambda rule: lambda spec, out: seen.update(out=out))
    steps.run(_job("weights", tmp_path, checkpoint=str(tmp_path / "stamp")))
    assert seen == {"out": tmp_path / "out.pt"}
