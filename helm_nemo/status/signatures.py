"""Known failure signatures in training logs (the data: signatures.yaml next to this file).

`scan(text, pod)` finds every hit in a log (one per line; a Python traceback is one hit, reported by the
exception line that ends it); `group(hits)` makes the summary `helm nemo logs --errors` prints: one entry
per signature with the pods, the first hit (earliest by the kubelet's timestamp) and its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

DATA = Path(__file__).with_name("signatures.yaml")
_RANK = (re.compile(r"\[Rank (\d+)\]"), re.compile(r"^\[default(\d+)\]:"), re.compile(r"\brank[ =:]?(\d+)\b", re.I))
_PREFIX = re.compile(r"^(\[default\d+\]:|\S+:\d+:\d+ \[\d+\] )")


@dataclass(frozen=True)
class Signature:
    """A known failure line (signatures.yaml)."""

    id: str
    title: str
    pattern: re.Pattern[str]
    hint: str = ""
    context: str = ""
    fatal: bool = True


@lru_cache(maxsize=1)
def signatures() -> tuple[Signature, ...]:
    import yaml

    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    return tuple(
        Signature(
            item["id"],
            item["title"],
            re.compile(item["pattern"]),
            item.get("hint", ""),
            item.get("context", ""),
            bool(item.get("fatal", True)),
        )
        for item in data["signatures"]
    )


@dataclass
class Hit:
    """One signature found in one log line."""

    signature: Signature
    pod: str
    line: int  # line number in the text scanned (the log's tail)
    text: str  # the line (for a traceback, the exception line)
    at: str = ""  # the kubelet's timestamp of the line, when the log was read with timestamps
    rank: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "signature": self.signature.id,
            "pod": self.pod,
            "line": self.line,
            "text": self.text,
            "at": self.at,
            "rank": self.rank,
        }


def _rank(line: str) -> str:
    for pattern in _RANK:
        match = pattern.search(line)
        if match:
            return match.group(1)
    return ""


def _stamp(line: str) -> tuple[str, str]:
    head, sep, rest = line.partition(" ")
    if sep and len(head) >= 20 and head[4:5] == "-" and "T" in head and head.endswith("Z"):
        return head, rest
    return "", line


def scan(text: str, pod: str, limit: int = 50) -> list[Hit]:
    """Every signature hit in a log text (at most `limit`), in log order."""
    sigs = signatures()
    lines = text.split("\n")
    hits: list[Hit] = []
    index = 0
    while index < len(lines) and len(hits) < limit:
        at, line = _stamp(lines[index])
        line = line.rsplit("\r", 1)[-1] if "\r" in line else line
        for sig in sigs:
            if sig.pattern.search(line):
                text_shown, end = line, index
                if sig.context == "traceback":
                    text_shown, end = _exception_line(lines, index, line)
                hits.append(Hit(sig, pod, index + 1, text_shown.strip()[:300], at, _rank(line) or _rank(text_shown)))
                index = end
                break
        index += 1
    return hits


def _exception_line(lines: list[str], start: int, first: str) -> tuple[str, int]:
    """The line that ends the traceback starting at `start` (lines of the same `[defaultN]:` prefix)."""
    prefix_match = _PREFIX.match(first)
    prefix = prefix_match.group(1) if prefix_match else ""
    for index in range(start + 1, min(len(lines), start + 400)):
        _, line = _stamp(lines[index])
        if prefix and not line.startswith(prefix):
            continue
        body = line[len(prefix) :]
        if (
            not body.strip()
            or body[:1].isspace()
            or body.startswith(("Traceback", "During handling", "The above exception"))
        ):
            continue
        return line, index
    return first, start


@dataclass
class Group:
    """The hits of one signature, over every pod."""

    signature: Signature
    hits: list[Hit] = field(default_factory=list)

    @property
    def pods(self) -> list[str]:
        return sorted({hit.pod for hit in self.hits})

    @property
    def first(self) -> Hit:
        stamped = [hit for hit in self.hits if hit.at]
        return min(stamped, key=lambda h: h.at) if stamped else self.hits[0]

    def as_json(self) -> dict[str, Any]:
        return {
            "signature": self.signature.id,
            "title": self.signature.title,
            "hint": self.signature.hint,
            "pods": self.pods,
            "count": len(self.hits),
            "first": self.first.as_json(),
        }


def group(hits: list[Hit]) -> list[Group]:
    """Hits by signature, the signature seen first (by timestamp) first: the first failure is usually the cause."""
    groups: dict[str, Group] = {}
    for hit in hits:
        groups.setdefault(hit.signature.id, Group(hit.signature)).hits.append(hit)
    order = {sig.id: n for n, sig in enumerate(signatures())}
    return sorted(groups.values(), key=lambda g: (g.first.at or "~", order[g.signature.id]))
