"""The report as one self-contained HTML page: the template (templates/report.html.j2, package data) filled with
the model and the charts' SVG. No script, no font, no image and no style sheet is fetched: the styles are
inline and the charts are SVG elements in the page, so it opens from disk with no network."""

from __future__ import annotations

from datetime import datetime

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

    from helm_nemo.report.model import PodRow, Report

ROWS_SHOWN = 48  # timeline rows shown open; the rest in a <details> (a 1,024-pod run)


def html(report: Report) -> str:
    """The page."""
    from importlib.resources import files

    import jinja2
    import markupsafe

    from helm_nemo.diagnose.render import core
    from helm_nemo.report import charts

    template = files("helm_nemo.report").joinpath("templates/report.html.j2").read_text(encoding="utf-8")
    env = jinja2.Environment(
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        bytecode_cache=_bytecode_cache(),
    )
    env.filters["when"] = when
    env.filters["core"] = core
    drawn = charts.build(report)
    pairs: dict[str, list[Any]] = {}
    for chart in drawn:
        pairs.setdefault(chart.key.rsplit("-", 1)[0], []).append(chart)
    lanes = timeline(report.pods)
    diagnosis = report.diagnosis
    consequences = sorted(diagnosis.consequences, key=lambda e: (e.at or "~", e.source)) if diagnosis else []
    loader = jinja2.DictLoader({"report.html.j2": template})
    env.loader = loader
    return env.get_template("report.html.j2").render(
        r=report,
        charts=list(pairs.values()),
        svg=lambda chart: markupsafe.Markup(chart.svg),
        cause=diagnosis.cause if diagnosis else None,
        consequences=consequences,
        lanes=lanes,
        shown=ROWS_SHOWN,
        excerpts=report.blocks,
    )


def _bytecode_cache() -> Any:
    """The compiled template kept in helm-nemo's cache folder (schema_cache.cache_dir): compiling it costs more
    than filling it. None (compile every time) when the cache is off or cannot be written."""
    import jinja2

    from helm_nemo.validate.schema_cache import cache_dir

    folder = cache_dir()
    if folder is None:
        return None
    try:
        (folder / "report").mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(str(folder / "report"))


def when(value: datetime | str | None) -> str:
    """`2026-11-26 20:47:26.904 UTC`, or empty."""
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        return value.replace("T", " ")[:23] + " UTC"
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:23] + " UTC"


def timeline(rows: list[PodRow]) -> dict[str, Any]:
    """Each row's phases and marks as percentages of the run's span (the bars of the timeline)."""
    times = [t for row in rows for t in row.times()]
    if not times:
        return {"start": None, "end": None, "rows": [(row, [], []) for row in rows]}
    start, end = min(times), max(times)
    span = (end - start).total_seconds() or 1.0

    def pct(at: datetime) -> float:
        return round((at - start).total_seconds() / span * 100, 2)

    phases = (
        ("created", "scheduled", "waiting to be scheduled"),
        ("scheduled", "started", "starting"),
        ("started", "first_step", "before the first step"),
        ("first_step", "last_line", "training"),
        ("last_line", "finished", "after the last line"),
    )
    out = []
    for row in rows:
        bars = []
        for begin, stop, what in phases:
            a, b = getattr(row, begin), getattr(row, stop)
            if a is not None and b is not None and b >= a:
                bars.append((what.replace(" ", "-"), pct(a), max(0.3, round(pct(b) - pct(a), 2)), what))
        if not bars and row.started is not None and row.last_line is not None:
            bars.append(("training", pct(row.started), max(0.3, pct(row.last_line) - pct(row.started)), "log"))
        marks = [(kind, pct(at), f"{kind} {words} at {when(at)}") for at, kind, words in row.marks]
        out.append((row, bars, marks))
    return {"start": start, "end": end, "rows": out}
