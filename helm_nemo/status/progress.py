"""Training progress from the tail of the rank-0 log, with the parsers and the arithmetic of `helm nemo metrics`.

The step time is the mean of the last `WINDOW` timed steps in the tail (steps before `WARMUP` only when the
run has no later ones: the first steps compile and warm up). It is exactly what `helm nemo metrics --file LOG
--start-step FIRST --end-step LAST` prints for the same log and steps (metrics.logs.select_steps and
average_seconds); TFLOPS/GPU and MFU come from metrics.report.figures with the inputs `--values` gives
metrics. Then:

    tokens/s       = global batch size x sequence length / step time
    ETA            = (max steps - steps done) x step time
    since last     = now - the time the last step's line was written (the kubelet's timestamp)
    stalled        = since last > max(STALL_FACTOR x step time, MIN_STALL_S)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, UTC
import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

    from helm_nemo.metrics.report import Input, Names

from helm_nemo.status.stall_rule import STALL_FACTOR, stall_after

WINDOW = 20
WARMUP = 3


@dataclass
class RunInputs:
    """What the figures need beyond the log, from the values (metrics.recipe) and the profiles."""

    inputs: dict[str, Input] = field(default_factory=dict)  # metrics.report.Input by key
    names: Names | dict[str, Any] = field(default_factory=dict)  # empty when there are no values
    missing: list[str] = field(default_factory=list)  # why a figure cannot be computed
    max_steps: int | None = None
    max_steps_origin: str = ""


def run_inputs(values_file: str | None, release: str | None = None) -> RunInputs:
    """The metrics inputs of the training release of a values or recipe file; never fails (what is missing
    is said in `missing`)."""
    out = RunInputs()
    if not values_file:
        out.missing.append("no --values: GPUs, batch size, model and accelerator are not known")
        return out
    from helm_nemo.metrics.recipe import read_recipe
    from helm_nemo.metrics.report import Request, resolve_partial
    from helm_nemo.user_errors import UserError

    try:
        recipe = read_recipe(values_file, release)
    except UserError as err:
        out.missing.append(err.problems[0].message)
        return out
    out.inputs, out.names, problems = resolve_partial(Request(file="", values=values_file, release=release), recipe)
    out.missing += [p.message for p in problems]
    if recipe.max_steps is not None:
        out.max_steps, out.max_steps_origin = recipe.max_steps.value, recipe.max_steps.origin
    return out


@dataclass
class Progress:
    """What the rank-0 log says about the training: steps, speed, ETA, stall."""

    format: str
    last_step: int  # 0-based, as helm nemo metrics counts
    max_steps: int | None = None
    max_steps_from: str = ""
    step_time_s: float | None = None
    first_step: int | None = None  # the steps averaged
    window_steps: int = 0
    tflops_per_gpu: float | None = None
    mfu: float | None = None
    tokens_per_s: float | None = None
    eta_s: float | None = None
    last_step_at: datetime | None = None
    since_last_s: float | None = None
    stall_after_s: float | None = None
    stalled: bool = False
    notes: list[str] = field(default_factory=list)
    recent_loss: list[float] = field(default_factory=list)  # the last steps' loss and step time (sparkline.py)
    recent_step_s: list[float] = field(default_factory=list)

    @property
    def steps_done(self) -> int:
        return self.last_step + 1

    @property
    def fraction(self) -> float | None:
        return min(1.0, self.steps_done / self.max_steps) if self.max_steps else None

    def as_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "last_step": self.last_step,
            "steps_done": self.steps_done,
            "max_steps": self.max_steps,
            "max_steps_from": self.max_steps_from,
            "step_time_s": self.step_time_s,
            "steps_averaged": [self.first_step, self.last_step] if self.first_step is not None else None,
            "tflops_per_gpu": self.tflops_per_gpu,
            "mfu": self.mfu,
            "tokens_per_s": self.tokens_per_s,
            "eta_s": self.eta_s,
            "last_step_at": self.last_step_at.isoformat().replace("+00:00", "Z") if self.last_step_at else None,
            "since_last_step_s": self.since_last_s,
            "stall_after_s": self.stall_after_s,
            "stalled": self.stalled,
            "notes": self.notes,
        }


def split_timestamps(text: str) -> tuple[list[tuple[int, str]], dict[int, datetime]]:
    """Log text as the API returns it with `timestamps=true` -> (numbered lines without the kubelet's
    timestamp, line number -> that timestamp). Lines without one are kept whole."""
    lines: list[tuple[int, str]] = []
    stamps: dict[int, datetime] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        stamp, sep, rest = line.partition(" ")
        when = parse_stamp(stamp) if sep and len(stamp) >= 20 and stamp[4:5] == "-" and "T" in stamp else None
        if when is not None:
            stamps[number] = when
            line = rest
        lines.append((number, line))
    return lines, stamps


def parse_stamp(text: str) -> datetime | None:
    """RFC 3339 with nanoseconds (`2026-01-01T12:00:00.123456789Z`) -> an aware datetime."""
    head, dot, frac = text.rstrip("Z").partition(".")
    digits = "".join(c for c in frac if c.isdigit())[:6]
    try:
        when = datetime.fromisoformat(head + (f".{digits.ljust(6, '0')}" if dot else ""))
    except ValueError:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


def progress(
    text: str,
    run: RunInputs | None = None,
    *,
    now: datetime | None = None,
    name: str = "rank 0",
    stall_factor: float = STALL_FACTOR,
    window: int = WINDOW,
) -> Progress | None:
    """The progress a log tail shows, or None when it shows no training step yet."""
    from helm_nemo.metrics.logs import average_seconds, scan_lines, select_steps
    from helm_nemo.metrics.report import figures
    from helm_nemo.user_errors import UserError

    run = run or RunInputs()
    lines, stamps = split_timestamps(text)
    log = scan_lines(name, lines)
    if log is None:
        return None
    last = max(log.timings, key=lambda t: (t.step, t.line))
    out = Progress(log.format, last.step)
    totals = [t.total for t in log.timings if t.total]
    if totals:
        out.max_steps, out.max_steps_from = totals[-1], "log"
    elif run.max_steps:
        out.max_steps, out.max_steps_from = run.max_steps, run.max_steps_origin
    steps = sorted({t.step for t in log.timings})
    later = [s for s in steps if s >= WARMUP] or steps
    chosen_steps = later[-window:]
    out.first_step = chosen_steps[0]
    try:
        chosen = select_steps(log, chosen_steps[0], chosen_steps[-1])
        out.step_time_s = average_seconds(chosen)
        out.window_steps = len(chosen)
    except UserError as err:
        out.notes.append(f"no step time: {err.problems[0].message}")
        out.first_step = None
    if out.step_time_s is not None:
        if {"model_flops", "batch_size", "gpus", "peak_tflops"} <= set(run.inputs):
            out.tflops_per_gpu, out.mfu = figures(out.step_time_s, run.inputs)
        elif run.missing:
            out.notes.append("no TFLOPS/MFU: " + "; ".join(run.missing[:2]))
        seq = run.names.get("seq_len")
        if "batch_size" in run.inputs and seq:
            out.tokens_per_s = run.inputs["batch_size"].value * seq / out.step_time_s
        if out.max_steps:
            out.eta_s = max(0, out.max_steps - out.steps_done) * out.step_time_s
    from helm_nemo.status.sparkline import recent

    out.recent_loss, out.recent_step_s = recent(lines, stamps, name)
    out.last_step_at = stamps.get(last.line)
    text_of_last = lines[last.line - 1][1] if 0 < last.line <= len(lines) else ""
    if out.last_step_at is not None and "\r" in text_of_last:
        # A progress bar rewritten with carriage returns: the kubelet stamps the start of the line only; the
        # bar's own elapsed time says how much later its last update came.
        elapsed = [e for e in (_bar_elapsed(part) for part in text_of_last.split("\r")) if e is not None]
        if len(elapsed) >= 2 and elapsed[-1] >= elapsed[0]:
            out.last_step_at = out.last_step_at + timedelta(seconds=elapsed[-1] - elapsed[0])
        elif len(elapsed) < 2:
            out.last_step_at = None
    if out.last_step_at is not None:
        now = now or datetime.now(UTC)
        out.since_last_s = max(0.0, (now - out.last_step_at).total_seconds())
        if out.step_time_s is not None:
            out.stall_after_s = stall_after(out.step_time_s, stall_factor)
            out.stalled = out.since_last_s > out.stall_after_s and not (
                out.max_steps and out.steps_done >= out.max_steps
            )
    return out


_BAR_ELAPSED = re.compile(r"\|\s*\d+/\d+\s*\[(?:(\d+):)?(\d+):(\d+)<")


def _bar_elapsed(part: str) -> int | None:
    """The elapsed seconds a tqdm bar shows (`[1:03:17<317:00:58, …`)."""
    match = _BAR_ELAPSED.search(part)
    if not match:
        return None
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def duration(seconds: float | None) -> str:
    """4 h 22 m, 3 m 05 s, 12 s."""
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} m"
    if minutes:
        return f"{minutes} m {secs:02d} s"
    return f"{secs} s"
