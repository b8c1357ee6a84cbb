"""The log the curves come from, fetched from the API server: whole when short; else its head, windows at evenly
spaced times and its tail.

Delivering a whole 55 MB log through kube-apiserver from kwok took 11.7 s on the test control plane, where 64 KB
from its middle (`sinceTime` + `limitBytes`) took 0.23 s and its tail 0.31 s (docs/report.md). So a log longer
than HEAD_BYTES is read as its first HEAD_BYTES and WINDOWS windows of WINDOW_BYTES starting at evenly spaced
times between its first line (a 4 KB probe) and the last line of the tail status read, all side by side, and that
tail. A pause between
two pieces (their time apart longer than their steps at the median by more than the stall limit) is a stall
whose place between their steps is not read step by step (Stall.inexact). A server that ignores `sinceTime`
(it answers from the log's start) gets the whole log read instead.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from helm_nemo.report.reading import _lines, _merge, from_text, last_time
from helm_nemo.report.series import Series, parse

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from helm_nemo.kube.client import KubeClient

HEAD_BYTES = 512_000
WINDOWS = 6
WINDOW_BYTES = 32_000
THREADS = 8


def _first_time(text: str) -> datetime | None:
    from helm_nemo.status.progress import parse_stamp

    stamp = text[:40].partition(" ")[0]
    return parse_stamp(stamp) if len(stamp) >= 20 and stamp[4:5] == "-" else None


def _whole_lines(text: str) -> str:
    """Without a last line cut by limitBytes."""
    return text[: text.rfind("\n") + 1] if not text.endswith("\n") else text


def fetch(client: KubeClient, path: str, query: dict[str, str], tail: str, source: str) -> tuple[Series, str]:
    """The steps of the log at `path` (pods/NAME/log) and the text whose last line is the log's last."""
    probe = client.text(path, {**query, "limitBytes": "4096"})  # the first line's time, for the windows
    start, end = _first_time(probe), last_time(tail)
    if len(probe.encode("utf-8", "replace")) < 4096 or start is None or end is None or end <= start:
        whole = probe if len(probe.encode("utf-8", "replace")) < 4096 else client.text(path, query)
        return from_text(source, whole), whole
    step = (end - start) / (WINDOWS + 1)
    times = [start + step * (k + 1) for k in range(WINDOWS)]

    def window(at: datetime | None) -> tuple[datetime | None, str]:
        if at is None:  # the head
            return None, client.text(path, {**query, "limitBytes": str(HEAD_BYTES)})
        since = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        return at, client.text(path, {**query, "sinceTime": since, "limitBytes": str(WINDOW_BYTES)})

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=THREADS) as pool:  # the head and the windows side by side
        (_, head), *got = list(pool.map(window, [None, *times]))
    if len(head.encode("utf-8", "replace")) < HEAD_BYTES:
        return from_text(source, head), head  # the whole log
    for at, text in got:
        first = _first_time(text)
        if first is None or at is None or first < at - timedelta(seconds=1):  # sinceTime not honoured: read it all
            whole = client.text(path, query)
            return from_text(source, whole), whole
    out = Series(source, sampled=True)
    pieces = [_whole_lines(head)] + [_whole_lines(text) for _, text in got] + [tail]
    found = {}
    for piece in pieces:
        part = parse(source, *_lines(piece, 1))
        if part.points:
            out.joins.append((part.points[0], part.points[-1]))
        _merge(out, part)
        for point in part.points:
            found[point.step] = point
    out.points = [found[s] for s in sorted(found)]
    out.read_steps = len(out.points)
    out.fetched = sum(len(p) for p in pieces)
    return out, tail
