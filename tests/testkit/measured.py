"""What a measuring step recorded, checked: its perf_analyzer commands, Little's law
over its levels, the native and floor rows beside it."""

import json
import re
from pathlib import Path

from testkit.workflow import main_config


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
