"""What Snakemake was asked for, read from Snakemake's own state in this one place: the
rules and the Snakefile read nothing of it elsewhere. None of it is Snakemake's documented
API, so it is read for the major version this workflow was written against
(pyproject.toml: snakemake>=9,<10) and refused under any other."""

from __future__ import annotations

import sys
from dataclasses import dataclass

SNAKEMAKE_MAJOR = 9  # the Snakemake whose workflow attributes invocation() reads


@dataclass(frozen=True)
class Invocation:
    configfiles: tuple  # --configfile, in order, as given
    # the files and rules named on the command line, sorted, and those of them that are
    # rules; None while the Snakefile is parsed: Snakemake hands the workflow its DAG
    # settings only after (read them in an input function or a handler)
    targets: tuple[str, ...] | None
    rules: tuple[str, ...] | None
    reporting: bool  # `--report` without --report-after-run: the DAG is only reported
    local: bool  # jobs run here, not through a cluster executor (known once jobs run)
    cores: int | None  # --cores (None: not given)
    bench_slots: int  # the bench_slot resource the profile gives (1: none)


def invocation(workflow, argv: list[str] | None = None) -> Invocation:
    """The run Snakemake's `workflow` was started for (and `argv`, its command line)."""
    import snakemake
    from snakemake.exceptions import WorkflowError

    major = int(snakemake.__version__.split(".")[0])
    if major != SNAKEMAKE_MAJOR:
        raise WorkflowError(
            f"this workflow reads Snakemake {SNAKEMAKE_MAJOR}'s own state "
            f"(deploybench.settings.invocation); this is Snakemake {snakemake.__version__}: "
            f"install snakemake>={SNAKEMAKE_MAJOR},<{SNAKEMAKE_MAJOR + 1} (pyproject.toml)")
    argv = sys.argv if argv is None else argv
    dag = workflow.dag_settings  # None while the Snakefile is parsed
    targets = None if dag is None else tuple(sorted(dag.targets))
    try:
        cores = workflow.cores
    except WorkflowError:  # no --cores given
        cores = None
    slots = workflow.global_resources.get("bench_slot")
    return Invocation(
        configfiles=tuple(workflow.config_settings.configfiles),
        targets=targets,
        rules=None if targets is None else tuple(t for t in targets if workflow.is_rule(t)),
        reporting=any(a == "--report" or a.startswith("--report=") for a in argv)
        and "--report-after-run" not in argv,
        local=workflow.local_exec,
        cores=cores,
        bench_slots=int(getattr(slots, "value", slots) or 1),
    )
