# The configuration search of a configuration (deploybench.search): a model repository and a
# measurement per point, and the report that ranks them against the latency budget.
#   snakemake results/tft/h100/aoti-cg_fp16/search/README.md
# A point that fails is recorded in its point.json (status failed, the reason) and the
# search goes on: its measuring job succeeds. The measuring job is a checkpoint, so that the
# descent strategy can choose its next points from the ones measured.


localrules:
    search_report,  # as the configuration reports (rules/report.smk)


rule search_repository:
    input:
        converted=converted_path,
        conversion_check=cfg("conversion_check.csv"),
    output:
        out=directory(pnt("model_repository")),
    log:
        log=pnt("logs/model_repository.log"),
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("model_repository"),
    params:
        spec=point_spec("model_repository"),
        code=SERVED_CODE,
    script:
        "../scripts/run_step.py"


checkpoint search_point:
    input:
        repository=pnt("model_repository"),
        perf_data=src("perf_data.json"),
        accuracy=cfg("accuracy.csv"),
    output:
        out=pnt("point.json"),
        config=pnt("config.pbtxt"),
    log:
        log=pnt("logs/point.log"),
        offline_perf_log=pnt("logs/offline_perf_analyzer.log"),
        offline_server_log=pnt("logs/offline_server.log"),
        online_perf_log=pnt("logs/online_perf_analyzer.log"),
        online_server_log=pnt("logs/online_server.log"),
    benchmark:
        pnt("benchmarks/point.tsv")
    priority: run_order
    group:
        DEVICE_GROUP
    conda:
        "../envs/deploybench.yaml"
    threads: measuring_threads
    resources:
        **cluster_resources("online"),
        bench_slot=1,
    params:
        spec=point_spec("search_point"),
    script:
        "../scripts/run_step.py"


rule search_report:
    input:
        unpack(search_inputs),
    output:
        out=srch("README.md"),
        out_json=srch("search.json"),
        winner=srch("winner/config.pbtxt"),
        frontier=reported(srch("frontier.png")),
    log:
        log=srch("logs/search.log"),
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("configuration_report"),
    params:
        spec=search_spec,
    script:
        "../scripts/run_step.py"
