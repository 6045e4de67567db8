"""The report rules' steps (rules/report.smk): plots, a configuration's and a model's
README, the regression reports (compare.md) and their HTML pages. Each takes the files its
rule names, has deploybench.reporting build the page or draw the plot, and writes it whole
or not at all."""

from __future__ import annotations

from pathlib import Path

from ..records import atomic, formats, layout
from ..reporting import compare, compare_report
from ..reporting import plots as drawn
from ..reporting.configuration_report import configuration_page
from ..reporting.html_page import html_page as html_of
from ..reporting.model_report import model_page
from ..reporting.ship import ship_page
from ..source import model as source_model


def _write(out: Path, text: str) -> None:
    with atomic.output(out) as tmp:
        tmp.write_text(text)


def plots(spec: dict, offline: Path, offline_throughput: Path, offline_latency: Path) -> None:
    drawn.offline_plots(offline, drawn.title(spec), offline_throughput, offline_latency)


def online_plot(spec: dict, online: Path, online_json: Path, online_latency: Path,
                online_tail: Path) -> None:
    """The online plots, a rule of their own: only configurations measured online have
    them."""
    drawn.online_latency_plot(online, drawn.title(spec), online_latency)
    report = formats.read(Path(online_json))
    drawn.tail_plot(report.get("tail", []), report.get("batches_formed", []), "Concurrency",
                    drawn.title(spec), online_tail)


def rate_plot(spec: dict, rate_csv: Path, rate_json: Path, rate_latency: Path) -> None:
    """Latency against the offered rate, the p99 budget (rate.json's) as a line."""
    budget = formats.read(Path(rate_json))["settings"]["p99_budget_ms"]
    drawn.rate_latency_plot(rate_csv, budget, drawn.title(spec), rate_latency)


def configuration_report(spec: dict, conversion_check: Path, accuracy: Path, offline: Path,
                         online: Path | list, offline_json: Path, online_json: Path | list,
                         offline_throughput: Path, offline_latency: Path,
                         online_latency: Path | list, native: Path | list,
                         native_json: Path | list, floor: Path | list, weights: Path, out: Path,
                         online_tail: Path | list = (), rate: Path | list = (),
                         rate_json: Path | list = (), rate_latency: Path | list = ()) -> None:
    """One configuration's README (reporting.configuration_report). The online files are
    empty lists for a configuration without an online scenario, native's and the floor's
    on a server the pipeline does not start (server.kind remote)."""
    _write(out, configuration_page(
        spec["run"], spec["dataset"], source_model.weights_origin(weights), out,
        conversion_check=conversion_check, accuracy=accuracy, offline=offline, online=online,
        offline_json=offline_json, online_json=online_json,
        offline_throughput=offline_throughput, offline_latency=offline_latency,
        online_latency=online_latency, native=native, native_json=native_json, floor=floor,
        online_tail=online_tail, rate=rate, rate_json=rate_json, rate_latency=rate_latency))


def model_report(spec: dict, configs: list[Path], out: Path, offline_frontier: Path,
                 online_frontier: Path, headline: Path | None = None) -> None:
    """The model's README and frontier plots (reporting.model_report). `configs`: the
    configuration reports this run built; the others already on disk join them.
    `headline`: its headline alone too, which the HTML report's front page includes."""
    lines, text = model_page(spec, configs, out, offline_frontier, online_frontier)
    if headline:
        _write(headline, lines + "\n")
    _write(out, text)


def configuration_comparison(spec: dict, offline: Path, online: Path | list,
                             native: Path | list, offline_json: Path,
                             online_json: Path | list, native_json: Path | list, out: Path,
                             baseline: list = ()) -> None:
    """One configuration's compare.md: its current tables and JSONs (online's and
    native's empty lists where the configuration has none) against compare.baseline,
    their history copies beside them or `baseline`, a folder baseline's files."""
    given = {"offline": (offline, offline_json), "online": (online, online_json),
             "native": (native, native_json)}
    comparison = compare.compare_given({name: pair if all(pair) else None
                                        for name, pair in given.items()},
                                       spec["baseline"], [Path(f) for f in baseline])
    _write(out, compare_report.render_configuration(spec["title"], comparison))


def model_comparison(spec: dict, configs: list[Path], out: Path) -> None:
    """The model's compare.md: each configuration built so far (the reports asked for,
    and every configuration report on disk) summarised, linked to its compare.md."""
    folders = sorted({Path(c).parent for c in configs}
                     | {r.parent for r in layout.configuration_reports(Path(out))})
    _write(out, compare_report.model_page(spec, folders))


def html_page(spec: dict, md: Path, out: Path) -> None:
    """A README (or compare.md) as one HTML page, its plots embedded."""
    _write(out, html_of(md.read_text(), md.parent, md.stem))


def ship(spec: dict, configs: list[Path], out: Path) -> None:
    """What to ship for a model on a GPU key: of every measurement under the key's folder
    (the configuration reports the rule waits for, and every set measured before), the one
    serving the most within the p99 budget (reporting.ship)."""
    _write(out, ship_page(spec["title"], spec["gpu"], Path(out).parent, spec["budget_ms"]))
