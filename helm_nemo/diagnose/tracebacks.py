"""Reading a Python traceback: the exception line that ends it and its message, so the specific cause inside
(`torch.OutOfMemoryError: CUDA out of memory`, `FileNotFoundError: …/data.idx`) is named, not "a traceback".

Lines of several ranks may interleave; a traceback is followed in the lines of its own launcher prefix
(`[default0]:`, `[rank0]:`). A chain (`During handling of the above exception…`, `The above exception was the
direct cause…`) is read to its end; the caller picks which exception of the chain names the cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from helm_nemo.diagnose import lines as L

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterator

    Line = tuple[int, int, str]  # (offset, line number, raw line)

MAX_FRAMES = 600  # lines a traceback may span
MAX_MESSAGE = 8  # lines of an exception's message read after its first line
CHAINED = ("During handling of the above exception", "The above exception was the direct cause")


@dataclass
class Raised:
    """One exception of a traceback: its line and its message (the first line and what follows it)."""

    name: str
    pos: int
    number: int
    raw: str  # the line as read (kubelet time included)
    message: str  # the exception line and its continuation lines, joined
    chained: bool = False  # another traceback follows it in a chain


@dataclass
class Traceback:
    """The exceptions of one traceback (a chain holds several) and where reading stopped."""

    raised: list[Raised] = field(default_factory=list)
    end: int = 0  # offset after the last line consumed


def read(first: Line, rest: Iterator[Line]) -> Traceback:
    """The exceptions of the traceback that starts at `first` (its `Traceback (most recent call last):`
    line); `rest` yields the lines after it (and is consumed up to the end of the traceback)."""
    prefix = L.stream(L.stamp(first[2])[1])[0].strip()
    out = Traceback(end=first[0] + len(first[2]) + 1)
    in_frames = True
    pending: Raised | None = None
    message_left = 0
    for count, (pos, number, raw) in enumerate(rest):
        if count > MAX_FRAMES:
            break
        own, body = L.stream(L.stamp(raw)[1])
        if own.strip() != prefix:
            if pending is not None and not own:
                break  # the traceback ended: unprefixed output of the launcher
            continue  # another rank's line
        stripped = body.strip()
        if in_frames:
            if not stripped or body[:1].isspace() or stripped.startswith(("Traceback", *CHAINED)):
                continue  # a frame (`  File …`, its source line, `^^^^`)
            name = L.exception_name(body) or _bare_name(stripped)
            if not name:
                continue  # something else printed meanwhile
            pending = Raised(name, pos, number, raw, stripped)
            out.raised.append(pending)
            in_frames, message_left = False, MAX_MESSAGE
            out.end = pos + len(raw) + 1
            continue
        # after an exception line: its message's continuation, then maybe a chained traceback
        if stripped.startswith(CHAINED):
            if pending is not None:
                pending.chained = True
            message_left = 0
            continue
        if stripped.startswith("Traceback (most recent call last)"):
            in_frames = True
            continue
        if not stripped:
            message_left = 0  # a blank line ends the message (a chain may still follow)
            continue
        if message_left > 0 and pending is not None and not _NEW_RECORD.match(stripped):
            pending.message += "\n" + stripped
            message_left -= 1
            out.end = pos + len(raw) + 1
            continue
        break
    return out


def _bare_name(text: str) -> str:
    """`mypackage.MyFailure: message`: an exception whose name does not end in Error."""
    found = _BARE.match(text)
    return found.group(1) if found else ""


_BARE = re.compile(r"^((?:[a-z_]\w*\.)+[A-Z]\w*)(?::\s|:?$)")
# a line that starts a new log record rather than continuing an exception's message
_NEW_RECORD = re.compile(
    r"^(\[|[EWIF]\d{4} |\d{4}-\d\d-\d\d|(INFO|WARNING|ERROR|DEBUG|CRITICAL)\b|={5,}|-{5,}|\S+:\d+:\d+ \[\d+\] )"
)
