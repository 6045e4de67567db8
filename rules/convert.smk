# Per configuration: conversion, its check, the Triton model repository.


rule convert:
    input:
        exported_path,
    output:
        cfg("converted/{converted}"),
    params:
        spec=spec("convert"),
    resources:
        **cluster_resources("convert"),
    conda:
        "../envs/deploybench.yaml"
    log:
        cfg("logs/convert_{converted}.log"),
    benchmark:
        cfg("benchmarks/convert_{converted}.tsv")
    shell:
        "python -m deploybench convert --spec {params.spec:q} --exported {input} --out {output} > {log} 2>&1"


# A SavedModel is a folder.
use rule convert as convert_savedmodel with:
    output:
        directory(cfg("converted/model.savedmodel")),
    log:
        cfg("logs/convert_model.savedmodel.log"),
    benchmark:
        cfg("benchmarks/convert_model.savedmodel.tsv")


# A sparse/dense ensemble (hps-*): the dense part converted beside the sparse storage.
rule convert_ensemble:
    input:
        dense=exported_path,
        sparse=sparse_export,
    output:
        directory(cfg("converted/model.ensemble")),
    params:
        spec=spec("convert"),
    resources:
        **cluster_resources("convert"),
    conda:
        "../envs/deploybench.yaml"
    log:
        cfg("logs/convert_model.ensemble.log"),
    benchmark:
        cfg("benchmarks/convert_model.ensemble.tsv")
    shell:
        "python -m deploybench convert --spec {params.spec:q} --exported {input.dense}"
        " --sparse {input.sparse} --out {output} > {log} 2>&1"


rule conversion_check:
    input:
        converted=converted_path,
        eval=lambda w: f"results/{w.model}/source/eval.npz",
    output:
        cfg("conversion_check.csv"),
    params:
        spec=spec("check"),
    resources:
        **cluster_resources("check"),
    conda:
        "../envs/deploybench.yaml"
    log:
        cfg("logs/conversion_check.log"),
    benchmark:
        cfg("benchmarks/conversion_check.tsv")
    shell:
        "python -m deploybench check --spec {params.spec:q} --converted {input.converted} --eval {input.eval}"
        " --out {output} > {log} 2>&1"


rule model_repository:
    input:
        converted=converted_path,
        check=cfg("conversion_check.csv"),
        code=SERVED_CODE,
    output:
        directory(cfg("model_repository")),
    params:
        spec=spec("repository"),
        config=lambda w, output: f"{output[0]}/{w.model}/config.pbtxt",
    resources:
        **cluster_resources("repository"),
    conda:
        "../envs/deploybench.yaml"
    log:
        cfg("logs/model_repository.log"),
    shell:
        "python -m deploybench repository --spec {params.spec:q} --artifact {input.converted}"
        " --check {input.check} --out {params.config} > {log} 2>&1"
