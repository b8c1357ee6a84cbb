"""Every training step a log states, with the figures its line carries: loss, validation loss, learning rate,
step time, TFLOPS/GPU, and when it was written (the kubelet's time, else the logger's own `[YYYY-MM-DD HH:MM:SS]`).

The logs are those `helm nemo metrics` reads (helm_nemo.metrics.logs; docs/metrics.md): NeMo 2's ProgressPrinter
(`Training epoch E, iteration N/T | key: value | …`), NeMo 1's progress bar (`… N/T [elapsed<left, key=value, …]`,
redrawn with carriage returns), Megatron's `iteration N/T | key: value |` lines and `validation loss at …`
lines, dllogger's `DLLL {json}`. A log without a stated step time (NeMo 2's default printer) gets one from the
times of consecutive step lines: the wall time between steps is what a step cost.

Steps count from 0 as in helm_nemo.metrics. Lines are read once, without a regular expression on lines that
cannot be step lines (a 50 MB log holds ~200,000 steps).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, UTC

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterable

# Field names -> what they are (the names NeMo and Megatron print; a field not here is ignored).
LOSS = ("reduced_train_loss", "lm loss", "train_loss", "loss")
VAL_LOSS = ("val_loss", "validation_loss", "val loss")
LR = ("lr", "learning rate", "learning_rate")
STEP_TIME_S = ("train_step_timing in s",)
STEP_TIME_MS = ("elapsed time per iteration (ms)",)
TFLOPS = ("throughput per GPU (TFLOP/s/GPU)", "TFLOPs_per_GPU", "tflops_per_sec_per_gpu")

_NEMO2 = re.compile(r"Training epoch \d+, iteration (\d+)/(\d+) \|(.*)")
_NEMO1 = re.compile(r"\|\s*(\d+)/(\d+)\s*\[(?:(\d+):)?(\d+):(\d+)<[^,\]]*,([^\]]*)")
_MEGATRON = re.compile(r"\biteration\s+(\d+)/\s*(\d+)\s*\|(.*)")
_MEGATRON_VAL = re.compile(r"validation loss at (?:iteration (\d+)[^|]*)?\|(.*)")
_OWN_TIME = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]")


@dataclass
class Point:
    """One training step as its log line states it."""

    step: int  # 0-based
    line: int  # 1-based line number in the text read
    at: datetime | None = None
    loss: float | None = None
    lr: float | None = None
    step_time_s: float | None = None  # stated by the line, or derived from the times of consecutive steps
    stated_time: bool = False  # step_time_s came from the line itself
    tflops: float | None = None  # stated by the line (Megatron's throughput per GPU)


@dataclass
class Series:
    """The steps of one log, in step order (a step logged twice, after a restart from a checkpoint: the last)."""

    source: str
    format: str = ""
    points: list[Point] = field(default_factory=list)
    val: list[tuple[int, datetime | None, float]] = field(default_factory=list)  # (step, at, validation loss)
    total: int | None = None  # the steps the run makes, when the lines say
    restarts: list[tuple[int, datetime | None]] = field(default_factory=list)  # (step the log went back to, at)
    sampled: bool = False  # a long log read in windows (reading.py): points holds the steps read
    read_steps: int = 0
    joins: list[tuple[Point, Point]] = field(default_factory=list)  # (first, last) step of each piece fetched
    fetched: int = 0  # characters fetched, when fetched in pieces (fetch.py)


def _number(text: str) -> float | None:
    try:
        value = float(text.strip().rstrip("s").strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _fields(text: str, sep: str, delim: str) -> dict[str, str]:
    out = {}
    for item in text.split(delim):
        key, found, value = item.partition(sep)
        if found:
            out[key.strip()] = value.strip()
    return out


def _pick(fields: dict[str, str], names: tuple[str, ...]) -> float | None:
    for name in names:
        if name in fields:
            return _number(fields[name])
    return None


def _own_time(text: str) -> datetime | None:
    match = _OWN_TIME.search(text)
    if not match:
        return None
    try:
        return datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC)
    except ValueError:
        return None


def parse(source: str, lines: Iterable[tuple[int, str]], stamps: dict[int, datetime] | None = None) -> Series:
    """The steps of a log given as (line number, text without the kubelet's time) and the kubelet's times."""
    stamps = stamps or {}
    out = Series(source)
    found: dict[int, Point] = {}
    last_step = -1
    for number, text in lines:
        if "iteration" not in text and "DLLL" not in text and "[" not in text and "validation" not in text:
            continue
        at = stamps.get(number)
        parts = text.split("\r") if "\r" in text else (text,)
        first_elapsed: int | None = None
        for part in parts:
            point, elapsed = _point(part, number, out)
            if point is None:
                continue
            when = at or _own_time(part)
            if elapsed is not None:
                first_elapsed = elapsed if first_elapsed is None else first_elapsed
                if when is not None:
                    when = when + timedelta(seconds=elapsed - first_elapsed)
            point.at = when
            if point.step < last_step:
                out.restarts.append((point.step, when))
            last_step = point.step
            found[point.step] = point
    out.points = [found[step] for step in sorted(found)]
    _derive_step_times(out.points)
    return out


def _point(part: str, number: int, out: Series) -> tuple[Point | None, int | None]:
    """The step a piece of a line states (and a progress bar's elapsed seconds), recording validation losses."""
    if "Training epoch" in part:
        match = _NEMO2.search(part)
        if match:
            fields = _fields(match.group(3), ": ", "|")
            step = _number(fields.get("global_step", "")) if "global_step" in fields else None
            out.format = out.format or "nemo2"
            out.total = int(match.group(2)) + 1  # NeMo 2 prints iteration i/max_steps-1
            point = _from_fields(int(step) if step is not None else int(match.group(1)), number, fields)
            _val(out, point, fields)
            return point, None
    if "DLLL" in part:
        at = part.find("DLLL ")
        try:
            entry = json.loads(part[at + 5 :])
        except ValueError:
            return None, None
        data = entry.get("data") if isinstance(entry, dict) else None
        step = entry.get("step") if isinstance(entry, dict) else None
        if not isinstance(step, int) or isinstance(step, bool) or not isinstance(data, dict):
            return None, None
        fields = {str(k): str(v) for k, v in data.items()}
        out.format = out.format or "dllogger"
        if not any(name in fields for name in STEP_TIME_S + LOSS):
            val = _pick(fields, VAL_LOSS)
            if val is not None:
                out.val.append((step, None, val))
            return None, None
        point = _from_fields(step, number, fields)
        _val(out, point, fields)
        return point, None
    if "iteration" in part:
        match = _MEGATRON.search(part)
        if match and "validation loss" not in part:
            fields = _fields(match.group(3), ":", "|")
            out.format = out.format or "megatron"
            out.total = int(match.group(2))
            return _from_fields(int(match.group(1)) - 1, number, fields), None  # Megatron counts from 1
    if "validation loss at" in part:
        match = _MEGATRON_VAL.search(part)
        if match:
            fields = _fields(match.group(2), " value:", "|")
            val = _pick(fields, ("lm loss",))
            step = int(match.group(1)) - 1 if match.group(1) else (out.points[-1].step if out.points else 0)
            if val is not None:
                out.val.append((step, _own_time(part), val))
        return None, None
    if "train_step_timing in s=" in part or "reduced_train_loss=" in part:
        match = _NEMO1.search(part)
        if match:
            hours, minutes, seconds = (int(g) if g else 0 for g in match.group(3, 4, 5))
            fields = _fields(match.group(6), "=", ",")
            out.format = out.format or "nemo1"
            out.total = int(match.group(2))
            point = _from_fields(int(match.group(1)) - 1, number, fields)  # the bar counts finished batches
            _val(out, point, fields)
            return point, hours * 3600 + minutes * 60 + seconds
    return None, None


def _from_fields(step: int, number: int, fields: dict[str, str]) -> Point:
    point = Point(step, number, loss=_pick(fields, LOSS), lr=_pick(fields, LR), tflops=_pick(fields, TFLOPS))
    seconds = _pick(fields, STEP_TIME_S)
    if seconds is None:
        ms = _pick(fields, STEP_TIME_MS)
        seconds = ms / 1000 if ms is not None else None
    if seconds is not None and seconds > 0:
        point.step_time_s, point.stated_time = seconds, True
    return point


def _val(out: Series, point: Point, fields: dict[str, str]) -> None:
    val = _pick(fields, VAL_LOSS)
    if val is not None and not (out.val and out.val[-1][2] == val):  # printed again on every later line
        out.val.append((point.step, None, val))


def _derive_step_times(points: list[Point]) -> None:
    """A step without a stated time: the wall time since the previous step's line, per step between them."""
    previous: Point | None = None
    for point in points:
        if (
            point.step_time_s is None
            and previous is not None
            and point.at is not None
            and previous.at is not None
            and point.step > previous.step
        ):
            seconds = (point.at - previous.at).total_seconds() / (point.step - previous.step)
            if seconds > 0:
                point.step_time_s = seconds
        previous = point
