"""helm as a supervised child: SIGINT/SIGTERM forwarded, its output relayed masked, never left running.

helm runs in its own process group, so a Ctrl-C in the terminal reaches helm nemo only, which passes it
on (as it passes on a SIGTERM from a CI runner or `kill`) and then waits for helm to finish: an install
is never left running unsupervised. The first signal is remembered; `Interrupted` (exit 128 + signal:
130 for SIGINT, 143 for SIGTERM) is raised once helm has exited, or before the next helm would start, so
a recipe can say which of its releases are installed. Outside `forwarding_signals()` Python's defaults
apply (commands that never start helm stay interruptible as usual).

What helm prints is relayed line by line through `helm_nemo.secrets.mask`; a stream can be captured
instead (template's manifests, uninstall's "not found"). A failing write of our own output (EPIPE,
ENOSPC) does not stop the relay: helm runs to its end, then `OutputError` says what happened.
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any, IO, Protocol, TextIO
    from collections.abc import Iterator

    class Helm(Protocol):
        """A running helm, as supervising it needs one: a subprocess.Popen started here, or actions/early.py's
        StartedHelm (started before the values were valid). Described, not imported: early.py imports this
        module."""

        @property
        def pid(self) -> int: ...
        @property
        def stdin(self) -> IO[bytes] | None: ...
        @property
        def stdout(self) -> IO[bytes] | None: ...
        @property
        def stderr(self) -> IO[bytes] | None: ...
        @property
        def returncode(self) -> int | None: ...
        def poll(self) -> int | None: ...
        def wait(self) -> int: ...
        def send_signal(self, signum: int, /) -> None: ...
        def communicate(self, input: str, /) -> tuple[str, str]: ...


from helm_nemo.secrets import mask

SIGNALS = (signal.SIGINT, signal.SIGTERM)
OUTPUT_ERRNOS = {errno.EPIPE, errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG}


class Interrupted(Exception):
    """A SIGINT/SIGTERM arrived; `exit_code` is 128 + the signal number."""

    def __init__(self, signum: int, returncode: int | None = None):
        self.signum = signum
        self.returncode = returncode  # helm's exit code when it was running, else None
        super().__init__(f"interrupted ({self.name})")

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class OutputError(Exception):
    """Writing our own output failed (a closed pipe, a full disk)."""

    def __init__(self, error: OSError):
        self.error = error
        super().__init__(f"cannot write the output: {error.strerror or error}")


class SignalStop(BaseException):
    """A SIGINT/SIGTERM that arrived while the values are read and validated (`stopping_at_once()`): raised by
    the handler itself, so whatever waits stops at once (a values file that is a FIFO with no writer, `-f -`
    on a terminal), where a remembered signal would wait for that read to end. Nothing has been sent to helm
    or sbatch then. A BaseException, like KeyboardInterrupt, so no `except Exception` on the way swallows it;
    the command turns it into Interrupted (exit 128 + the signal's number)."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signum)


class _State:
    active = False
    received: int | None = None
    children: set[Any] = set()  # the helm processes running now (recipe renders run side by side)
    at_once = False  # inside stopping_at_once(): a signal raises SignalStop


def _handler(signum: int, _frame: object) -> None:
    if _State.received is None:
        _State.received = signum
    for child in list(_State.children):
        if child.poll() is None:
            try:
                child.send_signal(signum)
            except ProcessLookupError:  # pragma: no cover - it just exited
                pass
    if _State.at_once:
        raise SignalStop(signum)


def spawn(args: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """Start helm (its own process group while signals are forwarded) and have signals passed to it until
    `release(proc)`; Interrupted instead when a signal already arrived."""
    check_interrupted()
    proc = subprocess.Popen(args, process_group=0 if _State.active else None, **popen)
    _State.children.add(proc)
    if _State.received is not None:  # it arrived while helm was being started: helm gets it too
        proc.send_signal(_State.received)
    return proc


def adopt(proc: Helm) -> None:
    """A helm started elsewhere (actions/early.py, in its own process group) and now given its values: signals
    are passed to it too, until `release(proc)`."""
    _State.children.add(proc)


def kill(proc: Helm) -> None:
    """Stop helm (SIGKILL to its process group: nothing it started outlives it), reap it, close its pipes."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # already gone
        pass
    proc.wait()
    release(proc)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


def release(proc: Helm) -> None:
    """`proc` has exited (or is given up): no more signals for it."""
    _State.children.discard(proc)


@contextmanager
def forwarding_signals() -> Iterator[None]:
    """While the block runs, SIGINT/SIGTERM are remembered and passed on to the running helm."""
    if _State.active or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _handler) for signum in SIGNALS}
    _State.active, _State.received = True, None
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _State.active, _State.received = False, None  # outside, Python's defaults
        _State.children.clear()


@contextmanager
def stopping_at_once() -> Iterator[None]:
    """While the values are read and validated (nothing sent anywhere yet), a signal stops the run at once
    (SignalStop) instead of being remembered for a helm that is not running."""
    _State.at_once = True
    try:
        if _State.received is not None:
            raise SignalStop(_State.received)
        yield
    finally:
        _State.at_once = False


@contextmanager
def signal_set_aside() -> Iterator[int | None]:
    """A clean-up that must run although a signal arrived (preflight --nccl's temporary release is removed
    after a Ctrl-C): the remembered signal is set aside while the block starts helm, and remembered again
    after it. A second signal meanwhile is passed to that helm as any other (it stops the clean-up)."""
    held = _State.received
    _State.received = None
    try:
        yield held
    finally:
        if _State.received is None:
            _State.received = held


def received() -> int | None:
    """The first signal received inside `forwarding_signals()`, if any."""
    return _State.received


def check_interrupted() -> None:
    """Raise Interrupted when a signal arrived (before starting anything new)."""
    if _State.received is not None:
        raise Interrupted(_State.received)


def run_helm(
    args: list[str],
    *,
    input: str | None = None,
    capture_stdout: bool = False,
    capture_stderr: bool = False,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run helm to its end; a stream not captured is relayed, masked, line by line.

    Raises Interrupted (after helm exited) when a signal arrived, OutputError when relaying failed."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    proc = spawn(
        args,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        pump = Pump(proc, input, None if capture_stdout else stdout, None if capture_stderr else stderr)
        pump.run()
        code = proc.wait()
    finally:
        release(proc)
        if proc.poll() is None:  # an exception of our own: never leave helm running
            proc.kill()
            proc.wait()
    if _State.received is not None:
        raise Interrupted(_State.received, code)
    if pump.failed is not None:
        raise OutputError(pump.failed)
    return subprocess.CompletedProcess(args, code, pump.text(proc.stdout), pump.text(proc.stderr))


class Pump:
    """Feeds helm's stdin and drains its stdout/stderr at once (no pipe ever fills up)."""

    def __init__(self, proc: Helm, input: str | None, out: TextIO | None, err: TextIO | None):
        self.proc = proc
        self.data = memoryview(input.encode("utf-8")) if input is not None else None
        self.targets = {proc.stdout: out, proc.stderr: err}
        self.buffers: dict[IO[bytes] | None, bytearray] = {proc.stdout: bytearray(), proc.stderr: bytearray()}
        self.failed: OSError | None = None

    def text(self, stream: IO[bytes] | None) -> str:
        return bytes(self.buffers[stream]).decode("utf-8", errors="replace")

    def emit(self, stream: IO[bytes] | None, final: bool = False) -> None:
        target, buffer = self.targets[stream], self.buffers[stream]
        if target is None:
            return  # captured: kept whole
        end = len(buffer) if final else buffer.rfind(b"\n") + 1
        if end <= 0:
            return
        chunk = bytes(buffer[:end]).decode("utf-8", errors="replace")
        del buffer[:end]
        if self.failed is not None:
            return
        try:
            target.write("".join(mask(line) for line in chunk.splitlines(keepends=True)))
            target.flush()
        except OSError as error:
            if error.errno not in OUTPUT_ERRNOS:
                raise
            self.failed = error  # keep draining: helm runs to its end

    def run(self) -> None:
        with selectors.DefaultSelector() as selector:
            if self.data is not None:
                assert self.proc.stdin is not None  # a pipe whenever there is input
                if len(self.data):
                    selector.register(self.proc.stdin, selectors.EVENT_WRITE)
                else:
                    self.proc.stdin.close()
            for pipe in (self.proc.stdout, self.proc.stderr):
                assert pipe is not None  # always pipes
                selector.register(pipe, selectors.EVENT_READ)
            while selector.get_map():
                for key, _ in selector.select():
                    stream: IO[bytes] = key.fileobj  # type: ignore[assignment]  # one of the pipes registered above
                    if stream is self.proc.stdin:
                        assert self.data is not None
                        try:
                            written = os.write(stream.fileno(), self.data[:65536])
                        except BrokenPipeError:  # helm stopped reading (it failed early)
                            written = len(self.data)
                        self.data = self.data[written:]
                        if not len(self.data):
                            selector.unregister(stream)
                            stream.close()
                        continue
                    chunk = os.read(stream.fileno(), 65536)
                    if not chunk:
                        selector.unregister(stream)
                        self.emit(stream, final=True)
                        stream.close()
                        continue
                    self.buffers[stream] += chunk
                    self.emit(stream)
