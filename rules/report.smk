# Plots and README reports.


rule plots:
    input:
        offline=cfg("offline.csv"),
        online=cfg("online.csv"),
    output:
        offline_throughput=cfg("plots/offline_throughput.png"),
        offline_latency=cfg("plots/offline_latency.png"),
        online_latency=cfg("plots/online_latency.png"),
    params:
        spec=lambda w: json.dumps(dict(w.items())),
    resources:
        **cluster_resources("plots"),
    conda:
        "../envs/deploybench.yaml"
    log:
        cfg("logs/plots.log"),
    shell:
        "python -m deploybench plots --spec {params.spec:q} --offline {input.offline} --online {input.online}"
        " --offline-throughput {output.offline_throughput}"
        " --offline-latency {output.offline_latency} --online-latency {output.online_latency}"
        " > {log} 2>&1"


rule configuration_report:
    input:
        check=cfg("conversion_check.csv"),
        accuracy=cfg("accuracy.csv"),
        offline=cfg("offline.csv"),
        online=cfg("online.csv"),
        offline_json=cfg("offline.json"),
        online_json=cfg("online.json"),
        offline_throughput=cfg("plots/offline_throughput.png"),
        offline_latency=cfg("plots/offline_latency.png"),
        online_latency=cfg("plots/online_latency.png"),
        native=cfg("native.csv"),
        weights=src("weights.pt"),
    output:
        cfg("README.md"),
    params:
        spec=lambda w: json.dumps(
            {"run": run_of(w), "dataset": data_dir(w)}, sort_keys=True
        ),
    resources:
        **cluster_resources("report"),
    conda:
        "../envs/deploybench.yaml"
    log:
        cfg("logs/report.log"),
    shell:
        "python -m deploybench report --spec {params.spec:q} --check {input.check}"
        " --accuracy {input.accuracy} --offline {input.offline} --online {input.online}"
        " --offline-json {input.offline_json} --online-json {input.online_json}"
        " --offline-throughput {input.offline_throughput}"
        " --offline-latency {input.offline_latency} --online-latency {input.online_latency}"
        " --native {input.native} --weights {input.weights} --out {output} > {log} 2>&1"


rule model_report:
    input:
        model_report_inputs,
    output:
        "results/{model}/README.md",
    params:
        spec=lambda w: json.dumps(
            {
                "model": w.model,
                "title": SETTINGS.models[w.model]["title"],
                "reference": SETTINGS.reference(w.model),
            }
        ),
    resources:
        **cluster_resources("report"),
    conda:
        "../envs/deploybench.yaml"
    log:
        "results/{model}/logs/model_report.log",
    shell:
        "python -m deploybench model-report --spec {params.spec:q} --out {output} --configs {input}"
        " > {log} 2>&1"
