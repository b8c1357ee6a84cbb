"""One log line: its kubelet timestamp, its launcher prefix, its level, its rank, and the signature it matches.

The signatures are data (signatures.yaml next to this file); `match(text)` returns the first that matches.
A line logged at warning level (`[W…]`, `WARNING`, `UserWarning`, `NCCL WARN`) is never a failure unless its
signature says `warned` (a NaN loss): PyTorch prints retried connects and benign socket notes at that level.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterator

DATA = Path(__file__).with_name("signatures.yaml")
ROLES = ("cause", "weak", "consequence", "warning")

# `kubectl logs --timestamps`: RFC 3339 with nanoseconds, a space, the line; after `kubectl logs --prefix`'s
# `[pod/NAME/CONTAINER] ` when both are given; a node's CRI log file (/var/log/pods) adds the stream and a tag
_STAMP = re.compile(
    r"(?:\[pod/[^\]\s]+\] )?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d) (?:std(?:out|err) [FP] )?"
)
# What launchers and log shippers put before the line a process wrote, several in a row (docs/status.md lists them):
#   torchrun --tee `[default3]:`, torch's `[rank3]:`, srun --label `3: `, mpirun --tag-output `[1,3]<stderr>:`,
#   Ray / SkyPilot `(head, rank=0, pid=4773) ` `(worker1, rank=1, pid=8, ip=10.0.0.2) ` `(RayTrainWorker pid=9) `
#   (with the colour codes Ray puts around them), `kubectl logs --prefix` `[pod/NAME/CONTAINER] `
_STREAM = re.compile(
    r"^(?:\[(?:default|rank|local_rank|Rank )?\d+\]:? ?"
    r"|\d{1,5}: "
    r"|\[\d+,\d+\]<std(?:out|err|diag)>: ?"
    r"|\((?:[\w.:+-]+,? )?(?:rank=\d+, )?pid=\d+(?:, ip=[^)\s]+)?\) ?"
    r"|\[pod/[^\]\s]+\] "
    r"|\x1b\[[\d;]*m ?)+"
)
_WARN_LEVEL = re.compile(
    r"^\s*(?:\[?W\d{4} \d\d:|\[W[ \d]|W\d{4} )|\bWARNING\b|\[WARN(?:ING)?\]|\bNCCL WARN\b|Warning: |\w+Warning\b"
)
_RANKS = (
    re.compile(r"^\[(?:rank|default)(\d+)\]:"),
    re.compile(r"^\[\d+,(\d+)\]<std"),
    re.compile(r"^(?:\x1b\[[\d;]*m)?\([^)]*\brank=(\d+)\b"),
    re.compile(r"^(\d{1,5}): "),
    re.compile(r"\[(?:PG[^\]]*?)?Rank (\d+)\]"),
    re.compile(r"\brank\s*[:=]?\s*(\d+)\b", re.I),
)
# Ray's note that it folded identical lines of several workers into one
_REPEATED = re.compile(r" \[repeated \d+x across cluster\]$")


@dataclass(frozen=True)
class Signature:
    """A known line (signatures.yaml)."""

    id: str
    klass: str
    role: str
    pattern: re.Pattern[str]
    title: str
    hint: str
    warned: bool = False  # fatal even on a warning-level line
    lasting: bool = False  # the cause even when training steps follow it
    detail: str = ""  # meanings.DETAILS: what the line's number means

    @property
    def fatal(self) -> bool:
        return self.role != "warning"


@lru_cache(maxsize=1)
def data() -> dict[str, Any]:
    """signatures.yaml, read once per process with libyaml's loader (8 ms; the pure-Python one takes 90 ms, and
    the signatures, the keywords and the raisers' rules each read it)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loaded: dict[str, Any] = yaml.load(DATA.read_text(encoding="utf-8"), Loader=loader)
    return loaded


@lru_cache(maxsize=1)
def signatures() -> tuple[Signature, ...]:
    out = []
    for item in data()["signatures"]:
        flags = set(item.get("flags") or ())
        if item["role"] not in ROLES:
            raise ValueError(f"{DATA}: {item['id']}: role {item['role']!r} is not one of {ROLES}")
        out.append(
            Signature(
                item["id"],
                item.get("class") or "",
                item["role"],
                re.compile(item["pattern"]),
                item["title"],
                item.get("hint", ""),
                "warned" in flags,
                "lasting" in flags,
                item.get("detail") or "",
            )
        )
    return tuple(out)


@lru_cache(maxsize=1)
def by_id() -> dict[str, Signature]:
    return {sig.id: sig for sig in signatures()}


@lru_cache(maxsize=1)
def trigger() -> re.Pattern[str]:
    """One pattern that finds every line worth a closer look (a signature, a traceback, torchrun's summary,
    a Python exception line): the only regular expression run over the whole text."""
    parts = [sig.pattern.pattern for sig in signatures()]
    parts += [
        r"Traceback \(most recent call last\)",
        r"Root Cause \(first observed failure\)",
        r"Failures:[ \t\r]*$",
        EXCEPTION_NAME,
    ]
    return re.compile("|".join(f"(?:{p})" for p in parts), re.M)


@lru_cache(maxsize=1)
def keywords() -> tuple[str, ...]:
    """The words at least one of which every line worth a closer look holds (signatures.yaml `keywords`)."""
    return tuple(data()["keywords"])


def candidates(text: str, start: int = 0) -> list[int]:
    """The starts of the lines after `start` that hold a keyword, in order: plain substring searches (fast in
    CPython) pick the few lines of a large log that the signatures' one big pattern then reads."""
    found: set[int] = set()
    for word in keywords():
        pos = text.find(word, start)
        while pos >= 0:
            line = text.rfind("\n", 0, pos) + 1
            found.add(max(line, start))
            end = text.find("\n", pos)
            if end < 0:
                break
            pos = text.find(word, end)
    return sorted(found)


def matches(text: str, start: int = 0) -> Iterator[re.Match[str]]:
    """The trigger's first match in each candidate line after `start` (what `trigger().finditer` finds, one per
    line, without running the big pattern over every character)."""
    pattern = trigger()
    for line in candidates(text, start):
        end = text.find("\n", line)
        found = pattern.search(text, line, len(text) if end < 0 else end)
        if found:
            yield found


# A Python exception line: `KeyError: 'x'`, `torch.OutOfMemoryError: CUDA out of memory…`, `RuntimeError`
EXCEPTION_NAME = r"\b(?:[a-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Failure|Interrupt|Exit)\b"
_EXCEPTION_LINE = re.compile(r"^\s*((?:[a-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Failure|Interrupt|Exit))(?::\s|:$|$)")


def stamp(line: str) -> tuple[str, str]:
    """(sortable kubelet time or "", the line without it)."""
    found = _STAMP.match(line)
    if not found:
        return "", line
    fraction = (found.group(2) or ".")[1:].ljust(9, "0")[:9]
    zone = found.group(3)
    key = f"{found.group(1)}.{fraction}" + ("" if zone == "Z" else zone)
    return key, line[found.end() :]


def stream(line: str) -> tuple[str, str]:
    """(the launcher prefix, the rest of the line)."""
    found = _STREAM.match(line)
    if not found:
        return "", line
    rest = line[found.end() :]
    if rest.endswith("cluster]"):
        rest = _REPEATED.sub("", rest)
    return found.group(0), rest


def body(line: str) -> str:
    """The line without its kubelet time, launcher prefix and carriage-return redraws."""
    if "\r" in line:
        line = line.rsplit("\r", 1)[-1] or line.replace("\r", "")
    return stream(stamp(line)[1])[1]


def warning_level(text: str) -> bool:
    return bool(_WARN_LEVEL.search(text))


def exception_name(text: str) -> str:
    """The exception type of a Python exception line, or ""."""
    found = _EXCEPTION_LINE.match(text)
    if not found or found.group(1) in ("Error", "Exception"):
        return ""
    return found.group(1)


def rank_of(line: str) -> str:
    for pattern in _RANKS:
        found = pattern.search(line)
        if found:
            return found.group(1)
    return ""


def match(text: str) -> Signature | None:
    """The first signature found in a text (a line, or an exception's message)."""
    for sig in signatures():
        if sig.pattern.search(text):
            return sig
    return None
