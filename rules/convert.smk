# Per configuration: conversion, its check, the Triton model repository.


rule convert:
    input:
        exported_path,
    output:
        RUN + "/converted/{converted}",
    params:
        spec=spec("convert"),
    log:
        RUN + "/logs/convert_{converted}.log",
    benchmark:
        RUN + "/benchmarks/convert_{converted}.tsv"
    shell:
        "{PY} convert --spec {params.spec:q} --exported {input} --out {output} > {log} 2>&1"


rule conversion_check:
    input:
        converted=converted_path,
        eval=lambda w: f"results/{w.model}/source/eval.npz",
    output:
        RUN + "/conversion_check.csv",
    params:
        spec=spec("check"),
    log:
        RUN + "/logs/conversion_check.log",
    benchmark:
        RUN + "/benchmarks/conversion_check.tsv"
    shell:
        "{PY} check --spec {params.spec:q} --converted {input.converted} --eval {input.eval}"
        " --out {output} > {log} 2>&1"


rule model_repository:
    input:
        converted=converted_path,
        check=RUN + "/conversion_check.csv",
    output:
        directory(RUN + "/model_repository"),
    params:
        spec=spec("repository"),
        config=lambda w, output: f"{output[0]}/{w.model}/config.pbtxt",
    log:
        RUN + "/logs/model_repository.log",
    shell:
        "{PY} repository --spec {params.spec:q} --artifact {input.converted}"
        " --check {input.check} --out {params.config} > {log} 2>&1"
