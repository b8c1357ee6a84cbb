"""The report's curves as inline SVG, drawn by leather (docs/report.md says why leather): each figure against
the step and against the wall time, the stalls and the first cause marked.

A curve keeps at most BUCKETS x 2 points: the lowest and the highest of each of BUCKETS slices of its x range
(a 10,000-step run draws the same picture in a tenth of the bytes, and a spike is never averaged away). Every
series group carries `data-series` (loss, val-loss, step-time, median, p95, stall, cause, …) and the chart
`data-chart`, which the browser test reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable
    from typing import Any

    from helm_nemo.report.model import Report
    from helm_nemo.report.series import Point

BUCKETS = 200
WIDTH, HEIGHT = 480, 260
COLOURS = {
    "loss": "#1f77b4",
    "val-loss": "#ff7f0e",
    "step-time": "#1f77b4",
    "median": "#2ca02c",
    "p95": "#9467bd",
    "stall": "#d62728",
    "cause": "#d62728",
    "tokens": "#1f77b4",
    "tflops": "#1f77b4",
    "mfu": "#1f77b4",
    "lr": "#8c564b",
}


@dataclass
class Curve:
    """One series of a chart: (x, y) points, drawn as a line (or dots)."""

    key: str  # data-series
    name: str  # the legend
    points: list[tuple[float, float]]
    dots: bool = False
    dashed: bool = False


@dataclass
class Chart:
    """One chart of the report: its series, axes and marks (drawn as SVG by leather)."""

    key: str  # data-chart: loss-step, loss-time, …
    title: str
    x_label: str
    y_label: str
    curves: list[Curve] = field(default_factory=list)
    svg: str = ""


def downsample(points: list[tuple[float, float]], buckets: int = BUCKETS) -> list[tuple[float, float]]:
    """The lowest and the highest point of each of `buckets` equal slices of the x range, in x order."""
    if len(points) <= 2 * buckets:
        return points
    lo, hi = points[0][0], points[-1][0]
    width = (hi - lo) / buckets or 1.0
    chosen: dict[int, list[tuple[float, float]]] = {}
    for point in points:
        slot = min(buckets - 1, int((point[0] - lo) / width))
        pair = chosen.get(slot)
        if pair is None:
            chosen[slot] = [point, point]
        else:
            if point[1] < pair[0][1]:
                pair[0] = point
            if point[1] > pair[1][1]:
                pair[1] = point
    out: list[tuple[float, float]] = []
    for slot in sorted(chosen):
        low, high = chosen[slot]
        out += sorted({low, high})
    return out


def figures(report: Report) -> list[tuple[str, str, str, Callable[[Point], float | None]]]:
    """The figures the report can draw: (key, title, y label, the value of a step)."""
    found: list[tuple[str, str, str, Callable[[Point], float | None]]] = [
        ("loss", "Loss", "loss", lambda p: p.loss),
        ("step-time", "Step time", "seconds per step", lambda p: p.step_time_s),
    ]
    tokens, flops, peak = report.tokens_per_step, report.flops_per_step_per_gpu, report.peak_tflops

    def tflops(p: Point) -> float | None:
        if p.tflops is not None:
            return p.tflops
        if flops is not None and p.step_time_s:
            return flops / p.step_time_s / 1e12
        return None

    if tokens is not None:
        found.append(
            ("tokens", "Tokens/s", "tokens per second", lambda p: tokens / p.step_time_s if p.step_time_s else None)
        )
    series = report.series
    stated = series is not None and any(p.tflops is not None for p in series.points)
    if flops is not None or stated:
        found.append(("tflops", "TFLOPS per GPU", "TFLOPS/GPU", tflops))
        if peak:
            found.append(
                ("mfu", "MFU", "MFU (%)", lambda p: (t / peak * 100) if (t := tflops(p)) is not None else None)
            )
    if series is not None and any(p.lr is not None for p in series.points):
        found.append(("lr", "Learning rate", "learning rate", lambda p: p.lr))
    return found


def build(report: Report) -> list[Chart]:
    """Every chart of the report, each against the step and against the wall time, drawn."""
    series = report.series
    if series is None or not series.points:
        return []
    points = series.points
    start = next((p.at for p in points if p.at is not None), None)
    cause_at = _cause_time(report)
    cause_step = None
    if cause_at is not None:
        before = [p.step for p in points if p.at is not None and p.at <= cause_at]
        cause_step = before[-1] if before else None
    unit, unit_name = _time_unit(points, start, report)
    charts = []
    for key, title, y_label, value in figures(report):
        for axis in ("step", "time"):
            if axis == "time" and start is None:
                continue

            def x_of(p: Point, axis: str = axis) -> float | None:
                if axis == "step":
                    return float(p.step)
                return (p.at - start).total_seconds() / unit if p.at is not None and start is not None else None

            x_label = "step" if axis == "step" else f"{unit_name} since {start:%Y-%m-%d %H:%M:%S} UTC"
            chart = Chart(f"{key}-{axis}", f"{title} by {'step' if axis == 'step' else 'wall time'}", x_label, y_label)
            pairs = [(x, y) for p in points if (x := x_of(p)) is not None and (y := value(p)) is not None]
            if not pairs:
                continue
            top = None
            if key == "step-time":
                top = _step_time_top(report, [y for _, y in pairs])
                pairs = [(x, min(y, top)) for x, y in pairs]
                if top < max(y for _, y in pairs) or any(s.seconds > top for s in report.stalls):
                    chart.y_label += f" (cut at {top:.3g})"
            chart.curves.append(Curve(key, "step" if key == "step-time" else title.lower(), downsample(pairs)))
            if key == "loss" and series.val:
                times = {p.step: p for p in points}
                val = []
                for step, at, loss in series.val:
                    x = (
                        float(step)
                        if axis == "step"
                        else ((at - start).total_seconds() / unit if at and start else None)
                    )
                    if x is None and step in times:
                        x = x_of(times[step])
                    if x is not None:
                        val.append((x, loss))
                if val:
                    chart.curves.append(Curve("val-loss", "validation loss", val, dots=len(val) < 3))
            if key == "step-time":
                lo, hi = pairs[0][0], pairs[-1][0]
                if report.step_median is not None:
                    median = min(report.step_median, top or report.step_median)
                    chart.curves.append(Curve("median", "median", [(lo, median), (hi, median)], dashed=True))
                if report.step_p95 is not None:
                    p95 = min(report.step_p95, top or report.step_p95)
                    chart.curves.append(Curve("p95", "p95", [(lo, p95), (hi, p95)], dashed=True))
                marks = []
                by_step = {p.step: p for p in points}
                for stall in report.stalls:
                    ended = by_step.get(stall.after) if stall.after is not None else None
                    where = ended or by_step.get(stall.step)
                    x = x_of(where) if where is not None else None
                    if x is not None and stall.after is None and axis == "time" and stall.at is not None:
                        x += stall.seconds / unit  # the pause runs to the log's last line
                    if x is not None:
                        marks.append((x, top if top is not None else stall.seconds))
                if marks:
                    chart.curves.append(Curve("stall", "stall", marks, dots=True))
            x_cause = None
            if axis == "step" and cause_step is not None:
                x_cause = float(cause_step)
            elif axis == "time" and cause_at is not None and start is not None:
                x_cause = (cause_at - start).total_seconds() / unit
            if x_cause is not None:
                ys = [y for c in chart.curves for _, y in c.points]
                chart.curves.append(Curve("cause", "cause", [(x_cause, min(ys)), (x_cause, max(ys))]))
            chart.svg = draw(chart)
            charts.append(chart)
    return charts


def _time_unit(points: list[Point], start: datetime | None, report: Report) -> tuple[float, str]:
    """Seconds, minutes or hours, whichever keeps the wall-time axis's numbers short."""
    ends = [p.at for p in points if p.at is not None] + [s.at for s in report.stalls if s.at is not None]
    span = (
        (max(ends) - start).total_seconds() + sum(s.seconds for s in report.stalls if s.after is None)
        if ends and start
        else 0
    )
    if span < 180:
        return 1.0, "seconds"
    if span < 3 * 3600:
        return 60.0, "minutes"
    return 3600.0, "hours"


def _step_time_top(report: Report, values: list[float]) -> float:
    """Where the step-time axis ends: the highest step, or 4 x p95 when stalls would flatten the rest."""
    highest = max(values)
    if report.step_p95 is None or highest <= 4 * report.step_p95:
        return highest
    return 4 * report.step_p95


def _cause_time(report: Report) -> datetime | None:
    from helm_nemo.status.progress import parse_stamp

    cause = report.diagnosis.cause if report.diagnosis is not None else None
    return parse_stamp(cause.at) if cause is not None and cause.at else None


_NUMBER = re.compile(r"(\d+\.\d{2})\d+")


def draw(chart: Chart) -> str:
    """The chart as an `<svg>` element (viewBox, scaled to its box), its series groups named."""
    import xml.etree.ElementTree as ET

    import leather  # type: ignore[import-untyped]

    _theme(leather)
    plot = leather.Chart(chart.title)
    xs = [x for c in chart.curves for x, _ in c.points]
    ys = [y for c in chart.curves for _, y in c.points]
    x_lo, x_hi = _span(min(xs), max(xs))
    y_lo, y_hi = _span(
        min(0.0, min(ys)) if chart.key.startswith(("step-time", "tokens", "tflops", "mfu")) else min(ys), max(ys)
    )
    plot.add_x_scale(x_lo, x_hi)
    plot.add_y_scale(y_lo, y_hi)
    plot.add_x_axis(name=chart.x_label, tick_formatter=_tick)
    plot.add_y_axis(name=chart.y_label, tick_formatter=_tick)
    for curve in chart.curves:
        colour = COLOURS.get(curve.key, "#333")
        if curve.dots:
            plot.add_dots(curve.points, name=curve.name, fill_color=colour, radius=4)
        else:
            plot.add_line(
                curve.points,
                name=curve.name,
                stroke_color=colour,
                width=1.5,
                stroke_dasharray="4 3" if curve.dashed or curve.key == "cause" else None,
            )
    group = plot.to_svg_group(WIDTH, HEIGHT)
    series_groups = [g for g in group.iter("g") if (g.get("class") or "").startswith("series")]
    for curve, element in zip(chart.curves, series_groups, strict=False):
        element.set("data-series", curve.key)
    root = ET.Element(
        "svg",
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "viewBox": f"0 0 {WIDTH} {HEIGHT}",
            "role": "img",
            "aria-label": f"{chart.title}: {chart.y_label} against {chart.x_label}",
            "data-chart": chart.key,
            "class": "chart",
        },
    )
    root.append(group)
    for element in root.iter():
        for name, value in element.attrib.items():
            if name in _GEOMETRY:
                element.set(name, _NUMBER.sub(r"\1", value))
    return ET.tostring(root, encoding="unicode")


_GEOMETRY = {"d", "x", "y", "x1", "x2", "y1", "y2", "cx", "cy", "r", "width", "height", "transform"}


def _span(lo: float, hi: float) -> tuple[float, float]:
    if hi > lo:
        return lo, hi
    pad = abs(lo) * 0.05 or 1.0
    return lo - pad, hi + pad


def _tick(value: Any, index: int, count: int) -> str:
    number = float(value)
    if number == 0:
        return "0"
    magnitude = abs(number)
    if 1e4 <= magnitude < 1e7 and number.is_integer():
        return f"{number:,.0f}"  # a step: 450,000
    if magnitude >= 1e5 or magnitude < 1e-2:
        return f"{number:.2g}"
    return f"{number:.4g}"


_THEMED = False


def _theme(leather: Any) -> None:
    """The page's look: a system sans-serif font and a white background (leather's theme is module state, set
    once per process: only `report` imports leather)."""
    global _THEMED
    if _THEMED:
        return
    theme = leather.theme
    for name in ("title_font_family", "legend_font_family", "axis_title_font_family", "tick_font_family"):
        if hasattr(theme, name):
            setattr(theme, name, "system-ui, sans-serif")
    theme.background_color = "#ffffff"
    _THEMED = True
