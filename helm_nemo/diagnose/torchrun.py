"""torchrun's error summary (torch.distributed.elastic's ChildFailedError):

    ============================================================
    train.py FAILED
    ------------------------------------------------------------
    Failures:
    [1]:
      time      : 2026-01-05_10:00:07
      host      : node-1
      rank      : 1 (local_rank: 0)
      exitcode  : -15 (pid: 1235)
      error_file: <N/A>
      traceback : Signal 15 (SIGTERM) received by PID 1235
    ------------------------------------------------------------
    Root Cause (first observed failure):
    [0]:
      time      : …
      exitcode  : -11 (pid: 1234)
      error_file: <N/A>
      traceback : Signal 11 (SIGSEGV) received by PID 1234
    ============================================================

The root cause entry is the first failure torchrun observed on this node: its exit code says the signal
(-9 SIGKILL, -11 SIGSEGV, -6 SIGABRT, -7 SIGBUS), its `traceback` field the worker's exception (when the
entry point is wrapped in @record), its `error_file` the JSON torchrun read it from. The other entries are
what followed (the survivors, stopped with SIGTERM).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from helm_nemo.diagnose import lines as L

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterator

    Line = tuple[int, int, str]

# exit code of a worker killed by a signal (negative: the signal number) -> signature id
SIGNALS = {9: "sigkill", 11: "segfault", 6: "abort", 7: "bus-error", 15: "survivor-sigterm", 2: "survivor-sigterm"}
SIGNAL_NAMES = {
    9: "SIGKILL",
    11: "SIGSEGV",
    6: "SIGABRT",
    7: "SIGBUS",
    15: "SIGTERM",
    2: "SIGINT",
    4: "SIGILL",
    8: "SIGFPE",
}
# a container's exit code 128+N: killed by signal N
_FIELD = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
_ENTRY = re.compile(r"^\s*\[(\d+)\]:\s*$")
_BORDER = re.compile(r"^\s*(={8,}|-{8,})\s*$")
MAX_LINES = 400


@dataclass
class Failure:
    """One entry of the summary."""

    root: bool
    fields: dict[str, str] = field(default_factory=dict)
    message: list[str] = field(default_factory=list)  # the `traceback` field and its continuation lines
    where: dict[str, tuple[int, int, str]] = field(default_factory=dict)  # field -> (offset, line number, raw)

    @property
    def exitcode(self) -> int | None:
        found = re.match(r"-?\d+", self.fields.get("exitcode", ""))
        return int(found.group(0)) if found else None

    @property
    def rank(self) -> str:
        found = re.match(r"\d+", self.fields.get("rank", ""))
        return found.group(0) if found else ""

    @property
    def error_file(self) -> str:
        value = self.fields.get("error_file", "").strip()
        return "" if value in ("", "<N/A>") else value

    def signal(self) -> int | None:
        code = self.exitcode
        return -code if code is not None and code < 0 else None


@dataclass
class Summary:
    """torchrun's error summary: its failures (the root cause first observed) and where reading stopped."""

    failures: list[Failure] = field(default_factory=list)
    end: int = 0

    @property
    def root(self) -> Failure | None:
        return next((f for f in self.failures if f.root), None)


def read(first: Line, rest: Iterator[Line]) -> Summary:
    """The summary that starts at `first` (its `Failures:` or `Root Cause (first observed failure):` line)."""
    out = Summary(end=first[0] + len(first[2]) + 1)
    root = "Root Cause" in first[2]
    current: Failure | None = None
    in_message = False
    for count, (pos, number, raw) in enumerate(rest):
        if count > MAX_LINES:
            break
        text = L.stamp(raw)[1].rstrip()
        body = L.stream(text)[1]
        if "Root Cause (first observed failure)" in body:
            root, current, in_message = True, None, False
            out.end = pos + len(raw) + 1
            continue
        if _BORDER.match(body):
            current, in_message = None, False
            out.end = pos + len(raw) + 1
            if body.strip().startswith("=") and root:
                break
            continue
        entry = _ENTRY.match(text) or _ENTRY.match(body)
        if entry:
            current, in_message = Failure(root), False
            out.failures.append(current)
            out.end = pos + len(raw) + 1
            continue
        if current is None:
            if body.strip() in ("", "<NO_OTHER_FAILURES>"):
                continue
            break
        found = _FIELD.match(body)
        if found and not in_message:
            key, value = found.group(1), found.group(2)
            current.fields[key] = value
            current.where[key] = (pos, number, raw)
            in_message = key == "traceback"
            if in_message:
                current.message.append(value)
            out.end = pos + len(raw) + 1
            continue
        if in_message:
            current.message.append(body[2:] if body.startswith("  ") else body)
            out.end = pos + len(raw) + 1
            continue
        break
    return out


def error_file_message(path: str, base: Path | None = None) -> str:
    """The exception torchrun's error file holds (`{"message": {"message": "RuntimeError: …", "extraInfo":
    {"py_callstack": …}}}`), or "" when the file is not there or not torchrun's."""
    candidate = Path(path)
    if not candidate.is_absolute() and base is not None:
        candidate = base / candidate
    try:
        if not candidate.is_file() or candidate.stat().st_size > 10_000_000:
            return ""
        data = json.loads(candidate.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return ""
    message = data.get("message") if isinstance(data, dict) else None
    if isinstance(message, dict):
        text = message.get("message")
        stack = (message.get("extraInfo") or {}).get("py_callstack")
        return str(text or stack or "")
    return str(message or "")


def exception_of(message: list[str]) -> tuple[int, str]:
    """(index, line) of the exception line that ends a traceback shown in the `traceback` field, or (-1, "")."""
    found = (-1, "")
    for index, line in enumerate(message):
        if line and not line[:1].isspace() and L.exception_name(line):
            found = (index, line.strip())
    return found
