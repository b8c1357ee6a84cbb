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

MAXFRAMES = 600  # lines a traceback may span
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
    frames: list[tuple[str, int, str]] = field(default_factory=list)  # (file, line, function), outermost first
    source: str = ""  # the innermost frame's source line (`assert args.batch_size % n == 0`)


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
    frames: list[tuple[str, int, str]] = []
    source = ""
    original = False  # inside the `Original Traceback` a DataLoader worker's re-raise carries in its message
    for count, (pos, number, raw) in enumerate(rest):
        if count > MAXFRAMES:
            break
        own, body = L.stream(L.stamp(raw)[1])
        if own.strip() != prefix:
            if pending is not None and not own:
                break  # the traceback ended: unprefixed output of the launcher
            continue  # another rank's line
        stripped = body.strip()
        if in_frames:
            if not stripped or body[:1].isspace() or stripped.startswith(("Traceback", *CHAINED)):
                frame = FRAME.match(stripped)
                if frame:
                    frames.append((frame.group(1), int(frame.group(2)), frame.group(3) or ""))
                    source = ""
                elif stripped and not source and not set(stripped) <= set("^~ "):
                    source = stripped
                continue  # a frame (`  File …`, its source line, `^^^^`)
            name = L.exception_name(body) or _bare_name(stripped) or _plain_name(stripped)
            if not name:
                continue  # something else printed meanwhile
            if original and pending is not None:
                # the worker's own exception: its frames say where it was raised
                pending.message += "\n" + stripped
                pending.frames, pending.source = frames, source
                original, in_frames, message_left = False, False, 0
                out.end = pos + len(raw) + 1
                continue
            pending = Raised(name, pos, number, raw, stripped, frames=frames, source=source)
            frames, source = [], ""
            out.raised.append(pending)
            in_frames, message_left = False, MAX_MESSAGE
            out.end = pos + len(raw) + 1
            continue
        if stripped.startswith("Original Traceback (most recent call last)") and pending is not None:
            original, in_frames, frames = True, True, []
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


FRAME = re.compile(r'^File "([^"]+)", line (\d+)(?:, in (\S+))?')


def _plain_name(text: str) -> str:
    """`Exception: message` ending a traceback (inside one, the bare base class names the exception)."""
    return text.split(":", 1)[0] if text.startswith(("Exception:", "Error:")) else ""


def _bare_name(text: str) -> str:
    """`mypackage.MyFailure: message`: an exception whose name does not end in Error."""
    found = _BARE.match(text)
    return found.group(1) if found else ""


_BARE = re.compile(r"^((?:[a-z_]\w*\.)+[A-Z]\w*)(?::\s|:?$)")
# a line that starts a new log record rather than continuing an exception's message
_NEW_RECORD = re.compile(
    r"^(\[|[EWIF]\d{4} |\d{4}-\d\d-\d\d|(INFO|WARNING|ERROR|DEBUG|CRITICAL)\b|={5,}|-{5,}|\S+:\d+:\d+ \[\d+\] )"
)
