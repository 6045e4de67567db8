# Per model, independent of GPU and backend: weights, data, evaluation set, exports.


rule weights:
    input:
        code=lambda w: plugin_sources(SETTINGS.export_settings(w.model)["plugin"]),
    output:
        src("weights.pt"),
    params:
        spec=export_spec,
    resources:
        **cluster_resources("weights"),
    conda:
        "../envs/deploybench.yaml"
    log:
        src("logs/weights.log"),
    benchmark:
        src("benchmarks/weights.tsv")
    shell:
        "python -m deploybench weights --spec {params.spec:q} --out {output} > {log} 2>&1"


rule generate_data:
    input:
        code=lambda w: plugin_sources(SETTINGS.export_settings(w.model)["plugin"]),
    output:
        directory(src("data")),
    params:
        spec=export_spec,
    resources:
        **cluster_resources("data"),
    conda:
        "../envs/deploybench.yaml"
    log:
        src("logs/generate_data.log"),
    benchmark:
        src("benchmarks/generate_data.tsv")
    shell:
        "python -m deploybench data --spec {params.spec:q} --out {output} > {log} 2>&1"


rule eval_set:
    input:
        weights=src("weights.pt"),
        data=data_dir,
    output:
        src("eval.npz"),
    params:
        spec=export_spec,
    resources:
        **cluster_resources("eval"),
    conda:
        "../envs/deploybench.yaml"
    log:
        src("logs/eval_set.log"),
    benchmark:
        src("benchmarks/eval_set.tsv")
    shell:
        "python -m deploybench eval --spec {params.spec:q} --weights {input.weights} --data {input.data}"
        " --out {output} > {log} 2>&1"


rule perf_data:
    input:
        src("eval.npz"),
    output:
        src("perf_data.json"),
    params:
        spec=export_spec,
    resources:
        **cluster_resources("perf-data"),
    conda:
        "../envs/deploybench.yaml"
    log:
        src("logs/perf_data.log"),
    shell:
        "python -m deploybench perf-data --spec {params.spec:q} --eval {input} --out {output} > {log} 2>&1"


rule export:
    input:
        weights=src("weights.pt"),
        eval=src("eval.npz"),
    output:
        "results/{model}/export/{export_format}/{exported}",
    params:
        spec=any_export_spec,
        format=lambda w, output: Path(output[0]).parent.name,
    resources:
        **cluster_resources("export"),
    conda:
        "../envs/deploybench.yaml"
    log:
        "results/{model}/export/{export_format}/logs/{exported}.log",
    benchmark:
        "results/{model}/export/{export_format}/benchmarks/{exported}.tsv"
    shell:
        "python -m deploybench export --spec {params.spec:q} --format {params.format}"
        " --weights {input.weights} --eval {input.eval} --out {output} > {log} 2>&1"


# A SavedModel is a folder.
use rule export as export_savedmodel with:
    output:
        directory("results/{model}/export/tf-savedmodel/model.savedmodel"),
    log:
        "results/{model}/export/tf-savedmodel/logs/model.savedmodel.log",
    benchmark:
        "results/{model}/export/tf-savedmodel/benchmarks/model.savedmodel.tsv"


use rule export_savedmodel as export_dense_savedmodel with:
    output:
        directory("results/{model}/export/dense-savedmodel/model.savedmodel"),
    log:
        "results/{model}/export/dense-savedmodel/logs/model.savedmodel.log",
    benchmark:
        "results/{model}/export/dense-savedmodel/benchmarks/model.savedmodel.tsv"


# A recommender's embedding tables, stacked, with each table's rows ranked by their
# frequency in the training split: the sparse model's storage (deploybench/ensemble.py).
rule sparse_export:
    input:
        weights=src("weights.pt"),
        data=data_dir,
    output:
        directory("results/{model}/export/sparse"),
    params:
        spec=split_export_spec,
    resources:
        **cluster_resources("export"),
    conda:
        "../envs/deploybench.yaml"
    log:
        "results/{model}/export/logs/sparse.log",
    benchmark:
        "results/{model}/export/benchmarks/sparse.tsv"
    shell:
        "python -m deploybench sparse --spec {params.spec:q} --weights {input.weights}"
        " --data {input.data} --out {output} > {log} 2>&1"
