# Per model, independent of GPU and backend: weights, data, evaluation set, exports.


rule weights:
    input:
        checkpoint=checkpoint_digest,
    output:
        out=src("weights.pt"),
    log:
        log=src("logs/weights.log"),
    benchmark:
        src("benchmarks/weights.tsv")
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("weights"),
    params:
        spec=export_spec,
        code=plugin_code,
    script:
        "../scripts/run_step.py"


rule generate_data:
    output:
        out=directory(src("data")),
    log:
        log=src("logs/generate_data.log"),
    benchmark:
        src("benchmarks/generate_data.tsv")
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("generate_data"),
    params:
        spec=export_spec,
        code=plugin_code,
    script:
        "../scripts/run_step.py"


rule eval_set:
    input:
        weights=src("weights.pt"),
        data=data_input,
        data_digest=data_digest,
    output:
        out=src("eval.npz"),
    log:
        log=src("logs/eval_set.log"),
    benchmark:
        src("benchmarks/eval_set.tsv")
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("eval_set"),
    params:
        spec=export_spec,
    script:
        "../scripts/run_step.py"


rule perf_data:
    input:
        eval_set=src("eval.npz"),
    output:
        out=src("perf_data.json"),
    log:
        log=src("logs/perf_data.log"),
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("perf_data"),
    params:
        spec=export_spec,
    script:
        "../scripts/run_step.py"


# A format in a precision: export/<format>/ (FP32) or export/<format>-fp16/ (layout.py).
rule export:
    input:
        weights=src("weights.pt"),
        eval_set=src("eval.npz"),
    output:
        out=layout.export("{export_folder}", "{exported}"),
    log:
        log=layout.export("{export_folder}", "logs/{exported}.log"),
    benchmark:
        layout.export("{export_folder}", "benchmarks/{exported}.tsv")
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("export"),
    params:
        spec=any_export_spec,
        folder=lambda w, output: Path(output[0]).parent.name,
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


# A user's Triton model folder (deploybench add-model), as it is.
use rule export_savedmodel as export_repository with:
    output:
        out=directory(layout.export("triton-repository", "model.repository")),
    log:
        log=layout.export("triton-repository", "logs/model.repository.log"),
    benchmark:
        layout.export("triton-repository", "benchmarks/model.repository.tsv")


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
        data=data_input,
        data_digest=data_digest,
    output:
        out=directory(layout.sparse()),
    log:
        log=f"{layout.EXPORT}/logs/sparse.log",
    benchmark:
        f"{layout.EXPORT}/benchmarks/sparse.tsv"
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("sparse_export"),
    params:
        spec=split_export_spec,
    script:
        "../scripts/run_step.py"
