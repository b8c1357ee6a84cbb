"""Stage timings for the benchmark: with HELM_NEMO_TIMINGS=FILE, each stage's end time (wall clock) is
written to FILE as JSON when the process exits. Off by default: one environment lookup at import."""

from __future__ import annotations

import os
import time

_FILE = os.environ.get("HELM_NEMO_TIMINGS")
_MARKS: list[tuple[str, float]] = []


def mark(stage: str) -> None:
    """Record that `stage` ended now."""
    if _FILE:
        _MARKS.append((stage, time.time()))


def dump() -> None:
    """Write the marks (the CLI calls this last: it leaves with os._exit, which runs no atexit hooks)."""
    if _FILE:
        import json

        with open(_FILE, "w", encoding="utf-8") as handle:
            json.dump(_MARKS, handle)
