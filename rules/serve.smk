# Per configuration, on a running Triton: accuracy, offline and online performance.
# `bench_slot` (1 in the profiles): two server jobs never share the device. Locally a
# measuring job also takes every core (measuring_threads), so that no export or
# conversion runs beside it and skews the numbers; on a cluster it owns its
# `cpus_per_task` instead (deploybench.cluster).


rule accuracy:
    input:
        repository=cfg("model_repository"),
        eval=lambda w: f"results/{w.model}/source/eval.npz",
    output:
        csv=cfg("accuracy.csv"),
        report=cfg("accuracy.json"),
    params:
        spec=spec("accuracy"),
        config=config_pbtxt,
    threads: measuring_threads()
    resources:
        bench_slot=1,
        **cluster_resources("accuracy"),
    conda:
        "../envs/deploybench.yaml"
    log:
        log=cfg("logs/accuracy.log"),
        server=cfg("logs/accuracy_server.log"),
    benchmark:
        cfg("benchmarks/accuracy.tsv")
    shell:
        "python -m deploybench accuracy --spec {params.spec:q} --config {params.config} --eval {input.eval}"
        " --out {output.csv} --report {output.report} --server-log {log.server}"
        " > {log.log} 2>&1"


rule performance:
    input:
        repository=cfg("model_repository"),
        data=lambda w: f"results/{w.model}/source/perf_data.json",
        accuracy=cfg("accuracy.csv"),
    output:
        csv=cfg("{scenario}.csv"),
        report=cfg("{scenario}.json"),
    wildcard_constraints:
        scenario="offline|online",
    params:
        spec=lambda w: spec(w.scenario)(w),
        config=config_pbtxt,
    threads: measuring_threads()
    resources:
        bench_slot=1,
        **cluster_resources("offline"),  # offline and online alike
    conda:
        "../envs/deploybench.yaml"
    log:
        log=cfg("logs/{scenario}.log"),
        perf=cfg("logs/{scenario}_perf_analyzer.log"),
        server=cfg("logs/{scenario}_server.log"),
    benchmark:
        cfg("benchmarks/{scenario}.tsv")
    shell:
        "python -m deploybench {wildcards.scenario} --spec {params.spec:q} --config {params.config}"
        " --data {input.data} --accuracy {input.accuracy} --out {output.csv}"
        " --report {output.report} --log {log.perf} --server-log {log.server} > {log.log} 2>&1"


rule native:
    input:
        converted=converted_path,
        eval=lambda w: f"results/{w.model}/source/eval.npz",
    output:
        cfg("native.csv"),
    params:
        spec=spec("native"),
    threads: measuring_threads()
    resources:
        bench_slot=1,
        **cluster_resources("native"),
    conda:
        "../envs/deploybench.yaml"
    log:
        cfg("logs/native.log"),
    benchmark:
        cfg("benchmarks/native.tsv")
    shell:
        "python -m deploybench native --spec {params.spec:q} --converted {input.converted}"
        " --eval {input.eval} --out {output} > {log} 2>&1"
