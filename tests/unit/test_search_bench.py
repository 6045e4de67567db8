"""The search benchmark compares a partial grid only when asked."""

import contextlib
import importlib.util
import io
import sys
from types import SimpleNamespace

from deploybench import search
from deploybench.records import formats
from testkit.workflow import ROOT

ONLINE_COLUMNS = ["Batch", "Concurrency", "Inferences/Second", "p99 latency (ms)",
                  "avg latency (ms)", "Shared memory", "sum of components (ms)"]


def _bench(*args) -> SimpleNamespace:
    """scripts/benchmarks/bench_search.py's main in this process (six runs: a second of imports each
    as a command), its exit status and output as a command's."""
    spec = importlib.util.spec_from_file_location(
        "bench_search", ROOT / "scripts/benchmarks/bench_search.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = bench.main(list(args))
        except SystemExit as stop:  # its refusals: SystemExit(message)
            print(stop.code, file=sys.stderr)
            code = 1
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def test_the_bench_compares_a_partial_grid_only_when_asked(tmp_path):
    """A search kept with part of its grid measured (as the H100 one): the descent walked
    over the measured points against the best of them, with how many are missing; the
    plain call refuses, and so does a walk that needs a missing point."""
    dims = {"instances": [1, 2], "max_queue_delay_us": [100, 1000]}
    throughput = {"i1-q100": 1000.0, "i2-q100": 3000.0, "i2-q1000": 2000.0, "i1-q1000": 9000.0}
    (tmp_path / "search.json").write_text(formats.text({
        "key": {"model": "m", "gpu": "h100", "backend": "aoti-cg", "precision": "fp16"},
        "grid": search.grid(dims), "dimensions": dims, "reference": "i1-q100",
        "p99_budget_ms": 25, "rank": "measured", "descent_passes": 1}))

    def measured(*names):
        for name in names:
            (tmp_path / name).mkdir(exist_ok=True)
            (tmp_path / name / "point.json").write_text(formats.text({"status": "ok", "online": [
                {"concurrency": 8, "throughput": throughput[name], "p99_ms": 20.0}]}))

    measured("i1-q100", "i2-q100")  # the descent then needs i2-q1000
    assert "not built: 2 of 4 points missing" in _bench("--folder", str(tmp_path)).stderr
    walk = _bench("--folder", str(tmp_path), "--measured")
    assert walk.returncode == 1 and "needs point 'i2-q1000'" in walk.stderr
    measured("i2-q1000")  # i1-q1000, the grid's best, unmeasured: the descent skips it
    out = _bench("--folder", str(tmp_path), "--measured").stdout
    assert "grid of 4 points, 3 measured (the grid best below is of those)" in out
    assert "descent's pick: i2-q100, 3,000 inf/s, after 3 points" in out
    assert "descent / grid throughput within the budget: 1.000" in out
    assert "points measured: 3 of 4 = 0.75" in out
    measured("i1-q1000")  # the full grid: its best is the point the descent skipped
    out = _bench("--folder", str(tmp_path)).stdout
    assert "grid's best: i1-q1000, 9,000 inf/s" in out
    assert "descent / grid throughput within the budget: 0.333" in out

    # repeats kept elsewhere: i1-q1000 once slower than i2-q100 (the descent then finds
    # the grid's best: 1.0), i2-q100 twice more (a history/) as before
    def online_csv(path, throughput):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{','.join(ONLINE_COLUMNS)}\n1,8,{throughput},20.0,10.0,none,10.0\n")

    online_csv(tmp_path / "again/i1-q1000/online.csv", 1500.0)
    for stamp in ("20261125T0100Z", "20261125T0200Z"):
        online_csv(tmp_path / f"again/i2-q100/history/online-{stamp}.csv", 3000.0)
    out = _bench("--folder", str(tmp_path), "--runs", str(tmp_path / "again")).stdout
    assert "over 6 combinations of each point's runs: 2 points with 2-3 runs" in out
    # i1-q1000's first run: 0.333 (three combinations), its second: 1.0 (three)
    assert "min 0.333, median 0.667, >= 0.95 in 50%" in out
    assert "grid's best: i1-q1000 50%, i2-q100 50%" in out
    assert "descent's pick: i2-q100 100%" in out
    (tmp_path / "stray/logs").mkdir(parents=True)  # no table: not a point, passed over
    online_csv(tmp_path / "stray/i9-q1/online.csv", 10.0)
    assert "'i9-q1' is not a measured point" in _bench(
        "--folder", str(tmp_path), "--runs", str(tmp_path / "stray")).stderr
