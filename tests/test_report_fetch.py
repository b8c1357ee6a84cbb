"""report/fetch.py: how a long log is fetched from the API server in pieces, against a log server that answers
`tailLines`, `sinceTime` and `limitBytes` the way the kubelet's log reader does (last N lines; lines before the
time dropped; the answer cut at the byte limit), and against servers that ignore one or both.

The log is bench/report_bench.py's rank-0 log (real healthy step lines, then the real hang's rank 0), whose last
minutes print three times slower than the rest: the tail's pace misplaces the first windows, and the second round
must place them from what the first taught."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))


class LogServer:
    """pods/NAME/log of one container, as the kubelet reads its file: `tailLines` (the last N lines), then
    `sinceTime` (lines stamped before it dropped), then `limitBytes`; `honours` says which of the first two it
    implements (a server that does not answers as if the parameter were absent). Every query is kept."""

    def __init__(self, text: str, honours: tuple[str, ...] = ("tailLines", "sinceTime")) -> None:
        self.lines = text.splitlines(keepends=True)
        self.honours = honours
        self.queries: list[dict[str, str]] = []

    def text(self, path: str, query: dict[str, str] | None = None) -> str:
        from helm_nemo.status.progress import parse_stamp

        query = dict(query or {})
        self.queries.append(query)
        lines = self.lines
        if "tailLines" in query and "tailLines" in self.honours:
            lines = lines[-int(query["tailLines"]) :]
        if "sinceTime" in query and "sinceTime" in self.honours:
            since = parse_stamp(query["sinceTime"])
            first = next(
                (n for n, line in enumerate(lines) if (parse_stamp(line.partition(" ")[0]) or since) >= since),
                len(lines),
            )
            lines = lines[first:]
        out = "".join(lines)
        if "limitBytes" in query:
            out = out.encode()[: int(query["limitBytes"])].decode("utf-8", "replace")
        return out


def make_log() -> tuple[str, int, str]:
    """(an 8 MB rank-0 log with a 10-minute pause two fifths in, its steps, the tail status reads)."""
    from failed_at_scale import failed_run
    from report_bench import rank0_log

    from helm_nemo.status.progress import parse_stamp

    text, steps = rank0_log(failed_run(2, 1, datetime(2026, 11, 26, 21, 0, tzinfo=UTC))[0].log, 8)
    lines = text.splitlines()
    cut = 2 * len(lines) // 5
    later = []
    for line in lines[cut:]:  # every line from `cut` on 10 minutes later: the run paused there
        stamp, _, rest = line.partition(" ")
        when = parse_stamp(stamp)
        later.append(f"{(when + timedelta(minutes=10)).strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {rest}" if when else line)
    paused = "\n".join(lines[:cut] + later) + "\n"
    return paused, steps, "".join(paused.splitlines(keepends=True)[-2000:])


def every_line(text: str):
    from helm_nemo.report import reading
    from helm_nemo.report.series import parse

    return parse("rank0", *reading._lines(text, 1))


def figures(series, last_line=None):
    from helm_nemo.report.model import percentile, stalls

    times = [p.step_time_s for p in series.points if p.step_time_s is not None]
    median = percentile(times, 0.5)
    return median, percentile(times, 0.95), stalls(series, median, last_line)


def test_windows_by_tail_lines_land_near_their_times_in_two_rounds_and_find_the_pause(log):
    from helm_nemo.report import fetch

    text, steps, tail = log
    server = LogServer(text)
    series, _ = fetch.fetch(server, "pods/rank0/log", {"timestamps": "true"}, tail, "rank0")  # type: ignore[arg-type]
    windows = [q for q in server.queries if q.get("limitBytes") == str(fetch.WINDOW_BYTES)]
    assert windows and all("tailLines" in q and "sinceTime" not in q for q in windows)
    assert fetch.WINDOWS < len(windows) <= fetch.ROUNDS * fetch.WINDOWS  # the tail's pace misplaced some at first
    assert (series.points[0].step, series.points[-1].step) == (0, steps - 1) and series.sampled
    # each evenly spaced time between the log's first and last lines that has lines near it (not inside the
    # pause) has a piece starting within half the spacing of it
    stamped = [fetch._first_time(line) for line in text.splitlines()]
    times = [t for t in stamped if t is not None]
    firsts = [piece[0].at for piece in series.joins]
    spacing = (times[-1] - times[0]) / (fetch.WINDOWS + 1)
    aimed = [times[0] + spacing * (k + 1) for k in range(fetch.WINDOWS)]
    reachable = [  # lines within a quarter of the spacing before and after it: not inside the pause
        at
        for at in aimed
        if any(at - spacing / 4 <= t <= at for t in times) and any(at < t <= at + spacing / 4 for t in times)
    ]
    assert len(reachable) >= fetch.WINDOWS - 2
    for at in reachable:
        assert min(abs(first - at) for first in firsts) <= spacing / 2, at
    exact = every_line(text)
    (m1, p1, s1), (m2, p2, s2) = figures(series), figures(exact)
    assert abs(m1 - m2) / m2 < 0.02 and abs(p1 - p2) / p2 < 0.05
    pause = next(s for s in s2 if s.seconds > 500)  # read line by line: the 10 minutes at their step
    found = [s for s in s1 if s.seconds > 500]
    assert len(found) == 1 and found[0].step <= pause.step and found[0].after >= pause.after
    assert abs(found[0].seconds - pause.seconds) < 60
    assert series.fetched < 2_000_000  # of 8 MB


def test_a_server_that_ignores_tail_lines_gets_the_windows_by_time(log):
    from helm_nemo.report import fetch

    text, steps, tail = log
    server = LogServer(text, honours=("sinceTime",))
    series, _ = fetch.fetch(server, "pods/rank0/log", {"timestamps": "true"}, tail, "rank0")  # type: ignore[arg-type]
    by_time = [q for q in server.queries if "sinceTime" in q]
    assert len(by_time) == fetch.WINDOWS
    assert (series.points[0].step, series.points[-1].step) == (0, steps - 1) and series.fetched < 2_000_000


def test_a_server_that_honours_neither_gets_the_whole_log_read(log):
    from helm_nemo.report import fetch

    text, steps, tail = log
    server = LogServer(text, honours=())
    series, whole = fetch.fetch(server, "pods/rank0/log", {"timestamps": "true"}, tail, "rank0")  # type: ignore[arg-type]
    assert server.queries[-1] == {"timestamps": "true"} and whole == text
    assert (series.points[0].step, series.points[-1].step) == (0, steps - 1) and not series.fetched


@pytest.fixture(scope="module")
def log() -> tuple[str, int, str]:
    return make_log()
