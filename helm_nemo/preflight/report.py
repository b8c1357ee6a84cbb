"""The checklist: one line per check (colour on a terminal), the hint under a failed or warned one, then a
summary with the failing checks first; or one JSON document."""

from __future__ import annotations

import json

from helm_nemo.preflight.model import FAIL, OK, SKIPPED, WARN

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

    from helm_nemo.preflight.model import Result

LABELS = {OK: "ok", WARN: "warn", FAIL: "FAIL", SKIPPED: "skip"}
COLOURS = {OK: "32", WARN: "33", FAIL: "1;31", SKIPPED: "2"}


def _paint(text: str, verdict: str, color: bool) -> str:
    return f"\x1b[{COLOURS[verdict]}m{text}\x1b[0m" if color else text


def summary(results: list[Result]) -> str:
    counts = {v: [r for r in results if r.verdict == v] for v in (FAIL, WARN, OK, SKIPPED)}
    parts = []
    for verdict, word in ((FAIL, "failed"), (WARN, "warning(s)")):
        if counts[verdict]:
            ids = sorted({r.id for r in counts[verdict]}, key=lambda i: [r.id for r in results].index(i))
            parts.append(f"{len(counts[verdict])} {word} ({', '.join(ids)})")
    parts.append(f"{len(counts[OK])} ok")
    if counts[SKIPPED]:
        parts.append(f"{len(counts[SKIPPED])} skipped")
    head = "FAILED" if counts[FAIL] else "passed"
    return f"preflight {head}: " + ", ".join(parts)


def text(results: list[Result], *, header: str, color: bool = False) -> str:
    width = max([len(r.id) for r in results] + [14])
    lines = [header]
    for result in results:
        label = _paint(f"{LABELS[result.verdict]:<4}", result.verdict, color)
        about = f"[{result.release}] " if result.release else ""
        lines.append(f"  {label}  {result.id:<{width}}  {about}{result.message}")
        if result.hint and result.verdict in (FAIL, WARN):
            lines.append(f"  {'':<4}  {'':<{width}}  hint: {result.hint}")
    painted = summary(results)
    lines.append(_paint(painted, FAIL if "FAILED" in painted else OK, color))
    return "\n".join(lines)


def as_json(results: list[Result], *, target: dict[str, Any], code: int) -> str:
    counts = {v: sum(1 for r in results if r.verdict == v) for v in (OK, WARN, FAIL, SKIPPED)}
    document = {
        "ok": code == 0,
        "exit_code": code,
        **target,
        "summary": counts,
        "failed": sorted({r.id for r in results if r.verdict == FAIL}),
        "checks": [r.as_json() for r in results],
    }
    return json.dumps(document, indent=2)
