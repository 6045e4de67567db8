"""The two-GPU run's plan, as the real Snakemake dry-runs it."""

import yaml

from deploybench import search
from testkit.gpu_count import TWO_GPUS


# a real Snakemake dry-run
def test_the_two_gpu_run_plans_both_configurations_and_tfts_one_and_two_gpu_points(tmp_path):
    """config/runs/two-gpus.yaml (scripts/machines/two_gpus.sh's): TFT FP16 and BERT FP16, and TFT's
    search over 1 and 2 GPUs at the reference's serving configuration, each point offline
    with 8 requests in flight."""
    from deploybench.settings.resolve import Settings
    from testkit.workflow import main_config, planned_jobs, snakemake

    run_file = yaml.safe_load(TWO_GPUS.read_text())
    settings = Settings(main_config(**run_file, models_dir="config/models"))
    found = search.configured(settings, "tft", "h100", "aoti-cg")
    assert search.grid(found) == ["i2-q1-p512_1024-g1", "i2-q1-p512_1024-g2"]
    point = search.point_run(settings, "tft", "h100", "aoti-cg", "fp16", "i2-q1-p512_1024-g2")
    assert point["model"]["triton"]["gpus"] == 2
    assert point["model"]["offline"]["concurrency"] == 8
    result = snakemake(tmp_path, "-n", "results/tft/h100/aoti-cg_fp16/search/README.md",
                       "--configfile", str(TWO_GPUS))
    assert planned_jobs(result)["search_point"] == 2, result.stdout[-3000:]
    jobs = planned_jobs(snakemake(tmp_path, "-n", "--configfile", str(TWO_GPUS)))
    assert jobs["offline"] == jobs["online"] == 2, jobs
