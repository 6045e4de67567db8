"""A deployment's GPU count (triton.gpus, the search's `gpus`): Triton's instance groups, the
scaling the search's README reports, and the run file that measures both on two GPUs with
settings of its own (model_overrides)."""

from pathlib import Path

import pytest

from deploybench import search
from testkit.gpu_count import TWO_GPUS

ROOT = Path(__file__).resolve().parents[2]


def test_a_gpu_count_is_written_as_tritons_instance_groups_and_parsed_back(tmp_path):
    from deploybench.settings.config import ConfigError
    from deploybench.settings.resolve import Settings
    from deploybench.triton import config as triton_config
    from testkit.workflow import main_config, tiny_models

    models_dir = tiny_models(tmp_path, triton={"gpus": 2, "instances": 3}).split("=", 1)[1]
    config = main_config(models_dir=models_dir)
    run = Settings(config).run("tft-tiny", "h100", "ts-trace", "fp16")
    triton_config.write(triton_config.model_config("tft-tiny", run), tmp_path / "config.pbtxt")
    text = (tmp_path / "config.pbtxt").read_text()
    (group,) = triton_config.read(tmp_path / "config.pbtxt").instance_group
    assert list(group.gpus) == [0, 1] and group.count == 3 and "gpus: 1" in text
    one = Settings(main_config()).run("tft-tiny", "h100", "ts-trace", "fp16")
    triton_config.write(triton_config.model_config("tft-tiny", one), tmp_path / "one.pbtxt")
    assert not triton_config.read(tmp_path / "one.pbtxt").instance_group[0].gpus
    with pytest.raises(ConfigError, match="triton.gpus 2 needs a GPU key"):
        Settings(config).run("tft-tiny", "cpu", "onnx", "fp32")


def _point(instances, gpus, online, offline, status=search.OK):
    """A point's result: two online levels (the peak `online`), offline at batches 1 and
    1024 (`offline` at 1024)."""
    return {"status": status, "values": {"instances": instances, "gpus": gpus},
            "online": [{"concurrency": 64, "throughput": online * 0.8, "p99_ms": 5.0},
                       {"concurrency": 128, "throughput": online, "p99_ms": 9.0}],
            "offline": [{"batch": 1, "throughput": 900.0},
                        {"batch": 1024, "throughput": offline}]}


def test_the_search_readme_scales_each_gpu_count_against_the_fewest():
    """Points that differ only in their GPU count: throughput, per GPU, and the ratio to
    the fewest GPUs', online (the peak) and offline (at the largest batch); a failed point
    says so; points of other values are compared among themselves."""
    from deploybench.reporting.search_report import _scaling

    results = {"i2-g1": _point(2, 1, 100_000, 150_000), "i2-g2": _point(2, 2, 190_000, 240_000),
               "i4-g1": _point(4, 1, 110_000, 150_000),
               "i4-g2": _point(4, 2, 0, 0, status=search.FAILED)}
    rows = [[cell.strip() for cell in line.strip("|").split("|")][1:]
            for line in _scaling(list(results), results).splitlines() if line.startswith("| [")]
    assert rows == [["1", "100,000", "100,000", "1.00", "150,000", "150,000", "1.00"],
                    ["2", "190,000", "95,000", "1.90", "240,000", "120,000", "1.60"],
                    ["1", "110,000", "110,000", "1.00", "150,000", "150,000", "1.00"],
                    ["2", "failed", "", "", "", "", ""]]
    assert _scaling(["i2-g1"], results) == ""  # nothing to scale against
    assert _scaling(["i2"], {"i2": {**results["i2-g1"], "values": {"instances": 2}}}) == ""


def test_a_run_files_model_overrides_reach_its_runs_and_are_checked():
    """model_overrides: a run file's own settings over a model's config, validated as one;
    an unknown model or a bad value is refused by name. offline.concurrency puts that many
    requests in flight at each batch size."""
    from deploybench.settings.config import ConfigError
    from deploybench.settings.resolve import Settings
    from deploybench.triton import perf_analyzer
    from testkit.workflow import main_config

    overrides = {"model_overrides": {"tft-tiny": {"offline": {"concurrency": 4,
                                                              "batch_sizes": [1, 8]}}}}
    run = Settings(main_config(**overrides)).run("tft-tiny", "cpu", "onnx", "fp32")
    assert [(r.batch, r.concurrency) for r in perf_analyzer.sweep(run, "offline")] == [
        (1, 4), (8, 4)]
    plain = Settings(main_config()).run("tft-tiny", "cpu", "onnx", "fp32")
    assert {r.concurrency for r in perf_analyzer.sweep(plain, "offline")} == {1}
    with pytest.raises(ConfigError, match="model_overrides key .* 'tft'; valid"):
        _ = Settings(main_config(model_overrides={"tft": {}})).models
    bad = main_config(model_overrides={"tft-tiny": {"offline": {"concurrency": 0}}})
    with pytest.raises(ConfigError, match="with model_overrides.tft-tiny"):
        _ = Settings(bad).models


def test_the_two_gpu_passes_measure_each_step_again_where_it_ran_together(tmp_path):
    """scripts/machines/two_gpus_passes.sh with two stand-in GPUs (`nvidia-smi -L`) and a stand-in
    for its snakemake runs (offline_run.sh, which records how it was called and writes
    each JSON target with the GPU it ran on): the together pass asks for every offline and
    online step with two bench slots; alone measures each step again with only the GPU it
    had together visible and that GPU's share of the CPUs; again does it once more for the
    models AGAIN names; each pass's earlier outputs are kept, not overwritten."""
    import json
    import os
    import subprocess

    work, bin_ = tmp_path / "work", tmp_path / "bin"
    (work / ".repo/scripts/machines").mkdir(parents=True)
    (work / ".repo/config/runs").mkdir(parents=True)
    bin_.mkdir()
    (work / ".repo/config/runs/two-gpus.yaml").write_text(TWO_GPUS.read_text())
    calls = tmp_path / "calls.jsonl"
    stand_ins = {
        bin_ / "nvidia-smi": "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaa)'\n"
                             "echo 'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbb)'\n",
        bin_ / "taskset": 'shift; echo "$1" > "$CPUS"; shift; exec "$@"\n',
        # together: TFT on GPU 0, BERT on GPU 1, as the claims could have placed them
        work / ".repo/scripts/machines/offline_run.sh": f"""
python3 - "$@" <<'PY'
import json, os, sys
from pathlib import Path
targets = [a for a in sys.argv[1:] if a.startswith("results/")]
cpus = Path(os.environ["CPUS"])
with open({str(calls)!r}, "a") as f:
    f.write(json.dumps({{"targets": targets, "slots": os.environ["DEPLOYBENCH_BENCH_SLOTS"],
                        "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                        "cpus": cpus.read_text().strip() if cpus.exists() else None}}) + "\\n")
cpus.unlink(missing_ok=True)
for t in targets:
    device = os.environ.get("CUDA_VISIBLE_DEVICES") or ("GPU-bbb" if "/bert/" in t else "GPU-aaa")
    Path(t).parent.joinpath("logs").mkdir(parents=True, exist_ok=True)
    Path(t).parent.joinpath("benchmarks").mkdir(exist_ok=True)
    Path(t).write_text(json.dumps({{"provenance": {{"device": device}}}}))
    Path(t).with_suffix(".csv").write_text(device + "\\n")
PY
"""}
    for path, text in stand_ins.items():
        path.write_text(f"#!/bin/bash\n{text}")
        path.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "work": str(work),
           "PASSES": "together alone again", "AGAIN": "bert", "CPUS": str(tmp_path / "cpus")}
    subprocess.run(["bash", ROOT / "scripts/machines/two_gpus_passes.sh"], env=env, check=True,
                   timeout=120)

    ran = [json.loads(line) for line in calls.read_text().splitlines()]
    tft, bert = "results/tft/h100/ts-trace_fp16", "results/bert/h100/ts-trace_fp16"
    steps = [f"{c}/{s}.json" for c in (tft, bert) for s in ("offline", "online")]
    assert ran[0] == {"targets": steps, "slots": "2", "visible": None, "cpus": None}
    half = os.cpu_count() // 2
    on = {"GPU-aaa": f"0-{half - 1}", "GPU-bbb": f"{half}-{2 * half - 1}"}
    expected = [(s, "GPU-aaa" if "/tft/" in s else "GPU-bbb") for s in steps] + \
        [(s, "GPU-bbb") for s in steps[2:]]  # again: BERT's steps only
    assert [(r["targets"], r["slots"], r["visible"], r["cpus"]) for r in ran[1:]] == [
        ([s], "1", gpu, on[gpu]) for s, gpu in expected]
    phases = (work / "phases.tsv").read_text().splitlines()
    assert [line.split("\t")[0] for line in phases] == \
        ["pass", "together"] + ["alone"] * 4 + ["again"] * 2
    for model, kept in (("tft", ("together",)), ("bert", ("together", "alone"))):
        for way in kept:
            folder = work / f"results/{model}/h100/{way}/ts-trace_fp16"
            assert sorted(p.name for p in folder.iterdir()) == [
                "benchmarks", "logs", "offline.csv", "offline.json", "online.csv",
                "online.json"], folder
    assert not (work / "results/tft/h100/alone").exists()  # AGAIN named BERT only


class Lanes:
    """scripts/machines/gpu_lanes.sh over a small lanes file, with stand-in GPUs (`gpus`, the lines
    `nvidia-smi -L` prints) and a stand-in `taskset` that records the run it would start
    and starts none."""

    def __init__(self, tmp_path):
        import os
        import sys

        self.tmp, bin_, offline = tmp_path, tmp_path / "bin", tmp_path / "offline"
        bin_.mkdir()
        (offline / "site").mkdir(parents=True)  # as if unpacked: the bundle is not needed
        self.calls, self.gpus = tmp_path / "calls.txt", tmp_path / "gpus.txt"
        self.gpus.write_text("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaa)\n"
                             "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbb)\n")
        stand_ins = {
            "nvidia-smi": f"cat {self.gpus}\n",
            "taskset": f'echo "$CUDA_VISIBLE_DEVICES $2 $(basename "$DEPLOYBENCH_WORKDIR") '
                       f'$RUNFILE ${{*:6}}" >> {self.calls}\n'
                       f'echo "$PYTHONPATH" >> {tmp_path}/pythonpath.txt\n'
                       # as gpu_session.sh: its workdir, and the host's GPUs in its OUT
                       'mkdir -p "$DEPLOYBENCH_WORKDIR" "$OUT" && nvidia-smi > "$OUT/gpu.txt"\n'}
        for name, text in stand_ins.items():
            (bin_ / name).write_text(f"#!/bin/bash\n{text}")
            (bin_ / name).chmod(0o755)
        self.file = tmp_path / "lanes"
        self.file.write_text("# lane name runfiles target...\n"
                             "0 a config/runs/h100-reference.yaml results/a/README.md\n"
                             "1 b config/runs/h100-reference.yaml,config/runs/python-served.yaml "
                             "results/b/offline.csv results/b/online.csv  # python\n"
                             "2 c config/runs/h100-reference.yaml results/c/{gpu}/README.md\n")
        # python3 (which finds the key) is this one
        path = f"{bin_}:{Path(sys.executable).parent}:{os.environ['PATH']}"
        self.env = {**os.environ, "PATH": path, "OUT": str(tmp_path / "out"),
                    "DEPLOYBENCH_LANES_DIR": str(tmp_path / "lanes.d"),
                    "DEPLOYBENCH_OFFLINE_DIR": str(offline), "PYTHONPATH": "/the/callers"}

    def run(self, *names):
        """One call: its result, and the runs it started."""
        import subprocess

        self.calls.unlink(missing_ok=True)
        done = subprocess.run(["bash", ROOT / "scripts/machines/gpu_lanes.sh", "0", self.file,
                               *names],
                              env=self.env, capture_output=True, text=True, timeout=60)
        started = self.calls.read_text().splitlines() if self.calls.exists() else []
        return done, started


def test_the_lanes_start_each_gpus_first_run_of_those_named(tmp_path):
    """Each GPU's first run of the file, lane n on GPU n mod 2, pinned to that GPU's half
    of the CPUs; NAMEs narrow the runs to those (so a GPU's later run starts where its
    first is not named); `{gpu}` in a target becomes the key of the host's GPUs, and a
    host no one key matches is refused; an unknown NAME is refused with the file's runs."""
    import os
    import tarfile

    lanes = Lanes(tmp_path)
    half = os.cpu_count() // 2
    first, second = f"0-{half - 1}", f"{half}-{2 * half - 1}"
    done, started = lanes.run()
    assert done.returncode == 0, done.stderr
    # each run's paths are the caller's: not this shell's, which offline_env.sh gave the
    # tree's package, the files the next call's copy replaces under a running job
    assert (tmp_path / "pythonpath.txt").read_text().splitlines() == ["/the/callers"] * 2
    assert started == [
        f"0 {first} a config/runs/h100-reference.yaml results/a/README.md",
        f"1 {second} b config/runs/h100-reference.yaml config/runs/python-served.yaml "
        "results/b/offline.csv results/b/online.csv"]
    done, started = lanes.run("c")  # GPU 0's second run, its first not named
    assert done.returncode == 0, done.stderr
    assert started == [f"0 {first} c config/runs/h100-reference.yaml results/c/h100/README.md"]
    # the host's GPUs, written once as a run starts, kept with it to go back at every call
    assert (tmp_path / "lanes.d/a/gpu.txt").read_bytes() == lanes.gpus.read_bytes()
    with tarfile.open(tmp_path / "out/lanes.tar") as bundle:
        assert bundle.extractfile("c/gpu.txt").read() == lanes.gpus.read_bytes()
    assert "{gpu}: h100" in done.stdout, done.stdout
    lanes.gpus.write_text("GPU 0: NVIDIA H200 (UUID: GPU-ccc)\n")
    done, started = lanes.run("c")
    assert started == [f"0 0-{os.cpu_count() - 1} c config/runs/h100-reference.yaml "
                       "results/c/h200/README.md"], (started, done.stderr)
    lanes.gpus.write_text("GPU 0: NVIDIA H200 (UUID: GPU-ccc)\n"
                          "GPU 1: NVIDIA L4 (UUID: GPU-ddd)\n")
    done, started = lanes.run("c")
    assert done.returncode == 2 and started == [], done.stderr
    assert "no one GPU key" in done.stderr and "NVIDIA L4" in done.stderr, done.stderr
    done, started = lanes.run("c", "z")
    assert done.returncode == 2 and started == []
    assert "no run 'z'" in done.stderr and " a b c " in done.stderr, done.stderr


def test_a_run_that_has_ended_comes_back_at_every_call_in_one_file(tmp_path):
    """The device brings back 8 files a call: every run's log, GPUs and results come back
    in one file, lanes.tar, at every call, also after the call that packed them."""
    import shutil
    import tarfile

    lanes = Lanes(tmp_path)
    ended = tmp_path / "lanes.d" / "a"
    (ended / "results/m/cpu/x_fp32").mkdir(parents=True)
    (ended / "results/m/cpu/x_fp32/offline.csv").write_text("Batch\n1\n")
    (ended / "snakemake.log").write_text("Finished jobid: 1\n")
    (ended / "snakemake.rc").write_text("0\n")
    (ended / "gpu.txt").write_text("NVIDIA H200, 580.159.04, 143771 MiB\n")
    for _ in range(2):
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        done, started = lanes.run("a")
        assert done.returncode == 0 and started == [], done.stderr
        assert "a (GPU 0): done 0 1 jobs done" in done.stdout, done.stdout
        assert [p.name for p in (tmp_path / "out").iterdir()] == ["lanes.tar"]
        with tarfile.open(tmp_path / "out/lanes.tar") as bundle:
            assert sorted(bundle.getnames()) == ["a", "a/gpu.txt", "a/results.tgz",
                                                 "a/snakemake.log"]
            results = tarfile.open(fileobj=bundle.extractfile("a/results.tgz"))
            assert results.extractfile("results/m/cpu/x_fp32/offline.csv").read() == \
                b"Batch\n1\n"
