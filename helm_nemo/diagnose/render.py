"""What `helm nemo logs --errors` prints: the first cause first (what, where, the line, what to check), then
who is behind in a hang, then what followed; or one JSON document with the cause first."""

from __future__ import annotations

import json
import re

from helm_nemo.diagnose.events import Diagnosis, Event

MAX_CONSEQUENCES = 8
_PREFIX = re.compile(r"^(\s*\[[^\]]*\]:?)+\s*|^\S+:\d+:\d+ \[\d+\] ")


def core(line: str, width: int = 160) -> str:
    """A log line without its launcher/logger prefixes (`[default3]:[rank27]:[E1125 …]`), cut to `width`."""
    text = _PREFIX.sub("", line).strip() or line.strip()
    return text if len(text) <= width else text[: width - 1] + "…"


def where(event: Event, kind: str = "file") -> str:
    parts = [f"{event.source} line {event.line}"]
    if event.rank:
        parts.append(f"rank {event.rank}")
    if event.node and event.node != event.source:
        parts.append(f"node {event.node}")
    if event.at:
        parts.append(f"at {event.at[:23]}")
    return ", ".join(parts)


def one_line(diagnosis: Diagnosis, width: int = 120) -> str:
    """`cuda-oom in node-1.log (rank 1): torch.OutOfMemoryError: CUDA out of memory…` or ""."""
    cause = diagnosis.cause
    if cause is None:
        return ""
    who = cause.source + (f" (rank {cause.rank})" if cause.rank else "")
    return f"{cause.klass or cause.signature} in {who}: {core(cause.text, width)}"


def text(diagnosis: Diagnosis, *, what: str = "log(s)") -> str:
    cause = diagnosis.cause
    warnings = [e for e in diagnosis.events if e.role == "warning"]
    if cause is None:
        out = f"no failure found in {diagnosis.sources} {what}"
        if warnings:
            out += f" ({len(warnings)} warning line(s), e.g. {warnings[0].signature}: {core(warnings[0].text, 100)})"
        return out
    name = cause.klass or cause.signature
    if cause.klass and cause.signature not in (cause.klass, "python-exception"):
        name += f" ({cause.signature})"
    lines = [
        f"FAILED: {name}: {cause.title}",
        f"  first: {where(cause, diagnosis.kind)}",
        f"  line:  {core(cause.text, 300)}",
    ]
    if cause.raised_in:
        lines.append(f"  from:  {cause.raised_in}")
    lines.append(f"  next:  {cause.hint}")
    hang = diagnosis.hang
    if hang is not None:
        words = hang.words()
        if words:
            lines.append(f"  hang:  {words}")
        lines += [f"  note:  {note}" for note in hang.notes]
    if diagnosis.consequences:
        lines.append(f"then ({len(diagnosis.consequences)} line(s) that followed from it):")
        seen = set()
        shown = 0
        for event in diagnosis.consequences:
            key = (event.signature, event.source)
            if key in seen:
                continue
            seen.add(key)
            shown += 1
            if shown > MAX_CONSEQUENCES:
                lines.append("  …")
                break
            lines.append(
                f"  {event.klass or event.signature} ({event.signature}) {where(event)}: {core(event.text, 120)}"
            )
    lines.append(f"read {diagnosis.sources} {what}")
    return "\n".join(lines)


def as_json(diagnosis: Diagnosis) -> str:
    return json.dumps(diagnosis.as_json(), indent=2, ensure_ascii=False)
