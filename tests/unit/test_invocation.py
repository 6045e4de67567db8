"""What Snakemake was asked for (deploybench.settings.invocation): each field read from a
workflow object's state, the refusal under a Snakemake other than the one it reads, and no
other place that reads Snakemake's internals (the Snakefile and rules/ read only
workflow.basedir, its documented attribute, and never sys.argv)."""

import re
from types import SimpleNamespace

import pytest
import snakemake
from snakemake.exceptions import WorkflowError

from deploybench.settings import invocation as invocation_module
from deploybench.settings.invocation import SNAKEMAKE_MAJOR, Invocation, invocation
from testkit.workflow import ROOT


class FakeWorkflow:
    """The attributes of Snakemake 9's workflow object that invocation() reads."""

    def __init__(self, targets=(), rules=(), configfiles=(), local=True, cores=None,
                 resources=None, parsing=False):
        # while the Snakefile is parsed, Snakemake 9 has not handed over the DAG's settings
        self.dag_settings = None if parsing else SimpleNamespace(targets=set(targets))
        self.config_settings = SimpleNamespace(configfiles=list(configfiles))
        self.local_exec = local
        self.global_resources = {"_cores": cores, "_nodes": None, **(resources or {})}
        self._rules = set(rules)
        self._cores = cores

    def is_rule(self, name):
        return name in self._rules

    @property
    def cores(self):
        if self._cores is None:  # as Snakemake 9's does without --cores
            raise WorkflowError("Workflow.cores called without cores")
        return self._cores


def test_each_field_is_read_from_the_workflow():
    workflow = FakeWorkflow(
        targets=["results/b.csv", "all", "results/a.csv", "references"],
        rules=["all", "references"], configfiles=["b.yaml", "a.yaml"], local=False, cores=8,
        resources={"bench_slot": 3})
    assert invocation(workflow, ["snakemake", "-c8"]) == Invocation(
        configfiles=("b.yaml", "a.yaml"),  # in the order given
        targets=("all", "references", "results/a.csv", "results/b.csv"),  # sorted
        rules=("all", "references"),
        reporting=False,
        local=False,
        cores=8,
        bench_slots=3,
    )


def test_without_cores_targets_or_bench_slots():
    run = invocation(FakeWorkflow(), ["snakemake", "-n"])
    assert (run.configfiles, run.targets, run.rules) == ((), (), ())
    assert run.local is True
    assert run.cores is None
    assert run.bench_slots == 1


def test_while_the_snakefile_is_parsed_the_targets_are_not_known():
    """The Snakefile's own reads (configfiles, reporting) work before Snakemake hands over
    the DAG settings; the targets then are None, never an empty tuple passing for none."""
    run = invocation(FakeWorkflow(configfiles=["a.yaml"], cores=2, parsing=True),
                     ["snakemake", "--report", "r.html"])
    assert (run.configfiles, run.reporting, run.cores) == (("a.yaml",), True, 2)
    assert run.targets is None and run.rules is None


def test_a_bench_slot_given_as_a_resource_object():
    """A resource Snakemake holds as an object with a value (or None: not set)."""
    slots = SimpleNamespace(value=4)
    assert invocation(FakeWorkflow(resources={"bench_slot": slots}), []).bench_slots == 4
    assert invocation(FakeWorkflow(resources={"bench_slot": None}), []).bench_slots == 1


@pytest.mark.parametrize("argv, reporting", [
    (["snakemake", "--report", "report.html"], True),
    (["snakemake", "--report=report.html"], True),
    (["snakemake", "--report", "report.html", "--report-after-run"], False),
    (["snakemake", "-c2", "results/tft/cpu/onnx_fp32/offline.csv"], False),
    (["snakemake", "--reporter", "x"], False),
])
def test_reporting_is_report_without_report_after_run(argv, reporting):
    assert invocation(FakeWorkflow(), argv).reporting is reporting


def test_the_command_line_is_sys_argv_by_default(monkeypatch):
    monkeypatch.setattr(invocation_module.sys, "argv", ["snakemake", "--report", "r.html"])
    assert invocation(FakeWorkflow()).reporting is True
    monkeypatch.setattr(invocation_module.sys, "argv", ["snakemake", "-c1"])
    assert invocation(FakeWorkflow()).reporting is False


def test_this_snakemake_is_the_one_it_reads():
    assert int(snakemake.__version__.split(".")[0]) == SNAKEMAKE_MAJOR == 9


@pytest.mark.parametrize("version", ["8.30.0", "10.0.0", "10.1.2"])
def test_another_snakemake_major_version_is_refused(monkeypatch, version):
    monkeypatch.setattr(snakemake, "__version__", version)
    with pytest.raises(WorkflowError) as refused:
        invocation(FakeWorkflow(), [])
    message = str(refused.value)
    assert f"Snakemake {version}" in message  # the version found
    assert "snakemake>=9,<10" in message  # what is supported
    assert "deploybench.settings.invocation" in message


def test_a_snakemake_9_minor_version_is_read(monkeypatch):
    monkeypatch.setattr(snakemake, "__version__", "9.99.0")
    assert invocation(FakeWorkflow(cores=2), []).cores == 2


# Snakemake's internals outside invocation.py: any attribute of `workflow` but its documented
# basedir, and the command line.
WORKFLOW_ATTRIBUTE = re.compile(r"(?<![\w/.])workflow\.(\w+)")  # not a file's name
COMMAND_LINE = re.compile(r"\bsys\.argv\b|\bfrom\s+sys\s+import\b[^\n]*\bargv\b")


def _internals(text: str) -> list[str]:
    return sorted({f"workflow.{m.group(1)}" for m in WORKFLOW_ATTRIBUTE.finditer(text)
                   if m.group(1) != "basedir"}
                  | {m.group(0) for m in COMMAND_LINE.finditer(text)})


def test_the_workflow_reads_no_snakemake_internals_but_through_invocation():
    files = [ROOT / "Snakefile", *sorted((ROOT / "rules").glob("*.smk"))]
    assert len(files) > 5, files
    found = {str(p.relative_to(ROOT)): hits for p in files if (hits := _internals(p.read_text()))}
    assert not found, found
    # the one place that reads them
    module = (ROOT / "scripts/deploybench/settings/invocation.py").read_text()
    assert "workflow.dag_settings" in module and "sys.argv" in module


@pytest.mark.parametrize("line, caught", [
    ("n = workflow.cores", ["workflow.cores"]),
    ("if workflow.local_exec:", ["workflow.local_exec"]),
    ("args = sys.argv[1:]", ["sys.argv"]),
    ("from sys import argv", ["from sys import argv"]),
    ("root = Path(workflow.basedir)", []),
    ("run = invocation(workflow)", []),
    ('report: "report/workflow.rst"', []),
])
def test_the_guard_catches_an_internal(line, caught):
    assert _internals(line) == caught
