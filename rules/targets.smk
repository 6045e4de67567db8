# What a run builds and reports: the default targets and the references', the reports'
# inputs, the lines a run ends with, and what the HTML report (`snakemake --report`) shows.
from deploybench.records import built
from deploybench.reporting.ship import budget_of


def configuration_readme(key):
    return layout.fill(cfg(layout.CONFIGURATION_REPORT), **key)


def default_targets():
    """Every default configuration's report and regression report and its model's, as HTML
    pages (the markdown reports they render come with them): the HTML report (`snakemake
    --report`) shows what its targets' jobs made."""
    pages = [
        layout.fill(cfg(page), **t)
        for t in config["targets"]
        for page in (layout.CONFIGURATION_PAGE, layout.COMPARISON_PAGE)
    ]
    models = sorted({t["model"] for t in config["targets"]})
    ships = sorted({(t["model"], t["gpu"]) for t in config["targets"]})
    return built_only(
        pages
        + [
            layout.fill(page, model=m)
            for m in models
            for page in (layout.MODEL_PAGE, layout.MODEL_COMPARISON_PAGE)
        ]
        + [layout.fill(layout.SHIP_PAGE, model=m, gpu=g) for m, g in ships if budget(m, g)]
    )


def budget(model, gpu):
    """The p99 budget what to ship ranks by on that key (reporting.ship.budget_of)."""
    return budget_of(SETTINGS.model_settings(model, gpu))


def ship_inputs(w):
    """The default targets' configuration reports on the model's GPU key (while reporting:
    those built, as the model reports' inputs)."""
    return built_only(
        [
            layout.fill(cfg(layout.CONFIGURATION_REPORT), **t)
            for t in config["targets"]
            if (t["model"], t["gpu"]) == (w.model, w.gpu)
        ]
    )


def ship_spec(w):
    title = SETTINGS.models[w.model]["title"]
    return json.dumps({"title": title, "gpu": w.gpu, "budget_ms": budget(w.model, w.gpu)})


# `snakemake --report` of a partly built workflow: Snakemake refuses a DAG that holds a file
# marked for the report which does not exist, so while it reports (and does not run first),
# the default targets and the model reports' inputs are the ones already built.
REPORTING = invocation(workflow).reporting


def built_only(paths):
    return [p for p in paths if Path(p).exists()] if REPORTING else paths


def run_summary(failed=False):
    """The lines a run ends with (deploybench.records.built): the reports of its targets (the
    default target's, `references`', or the files named), and the HTML report's command with
    the run's configuration files and targets."""
    run = invocation(workflow)
    named = list(run.targets)
    targets = [t for t in named if t not in run.rules]
    if not named or "all" in named:
        targets += default_targets()
    if "references" in named:
        targets += reference_targets()
    args = [a for f in run.configfiles for a in ("--configfile", str(f))]
    return built.summary(targets, Path.cwd(), args + named, failed)


def reference_targets():
    """The configuration reports that reproduce every published table of the reference
    documents, on each GPU key it was measured on (models' reference.pairs)."""
    keys = ("model", "gpu", "backend", "precision")
    return [configuration_readme(dict(zip(keys, t))) for t in SETTINGS.reference_targets()]


def _model_inputs(w, name):
    """A per-configuration file (`name`) of the model's configurations among the default
    targets and among the targets asked for on the command line."""
    defaults = [layout.fill(cfg(name), **t) for t in config["targets"] if t["model"] == w.model]
    pattern = layout.as_regex(cfg(name), model=w.model)
    requested = {
        m.group(0)
        for t in invocation(workflow).targets
        if (m := pattern.search(Path(t).as_posix()))
    }
    return built_only(sorted(set(defaults) | requested))


def model_report_inputs(w):
    """The model's configurations among the default targets and among the targets asked
    for on the command line (so a report built in the same run waits for them). The
    report also gathers, when it runs, every other configuration report already on disk
    (e.g. committed GPU results), without making them inputs this machine would rebuild."""
    return _model_inputs(w, layout.CONFIGURATION_REPORT)


def model_comparison_inputs(w):
    """The regression reports of the configurations the model report takes (the model's
    comparison gathers the others on disk as the model report does)."""
    return _model_inputs(w, layout.COMPARISON)


# What the HTML report (`snakemake --report report.html`) shows, and where: reported()
# files an output under its model (category), then its configuration
# `<gpu>/<backend>_<precision>` or "all configurations" (subcategory), lists it by one
# label, "<kind>: <file name>" (Snakemake makes a second label with two values a toggle
# that hides half the list), and describes it by report/<configuration|model>/<file>.rst.
REPORT_KINDS = {".csv": "table", ".png": "plot", ".html": "report"}
MODEL_FILES = "all configurations"


def reported(pattern):
    """`pattern`, an output of a configuration (cfg(...)), of a model on a GPU key or of a
    model (under layout.MODEL) that a reader looks at, marked for the HTML report."""
    for level, folder, subcategory in (
        ("configuration", cfg(), "{gpu}/{backend}_{precision}"),
        ("gpu", f"{layout.MODEL}/{{gpu}}", "{gpu}: what to ship"),
        ("model", layout.MODEL, MODEL_FILES),
    ):
        if pattern.startswith(f"{folder}/"):
            name = Path(pattern[len(folder) + 1 :])
            break
    else:
        raise ValueError(f"reported(): {pattern} is not a configuration's or a model's file")
    caption = Path(workflow.basedir, "report", level, name.with_suffix(".rst"))
    if not caption.is_file():
        raise ValueError(f"reported(): {pattern} has no caption ({caption})")
    kind = REPORT_KINDS[name.suffix]
    return report(
        pattern,
        caption=str(caption),
        category="{model}",
        subcategory=subcategory,
        labels={"result": f"{kind}: {name.stem.replace('_', ' ')}"},
    )
