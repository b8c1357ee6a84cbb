"""What the diagnosis is made of: events (a failure line found in one log) and the verdict over all logs."""

from __future__ import annotations

from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

TIERS = {"cause": 0, "weak": 1, "consequence": 2}


@dataclass
class Event:
    """One failure (or warning) line in one log: a signature, where it is and what it says."""

    signature: str  # the signature that matched (signatures.yaml id, python-exception, torchrun-…)
    klass: str  # the failure class (tests/logs/real/README.md)
    role: str  # cause | weak | consequence | warning
    title: str
    hint: str
    source: str  # the file or pod
    line: int  # 1-based line number in the text read
    text: str  # the line without the kubelet's time
    at: str = ""  # the kubelet's time (sortable), when the log has it
    rank: str = ""
    node: str = ""
    pos: int = 0  # character offset in the text (for "did training go on after it")
    why: str = ""  # why it is not the cause (a consequence, training went on after it)
    chained: bool = False  # a Python exception another one was raised while handling
    raised_in: str = ""  # a Python exception: the innermost frame (`torch.serialization (serialization.py:12 in load)`)

    @property
    def fatal(self) -> bool:
        return self.role in TIERS

    def as_json(self, kind: str = "file") -> dict[str, Any]:
        out: dict[str, Any] = {
            "signature": self.klass or self.signature,
            "match": self.signature,
            "title": self.title,
            "hint": self.hint,
            kind: self.source,
            "line": self.line,
            "rank": self.rank or None,
            "node": self.node or None,
            "at": self.at or None,
            "text": self.text,
        }
        if self.raised_in:
            out["raised_in"] = self.raised_in
        if self.why:
            out["why"] = self.why
        return out


@dataclass
class Steps:
    """The last training step of one log (or of one rank's lines in it)."""

    who: str  # the source, or `source [rank N]`
    step: int
    line: int
    at: str = ""


@dataclass
class SourceScan:
    """What one log (a file or a pod's log) holds."""

    source: str
    events: list[Event] = field(default_factory=list)
    steps: list[Steps] = field(default_factory=list)  # last step per rank stream (or of the whole log)
    last_step_pos: int = -1  # offset of the last training step line, -1: none
    marks: list[tuple[int, int]] = field(default_factory=list)  # (offset, step) of the step lines of the tail
    skipped: int = 0  # characters at the start not read (a long log: its failure is at its end)
    stamped: bool = False  # the lines carry the kubelet's time
    lines: int = 0
    node: str = ""


@dataclass
class Hang:
    """Who is behind when the first failure is a collective timeout."""

    behind: list[Steps] = field(default_factory=list)  # last step lower than the others'
    ahead_step: int | None = None
    not_joined: list[int] = field(default_factory=list)  # ranks missing from the stuck collective (flight recorder)
    collective: str = ""  # `nccl:all_reduce seq 48 of group 0 (default_pg)`
    no_dump: list[int] = field(default_factory=list)  # ranks that wrote no flight-recorder dump
    notes: list[str] = field(default_factory=list)

    def words(self) -> str:
        parts = []
        if self.not_joined:
            ranks = ", ".join(map(str, self.not_joined))
            parts.append(f"rank(s) {ranks} did not join {self.collective or 'the collective'} (flight recorder)")
        if self.behind:
            who = ", ".join(f"{s.who} at step {s.step}" for s in self.behind[:6])
            parts.append(f"behind: {who} (the others reached step {self.ahead_step})")
        if self.no_dump:
            parts.append(f"no flight-recorder dump from rank(s) {', '.join(map(str, self.no_dump))}")
        return "; ".join(parts)

    def as_json(self) -> dict[str, Any]:
        return {
            "not_joined": self.not_joined,
            "collective": self.collective or None,
            "behind": [{"who": s.who, "step": s.step, "line": s.line, "at": s.at or None} for s in self.behind],
            "others_step": self.ahead_step,
            "no_dump": self.no_dump,
            "notes": self.notes,
        }


@dataclass
class Diagnosis:
    """One verdict over the logs of one run: its first cause, what followed from it, every signature seen."""

    cause: Event | None
    consequences: list[Event] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)  # every event, warnings included, in order found
    hang: Hang | None = None
    sources: int = 0
    kind: str = "file"  # the JSON key that names where: file or pod

    @property
    def failed(self) -> bool:
        return self.cause is not None

    def signatures(self) -> list[dict[str, Any]]:
        """Every signature seen: count, where, the first line; the cause's first."""
        groups: dict[str, list[Event]] = {}
        for event in self.events:
            groups.setdefault(event.signature, []).append(event)
        order = sorted(groups, key=lambda sid: (not (self.cause and self.cause.signature == sid),))
        out = []
        for sid in order:
            found = groups[sid]
            first = found[0]
            out.append(
                {
                    "signature": sid,
                    "class": first.klass or None,
                    "role": first.role,
                    "title": first.title,
                    "count": len(found),
                    f"{self.kind}s": sorted({e.source for e in found}),
                    "first": first.as_json(self.kind),
                }
            )
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "failed": self.failed,
            "cause": self.cause.as_json(self.kind) if self.cause else None,
            "consequences": [e.as_json(self.kind) for e in self.consequences],
            "hang": self.hang.as_json() if self.hang else None,
            "signatures": self.signatures(),
            f"{self.kind}s_read": self.sources,
        }
