"""Cluster execution on a real Slurm: a private single-node cluster (munged, slurmctld,
slurmd from Debian's packages) with partitions named after the registry's a30 and t4 keys,
CPU nodes standing in for them (tests/config/slurm.yaml). The tiny TFT matrix goes
through the `slurm` profile (snakemake-executor-plugin-slurm); Slurm's own job records
must show every job in its partition, every output and log of the plan must be there,
and a re-run must submit nothing.

No accounting (slurmdbd) is needed: the plugin tracks jobs with squeue when slurmctld
keeps finished jobs long enough (MinJobAge). The a30 and t4 partitions give a job the
whole node (OverSubscribe=EXCLUSIVE), as Slurm's GPU allocation gives a benchmark its GPU.
"""

import getpass
import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from deploybench.settings.cluster import DEVICE_GROUP
from testkit.workflow import ROOT, TINY, snakemake

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "sinfo", "scancel")
STANDIN = ROOT / "tests" / "config" / "slurm.yaml"
# a30's configuration whole, t4's conversion check (a step on the device) beside it: each
# key's device jobs in its own partition, at the cost of one measuring job
TARGETS = ("all", "results/tft-tiny/t4/onnx_fp32/conversion_check.csv")
DEVICE_RULES = {"conversion_check"}  # on the device, outside the measuring group
ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING")
REPORTING = {"plots", "online_plot", "configuration_report", "model_report",
             "configuration_html", "model_html"}
# Site settings of this cluster: no accounting, so job states come from squeue.
SITE = ("--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1")
# A model's source steps (weights, data, evaluation set) as one job: a Slurm level fewer.
# Export and convert, which the test looks for, stay jobs of their own.
GROUPS = ("--groups", "weights=source", "generate_data=source", "eval_set=source")
# The plugin (2.6) waits 10 s longer before each status check after one that found no job
# finished (up to 180 s; Executor.check_active_jobs) and sleeps 5 s before every sbatch
# (Executor.run_job); no option changes either, and with jobs of seconds they were most of
# this test's time. The test's snakemake (not its jobs) checks every second (the setting
# above) and submits at once: timing only, the plugin's submission and status code run.
NO_WAITS = """\
import time, types
import snakemake_executor_plugin_slurm as plugin
plugin.time = types.SimpleNamespace(time=time.time, sleep=lambda seconds: None)
wait = plugin.Executor.next_seconds_between_status_checks
plugin.Executor.next_seconds_between_status_checks = wait.setter(
    lambda executor, seconds: wait.fset(executor, min(seconds, 1)))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(d: Path) -> str:
    host = socket.gethostname().split(".")[0]
    # slurmd -C: this machine's real CPUs and memory, as Slurm sees them.
    node = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True)
    node = re.sub(r"^NodeName=\S+", "NodeName=node1", node.stdout.splitlines()[0])
    return f"""\
ClusterName=deploybench-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge.socket
SlurmUser={getpass.getuser()}
SlurmdUser={getpass.getuser()}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
PlugStackConfig=/dev/null
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
MpiDefault=none
ReturnToService=2
MinJobAge=3600
SlurmctldTimeout=30
SlurmdTimeout=30
KillWait=5
{node} NodeAddr=127.0.0.1 NodeHostname={host} State=UNKNOWN
PartitionName=cpu Nodes=node1 Default=YES MaxTime=60 State=UP
PartitionName=a30 Nodes=node1 MaxTime=60 State=UP OverSubscribe=EXCLUSIVE
PartitionName=t4 Nodes=node1 MaxTime=60 State=UP OverSubscribe=EXCLUSIVE
"""


def slurm_jobs(check: bool = True) -> list[dict]:
    """Every job slurmctld knows (finished ones are kept for MinJobAge)."""
    out = subprocess.run(["squeue", "--states=all", "--noheader", "--format=%i|%P|%T|%k"],
                         capture_output=True, text=True, check=check).stdout
    keys = ("id", "partition", "state", "comment")
    return [dict(zip(keys, line.split("|", 3))) for line in out.splitlines() if line]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A running single-node Slurm for this module; every daemon stopped afterwards."""
    path = os.pathsep.join([os.environ["PATH"], "/usr/sbin", "/sbin"])  # daemons: sbin
    missing = [b for b in BINARIES if not shutil.which(b, path=path)]
    if missing:
        pytest.skip(f"Slurm binaries absent ({', '.join(missing)}): "
                    "apt-get install slurm-wlm munge (.ci/run does)")
    d = tmp_path_factory.mktemp("slurm")
    (d / "state").mkdir()
    (d / "spool").mkdir()
    key = d / "munge.key"
    key.write_bytes(os.urandom(128))
    key.chmod(0o600)
    # The job step plugin runs each job under srun with every SLURM_* variable dropped,
    # SLURM_CONF too: srun finds this private cluster's config through a wrapper.
    (d / "bin").mkdir()
    srun = d / "bin" / "srun"
    srun.write_text(f'#!/bin/sh\nSLURM_CONF={d}/slurm.conf exec '
                    f'{shutil.which("srun", path=path)} "$@"\n')
    srun.chmod(0o755)
    daemons = []
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PATH", f"{d / 'bin'}{os.pathsep}{path}")
        env.setenv("SLURM_CONF", str(d / "slurm.conf"))
        (d / "slurm.conf").write_text(slurm_conf(d))
        try:
            for name, cmd in (
                ("munged", ["munged", "--foreground", "--force", f"--socket={d}/munge.socket",
                            f"--key-file={key}", f"--pid-file={d}/munged.pid",
                            f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed"]),
                ("slurmctld", ["slurmctld", "-D"]),
                ("slurmd", ["slurmd", "-D", "-N", "node1"]),
            ):
                with open(d / f"{name}.out", "w") as out:
                    daemons.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT))
                if name == "munged":
                    wait_for(lambda: (d / "munge.socket").exists(), d, "munged's socket")
            wait_for(lambda: subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True,
                                            text=True).stdout.split() == ["idle"],
                     d, "idle node")
            yield d
        finally:  # cancel what a failed test left, let it end, stop the daemons
            subprocess.run(["scancel", "--full", "--user", getpass.getuser()],
                           capture_output=True, check=False)
            wait_for(lambda: not [j for j in slurm_jobs(check=False) if j["state"] in ACTIVE],
                     d, "end of the cancelled jobs", check=False)
            for daemon in reversed(daemons):
                daemon.terminate()
                try:
                    daemon.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    daemon.kill()
                    daemon.wait()


def wait_for(ready, d: Path, what: str, timeout_s: float = 30, check: bool = True) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            if not check:
                return
            logs = "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}"
                             for p in sorted(d.glob("*.log")) + sorted(d.glob("*.out")))
            raise AssertionError(f"Slurm did not come up: no {what} in {timeout_s} s\n{logs}")
        time.sleep(0.5)


def artifacts(work: Path) -> set[str]:
    """Relative paths of the results (history/ copies without their time stamps)."""
    return {re.sub(r"-\d{8}T\d{6}Z(?=\.)", "", str(p.relative_to(work)))
            for p in (work / "results").rglob("*") if p.is_file()}


def test_matrix_on_slurm_lands_in_the_keyed_partitions(slurm, tmp_path):
    config = (*TARGETS, "--configfile", str(TINY), str(STANDIN))  # targets first: the
    # files after --configfile are all config files
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    snakemake(cluster, *config, *SITE, *GROUPS, profile="slurm", prelude=NO_WAITS)

    jobs = slurm_jobs()
    assert jobs and all(job["state"] == "COMPLETED" for job in jobs), jobs
    # a configuration's measuring steps are one job (the profile's group-components)
    group = DEVICE_GROUP.format(model="tft-tiny", gpu="a30", backend="onnx", precision="fp32")
    placed = {}
    for job in jobs:  # the executor's comment: rule_<rule>_wildcards_<values joined by _>,
        # a group's: rule_<group>_<its rules joined by _>
        rule, _, values = job["comment"].removeprefix("rule_").partition("_wildcards_")
        if rule.startswith(f"{group}_"):
            steps = rule.removeprefix(f"{group}_").split("_")
            assert steps == ["accuracy", "floor", "native", "offline", "online"], job
            expected, rule = "a30", "measuring"
        else:
            gpu = values.split("_")[1] if values.count("_") >= 3 else None
            expected = gpu if rule in DEVICE_RULES else "cpu"
        assert job["partition"] == expected, job
        placed.setdefault(job["partition"], []).append(rule)
    assert sorted(placed["a30"]) == ["conversion_check", "measuring"], placed
    assert placed["t4"] == ["conversion_check"], placed
    assert {"export", "convert"} <= set(placed["cpu"]), placed
    # plots and reports run where snakemake runs (localrules), never as a job
    assert not REPORTING & {rule for rules in placed.values() for rule in rules}, placed

    # every output and log of the plan exists and is up to date, as a local run leaves them
    # (the local run it was once compared with took a third of the test's time)
    summary = snakemake(cluster, *config, "--detailed-summary").stdout.splitlines()
    assert summary[0].split("\t")[6:8] == ["status", "plan"], summary[0]
    rows = [line.split("\t") for line in summary[1:] if line.strip()]
    assert len(rows) > 20 and [r for r in rows if r[6:8] != ["ok", "no update"]] == []
    logs = {log for r in rows for log in r[3].split(",") if log not in ("", "-")}
    assert logs and {log for log in logs if not (cluster / log).is_file()} == set()
    built = artifacts(cluster)
    assert {r[0] for r in rows if not (cluster / r[0]).is_dir()} <= built
    report = json.loads((cluster / "results/tft-tiny/a30/onnx_fp32/accuracy.json").read_text())
    assert report["provenance"]["device_check"]["mismatch_allowed"] is True

    rerun = snakemake(cluster, *config, *SITE, *GROUPS, profile="slurm", prelude=NO_WAITS)
    assert "Nothing to be done" in rerun.stdout + rerun.stderr
    assert len(slurm_jobs()) == len(jobs)
