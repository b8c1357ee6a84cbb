"""What a report shows, as plain data (gather.py fills it, charts.py and render.py draw it): the verdict with an
excerpt of each line it names, the curves of one log, the stalls, the pods' timeline and the recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from helm_nemo.diagnose.events import Diagnosis, Event
    from helm_nemo.report.series import Series

from helm_nemo.status.stall_rule import STALL_FACTOR  # a step longer than this many median step times is a stall

MIN_STALL_S = 60.0  # and longer than this: a curve shows every such pause (status waits 300 s to say STALLED)
EXCERPT = 4  # lines before and after an event's line


@dataclass
class Excerpt:
    """The lines around events of the verdict (EXCERPT before and after each; events of one log whose lines are
    that close share one excerpt), each event's line with the anchor the verdict links to."""

    anchor: str
    source: str
    first: int  # line number of lines[0]
    line: int  # the first event's line
    lines: list[str]
    hits: dict[int, str] = field(default_factory=dict)  # line number -> the anchor of the event(s) on it


@dataclass
class Stall:
    """A pause without a training step: between two steps, or after the last one (`after` is None)."""

    step: int  # the last step before the pause
    at: datetime | None
    seconds: float
    after: int | None = None  # the step that ended it, None when none came
    inexact: bool = False  # between two pieces of a log fetched in pieces: somewhere between step and after


@dataclass
class PodRow:
    """One pod (or log file) on the timeline: the times it went through and how it ended."""

    name: str
    rank: str = ""
    node: str = ""
    created: datetime | None = None
    scheduled: datetime | None = None
    started: datetime | None = None
    first_step: datetime | None = None
    last_line: datetime | None = None
    finished: datetime | None = None
    exit_code: int | None = None
    signal: str = ""
    reason: str = ""
    restarts: int = 0
    role: str = ""  # "first cause", "consequence" or ""
    marks: list[tuple[datetime, str, str]] = field(default_factory=list)  # (when, kind, words): its events

    def times(self) -> list[datetime]:
        found = [self.created, self.scheduled, self.started, self.first_step, self.last_line, self.finished]
        return [t for t in found if t is not None] + [m[0] for m in self.marks]


@dataclass
class RunEvent:
    """An event of the run as a whole: Kueue admission or preemption, an eviction, a JobSet restart."""

    at: datetime | None
    kind: str  # admitted, preempted, evicted, restart, warning, …
    who: str
    words: str


@dataclass
class RecipeRow:
    """One value of the recipe shown in the report, and where it came from."""

    key: str
    value: str
    origin: str = ""


@dataclass
class Check:
    """One preflight check result from a `helm nemo preflight -o json` document."""

    id: str
    verdict: str
    message: str
    source: str


@dataclass
class Report:
    """Everything one report shows, gathered before it is rendered."""

    title: str
    generated: datetime
    source: str  # "files" or "cluster"
    diagnosis: Diagnosis | None = None
    excerpts: dict[int, Excerpt] = field(default_factory=dict)  # id(event) -> the excerpt that holds its line
    anchors: dict[int, str] = field(default_factory=dict)  # id(event) -> the id of its line in that excerpt
    blocks: list[Excerpt] = field(default_factory=list)  # the excerpts, in the order of their first event
    series: Series | None = None
    series_note: str = ""  # which log the curves come from
    step_median: float | None = None
    step_p95: float | None = None
    stalls: list[Stall] = field(default_factory=list)
    tokens_per_step: float | None = None  # global batch x sequence length (tokens/s = this / step time)
    flops_per_step_per_gpu: float | None = None  # model FLOPs x batch / GPUs (TFLOPS/GPU = this / step time / 1e12)
    peak_tflops: float | None = None  # MFU = TFLOPS/GPU / this
    pods: list[PodRow] = field(default_factory=list)
    events: list[RunEvent] = field(default_factory=list)
    recipe: list[RecipeRow] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def anchor(self, event: Event) -> str:
        return self.anchors.get(id(event), "")


def percentile(values: list[float], fraction: float) -> float:
    """The value below which `fraction` of the values lie (nearest rank on the sorted values)."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(fraction * (len(ordered) - 1)))))
    return ordered[index]


def stalls(series: Series, median: float, last_line: datetime | None) -> list[Stall]:
    """The steps that took longer than max(STALL_FACTOR x median, MIN_STALL_S), and the time after the last
    step until the log's last line when that is as long (a run that stopped stepping)."""
    limit = max(STALL_FACTOR * median, MIN_STALL_S)
    found = []
    previous = None
    for point in series.points:
        if previous is not None and point.step_time_s is not None and point.step_time_s > limit:
            seconds = point.step_time_s * (point.step - previous.step)
            found.append(Stall(previous.step, previous.at, seconds, point.step))
        previous = point
    for (_, before), (after, _) in zip(series.joins, series.joins[1:], strict=False):  # pieces fetched apart
        if before.at is None or after.at is None or after.step <= before.step:
            continue
        excess = (after.at - before.at).total_seconds() - (after.step - before.step) * median
        if excess > limit:
            found.append(Stall(before.step, before.at, excess, after.step, inexact=True))
    last = series.points[-1] if series.points else None
    if last is not None and last.at is not None and last_line is not None:
        gap = (last_line - last.at).total_seconds()
        if gap > limit:
            found.append(Stall(last.step, last.at, gap))
    return found
