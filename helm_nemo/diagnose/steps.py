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

TAIL = 4 << 20  # characters of the tail read for the last steps
_STEP = re.compile(
    r"Training epoch \d+, iteration (\d+)/\d+"
    r"|\biteration\s+(\d+)/\s*\d+\s*\|"
    r"|\bEpoch \d+:[^\n|]*\|\s*(\d+)/\d+ \["
    r"|\bglobal_step[=:]\s*(\d+)"
    r"|\"step\": (\d+)"
)


def read_steps(text: str, out: SourceScan) -> None:
    """Set out.last_step_pos and out.steps (the last step per launcher prefix, or of the whole log)."""
    start = max(0, len(text) - TAIL)
    last: dict[str, tuple[int, int, str, int]] = {}  # prefix -> (step, offset, kubelet time, line start)
    while True:
        for found in _STEP.finditer(text, start):
            step = int(next(g for g in found.groups() if g is not None))
            line_start = text.rfind("\n", 0, found.start()) + 1
            head = text[line_start : found.start()]
            at, rest = L.stamp(head + " ")
            prefix = L.stream(rest)[0].strip()
            last[prefix] = (step, found.start(), at, line_start)
        if last or start == 0:
            break
        start = max(0, start - TAIL * 4)  # no step in the tail: look further back
    if not last:
        return
    out.last_step_pos = max(v[3] for v in last.values())  # the start of the last step line
    for prefix, (step, _, at, line_start) in sorted(last.items()):
        rank = L.rank_of(prefix + ":") if prefix else ""
        who = f"{out.source} [rank {rank}]" if rank and len(last) > 1 else out.source
        number = text.count("\n", 0, line_start) + 1
        out.steps.append(Steps(who, step, number, at))
