# Per model, independent of GPU and backend: weights, data, evaluation set, exports.


rule weights:
    input:
        checkpoint=checkpoint_files,
    output:
        out=src("weights.pt"),
    params:
        spec=export_spec,
        code=plugin_code,
    resources:
        **cluster_resources("weights"),
    conda:
        "../envs/deploybench.yaml"
    log:
        log=src("logs/weights.log"),
    benchmark:
        src("benchmarks/weights.tsv")
    script:
        "../scripts/run_step.py"


rule generate_data:
    output:
        out=directory(src("data")),
    params:
        spec=export_spec,
        code=plugin_code,
    resources:
        **cluster_resources("generate_data"),
    conda:
        "../envs/deploybench.yaml"
    log:
        log=src("logs/generate_data.log"),
    benchmark:
        src("benchmarks/generate_data.tsv")
    script:
        "../scripts/run_step.py"


rule eval_set:
    input:
        weights=src("weights.pt"),
        data=data_dir,
        data_files=data_files,
    output:
        out=src("eval.npz"),
    params:
        spec=export_spec,
    resources:
        **cluster_resources("eval_set"),
    conda:
        "../envs/deploybench.yaml"
    log:
        log=src("logs/eval_set.log"),
    benchmark:
        src("benchmarks/eval_set.tsv")
    script:
        "../scripts/run_step.py"


rule perf_data:
    input:
        eval_set=src("eval.npz"),
    output:
        out=src("perf_data.json"),
    params:
        spec=export_spec,
    resources:
        **cluster_resources("perf_data"),
    conda:
        "../envs/deploybench.yaml"
    log:
        log=src("logs/perf_data.log"),
    script:
        "../scripts/run_step.py"


rule export:
    input:
        weights=src("weights.pt"),
        eval_set=src("eval.npz"),
    output:
        out=layout.export("{export_format}", "{exported}"),
    params:
        spec=any_export_spec,
        format=lambda w, output: Path(output[0]).parent.name,
    resources:
        **cluster_resources("export"),
    conda:
        "../envs/deploybench.yaml"
    log:
        log=layout.export("{export_format}", "logs/{exported}.log"),
    benchmark:
        layout.export("{export_format}", "benchmarks/{exported}.tsv")
    script:
        "../scripts/run_step.py"


# A SavedModel is a folder.
use rule export as export_savedmodel with:
    output:
        out=directory(layout.export("tf-savedmodel", "model.savedmodel")),
    log:
        log=layout.export("tf-savedmodel", "logs/model.savedmodel.log"),
    benchmark:
        layout.export("tf-savedmodel", "benchmarks/model.savedmodel.tsv")


use rule export_savedmodel as export_dense_savedmodel with:
    output:
        out=directory(layout.export("dense-savedmodel", "model.savedmodel")),
    log:
        log=layout.export("dense-savedmodel", "logs/model.savedmodel.log"),
    benchmark:
        layout.export("dense-savedmodel", "benchmarks/model.savedmodel.tsv")


# A recommender's embedding tables, stacked, with each table's rows ranked by their
# frequency in the training split: the sparse model's storage (deploybench/ensemble/).
rule sparse_export:
    input:
        weights=src("weights.pt"),
        data=data_dir,
        data_files=data_files,
    output:
        out=directory(layout.sparse()),
    params:
        spec=split_export_spec,
    resources:
        **cluster_resources("sparse_export"),
    conda:
        "../envs/deploybench.yaml"
    log:
        log=f"{layout.EXPORT}/logs/sparse.log",
    benchmark:
        f"{layout.EXPORT}/benchmarks/sparse.tsv"
    script:
        "../scripts/run_step.py"
