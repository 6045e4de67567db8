# Per model, independent of GPU and backend: weights, data, evaluation set, exports.


rule weights:
    input:
        code=lambda w: plugin_sources(SETTINGS.export_settings(w.model)["plugin"]),
    output:
        SOURCE + "/weights.pt",
    params:
        spec=export_spec,
    log:
        SOURCE + "/logs/weights.log",
    benchmark:
        SOURCE + "/benchmarks/weights.tsv"
    shell:
        "{PY} weights --spec {params.spec:q} --out {output} > {log} 2>&1"


rule generate_data:
    input:
        code=lambda w: plugin_sources(SETTINGS.export_settings(w.model)["plugin"]),
    output:
        directory(SOURCE + "/data"),
    params:
        spec=export_spec,
    log:
        SOURCE + "/logs/generate_data.log",
    benchmark:
        SOURCE + "/benchmarks/generate_data.tsv"
    shell:
        "{PY} data --spec {params.spec:q} --out {output} > {log} 2>&1"


rule eval_set:
    input:
        weights=SOURCE + "/weights.pt",
        data=data_dir,
    output:
        SOURCE + "/eval.npz",
    params:
        spec=export_spec,
    log:
        SOURCE + "/logs/eval_set.log",
    benchmark:
        SOURCE + "/benchmarks/eval_set.tsv"
    shell:
        "{PY} eval --spec {params.spec:q} --weights {input.weights} --data {input.data}"
        " --out {output} > {log} 2>&1"


rule perf_data:
    input:
        SOURCE + "/eval.npz",
    output:
        SOURCE + "/perf_data.json",
    params:
        spec=export_spec,
    log:
        SOURCE + "/logs/perf_data.log",
    shell:
        "{PY} perf-data --spec {params.spec:q} --eval {input} --out {output} > {log} 2>&1"


rule export:
    input:
        weights=SOURCE + "/weights.pt",
        eval=SOURCE + "/eval.npz",
    output:
        "results/{model}/export/{export_format}/{exported}",
    params:
        spec=export_spec,
    log:
        "results/{model}/export/{export_format}/logs/{exported}.log",
    benchmark:
        "results/{model}/export/{export_format}/benchmarks/{exported}.tsv"
    shell:
        "{PY} export --spec {params.spec:q} --format {wildcards.export_format}"
        " --weights {input.weights} --eval {input.eval} --out {output} > {log} 2>&1"
