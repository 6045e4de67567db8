# Per configuration, on a running Triton: accuracy, offline and online performance; and
# the native (in-process) throughput beside them.
# `bench_slot` (1 in the profiles): two measuring jobs never share the device. Locally a
# measuring job also takes every core (measuring_threads), so that no export or
# conversion runs beside it and skews the numbers; on a cluster a configuration's
# measuring steps are one job (DEVICE_GROUP) that owns its `cpus_per_task` and GPU.


rule accuracy:
    input:
        repository=cfg("model_repository"),
        eval_set=src("eval.npz"),
        refused=refused_without("accuracy"),
    output:
        out_csv=reported(cfg("accuracy.csv")),
        out_json=cfg("accuracy.json"),
    log:
        log=cfg("logs/accuracy.log"),
        server_log=cfg("logs/accuracy_server.log"),
    benchmark:
        cfg("benchmarks/accuracy.tsv")
    priority: run_order
    group:
        DEVICE_GROUP
    conda:
        "../envs/deploybench.yaml"
    threads: measuring_threads
    resources:
        **cluster_resources("accuracy"),
        bench_slot=1,
    params:
        spec=spec("accuracy"),
    script:
        "../scripts/run_step.py"


rule offline:
    input:
        repository=cfg("model_repository"),
        perf_data=src("perf_data.json"),
        accuracy=if_built("accuracy", "accuracy.csv"),
        data=ensemble_data,
    output:
        out_csv=reported(cfg("offline.csv")),
        out_json=cfg("offline.json"),
    log:
        log=cfg("logs/offline.log"),
        perf_log=cfg("logs/offline_perf_analyzer.log"),
        server_log=cfg("logs/offline_server.log"),
    benchmark:
        cfg("benchmarks/offline.tsv")
    priority: run_order
    group:
        DEVICE_GROUP
    conda:
        "../envs/deploybench.yaml"
    threads: measuring_threads
    resources:
        **cluster_resources("offline"),
        bench_slot=1,
    params:
        spec=spec("offline"),
    script:
        "../scripts/run_step.py"


use rule offline as online with:
    input:
        repository=online_measured("model_repository"),
        perf_data=src("perf_data.json"),
        accuracy=online_measured("accuracy.csv", step="accuracy"),
    output:
        out_csv=reported(cfg("online.csv")),
        out_json=cfg("online.json"),
    log:
        log=cfg("logs/online.log"),
        perf_log=cfg("logs/online_perf_analyzer.log"),
        server_log=cfg("logs/online_server.log"),
    benchmark:
        cfg("benchmarks/online.tsv")
    resources:
        **cluster_resources("online"),
        bench_slot=1,
    params:
        spec=spec("online"),


# Open loop: requests arriving at the model config's rates (its `rate` section: given, or
# fractions of the online sweep's peak, which it then follows), on the online deployment;
# a configuration without one is refused with the reason.
use rule offline as rate with:
    input:
        repository=rate_measured("model_repository"),
        perf_data=src("perf_data.json"),
        accuracy=rate_measured("accuracy.csv", step="accuracy"),
        online=rate_measured("online.csv", of_peak=True),
    output:
        out_csv=reported(cfg("rate.csv")),
        out_json=cfg("rate.json"),
    log:
        log=cfg("logs/rate.log"),
        perf_log=cfg("logs/rate_perf_analyzer.log"),
        server_log=cfg("logs/rate_server.log"),
    benchmark:
        cfg("benchmarks/rate.tsv")
    resources:
        **cluster_resources("online"),
        bench_slot=1,
    params:
        spec=spec("rate"),


# What Triton and each backend of ours cost by themselves: an identity model with the
# configuration's tensors, measured as the offline scenario at its smallest and largest batch
# (re-run when the code that serves it changes).
rule floor:
    input:
        perf_data=src("perf_data.json"),
        refused=refused_without("floor"),
    output:
        out_csv=reported(cfg("floor.csv")),
        out_json=cfg("floor.json"),
    log:
        log=cfg("logs/floor.log"),
        perf_log=cfg("logs/floor_perf_analyzer.log"),
        server_log=cfg("logs/floor_server.log"),
    benchmark:
        cfg("benchmarks/floor.tsv")
    priority: run_order
    group:
        DEVICE_GROUP
    conda:
        "../envs/deploybench.yaml"
    threads: measuring_threads
    resources:
        **cluster_resources("floor"),
        bench_slot=1,
    params:
        spec=spec("floor"),
        code=SERVED_CODE,
    script:
        "../scripts/run_step.py"


rule native:
    input:
        converted=converted_path,
        eval_set=src("eval.npz"),
        refused=refused_without("native"),
    output:
        out_csv=reported(cfg("native.csv")),
        out_json=cfg("native.json"),
    log:
        log=cfg("logs/native.log"),
    benchmark:
        cfg("benchmarks/native.tsv")
    priority: run_order
    group:
        DEVICE_GROUP
    conda:
        "../envs/deploybench.yaml"
    threads: measuring_threads
    resources:
        **cluster_resources("native"),
        bench_slot=1,
    params:
        spec=spec("native"),
    script:
        "../scripts/run_step.py"
