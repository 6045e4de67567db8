# The configuration search's input functions (rules/search.smk, deploybench.search), apart
# from rules/common.smk, inputs.smk and targets.smk, which hold everything else the rules share.

# A point's files are keyed by its name, which its values make (e.g. i2-q100-p512_1024).
srch = layout.search  # a file of a configuration's search
pnt = layout.search_point  # a file of one search point


@lru_cache(maxsize=None)
def _point_spec(model, gpu, backend, precision, point, step):
    run = configuration_search.point_run(SETTINGS, model, gpu, backend, precision, point)
    return json.dumps(configuration_search.point_step_spec(run, step), sort_keys=True)


def point_spec(step):
    """params: the settings a point's step depends on (its values in `triton`)."""
    return lambda w: _point_spec(w.model, w.gpu, w.backend, w.precision, w.point, step)


def search_of(w):
    return configuration_search.required(SETTINGS, w.model, w.gpu, w.backend)


def search_spec(w):
    """params of the search report: the search (strategy, budget, lists), its grid and the
    reference configuration's point (a change re-runs the report only)."""
    search = search_of(w)
    triton = run_of(w)["model"]["triton"]
    spec = {
        "key": key_of(w),
        "search": search,
        "grid": configuration_search.grid(search),
        "reference": configuration_search.reference_point(search, triton),
    }
    return json.dumps(spec, sort_keys=True)


def search_inputs(w):
    """The points the search's strategy measures: every point of the grid; or the
    descent's, walked through the point checkpoints (each raises until its point is
    measured, then Snakemake walks again), so its points are the grid's files."""
    search = search_of(w)
    if search["strategy"] == "grid":
        names = configuration_search.grid(search)
    else:

        def measure(point):
            from deploybench.records import formats  # point.json: its version checked

            done = checkpoints.search_point.get(**key_of(w), point=point)
            return formats.read(done.output.out)

        triton = run_of(w)["model"]["triton"]
        budget = search.get("p99_budget_ms")
        names, _ = configuration_search.descent(search, triton, measure, budget, search["rank"])
    return {
        "points": [layout.fill(pnt("point.json"), **key_of(w), point=n) for n in names],
        "configs": [layout.fill(pnt("config.pbtxt"), **key_of(w), point=n) for n in names],
    }
