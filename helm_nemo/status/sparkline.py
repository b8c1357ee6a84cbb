"""The loss and the step time of the last steps as one line of block characters (`▁▂▃▅█`), for `status`.

A terminal that cannot show them (its encoding is not UTF-8: `LANG=C`, a Windows code page, a pipe to a tool
that reads ASCII) gets the same line drawn with ASCII characters (`_.-=#`). Each value is placed between the
lowest and the highest of the line, so a spike (a stall, a loss jump) stands out whatever the scale.
"""

from __future__ import annotations

import math
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Sequence
    from datetime import datetime
    from typing import TextIO

STEPS = 40  # the last N steps drawn
BLOCKS = "▁▂▃▄▅▆▇█"
ASCII = "_.,-~=*#"  # the same eight levels, lowest first


def utf8_terminal(stream: TextIO | None = None) -> bool:
    """Whether the output stream (default stdout) encodes UTF-8; when it has no encoding, the locale's."""
    encoding = getattr(stream if stream is not None else sys.stdout, "encoding", None)
    if not encoding:
        import locale

        encoding = locale.getpreferredencoding(False)
    return encoding.lower().replace("-", "").replace("_", "") in ("utf8", "utf8sig")


def sparkline(values: Sequence[float], *, unicode: bool = True) -> str:
    """One character per value, from the lowest level (the smallest value) to the highest (the largest); a
    value that is not a finite number is a space."""
    levels = BLOCKS if unicode else ASCII
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return " " * len(values)
    lo, hi = min(finite), max(finite)
    top = len(levels) - 1
    out = []
    for value in values:
        if not math.isfinite(value):
            out.append(" ")
        elif hi == lo:
            out.append(levels[top // 2])
        else:
            out.append(levels[round((value - lo) / (hi - lo) * top)])
    return "".join(out)


def recent(
    lines: list[tuple[int, str]], stamps: dict[int, datetime], name: str, steps: int = STEPS
) -> tuple[list[float], list[float]]:
    """The loss and the step time of the last `steps` steps of a log tail (helm_nemo.report.series reads the
    lines: a step time the log does not state is the time between two steps' lines)."""
    from helm_nemo.report.series import parse

    points = parse(name, lines, stamps).points[-steps:]
    losses = [p.loss for p in points if p.loss is not None]
    times = [p.step_time_s for p in points if p.step_time_s is not None]
    return losses, times


def line(label: str, values: Sequence[float], unit: str = "", *, unicode: bool = True) -> str:
    """`loss      ▅▆▄▃▂▁  1.042 → 0.9866 (last 40 steps)`."""
    if not values:
        return ""
    arrow = "→" if unicode else "->"
    return (
        f"{label:<10}{sparkline(values, unicode=unicode)}  {values[0]:.4g}{unit} {arrow} {values[-1]:.4g}{unit}"
        f" (min {min(values):.4g}, max {max(values):.4g}; last {len(values)} steps)"
    )
