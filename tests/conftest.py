import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "config" / "tiny.yaml"
# model_overrides for a test that measures the tiny TFT again and needs only some level of
# each scenario: one, without warm-up
ONE_LEVEL = {"tft-tiny": {"offline": {"batch_sizes": [4], "warmup_windows": 0},
                          "online": {"concurrency": [2], "warmup_windows": 0}}}
# The checkout under test first, in this process and in every process it starts: a
# PYTHONPATH naming another checkout's scripts/ would otherwise import that one's package
# (a test changing this checkout's code would then see no change).
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT / "scripts"), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
sys.path.insert(0, str(ROOT / "scripts"))
# the tools the tests import as modules (results_archive, bench_incremental, pack_offline)
sys.path[1:1] = [str(ROOT / "scripts" / d) for d in ("benchmarks", "machines", "results_tools")]


def pytest_collection_modifyitems(config, items):
    """A test marked `gpu` needs a CUDA GPU: skipped where there is none (`pytest -m gpu`
    selects every one, as scripts/machines/gpu_tests.sh runs them on a lent machine)."""
    marked = [item for item in items if item.get_closest_marker("gpu")]
    if not marked:
        return
    import torch

    if not torch.cuda.is_available():
        for item in marked:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))


def main_config(**overrides) -> dict:
    """The main config with the tiny test config merged in, as Snakemake would."""
    from deploybench.settings.config import deep_merge

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config = deep_merge(config, yaml.safe_load(TINY.read_text()))
    return deep_merge(config, overrides)


def reference_opset(model: str) -> int:
    """The ONNX opset a model's reference exported with (its config's export.onnx_opset)."""
    config = yaml.safe_load((ROOT / "config" / "models" / f"{model}.yaml").read_text())
    return config["export"]["onnx_opset"]


def snakemake(workdir: Path, *args: str, check: bool = True, profile: str | None = None,
              project: Path = ROOT, prelude: str = "") -> subprocess.CompletedProcess:
    """Run the real snakemake on the repository's Snakefile with the tiny config, locally
    or with one of the repository's workflow profiles (e.g. "slurm"); `project`: another
    copy of the repository, whose Snakefile and package run instead; `prelude`: Python run
    in snakemake's process before its command line (not in the jobs it starts)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    if project != ROOT:
        env["PYTHONPATH"] = f"{project / 'scripts'}{os.pathsep}{env['PYTHONPATH']}"
    main = ["-c", f"{prelude}\nfrom snakemake.cli import main\nmain()"] if prelude else [
        "-m", "snakemake"]
    cmd = [sys.executable, *main, "--snakefile", str(project / "Snakefile"),
           "--directory", str(workdir), "--configfile", str(TINY)]
    if profile:
        cmd += ["--workflow-profile", str(ROOT / "profiles" / profile), *args]
    else:  # --resources after args: it takes several values
        cmd += ["-c2", *args, "--resources", "bench_slot=1"]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir)
    if check and result.returncode != 0:
        logs = "\n".join(
            f"--- {p}\n{p.read_text()[-3000:]}" for p in sorted(workdir.rglob("logs/*.log"))
        )
        raise AssertionError(f"snakemake failed:\n{result.stdout[-4000:]}\n"
                             f"{result.stderr[-6000:]}\n{logs}")
    return result


def measuring_rules() -> set[str]:
    """The rules of the measuring group (`group: DEVICE_GROUP` in rules/*.smk, and those a
    `use rule` derives from them): a configuration's steps that share one cluster job."""
    text = "\n".join(p.read_text() for p in sorted((ROOT / "rules").glob("*.smk")))
    grouped = set(re.findall(r"^(?:rule|checkpoint) (\w+):(?:\n    .*)*?\n    group:\n"
                             r"        DEVICE_GROUP", text, re.M))
    for base, derived in re.findall(r"^use rule (\w+) as (\w+)", text, re.M):
        if base in grouped:
            grouped.add(derived)
    return grouped


def planned_jobs(result: subprocess.CompletedProcess) -> dict[str, int]:
    """rule -> count of a dry-run's job table."""
    table = re.search(r"^job\s+count\n-+\s+-+\n(.*?)^total", result.stdout, re.M | re.S)
    if not table:
        return {}
    return {line.split()[0]: int(line.split()[1]) for line in table.group(1).splitlines()}


def corrupt_tensor_bytes(path: Path) -> Path:
    """A zip checkpoint (torch.save) with one byte of its largest tensor flipped, its size
    and names unchanged: torch itself would load it, as other weights."""
    import struct
    import zipfile

    with zipfile.ZipFile(path) as z:
        entry = max((i for i in z.infolist() if "/data/" in i.filename),
                    key=lambda i: i.file_size)
    data = bytearray(path.read_bytes())
    name_len, extra_len = struct.unpack("<HH", data[entry.header_offset + 26:
                                                    entry.header_offset + 30])
    data[entry.header_offset + 30 + name_len + extra_len + entry.file_size // 2] ^= 0xFF
    path.write_bytes(data)
    return path


@pytest.fixture(scope="session")
def tiny_build(tmp_path_factory) -> Path:
    """The tiny config's default build (tft-tiny, cpu, onnx, fp32: every step and report),
    made once a session and never changed: a module copies it (copy_build) and re-runs
    only what its own settings change, as a user's second run would."""
    work = tmp_path_factory.mktemp("tiny-build")
    result = snakemake(work)
    (work / "terminal.txt").write_text(result.stderr + result.stdout)  # what the user saw
    return work


def copy_build(build: Path, to: Path) -> Path:
    """A copy of a built workdir (results, Snakemake's records, their times) at `to`."""
    shutil.copytree(build, to, symlinks=True)
    return to


@pytest.fixture(scope="session")
def settings():
    from deploybench.settings.resolve import Settings

    return Settings(main_config())


def needs(module: str):
    """An optional package a test needs (the tf extra, scikit-learn): the test is skipped
    where it is not installed, and fails under CI, which installs every extra."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"'{module}' is not installed: CI installs every extra "
                        "(scripts/setup.sh)", pytrace=False)
        pytest.skip(f"'{module}' is not installed", allow_module_level=True)


# Debian's Chromium (apt package chromium), never a browser Playwright downloads. Without
# the background-networking flags it keeps opening connections a closed network refuses;
# --no-sandbox: its sandbox cannot start as root in a container.
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]


@pytest.fixture(scope="session")
def chromium():
    """Headless Chromium driven by Playwright: skipped where Chromium is not installed,
    failed under CI, which installs it (.ci/run) and Playwright (the test extra)."""
    if not CHROMIUM.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is not installed: .ci/run installs Debian's chromium",
                        pytrace=False)
        pytest.skip(f"{CHROMIUM} is not installed (Debian: apt-get install chromium)")
    sync_api = needs("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


def perf_commands(log: Path, warm_up: bool = False) -> list[list[str]]:
    """The perf_analyzer command lines a measuring step ran, from its log (or those of its
    discarded warm-up)."""
    mark = "[warm-up, discarded] $ " if warm_up else "$ "
    return [line[len(mark):].split() for line in log.read_text().splitlines()
            if line.startswith(mark)]


def flag(command: list[str], name: str) -> str | None:
    return command[command.index(name) + 1] if name in command else None


# The client's own time between a response and its next request, outside the latency: an
# absolute cost a request (perf_analyzer's loop, the loopback), up to 0.1 ms on a busy 2-core
# machine, and what a level's own jitter adds. The committed CPU and GPU tables at
# concurrency up to 16 lie within it; perf_analyzer's clients at 150 or more (an H100's
# online sweeps) spend longer, and no test measures there.
CLIENT_MS, CLIENT_SHARE = 0.1, 0.02


def check_littles_law(table, what: str, time_windows: bool = False) -> None:
    """Throughput = batch x concurrency / average latency, less the client's own time
    between a response and its next request (CLIENT_MS + CLIENT_SHARE of the latency at
    most): a throughput 5 % below the law fails wherever the latency is 3.3 ms or more, one
    15 % below it at 0.8 ms or more, and nothing is ever 15 % below it. Never above the law,
    but for time windows: a request begun before a window counts in it, and on a busy host
    a window outlasts its nominal length (tiny FastPitch, 1-s windows: 1.036 on
    2026-11-24)."""
    per_request_ms = table["Batch"] * table["Concurrency"] / table["Inferences/Second"] * 1e3
    client_ms = per_request_ms - table["avg latency (ms)"]
    ratio = table["avg latency (ms)"] / per_request_ms
    assert ratio.between(0.85, 1.05 if time_windows else 1.02).all(), (what, table, ratio)
    allowed = CLIENT_MS + CLIENT_SHARE * table["avg latency (ms)"]
    assert (client_ms <= allowed).all(), (what, table, client_ms, allowed)


def check_measurements(run: Path, config: dict, online: bool = True,
                       flattened: bool = False) -> None:
    """What the measuring steps of one configuration wrote is consistent with itself and
    with what ran: every row obeys Little's law (check_littles_law), perf_analyzer really
    ran with each scenario's flags (from its log), the native rows are timings of at least
    ten iterations, and the floor costs the server less than the model. `online`: the
    configuration has an online scenario (run_facts.serves_online); `flattened`: its offline
    requests carry the batch inside their tensors (an ensemble: perf_analyzer at -b 1)."""
    perf = main_config()["perf"]

    def batch_sent(command: list[str]) -> str:
        """The batch a request carried: -b, or an ensemble's keys over its ids a sample."""
        if not flattened:
            return flag(command, "-b")
        assert flag(command, "-b") == "1", command
        ids = next(t for t in config["inputs"] if t["name"] == config["ensemble"]["sparse_input"])
        keys = next(a for a in command if a.startswith("--shape=EMB_KEY:")).split(":")[1]
        return str(int(keys) // ids["dims"][0])

    for scenario in ("offline", "online") if online else ("offline",):
        _check_scenario(run, config[scenario], scenario, perf, batch_sent)
    _check_native_and_floor(run, config)


def _check_scenario(run: Path, settings: dict, scenario: str, perf: dict, batch_sent) -> None:
    """check_measurements of one scenario: its table, its perf_analyzer command lines, the
    step's progress lines."""
    import pandas as pd

    from deploybench.records.tables import COMPONENT_SUM, COMPONENTS
    from deploybench.settings.run_facts import shared_memory_modes

    table = pd.read_csv(run / f"{scenario}.csv")
    # the scenario's mode, else the run's (perf: the tiny configs' quarter-second windows)
    mode = settings.get("measurement_mode", perf["measurement_mode"])
    check_littles_law(table, scenario, mode == "time_windows")
    # the reference documents' average: the components added up, beside perf_analyzer's
    summed = table[COMPONENTS].sum(axis=1)
    assert ((table[COMPONENT_SUM] - summed).abs() < 0.002).all(), table
    log = run / "logs" / f"{scenario}_perf_analyzer.log"
    commands = perf_commands(log)
    ran = [(batch_sent(c), flag(c, "--concurrency-range")) for c in commands]
    if scenario == "offline":
        wanted = [(str(b), "1:1") for b in settings["batch_sizes"]]
        modes = shared_memory_modes(settings)
        wanted = [row for _ in modes for row in wanted]  # one sweep per mode
        used = [flag(c, "--shared-memory") or "none" for c in commands]
        assert list(dict.fromkeys(used)) == modes, used
        assert set(table["Shared memory"]) == set(modes), table
    else:
        wanted = [(str(settings["batch_size"]), f"{c}:{c}") for c in settings["concurrency"]]
        assert all("--shared-memory" not in c for c in commands), commands
    protocol = settings.get("protocol", "grpc" if scenario == "offline" else "http")
    interval = settings.get("measurement_interval_ms", perf["measurement_interval_ms"])
    # retries double the interval; an online level short of perf.min_requests is
    # measured again with windows as many times longer as its tail says
    tails = json.loads((run / f"{scenario}.json").read_text()).get("tail", [])
    scales = {1} | {t.get("windows_lengthened", 1) for t in tails}
    lengths = {interval * s * 2**i for s in scales for i in range(4)}
    for command in commands:
        assert flag(command, "-i") == protocol, command
        assert flag(command, "--measurement-mode") == mode, command
        if mode == "time_windows":
            assert int(flag(command, "-p")) in lengths, (command, scales)
            assert "--measurement-request-count" not in command, command
    # retries repeat a row
    assert [r for i, r in enumerate(ran) if i == 0 or r != ran[i - 1]] == wanted, ran
    # where the step was, after each level, in its log
    said = re.findall(rf"^{scenario} \([\w-]+\): (\d+)/(\d+) \(batch (\d+), ",
                      (run / "logs" / f"{scenario}.log").read_text(), re.M)
    batches = [str(b) for b in table["Batch"]]
    assert said == [(str(i), str(len(wanted)), b) for i, b in enumerate(batches, 1)]
    _check_warm_up(log, table, settings, scenario, perf, mode, interval)


def _check_warm_up(log: Path, table, settings: dict, scenario: str, perf: dict, mode: str,
                   interval: int) -> None:
    """The warm-up: each of its levels (warmup_levels, [batch, concurrency]: max and max/2
    of the sweep's; its largest row by default) in each shared-memory mode, before the
    sweep, the window `warmup_windows` times as long."""
    from deploybench.triton.perf_analyzer import ANY_SPREAD

    warm = perf_commands(log, warm_up=True)
    windows = settings.get("warmup_windows", 0)
    tops = (int(table["Batch"].max()), int(table["Concurrency"].max()))
    levels = [[v if isinstance(v, int) else top // 2 if v == "max/2" else top
               for v, top in zip(level, tops)]
              for level in settings.get("warmup_levels") or [["max", "max"]]]
    modes = dict.fromkeys(table["Shared memory"])
    assert [(flag(c, "-b"), flag(c, "--concurrency-range")) for c in warm] == (
        [(str(b), f"{c}:{c}") for _ in modes for b, c in levels] if windows else []), warm
    for command in warm:
        assert flag(command, "-s") == str(ANY_SPREAD), command  # three windows, any spread
        if mode == "time_windows":
            assert flag(command, "-p") == str(interval * windows), command
        else:  # online's count: a third of perf.min_requests at least
            count = settings["measurement_request_count"]
            if scenario == "online":
                count = max(count, -(-perf.get("min_requests", 0) // 3))
            assert flag(command, "--measurement-request-count") == str(
                count * windows), command


def _check_native_and_floor(run: Path, config: dict) -> None:
    """Native rows timed over ten iterations at least; the floor below the model."""
    import pandas as pd

    native = pd.read_csv(run / "native.csv")
    assert list(native["Batch"]) == config["offline"]["batch_sizes"]
    assert (native["iterations"] >= 10).all(), native
    timed = native["Batch"] / (native["median latency (ms)"] / 1e3)
    assert ((native["Inferences/Second"] / timed - 1).abs() < 0.01).all(), native

    # the floor: an identity model over the same data path, at the smallest and largest
    # offline batch; it computes nothing, so the server spends no more in it than in the
    # model, served by the same backend (the python stub's floor is above a tiny model the
    # C++ backend serves). A tiny model's own compute is below the data path's run-to-run
    # noise (Wide & Deep's: 0.69 ms served against a floor of 0.45-0.79 ms on a shared
    # 2-core machine), so the floor may exceed it by that noise, not by more.
    floor = pd.read_csv(run / "floor.csv")
    batches = config["offline"]["batch_sizes"]
    assert sorted(set(floor["Batch"])) == sorted({min(batches), max(batches)}), floor
    check_littles_law(floor, "floor")
    offline = pd.read_csv(run / "offline.csv")
    compute = "Server Compute Infer (ms)"
    backends = set(offline["Served by"])
    if backends == {"ensemble"}:  # the backends of its parts
        server = json.loads((run / "offline.json").read_text())["provenance"]["server"]
        backends = set(server["ensemble_parts"].values())
    same_backend = floor[floor["Served by"].isin(backends)]
    assert len(same_backend), (floor, offline)
    for _, row in same_backend.iterrows():
        served = offline[(offline["Batch"] == row["Batch"])
                         & (offline["Shared memory"] == row["Shared memory"])]
        assert (row[compute] < 1.3 * served[compute]).all(), (row, served)


OTHER_USER = "deploybench-other"  # the second local user of the security tests


@pytest.fixture(scope="session")
def other_user():
    """Run commands as a second, unprivileged user of this host: `other_user(cmd, ...)`
    is subprocess.run as that user (created where the tests run as root; the tests that
    need one are skipped elsewhere, with the reason)."""
    import pwd

    if os.getuid() != 0:
        pytest.skip("acting as a second local user needs root (the tests create "
                    f"'{OTHER_USER}' where they run as root)")
    try:
        entry = pwd.getpwnam(OTHER_USER)
    except KeyError:  # another test process may create it at the same moment: no check
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", OTHER_USER], capture_output=True)
        entry = pwd.getpwnam(OTHER_USER)

    def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(cmd, user=entry.pw_uid, group=entry.pw_gid, extra_groups=[],
                              **kwargs)

    run.uid, run.gid = entry.pw_uid, entry.pw_gid
    return run


# In a mount namespace of the test's own: the installation of this environment's Python
# bound into a tmpfs over the folder that hides it (pyenv's under root's home, mode 0700),
# then the command as the user, every capability dropped.
_UNPRIVILEGED = """set -e
staging=$(mktemp -d)
if [ -n "$HIDDEN" ]; then
    mount --bind "$BASE" "$staging"
    mount -t tmpfs -o mode=755 tmpfs "$HIDDEN"
    mkdir -p "$BASE"
    mount --bind "$staging" "$BASE"
fi
uid=$RUN_UID gid=$RUN_GID
unset BASE HIDDEN RUN_UID RUN_GID
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all \
    --bounding-set=-all -- "$@"
"""


def unprivileged(user, cmd: list[str], env: dict, **popen) -> subprocess.Popen:
    """`cmd` started as `user` (other_user's) with no capability at all: an unprivileged
    user's process, this environment's Python made reachable to it (`_UNPRIVILEGED`)."""
    missing = [tool for tool in ("unshare", "setpriv", "mount") if not shutil.which(tool)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (util-linux) to act as an unprivileged user")
    base = Path(sys.base_prefix).resolve()
    hidden = next((a for a in reversed(base.parents) if not os.stat(a).st_mode & 0o001), None)
    if hidden:  # the folder within it that holds the installation (pyenv's: its shims too,
        # which the python backend's stub finds its Python through, on the PATH)
        base = hidden / base.relative_to(hidden).parts[0]
    setup = {"BASE": str(base), "HIDDEN": str(hidden or ""), "RUN_UID": str(user.uid),
             "RUN_GID": str(user.gid)}
    return subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                             _UNPRIVILEGED, "sh", *cmd], env={**env, **setup}, **popen)


def tiny_models(tmp_path, **changes) -> str:
    """A models folder with tft-tiny's config changed: `--config models_dir=<it>`."""
    from deploybench.settings.config import deep_merge

    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    model = yaml.safe_load((ROOT / "tests/config/models/tft-tiny.yaml").read_text())
    (models / "tft-tiny.yaml").write_text(yaml.safe_dump(deep_merge(model, changes)))
    return f"models_dir={models}"
