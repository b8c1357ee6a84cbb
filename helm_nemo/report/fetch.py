"""The log the curves come from, fetched from the API server: whole when short; else its head, windows at evenly
spaced times and its tail.

Delivering a whole 55 MB log through kube-apiserver from kwok took 11.7 s on the test control plane, where 32 KB
of it took 0.04-0.3 s (docs/report.md). So a log longer than HEAD_BYTES is read as its first HEAD_BYTES, WINDOWS
windows of WINDOW_BYTES near evenly spaced times between its first line (a 4 KB probe) and the last line of the
tail status read, all side by side, and that tail.

A window is asked for by its place from the end, `tailLines=N` + `limitBytes`: the kubelet (and kwok, which runs
its code) finds the Nth line from the end by reading the file backwards in blocks, where `sinceTime` makes it
read and parse every line from the file's start (on the 55 MB log, 0.05 s for 100,000 lines from the end against
0.30 s for the same place by time, one at a time). N for a time comes from what is known of the log's lines and
their times, lines from the end against time: at first the tail's, then also each window's first line. Between
two known places N is interpolated; before the earliest it is extrapolated at the pace of the known places (a
pause of more than MIN_STALL_S between two lines is not the pace). The windows that land more than half the
spacing from their time are asked for once more, placed by what the first round taught (ROUNDS); every window's
steps are kept. When none lands (a server that does not honour tailLines answers with the log's head, or the tail
gave no pace), the windows are asked for by `sinceTime`; a server that honours neither gets the whole log read.
A pause between two pieces (their time apart longer than their steps at the median by more than the stall limit)
is a stall whose place between their steps is not read step by step (Stall.inexact).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from helm_nemo.report.model import MIN_STALL_S
from helm_nemo.report.reading import _lines, _merge, from_text, last_time
from helm_nemo.report.series import Series, parse

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from helm_nemo.kube.client import KubeClient

HEAD_BYTES = 512_000
WINDOWS = 6
WINDOW_BYTES = 32_000
THREADS = 8
ROUNDS = 2  # rounds of windows by tailLines (the second places the windows the first left off their times)


def _first_time(text: str) -> datetime | None:
    from helm_nemo.status.progress import parse_stamp

    stamp = text[:40].partition(" ")[0]
    return parse_stamp(stamp) if len(stamp) >= 20 and stamp[4:5] == "-" else None


def _whole_lines(text: str) -> str:
    """Without a last line cut by limitBytes."""
    return text[: text.rfind("\n") + 1] if not text.endswith("\n") else text


def _places(tail: str) -> list[tuple[int, datetime]]:
    """(lines from the end, time) of the stamped lines of `tail`, the log's last line first (0)."""
    from helm_nemo.report.reading import _stamp

    minutes: dict[str, datetime | None] = {}
    lines = tail.rstrip("\n").split("\n")
    out = []
    for back, line in enumerate(reversed(lines)):
        stamp = line[:40].partition(" ")[0]
        if len(stamp) >= 20 and stamp[4:5] == "-" and stamp.endswith("Z") and stamp[19:20] in (".", "Z"):
            when = _stamp(stamp, minutes)
            if when is not None:
                out.append((back, when))
    return out


def _lines_back(known: list[tuple[int, datetime]], at: datetime) -> int | None:
    """The place from the end (in lines, the last line 0) of the first line at `at`, from the known places (lines
    from the end, time): interpolated between the two around it, else extrapolated before the earliest at the pace
    of the known places (a pause of more than MIN_STALL_S between two lines left out)."""
    after = [(n, t) for n, t in known if t >= at]
    before = [(n, t) for n, t in known if t < at]
    if after and before:
        (n0, t0), (n1, t1) = max(after), min(before)  # the earliest place after `at`, the latest before it
        span = (t0 - t1).total_seconds()
        return round(n0 + (n1 - n0) * ((t0 - at).total_seconds() / span)) if span > 0 else n0
    if not after:
        return None
    ordered = sorted(known)  # from the end back: lines rising, times falling
    lines = seconds = 0.0
    for (n1, t1), (n2, t2) in zip(ordered, ordered[1:], strict=False):
        if (t1 - t2).total_seconds() <= MIN_STALL_S * (n2 - n1):  # a pause between two lines is not the pace
            lines, seconds = lines + n2 - n1, seconds + (t1 - t2).total_seconds()
    first_n, first_t = max(after)
    if seconds <= 0:
        return None
    return round(first_n + lines / seconds * (first_t - at).total_seconds())


def fetch(client: KubeClient, path: str, query: dict[str, str], tail: str, source: str) -> tuple[Series, str]:
    """The steps of the log at `path` (pods/NAME/log) and the text whose last line is the log's last."""
    probe = client.text(path, {**query, "limitBytes": "4096"})  # the first line's time, for the windows
    start, end = _first_time(probe), last_time(tail)
    if len(probe.encode("utf-8", "replace")) < 4096 or start is None or end is None or end <= start:
        whole = probe if len(probe.encode("utf-8", "replace")) < 4096 else client.text(path, query)
        return from_text(source, whole), whole
    spacing = (end - start) / (WINDOWS + 1)
    times = [start + spacing * (k + 1) for k in range(WINDOWS)]
    known = _places(tail)

    def window(asked: tuple[str, str] | None) -> str:
        if asked is None:  # the head
            return client.text(path, {**query, "limitBytes": str(HEAD_BYTES)})
        return client.text(path, {**query, asked[0]: asked[1], "limitBytes": str(WINDOW_BYTES)})

    from concurrent.futures import ThreadPoolExecutor

    landed: set[int] = set()  # the windows that came within half the spacing of their time
    kept: list[tuple[datetime, str]] = []  # every window but the head's copies (one off its time holds real steps)
    head: str | None = None
    with ThreadPoolExecutor(max_workers=THREADS) as pool:  # the head and the windows side by side
        for by_time in [False] * ROUNDS + [True]:
            if by_time:  # none landed by tailLines (not honoured, or no pace to place them): by sinceTime
                if landed:
                    break
                asked = [(k, ("sinceTime", times[k].strftime("%Y-%m-%dT%H:%M:%SZ"))) for k in range(WINDOWS)]
            else:
                backs = [(k, _lines_back(known, times[k])) for k in range(WINDOWS) if k not in landed]
                asked = [(k, ("tailLines", str(back + 1))) for k, back in backs if back is not None]
            answers = list(pool.map(window, ([None] if head is None else []) + [where for _, where in asked]))
            if head is None:
                head = answers.pop(0)
                if len(head.encode("utf-8", "replace")) < HEAD_BYTES:
                    return from_text(source, head), head  # the whole log
            for (k, (how, value)), text in zip(asked, answers, strict=True):
                first = _first_time(text)
                if by_time and (first is None or first < times[k] - timedelta(seconds=1)):  # sinceTime ignored too
                    whole = client.text(path, query)
                    return from_text(source, whole), whole
                if first is None or first <= start:
                    continue
                kept.append((first, text))
                if how == "tailLines":
                    known.append((int(value) - 1, first))
                if by_time or abs(first - times[k]) <= spacing / 2:
                    landed.add(k)
    assert head is not None
    out = Series(source, sampled=True)
    pieces = [_whole_lines(head)] + [_whole_lines(text) for _, text in sorted(kept)] + [tail]
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
