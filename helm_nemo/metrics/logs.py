"""Per-step training times from the logs NeMo and Megatron-Bridge jobs write.

Supported (docs/metrics.md shows a line of each); every step number is 0-based like dllogger's, so
the same --start-step/--end-step select the same steps whichever log a job wrote:

- `dllogger`: dllogger.json, one `DLLL {json}` per line (NeMo's DLLogger); the entry's `step`, its
  `data["train_step_timing in s"]`. `"step": "PARAMETER"` lines and entries without a step time
  (validation) are skipped. This is the format gpu-recipes' training_metrics tool reads.
- `nemo2`: a NeMo 2 rank-0 log, ProgressPrinter lines `Training epoch E, iteration N/T | … |
  global_step: G | … | train_step_timing in s: X`; step G (N when the line has no global_step). NeMo
  prints 4 significant digits, so averages agree with dllogger.json's to about 1e-4.
- `nemo1`: a NeMo 1 (NeMo-Launcher) rank-0 log, PyTorch Lightning's progress bar `Epoch E: … | N/T [elapsed<left,
  …, global_step=…, train_step_timing in s=X, …]` (rewritten in place with carriage returns, as seed 004
  shows it); the bar's N counts finished batches, so it is step N-1 (its `global_step` is printed with
  three digits only); a redraw of the same N is one step.
- `megatron`: Megatron-Bridge / Megatron-LM `iteration N/T | … | elapsed time per iteration (ms): X |`
  lines (printed by the last rank); iteration N is step N-1 (Megatron counts from 1).
- `megatron-step-time`: Megatron-Bridge's rank-0 line `Step Time : X.XXs GPU utilization: …`, which
  carries no step number: the k-th such line is step k-1 (log_interval 1, as the recipes set it);
  10 ms resolution. Used only when the log has no `iteration` lines.

A line may carry a prefix (`[default0]:`, a pod name, a timestamp). Lines are read one at a time, so a
multi-gigabyte log costs time, not memory.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from collections.abc import Iterable, Iterator
    from typing import Any

    Line = tuple[int, str, bool]  # (line number, text without its line end, had a line end)

from helm_nemo.user_errors import Problem, UserError

TIMING_KEY = "train_step_timing in s"

FORMATS = {
    "dllogger": "dllogger.json (`DLLL {json}` lines with `train_step_timing in s`)",
    "nemo2": "NeMo 2 log (`Training epoch E, iteration N/T | … | train_step_timing in s: X`)",
    "nemo1": "NeMo 1 log (progress bar `Epoch E: … | N/T [… train_step_timing in s=X …]`)",
    "megatron": "Megatron-Bridge log (`iteration N/T | … | elapsed time per iteration (ms): X |`)",
    "megatron-step-time": "Megatron-Bridge rank-0 log (`Step Time : X.XXs GPU utilization: …`)",
}
SUPPORTED_HINT = "supported: " + "; ".join(FORMATS.values())

_DLLL = re.compile(r"^DLLL\s*(.*)$")
_NEMO2 = re.compile(r"Training epoch \d+, iteration (\d+)/(\d+) \|(.*)")
_NEMO1 = re.compile(r"\bEpoch \d+:.*?\|\s*(\d+)/(\d+)\s*\[[^\]]*?\btrain_step_timing in s=([^,\]\s]*)")
_MEGATRON = re.compile(r"\biteration\s+(\d+)/\s*(\d+)\s*\|.*?\belapsed time per iteration \(ms\):\s*([^\s|]*)")
_STEP_TIME = re.compile(r"\bStep Time : (\S*?)s GPU utilization")


@dataclass(frozen=True)
class StepTiming:
    """One step's time as a log line states it (and the line, for errors)."""

    step: int
    seconds: object  # a float when the log holds a number; checked when the step is used
    line: int
    per_second: float = 1.0  # 1000 for Megatron's milliseconds
    total: int | None = None  # the number of steps the run makes, when the line states it

    def value(self) -> float | None:
        """Seconds, or None when the log's value is no finite positive number."""
        raw = self.seconds
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            return None
        seconds = raw / self.per_second if self.per_second != 1.0 else raw
        return seconds if math.isfinite(seconds) and seconds > 0 else None


@dataclass
class StepLog:
    """The step times read from one training log, in the log's format."""

    path: str
    format: str
    timings: list[StepTiming] = field(default_factory=list)

    @property
    def description(self) -> str:
        return FORMATS[self.format]


def _problem(path: str, line: int | None, message: str, hint: str | None = None, where: str = "$") -> UserError:
    return UserError(Problem(path, line, None, where, message, hint=hint))


def _number(text: str) -> object:
    try:
        return float(text)
    except ValueError:
        return text


def read_log(path: str | Path) -> StepLog:
    """The step timings of a log file, in file order; UserError (file:line) when the file is unusable."""
    name = str(path)
    try:
        handle = open(path, encoding="utf-8", errors="replace", newline="")
    except FileNotFoundError:
        raise _problem(
            name, None, "log file not found", hint="give the path of dllogger.json or of the rank-0 log"
        ) from None
    except IsADirectoryError:
        raise _problem(
            name,
            None,
            "the log path is a directory",
            hint="point --file at dllogger.json (e.g. <log dir>/dllogger/rank-0/dllogger.json)",
        ) from None
    except OSError as err:
        raise _problem(name, None, f"cannot read the log: {err.strerror or err}") from None
    with handle:
        lines = _numbered_lines(handle)
        first = next(((n, text, ended) for n, text, ended in lines if text.strip()), None)
        if first is None:
            raise _problem(name, None, "the log is empty", hint=SUPPORTED_HINT)
        if _DLLL.match(first[1].lstrip("\ufeff")):
            return _read_dllogger(name, first, lines)
        return _read_text(name, first, lines)


def _numbered_lines(handle: Iterable[str]) -> Iterator[Line]:
    """(line number, text without its line end, had a line end) for every line of the file."""
    for number, raw in enumerate(handle, start=1):
        ended = raw.endswith("\n")
        yield number, raw.rstrip("\r\n"), ended


def _read_dllogger(name: str, first: Line, rest: Iterator[Line]) -> StepLog:
    log = StepLog(name, "dllogger")
    pending = None  # a line that did not parse: an error unless it turns out to be the last one

    def lines() -> Iterator[Line]:
        yield first
        yield from rest

    for number, text, _ended in lines():
        if not text.strip():
            continue
        if pending is not None:
            raise _problem(name, pending[0], f"not valid JSON after `DLLL`: {pending[1]}")
        found = _DLLL.match(text.lstrip("\ufeff"))
        if not found:
            raise _problem(
                name,
                number,
                "not a dllogger line (every line of dllogger.json is `DLLL {json}`)",
                hint="a plain training log is read too, but not mixed with DLLL lines",
            )
        try:
            entry = json.loads(found.group(1))
        except json.JSONDecodeError as err:
            pending = (number, err.msg)
            continue
        _dllogger_entry(name, number, entry, log)
    if pending is not None:
        raise _problem(
            name,
            pending[0],
            "the last line is cut short (incomplete JSON): the file is truncated or the job is still writing it",
            hint="copy the file again after the job ends, or delete the incomplete last line",
        )
    if not log.timings:
        raise _problem(
            name,
            None,
            f"no dllogger entry has `{TIMING_KEY}`",
            hint="NeMo writes it with exp_manager.log_step_timing: true",
        )
    return log


def _dllogger_entry(name: str, number: int, entry: Any, log: StepLog) -> None:
    if not isinstance(entry, dict):
        raise _problem(name, number, "a dllogger entry must be a JSON object")
    step = entry.get("step")
    if step == "PARAMETER":
        return
    data = entry.get("data")
    if not isinstance(data, dict) or TIMING_KEY not in data:
        return  # validation metrics and other entries without a step time
    if isinstance(step, bool) or not isinstance(step, int):
        raise _problem(name, number, f"step {json.dumps(step)} is not an integer", where="$.step")
    log.timings.append(StepTiming(step, data[TIMING_KEY], number))


def _read_text(name: str, first: Line, rest: Iterator[Line]) -> StepLog:
    found: dict[str, list[StepTiming]] = {fmt: [] for fmt in TEXT_FORMATS}
    last = None  # (line number, had a line end, matched a timing pattern)

    def lines() -> Iterator[Line]:
        yield first
        yield from rest

    for number, text, ended in lines():
        matched = False
        for part in text.split("\r"):  # progress bars rewrite a line with carriage returns
            matched |= _text_line(part, number, found)
        last = (number, ended, matched)
    if last and last[2] and not last[1]:
        raise _problem(
            name,
            last[0],
            "the last line is cut short (no line end): the log is truncated or still being written",
            hint="copy the log again after the job ends, or delete the incomplete last line",
        )
    for fmt in TEXT_FORMATS:
        if found[fmt]:
            return StepLog(name, fmt, found[fmt])
    raise _problem(name, None, "no training step times found in this log", hint=SUPPORTED_HINT)


TEXT_FORMATS = ("nemo2", "nemo1", "megatron", "megatron-step-time")  # a log with several: the first found


def _text_line(text: str, number: int, found: dict[str, list[StepTiming]]) -> bool:
    if "Training epoch" in text:
        match = _NEMO2.search(text)
        if match:
            fields = {}
            for item in match.group(3).split("|"):
                key, sep, value = item.partition(": ")
                if sep:
                    fields[key.strip()] = value.strip()
            if TIMING_KEY in fields:
                step = _number(fields.get("global_step", match.group(1)))
                step = int(step) if isinstance(step, float) and step.is_integer() else int(match.group(1))
                # NeMo 2 prints `iteration i/max_steps-1`
                found["nemo2"].append(
                    StepTiming(step, _number(fields[TIMING_KEY]), number, total=int(match.group(2)) + 1)
                )
                return True
    if "train_step_timing in s=" in text:
        match = _NEMO1.search(text)
        if match:
            step = int(match.group(1)) - 1
            earlier = found["nemo1"]
            if step >= 0 and not (earlier and earlier[-1].step == step):  # a redraw of the same batch
                earlier.append(StepTiming(step, _number(match.group(3)), number, total=int(match.group(2))))
            return True
    if "elapsed time per iteration" in text:
        match = _MEGATRON.search(text)
        if match:
            found["megatron"].append(
                StepTiming(int(match.group(1)) - 1, _number(match.group(3)), number, 1000.0, total=int(match.group(2)))
            )
            return True
    if "Step Time :" in text:
        match = _STEP_TIME.search(text)
        if match:
            index = len(found["megatron-step-time"])
            found["megatron-step-time"].append(StepTiming(index, _number(match.group(1)), number))
            return True
    return False


def select_steps(log: StepLog, start: int, end: int) -> list[StepTiming]:
    """The timings of steps start..end (both included), in file order; UserError when there are none or one
    is not a finite positive number."""
    chosen = [t for t in log.timings if start <= t.step <= end]
    if not chosen:
        steps = sorted({t.step for t in log.timings})
        raise _problem(
            log.path,
            None,
            f"no steps in {start}–{end}: the log has steps {steps[0]}–{steps[-1]} ({len(log.timings)} timed)",
            hint="choose a range with --start-step/--end-step (steps count from 0)",
        )
    bad = [t for t in chosen if t.value() is None]
    if bad:
        problems = [
            Problem(
                log.path,
                t.line,
                None,
                "$",
                f"step {t.step}: step time {_shown(t.seconds)} is not a positive number",
                hint="a NaN or missing time makes the average meaningless; choose another step range",
            )
            for t in bad
        ]
        raise UserError(problems)
    return chosen


def _shown(raw: object) -> str:
    if isinstance(raw, float):
        return repr(raw)
    return json.dumps(raw) if not isinstance(raw, str) else repr(raw)


def average_seconds(chosen: list[StepTiming]) -> float:
    """The mean step time, summed in file order (as the anchor does, so the result is bit-identical)."""
    total = 0.0
    for timing in chosen:
        value = timing.value()
        assert value is not None  # select_steps refuses a step without one
        total += value
    return total / len(chosen)


def scan_lines(name: str, lines: Iterable[tuple[int, str]]) -> StepLog | None:
    """The step timings in a piece of a log that is still being written (`helm nemo status` reads the tail of
    a running pod's log): `lines` are (line number, text) pairs; the first may be cut, the last unfinished;
    `DLLL {json}` lines may be mixed with other output (a launcher that prints dllogger's lines). No error:
    None when no step time is found. With several formats, the one with the most steps wins."""
    found: dict[str, list[StepTiming]] = {fmt: [] for fmt in ("dllogger", *TEXT_FORMATS)}
    for number, text in lines:
        for part in text.split("\r"):
            at = part.find("DLLL ")
            if at >= 0:
                try:
                    entry = json.loads(part[at + 5 :])
                except ValueError:
                    continue
                step = entry.get("step") if isinstance(entry, dict) else None
                data = entry.get("data") if isinstance(entry, dict) else None
                if (
                    isinstance(step, int)
                    and not isinstance(step, bool)
                    and isinstance(data, dict)
                    and TIMING_KEY in data
                ):
                    found["dllogger"].append(StepTiming(step, data[TIMING_KEY], number))
                continue
            _text_line(part, number, found)
    best = max(found, key=lambda fmt: len(found[fmt]))
    return StepLog(name, best, found[best]) if found[best] else None
