"""The last training step of a log, per rank when the lines say the rank: for a hang, the ranks whose last
step is behind the others' are the suspects; a failure line followed by more steps did not end the run.

Step lines of NeMo 2 (`Training epoch 0, iteration 29/99 | …`), Megatron (`iteration 30/ 100 | …`), NeMo 1 /
Lightning progress bars (`Epoch 0: 30/100 […]`), dllogger (`"step": 29`) and `global_step: 29` fields.
Only the log's tail is read (a few MB), so a large log costs little.
"""

from __future__ import annotations

import re

from helm_nemo.diagnose import lines as L
from helm_nemo.diagnose.events import SourceScan, Steps

CHUNK = 1 << 20  # characters of the tail first read for the last steps
MAX_TAIL = 16 << 20  # no further back
_STEP = re.compile(
    r"Training epoch \d+, iteration (\d+)/\d+"
    r"|\biteration\s+(\d+)/\s*\d+\s*\|"
    r"|\bEpoch \d+:[^\n|]*\|\s*(\d+)/\d+ \["
    r"|\bglobal_step[=:]\s*(\d+)"
    r"|\"step\": (\d+)"
)


def read_steps(text: str, out: SourceScan) -> None:
    """Set out.steps (the last step per launcher prefix, or of the whole log), out.marks (every step line of
    the tail read: offset, step) and out.last_step_pos. The tail grows (1 MB, 4 MB, 16 MB) until a step line
    is found; a log without one is not read further back."""
    size = CHUNK
    last: dict[str, tuple[int, int, str, int]] = {}  # prefix -> (step, offset, kubelet time, line start)
    while True:
        start = max(0, len(text) - size)
        marks: list[tuple[int, int]] = []
        for found in _STEP.finditer(text, start):
            step = int(next(g for g in found.groups() if g is not None))
            line_start = text.rfind("\n", 0, found.start()) + 1
            head = text[line_start : found.start()]
            at, rest = L.stamp(head + " ")
            prefix = L.stream(rest)[0].strip()
            last[prefix] = (step, found.start(), at, line_start)
            marks.append((line_start, step))
        if last or start == 0 or size >= MAX_TAIL:
            break
        size *= 4
    out.marks = marks
    if not last:
        return
    out.last_step_pos = max(v[3] for v in last.values())  # the start of the last step line
    for prefix, (step, _, at, line_start) in sorted(last.items()):
        rank = L.rank_of(prefix + ":") if prefix else ""
        who = f"{out.source} [rank {rank}]" if rank and len(last) > 1 else out.source
        number = text.count("\n", 0, line_start) + 1
        out.steps.append(Steps(who, step, number, at))


def went_on(marks: list[tuple[int, int]], pos: int) -> bool:
    """Did training go on after offset `pos`: at least two steps past the last one before it (a line of
    another rank finishing the step under way does not count)."""
    before = [step for at, step in marks if at <= pos]
    after = [step for at, step in marks if at > pos]
    if not after:
        return False
    if before:
        return max(after) >= max(before) + 2
    return len(set(after)) >= 2
