"""The H100 reference run plans every pair the H100 can run (a real Snakemake dry-run)."""

from testkit.workflow import ROOT

# What the lent H100 cannot run: TensorRT (its libraries are not on the package index) and
# TensorFlow with CUDA (too large for the machine)
NOT_ON_THE_H100 = ("trt", "tf-")


# a real Snakemake dry-run
def test_the_h100_reference_run_plans_every_pair_the_h100_can_run(tmp_path):
    """config/runs/h100-reference.yaml names every published table's pair (reference.pairs)
    but those that need TensorRT or TensorFlow with CUDA, and each is planned to its report;
    its lanes, and ONNX Runtime's run file among them, plan too."""
    import yaml

    from deploybench.settings.resolve import Settings
    from testkit.workflow import planned_jobs, snakemake

    settings = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    runnable = {(model, pair) for model in settings.models
                for pair in ((settings.reference(model) or {}).get("pairs") or {}).values()
                if not any(word in pair for word in NOT_ON_THE_H100)}
    run_file = ROOT / "config/runs/h100-reference.yaml"
    targets = yaml.safe_load(run_file.read_text())["targets"]
    assert {t["gpu"] for t in targets} == {"h100"}
    assert {(t["model"], f"{t['backend']}_{t['precision']}") for t in targets} == runnable
    assert len(runnable) == 6, runnable  # TFT, TFT traffic, BERT 2, FastPitch 2
    jobs = planned_jobs(snakemake(tmp_path, "-n", "--configfile", str(run_file)))
    assert jobs["configuration_report"] == jobs["offline"] == len(targets), jobs
    # its lanes (scripts/machines/gpu_lanes.sh) name run files that exist and the reports or
    # measurements of their first run file's targets (this one's, or ONNX Runtime's), on
    # the lent machine's key ({gpu})
    def files(run_file):
        return {f"results/{t['model']}/{{gpu}}/{t['backend']}_{t['precision']}/{name}"
                for t in yaml.safe_load((ROOT / run_file).read_text())["targets"]
                for name in ("README.md", "accuracy.csv", "native.csv", "offline.csv",
                             "online.csv", "floor.csv")}

    first_files = set()
    lines = [line for lanes in ("reference.lanes", "engines.lanes")
             for line in (ROOT / "config/runs" / lanes).read_text().splitlines()]
    for line in lines:
        words = line.split("#")[0].split()
        if words and words[0] != "stop":  # `stop NAME`: a run ended, no run of its own
            lane, _, runfiles, *lane_targets = words
            assert int(lane) >= 0 and lane_targets, line
            assert all((ROOT / f).is_file() for f in runfiles.split(",")), line
            assert set(lane_targets) <= files(runfiles.split(",")[0]), line
            first_files.add(runfiles.split(",")[0])
    assert first_files == {"config/runs/h100-reference.yaml",
                           "config/runs/h100-onnxruntime.yaml"}
    onnxruntime = ROOT / "config/runs/h100-onnxruntime.yaml"
    jobs = planned_jobs(snakemake(tmp_path, "-n", "--configfile", str(onnxruntime)))
    # a configuration each: TFT's, TFT traffic's and Wide & Deep's, both recommenders' two
    assert len(yaml.safe_load(onnxruntime.read_text())["targets"]) == 7
    assert jobs["offline"] == jobs["configuration_report"] == 7, jobs
