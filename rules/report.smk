# Plots and README reports.
import glob


rule plots:
    input:
        offline=RUN + "/offline.csv",
        online=RUN + "/online.csv",
    output:
        offline_throughput=RUN + "/plots/offline_throughput.png",
        offline_latency=RUN + "/plots/offline_latency.png",
        online_latency=RUN + "/plots/online_latency.png",
    params:
        spec=lambda w: json.dumps(dict(w.items())),
    log:
        RUN + "/logs/plots.log",
    shell:
        "{PY} plots --spec {params.spec:q} --offline {input.offline} --online {input.online}"
        " --offline-throughput {output.offline_throughput}"
        " --offline-latency {output.offline_latency} --online-latency {output.online_latency}"
        " > {log} 2>&1"


rule configuration_report:
    input:
        check=RUN + "/conversion_check.csv",
        accuracy=RUN + "/accuracy.csv",
        offline=RUN + "/offline.csv",
        online=RUN + "/online.csv",
        offline_json=RUN + "/offline.json",
        online_json=RUN + "/online.json",
        offline_throughput=RUN + "/plots/offline_throughput.png",
        offline_latency=RUN + "/plots/offline_latency.png",
        online_latency=RUN + "/plots/online_latency.png",
        weights=SOURCE + "/weights.pt",
    output:
        RUN + "/README.md",
    params:
        spec=lambda w: json.dumps(
            {"run": run_of(w), "dataset": data_dir(w)}, sort_keys=True
        ),
    log:
        RUN + "/logs/report.log",
    shell:
        "{PY} report --spec {params.spec:q} --check {input.check}"
        " --accuracy {input.accuracy} --offline {input.offline} --online {input.online}"
        " --offline-json {input.offline_json} --online-json {input.online_json}"
        " --offline-throughput {input.offline_throughput}"
        " --offline-latency {input.offline_latency} --online-latency {input.online_latency}"
        " --weights {input.weights} --out {output} > {log} 2>&1"


def built_configurations(w):
    """Every configuration report of the model on disk, plus those of the default targets."""
    built = set(glob.glob(f"results/{w.model}/*/*/README.md"))
    wanted = {configuration_readme(t) for t in config["targets"] if t["model"] == w.model}
    return sorted(built | wanted)


rule model_report:
    input:
        built_configurations,
    output:
        "results/{model}/README.md",
    params:
        spec=lambda w: json.dumps(
            {"model": w.model, "title": SETTINGS.models[w.model]["title"]}
        ),
    log:
        "results/{model}/logs/model_report.log",
    shell:
        "{PY} model-report --spec {params.spec:q} --out {output} --configs {input}"
        " > {log} 2>&1"
