"""Reading one log (a file or a pod's log) into events: the failure lines it holds, in order.

Fast on large logs: one regular expression (lines.trigger) runs over the whole text and finds the few lines
worth a look; only those are classified. A traceback is read to its exception line and classified by that
line and its message (a specific signature inside a traceback beats "a Python exception"); torchrun's
summary is read as a whole (the root cause's exit code and exception, the others as consequences); an
`abort` is named by its `what():` line when it has one.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from helm_nemo.diagnose import lines as L
from helm_nemo.diagnose import steps as S
from helm_nemo.diagnose import meanings, raisers, torchrun, tracebacks
from helm_nemo.diagnose.events import Event, SourceScan

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterator

    Line = tuple[int, int, str]

PYTHON_EXCEPTION = L.Signature(
    "python-exception",
    "python-exception",
    "cause",
    re.compile(r"$^"),
    "a Python exception",
    "the exception line says what failed and the frames above it where; the first rank to raise holds the cause",
)
WHAT = "what():"
MARGIN = 256 << 10  # characters read before the last step line
NO_STEP_TAIL = 1 << 20  # characters read of a log without a step line


class _Text:
    """Line access by offset, with line numbers counted incrementally (the text is scanned forward)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._pos, self._number = 0, 1
        self.trail: bool | None = None  # the text holds NCCL's error-return trail (found once, when asked)

    def number(self, pos: int) -> int:
        if pos >= self._pos:
            self._number += self.text.count("\n", self._pos, pos)
        else:
            self._number -= self.text.count("\n", pos, self._pos)
        self._pos = pos
        return self._number

    def line_at(self, pos: int) -> Line:
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        end = len(self.text) if end < 0 else end
        return start, self.number(start), self.text[start:end]

    def after(self, line: Line) -> Iterator[Line]:
        pos, number = line[0] + len(line[2]) + 1, line[1] + 1
        text = self.text
        while pos < len(text):
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            yield pos, number, text[pos:end]
            pos, number = end + 1, number + 1


def scan(text: str, source: str, *, node: str = "", base: Path | None = None) -> SourceScan:
    """The events of one log text. `base`: the folder torchrun's relative error files are looked up in."""
    out = SourceScan(source, node=node)
    S.read_steps(text, out)
    # A failure ends the run: what comes before the last training steps went on (a retry that succeeded).
    # A long log is read from a margin before its last step line (or, without one, its last MB).
    if out.marks:
        out.skipped = max(0, out.last_step_pos - MARGIN)
    else:
        out.skipped = max(0, len(text) - NO_STEP_TAIL)
    if out.skipped:
        out.skipped = text.find("\n", out.skipped) + 1
    reader = _Text(text)
    skip = out.skipped
    for found in L.matches(text, out.skipped):
        if found.start() < skip:
            continue
        line = reader.line_at(found.start())
        skip = line[0] + len(line[2]) + 1
        at, rest = L.stamp(line[2])
        own, body = L.stream(rest.rsplit("\r", 1)[-1] if "\r" in rest else rest)
        if at:
            out.stamped = True
        if body.lstrip().startswith("Traceback (most recent call last)"):
            skip = max(skip, _traceback(out, reader, line, base))
        elif "Root Cause (first observed failure)" in body or body.strip() == "Failures:":
            skip = max(skip, _summary(out, reader, line, base))
        else:
            _plain(out, reader, line, at, own, body)
    out.lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    return out


def _event(out: SourceScan, sig: L.Signature, line: Line, text: str | None = None, **extra: str) -> Event:
    at, rest = L.stamp(line[2])
    shown = (text if text is not None else rest).strip()
    title = sig.title
    if sig.detail:
        said = meanings.DETAILS[sig.detail](shown)
        if said:
            title = f"{title}: {said}"
    event = Event(
        sig.id,
        sig.klass,
        sig.role,
        title,
        sig.hint,
        out.source,
        line[1],
        shown[:2000],
        at,
        extra.get("rank") or L.rank_of(rest),
        extra.get("node") or out.node,
        line[0],
    )
    if extra.get("raised_in"):
        event.raised_in = extra["raised_in"]
    out.events.append(event)
    return event


# classes NCCL only WARNs about before it returns an error (no retry follows): fatal on an `NCCL WARN` line
NCCL_FATAL = ("cuda-oom", "fabric", "nccl-error", "gpu-lost", "cuda-error", "bus-error", "disk-full")


# a line of Python source shown in a traceback (`    raise RuntimeError(f"… not divisible …")`) or a frame of
# rich's boxed traceback (`│ ❱ 891 │ …`): it names an error the program may raise, not one it raised
_SOURCE = re.compile(r"^\s+(raise|assert)\b|^\s*[│╭╰┃❱]")


def _plain(out: SourceScan, reader: _Text, line: Line, at: str, own: str, body: str) -> None:
    if _SOURCE.match(body) or " NCCL INFO " in body:
        return  # source code, or NCCL's informational lines (its error-return trail is read with the WARN before it)
    name = L.exception_name(body)
    sig = L.match(body)
    if sig is None and not name:
        return
    frames: list[tuple[str, int, str]] = []
    source = ""
    if name:
        frames, source = _frames_before(reader, line, own)
    if sig is None:
        rule = raisers.classify(frames, name, body, source)
        sig = raisers.as_signature(rule) if rule is not None else unknown(body, frames)
    elif sig.id == "abort":
        named = _what(reader, line)
        if named is not None:
            what_line, what_sig = named
            _event(out, what_sig, what_line)
            return
    if "NCCL WARN" in body and sig.role == "weak" and sig.klass == "nccl-error" and sig.id != "nccl-warn":
        # a peer gone, as NCCL warns of it (`Call to send … failed : Connection reset by peer`): NCCL's own line,
        # still only what a peer's failure looks like from here
        _event(out, replace(L.by_id()["nccl-warn"], id=sig.id, title=sig.title, hint=sig.hint), line)
        return
    if sig.id == "nccl-warn":
        trail = _nccl_trail(reader, body, line)
        if trail is not None:
            _nccl_event(out, reader, trail, line)
            return
    if sig.klass == "nccl-error":
        detail = _last_error(reader, line)
        if detail is not None:
            _detailed(out, sig, detail)
            return
    nccl_fatal = "NCCL WARN" in body and sig.role == "cause" and sig.klass in NCCL_FATAL
    if nccl_fatal:
        _nccl_event(out, reader, sig, line)
        return
    if L.warning_level(body) and not sig.warned and sig.role != "consequence":
        sig = replace(sig, role="warning")
    if sig.id == "xid" and not meanings.xid_is_hardware(body):
        # an application Xid (13, 31, 43, 45) follows the program's own fault: a hardware Xid or the program's
        # error is the first cause before it
        sig = replace(sig, role="weak")
    if sig.id in SIGNAL_IDS and "received by PID" not in body:
        said = _signal_line(reader, line)
        if said is not None:
            _event(out, sig, said, f"{body.strip()} / {L.body(said[2]).strip()}")
            return
    _event(out, sig, line, raised_in=raisers.where(frames))


MAX_HEADLESS = 200  # lines read back for the frames of a traceback pasted without its header


def _frames_before(reader: _Text, line: Line, own: str) -> tuple[list[tuple[str, int, str]], str]:
    """The frames just above an exception line outside a read traceback (pasted without its `Traceback …` line):
    the `File "…", line N, in f` lines of the same launcher prefix, outermost first, and the innermost's source."""
    text, frames, source = reader.text, [], ""
    end = line[0] - 1
    for _ in range(MAX_HEADLESS):
        if end <= 0:
            break
        start = text.rfind("\n", 0, end) + 1
        raw = text[start:end]
        end = start - 1
        prefix, body = L.stream(L.stamp(raw)[1])
        if prefix.strip() != own.strip():
            continue
        stripped = body.strip()
        frame = tracebacks.FRAME.match(stripped)
        if frame:
            frames.append((frame.group(1), int(frame.group(2)), frame.group(3) or ""))
        elif stripped and not body[:1].isspace() and not stripped.startswith(tracebacks.CHAINED):
            break  # not a frame nor its source: the traceback starts below
        elif stripped and not frames and not set(stripped) <= set("^~ "):
            source = stripped
    frames.reverse()
    return frames, source


SIGNAL_IDS = ("sigkill", "segfault", "abort", "bus-error", "survivor-sigterm")
_TRAIL = re.compile(r"NCCL INFO \S+:\d+ -> [1-9]")


def _last_error(reader: _Text, line: Line) -> Line | None:
    """The line after `Last error:` in an NCCL error's message (torch's DistBackendError, ncclRemoteError): NCCL's
    own words for what failed (`Bootstrap : no socket interface found`, `Error while creating shared memory
    segment /dev/shm/…`, `socketProgress: Connection closed by remote peer`)."""
    for count, following in enumerate(reader.after(line)):
        if count > 6:
            return None
        if L.body(following[2]).strip() == "Last error:":
            detail = next(reader.after(following), None)
            return detail if detail is not None and L.body(detail[2]).strip() else None
    return None


def _detailed(out: SourceScan, sig: L.Signature, detail: Line) -> Event:
    """An NCCL error named by its `Last error:` line: that line's own signature when it names a cause (a full
    /dev/shm is a shared-memory problem, not NCCL's), shown as that line."""
    said = L.match(L.body(detail[2]))
    if said is not None and said.role == "cause":
        sig = said
    return _event(out, sig, detail, L.body(detail[2]))


def _signal_line(reader: _Text, line: Line) -> Line | None:
    """torchrun's `traceback : Signal 11 (SIGSEGV) received by PID 6421` after an `exitcode : -11` line."""
    for count, following in enumerate(reader.after(line)):
        if count > 3:
            return None
        if "received by PID" in following[2]:
            return following
    return None


TRAIL_WINDOW = 4000  # characters after an `NCCL WARN` line where its error-return trail is looked for


def _nccl_trail(reader: _Text, body: str, line: Line) -> L.Signature | None:
    """An `NCCL WARN` followed by NCCL's error-return trail (`NCCL INFO init.cc:519 -> 2`: the error being returned
    up) is an NCCL error (named by what the warning says when it names a class: `Cuda failure 'out of memory'`)."""
    if reader.trail is None:
        reader.trail = _TRAIL.search(reader.text) is not None
    if not reader.trail:
        return None
    end = line[0] + len(line[2])
    if not _TRAIL.search(reader.text, end, end + TRAIL_WINDOW):
        return None
    said = L.match(body.split("NCCL WARN", 1)[1])
    if said is not None and said.role == "cause" and said.id != "nccl-warn":
        return replace(said, role="cause", warned=True)
    base = L.by_id()["nccl-error"]
    return replace(base, id="nccl-warn-error", warned=True)


def _nccl_event(out: SourceScan, reader: _Text, sig: L.Signature, line: Line) -> Event:
    """An NCCL error line, titled with the result NCCL returned (its `-> N` trail after the line), when it has one."""
    event = _event(out, sig, line)
    result = meanings.trail_code(reader.text, line[0] + len(line[2]))
    if result and result.split(" ", 1)[0] not in event.title:
        event.title = f"{event.title} (NCCL returned {result})"
    return event


def _what(reader: _Text, line: Line) -> tuple[Line, L.Signature] | None:
    """The `what():` line after `terminate called after throwing…`, and its signature when it names one."""
    for count, following in enumerate(reader.after(line)):
        if count > 4:
            return None
        body = L.body(following[2])
        if WHAT in body:
            sig = L.match(body.split(WHAT, 1)[1])
            return (following, sig) if sig is not None and sig.id != "abort" else None
    return None


def _traceback(out: SourceScan, reader: _Text, line: Line, base: Path | None) -> int:
    found = tracebacks.read(line, reader.after(line))
    previous: Event | None = None
    for raised in found.raised:
        sig = L.match(raised.message) or named(raised)
        raised_line = (raised.pos, raised.number, raised.raw)
        detail = _last_error(reader, raised_line) if "Last error:" in raised.message else None
        if detail is not None:
            event = _detailed(out, sig, detail)
        else:
            event = _event(out, sig, raised_line, L.stamp(raised.raw)[1], raised_in=raisers.where(raised.frames))
        if previous is not None and previous.chained:
            # a chain: the specific exception names the cause; a generic one beside it is its consequence
            if previous.klass == "python-exception" and sig.klass != "python-exception":
                previous.role, previous.why = "consequence", "chained with a more specific exception"
            elif sig.klass == "python-exception" or event.role == "consequence":
                event.role, event.why = "consequence", "raised while handling the exception before it"
        event.chained = raised.chained
        previous = event
    return found.end


def named(raised: tracebacks.Raised) -> L.Signature:
    """An exception no signature names: classed by where it was raised (raisers.py), else a Python exception titled
    by its own type and message."""
    rule = raisers.classify(raised.frames, raised.name, raised.message, raised.source)
    if rule is not None:
        return raisers.as_signature(rule)
    return unknown(raised.message, raised.frames)


def unknown(message: str, frames: list[tuple[str, int, str]] | None = None) -> L.Signature:
    """A Python exception titled by what it says: `KeyError: 'iteration' (raised in megatron.training.checkpointing)`."""
    title = raisers.headline(message) or PYTHON_EXCEPTION.title
    where = raisers.where(frames or [])
    if where:
        title += f" (raised in {where.split(' ', 1)[0]})"
    return replace(PYTHON_EXCEPTION, title=title)


def _summary(out: SourceScan, reader: _Text, line: Line, base: Path | None) -> int:
    summary = torchrun.read(line, reader.after(line))
    if summary.failures and summary.root is None:  # pasted without its Root Cause: the first entry
        summary.failures[0].root = True
    by_id = L.by_id()
    for failure in summary.failures:
        code = failure.exitcode
        where = failure.where.get("exitcode") or failure.where.get("traceback")
        if code is None or where is None:
            continue
        exit_line = L.body(where[2]).strip()
        node = failure.fields.get("host", "").strip()
        signal = failure.signal()
        sig: L.Signature | None = None
        shown, at_line = exit_line, where
        if signal is not None:
            sig = by_id.get(torchrun.SIGNALS.get(signal, ""))
            name = torchrun.SIGNAL_NAMES.get(signal, f"signal {signal}")
            if sig is None:
                sig = L.Signature(
                    "signal",
                    "worker-exit",
                    "cause",
                    PYTHON_EXCEPTION.pattern,
                    f"a worker was killed by {name}",
                    "the worker's own output before it says why",
                )
            tb = failure.where.get("traceback")
            shown = exit_line + (f"; {L.body(tb[2]).strip()}" if tb else f" ({name})")
        elif code > 0:
            index, exception = torchrun.exception_of(failure.message)
            message = exception
            if not message and failure.error_file:
                message = torchrun.error_file_message(failure.error_file, base)
            if message:
                sig = L.match(message) or unknown(message.strip().splitlines()[-1])
                shown = message.strip().splitlines()[-1] if index < 0 else exception
            else:
                sig = by_id["worker-exit"]
        if sig is None:
            continue
        event = _event(out, sig, at_line, shown, rank=failure.rank, node=node)
        if not failure.root and event.role != "warning":
            event.role, event.why = "consequence", "torchrun: not the first observed failure"
    return summary.end
