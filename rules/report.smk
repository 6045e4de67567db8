# Plots, README reports, regression reports (compare.md), what to ship (SHIP.md) and their
# HTML pages.


# They read a few small files and take seconds: on a cluster they run where snakemake runs,
# not as jobs (a job's submission, queue and start cost more than they do).
localrules:
    plots,
    online_plot,
    rate_plot,
    configuration_report,
    model_report,
    configuration_comparison,
    model_comparison,
    configuration_html,
    model_html,
    configuration_comparison_html,
    model_comparison_html,
    ship,
    ship_html,


rule plots:
    input:
        offline=cfg("offline.csv"),
    output:
        offline_throughput=reported(cfg("plots/offline_throughput.png")),
        offline_latency=reported(cfg("plots/offline_latency.png")),
    log:
        log=cfg("logs/plots.log"),
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("plots"),
    params:
        spec=lambda w: json.dumps(key_of(w)),
    script:
        "../scripts/run_step.py"


# Apart from the offline plots: a configuration without an online scenario has none.
rule online_plot:
    input:
        online=cfg("online.csv"),
        online_json=cfg("online.json"),
    output:
        online_latency=reported(cfg("plots/online_latency.png")),
        online_tail=reported(cfg("plots/online_tail.png")),
    log:
        log=cfg("logs/online_plot.log"),
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("plots"),
    params:
        spec=lambda w: json.dumps(key_of(w)),
    script:
        "../scripts/run_step.py"


use rule online_plot as rate_plot with:
    input:
        rate_csv=cfg("rate.csv"),
        rate_json=cfg("rate.json"),
    output:
        rate_latency=reported(cfg("plots/rate_latency.png")),
    log:
        log=cfg("logs/rate_plot.log"),


rule configuration_report:
    input:
        conversion_check=conversion_checked,
        accuracy=if_built("accuracy", "accuracy.csv"),
        offline=cfg("offline.csv"),
        online=if_online("online.csv"),
        offline_json=cfg("offline.json"),
        online_json=if_online("online.json"),
        offline_throughput=cfg("plots/offline_throughput.png"),
        offline_latency=cfg("plots/offline_latency.png"),
        online_latency=if_online("plots/online_latency.png"),
        online_tail=if_online("plots/online_tail.png"),
        native=if_built("native", "native.csv"),
        native_json=if_built("native", "native.json"),
        floor=if_built("floor", "floor.csv"),
        rate=if_rate("rate.csv"),
        rate_json=if_rate("rate.json"),
        rate_latency=if_rate("plots/rate_latency.png"),
        weights=src("weights.pt"),
    output:
        out=cfg(layout.CONFIGURATION_REPORT),
    log:
        log=cfg("logs/configuration_report.log"),
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("configuration_report"),
    params:
        spec=lambda w: json.dumps({"run": run_of(w), "dataset": data_dir(w)}, sort_keys=True),
    script:
        "../scripts/run_step.py"


rule model_report:
    input:
        configs=model_report_inputs,
    output:
        out=layout.MODEL_REPORT,
        headline=layout.MODEL_HEADLINE,
        offline_frontier=reported(f"{layout.MODEL}/plots/offline_frontier.png"),
        online_frontier=reported(f"{layout.MODEL}/plots/online_frontier.png"),
    log:
        log=f"{layout.MODEL}/logs/model_report.log",
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("model_report"),
    params:
        spec=lambda w: json.dumps(
            {
                "model": w.model,
                "title": SETTINGS.models[w.model]["title"],
                "reference": SETTINGS.reference(w.model),
            }
        ),
    script:
        "../scripts/run_step.py"


# A configuration's current measurements against compare.baseline (deploybench.records.baseline):
# level by level, changes beyond the measured noise, what differs in what they ran on.
rule configuration_comparison:
    input:
        offline=cfg("offline.csv"),
        online=if_online("online.csv"),
        native=if_built("native", "native.csv"),
        offline_json=cfg("offline.json"),
        online_json=if_online("online.json"),
        native_json=if_built("native", "native.json"),
        baseline=comparison_baseline,
    output:
        out=cfg(layout.COMPARISON),
    log:
        log=cfg("logs/configuration_comparison.log"),
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("configuration_comparison"),
    params:
        spec=lambda w: json.dumps(
            {
                "title": "{}: {}, {} with {}".format(
                    run_of(w)["model"]["title"],
                    run_of(w)["gpu"]["description"],
                    run_of(w)["backend"]["title"],
                    w.precision.upper(),
                ),
                "baseline": config["compare"]["baseline"],
            }
        ),
    script:
        "../scripts/run_step.py"


# A README as one HTML page with its plots embedded, for the HTML report, which offers
# markdown only as a download. The plots are the README job's inputs or outputs: a new plot
# rewrites the README, and so re-renders the page.
rule configuration_html:
    input:
        md=cfg(layout.CONFIGURATION_REPORT),
    output:
        out=reported(cfg(layout.CONFIGURATION_PAGE)),
    log:
        log=cfg("logs/configuration_html.log"),
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("configuration_html"),
    params:
        spec="{}",
    script:
        "../scripts/run_step.py"


rule model_comparison:
    input:
        configs=model_comparison_inputs,
    output:
        out=layout.MODEL_COMPARISON,
    log:
        log=f"{layout.MODEL}/logs/model_comparison.log",
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("model_comparison"),
    params:
        spec=lambda w: json.dumps(
            {
                "model": w.model,
                "title": SETTINGS.models[w.model]["title"],
                "baseline": config["compare"]["baseline"],
            }
        ),
    script:
        "../scripts/run_step.py"


use rule configuration_html as model_html with:
    input:
        md=layout.MODEL_REPORT,
    output:
        out=reported(layout.MODEL_PAGE),
    log:
        log=f"{layout.MODEL}/logs/model_html.log",
    resources:
        **cluster_resources("model_html"),


use rule configuration_html as configuration_comparison_html with:
    input:
        md=cfg(layout.COMPARISON),
    output:
        out=reported(cfg(layout.COMPARISON_PAGE)),
    log:
        log=cfg("logs/configuration_comparison_html.log"),
    resources:
        **cluster_resources("configuration_comparison_html"),


use rule configuration_html as model_comparison_html with:
    input:
        md=layout.MODEL_COMPARISON,
    output:
        out=reported(layout.MODEL_COMPARISON_PAGE),
    log:
        log=f"{layout.MODEL}/logs/model_comparison_html.log",
    resources:
        **cluster_resources("model_comparison_html"),


# What to ship for a model on a GPU key (deploybench.reporting.ship; `deploybench ship` prints
# it), from every measurement under results/<model>/<gpu>/, after the default targets'
# configuration reports there: the HTML report's first page of the model.
rule ship:
    input:
        configs=ship_inputs,
    output:
        out=layout.SHIP,
    log:
        log=f"{layout.MODEL}/{{gpu}}/logs/ship.log",
    priority: run_order
    conda:
        "../envs/deploybench.yaml"
    resources:
        **cluster_resources("ship"),
    params:
        spec=ship_spec,
    script:
        "../scripts/run_step.py"


use rule configuration_html as ship_html with:
    input:
        md=layout.SHIP,
    output:
        out=reported(layout.SHIP_PAGE),
    log:
        log=f"{layout.MODEL}/{{gpu}}/logs/ship_html.log",
    resources:
        **cluster_resources("ship_html"),
