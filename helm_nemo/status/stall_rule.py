"""When a run is stalled: status's STALLED and the diagnosis's "stall, then stop" use this one rule."""

from __future__ import annotations

STALL_FACTOR = 10.0
MIN_STALL_S = 300.0  # a checkpoint save or an evaluation takes minutes without a step


def stall_after(step_time_s: float, factor: float = STALL_FACTOR) -> float:
    """Seconds without a step after which a run with this step time is stalled."""
    return max(factor * step_time_s, MIN_STALL_S)
