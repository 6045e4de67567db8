# Per configuration, on a running Triton: accuracy, offline and online performance.
# `bench_slot` (1 in the profiles): two server jobs never share the device.


rule accuracy:
    input:
        repository=RUN + "/model_repository",
        eval=lambda w: f"results/{w.model}/source/eval.npz",
    output:
        csv=RUN + "/accuracy.csv",
        report=RUN + "/accuracy.json",
    params:
        spec=spec("accuracy"),
        config=config_pbtxt,
    resources:
        bench_slot=1,
    log:
        log=RUN + "/logs/accuracy.log",
        server=RUN + "/logs/accuracy_server.log",
    benchmark:
        RUN + "/benchmarks/accuracy.tsv"
    shell:
        "{PY} accuracy --spec {params.spec:q} --config {params.config} --eval {input.eval}"
        " --out {output.csv} --report {output.report} --server-log {log.server}"
        " > {log.log} 2>&1"


rule performance:
    input:
        repository=RUN + "/model_repository",
        data=lambda w: f"results/{w.model}/source/perf_data.json",
        accuracy=RUN + "/accuracy.csv",
    output:
        csv=RUN + "/{scenario}.csv",
        report=RUN + "/{scenario}.json",
    wildcard_constraints:
        scenario="offline|online",
    params:
        spec=lambda w: spec(w.scenario)(w),
        config=config_pbtxt,
    resources:
        bench_slot=1,
    log:
        log=RUN + "/logs/{scenario}.log",
        perf=RUN + "/logs/{scenario}_perf_analyzer.log",
        server=RUN + "/logs/{scenario}_server.log",
    benchmark:
        RUN + "/benchmarks/{scenario}.tsv"
    shell:
        "{PY} {wildcards.scenario} --spec {params.spec:q} --config {params.config}"
        " --data {input.data} --accuracy {input.accuracy} --out {output.csv}"
        " --report {output.report} --log {log.perf} --server-log {log.server} > {log.log} 2>&1"
