# Per configuration: conversion, its check, the Triton model repository.


rule convert:
    input:
        exported=exported_path,
    output:
        out=cfg("converted/{converted}"),
    log:
        log=cfg("logs/convert_{converted}.log"),
    benchmark:
        cfg("benchmarks/convert_{converted}.tsv")
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("convert"),
    params:
        spec=spec("convert"),
    script:
        "../scripts/run_step.py"


# A SavedModel is a folder.
use rule convert as convert_savedmodel with:
    output:
        out=directory(cfg("converted/model.savedmodel")),
    log:
        log=cfg("logs/convert_model.savedmodel.log"),
    benchmark:
        cfg("benchmarks/convert_model.savedmodel.tsv")


# A sparse/dense ensemble (hps-*): the dense part converted beside the sparse storage.
use rule convert as convert_ensemble with:
    input:
        exported=exported_path,
        sparse=sparse_export,
    output:
        out=directory(cfg("converted/model.ensemble")),
    log:
        log=cfg("logs/convert_model.ensemble.log"),
    benchmark:
        cfg("benchmarks/convert_model.ensemble.tsv")


rule conversion_check:
    input:
        converted=converted_path,
        eval_set=src("eval.npz"),
    output:
        out=reported(cfg("conversion_check.csv")),
    log:
        log=cfg("logs/conversion_check.log"),
    benchmark:
        cfg("benchmarks/conversion_check.tsv")
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("conversion_check"),
    params:
        spec=spec("conversion_check"),
    script:
        "../scripts/run_step.py"


# Of the converted model, once its check passed; of a user's Triton model folder (backend
# repository), its export as it is.
rule model_repository:
    input:
        converted=served_path,
        conversion_check=conversion_checked,
    output:
        out=directory(cfg("model_repository")),
    log:
        log=cfg("logs/model_repository.log"),
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("model_repository"),
    params:
        spec=spec("model_repository"),
        code=SERVED_CODE,
    script:
        "../scripts/run_step.py"
