"""A log's text -> its steps (series.py), every line of it, or evenly spaced windows of a long one.

A log of up to FULL_BYTES is read line by line. A longer one (a 50 MB rank-0 log holds 200,000 to 450,000
steps: reading each in Python costs seconds) is read in WINDOWS windows of consecutive lines spread evenly over
its bytes, plus its last TAIL_BYTES: the curves are drawn from these steps (a chart shows 300 slices), the median
and p95 step time are theirs, and every pause is still found exactly: where the time between two windows is
longer than their steps at the median would take by more than the stall limit, the lines between them are read
too. Series.read_steps and Series.sampled say what was read.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from helm_nemo.report.model import MIN_STALL_S, percentile
from helm_nemo.status.stall_rule import STALL_FACTOR
from helm_nemo.report.series import Point, Series, parse

FULL_BYTES = 4_000_000
WINDOWS = 400
WINDOW_BYTES = 2000
TAIL_BYTES = 64_000


def _lines(text: str, first_line: int) -> tuple[list[tuple[int, str]], dict[int, datetime]]:
    """(line number, text without the kubelet's time) of the lines that may be step lines, and their times."""
    from helm_nemo.status.progress import parse_stamp

    lines: list[tuple[int, str]] = []
    stamps: dict[int, datetime] = {}
    minutes: dict[str, datetime | None] = {}  # `2026-11-26T20:47:` -> that minute: one parse per minute, not per line
    for number, line in enumerate(text.split("\n"), start=first_line):
        if "iteration" not in line and "DLLL" not in line and "[" not in line and "validation" not in line:
            continue
        stamp, sep, rest = line.partition(" ")
        if sep and len(stamp) >= 20 and stamp[4:5] == "-" and "T" in stamp:
            when = _stamp(stamp, minutes) if stamp[19:20] in (".", "Z") and stamp.endswith("Z") else parse_stamp(stamp)
            if when is not None:
                stamps[number] = when
                line = rest
        lines.append((number, line))
    return lines, stamps


def _stamp(stamp: str, minutes: dict[str, datetime | None]) -> datetime | None:
    """A kubelet time in UTC (`2026-11-26T20:47:21.489009156Z`), its minute parsed once."""
    from helm_nemo.status.progress import parse_stamp

    head = stamp[:17]
    minute = minutes.get(head, datetime.min)
    if minute is datetime.min:
        minute = minutes[head] = parse_stamp(head + "00Z")
    if minute is None:
        return None
    try:
        return minute + timedelta(seconds=float(stamp[17:-1][:9]))
    except ValueError:
        return parse_stamp(stamp)


def from_text(source: str, text: str) -> Series:
    """The steps of a log as `kubectl logs --timestamps` (or a plain file) gives it."""
    if len(text) <= FULL_BYTES:
        series = parse(source, *_lines(text, 1))
        series.read_steps = len(series.points)
    else:
        series = _sampled(source, text)
    times = {p.step: p.at for p in series.points}
    series.val = [(step, at or times.get(step), val) for step, at, val in series.val]
    return series


def _sampled(source: str, text: str) -> Series:
    size = len(text)
    spans: list[tuple[int, int]] = []
    for k in range(WINDOWS):
        start = 0 if k == 0 else text.find("\n", k * size // WINDOWS) + 1
        end = text.find("\n", min(size, start + WINDOW_BYTES))
        spans.append((start, size if end < 0 else end))
    tail = text.find("\n", max(0, size - TAIL_BYTES)) + 1
    spans.append((tail, size))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    out = Series(source, sampled=True)
    windows: list[tuple[int, int, list[Point]]] = []
    line = 1
    at = 0
    for start, end in merged:
        line += text.count("\n", at, start)
        at = start
        part = parse(source, *_lines(text[start:end], line))
        _merge(out, part)
        windows.append((start, end, part.points))
    found = {p.step: p for p in out.points}
    times = [p.step_time_s for p in out.points if p.step_time_s is not None]
    if times:
        limit = max(STALL_FACTOR * percentile(times, 0.5), MIN_STALL_S)
        median = percentile(times, 0.5)
        for (start, _, before), (_, end, after) in zip(windows, windows[1:], strict=False):
            if not before or not after or before[-1].at is None or after[0].at is None:
                continue
            steps = after[0].step - before[-1].step
            gap = (after[0].at - before[-1].at).total_seconds()
            if steps > 0 and gap - steps * median > limit:  # a pause between the windows: read every line
                first = text.count("\n", 0, start) + 1
                for point in parse(source, *_lines(text[start:end], first)).points:
                    found[point.step] = point
    out.points = [found[step] for step in sorted(found)]
    out.read_steps = len(out.points)
    return out


def _merge(out: Series, part: Series) -> None:
    out.format = out.format or part.format
    out.total = part.total or out.total
    out.points += part.points
    out.val += part.val
    out.restarts += part.restarts


def last_time(text: str) -> datetime | None:
    """The kubelet's time of a log's last stamped line (its last 64 KB read), or None."""
    from helm_nemo.status.progress import parse_stamp

    for line in reversed(text[-65536:].rstrip("\n").split("\n")):
        stamp = line.partition(" ")[0]
        if len(stamp) >= 20 and stamp[4:5] == "-":
            return parse_stamp(stamp)
    return None
