"""Start `helm template` before the values are validated, and give it the values only once they are.

helm spends most of a `helm template` starting (the Go runtime and helm's packages: ~55 of ~65 ms here)
before it reads a single value, and helm-nemo spends about as long starting Python and validating. So
`template` and `lint` start helm first thing, with the release name and chart read off the values file's
top-level lines (`release:`, `chart:`, `accelerator:`) and the values to come on stdin (`-f -`), then
validate as usual. When validation passes and the command the plan needs is exactly the one started, that
process gets the values; otherwise (a guess that does not match, an error, a signal, any exit) it is killed
(SIGKILL to its process group) before it has read anything: a helm started this way never sees a value,
prints nothing that is shown and touches nothing (`helm template` with a local chart reads no network and
no cluster before its values).

Only for a single values file naming a chart folder shipped with helm-nemo, helm given by $HELM_BIN or
$HELM_NEMO_HELM, no --chart/--version/--chart-repo/$HELM_NEMO_CHART_REPO and no flag for helm but -n
(nothing that could make helm read a repository or registry first). install/upgrade never start helm
before validation. This module imports nothing but `os` before helm is started (no re, pathlib or
subprocess: ~20 ms of imports that now run while helm starts); the process is a StartedHelm, which
answers what render_all and the signal forwarding ask of a subprocess.Popen.
"""

from __future__ import annotations

import os
from stat import S_ISREG

_READ_AT_MOST = 1 << 20
_KEYS = ("chart", "accelerator", "release", "releases")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_started: list = []  # [(args, StartedHelm)] not taken yet


def _plain_name(text: str) -> str | None:
    """`jobset`, `a4`, `run-1`: a lower-case name written plainly (a comment after it allowed), else None."""
    value = text.split(" #", 1)[0].split("\t#", 1)[0].strip()
    if value and value[0] != "-" and set(value) <= _NAME_CHARS:
        return value
    return None


def guess_release(values_file: str, release: str | None) -> tuple[str, str] | None:
    """(release name, chart folder) the values file most likely names, or None when unsure. Only a guess:
    the command is used only if it equals the validated plan's."""
    try:  # a regular file only: a pipe (`-f <(…)`, a FIFO) is not even opened (that alone would disturb its
        # writer), it must be left whole for the real read
        if not S_ISREG(os.stat(values_file).st_mode):
            return None
        fd = os.open(values_file, os.O_RDONLY | os.O_NONBLOCK)
        try:
            if not S_ISREG(os.fstat(fd).st_mode):
                return None
            text = os.read(fd, _READ_AT_MOST).decode("utf-8")
        finally:
            os.close(fd)
    except (OSError, ValueError):  # ValueError: not UTF-8, a NUL in the path
        return None
    found: dict[str, str | None] = {}
    for line in text.splitlines():
        key, colon, rest = line.partition(":")
        if not colon or key not in _KEYS or rest[:1] not in ("", " ", "\t"):
            continue  # not a top-level key we read (indented, a comment, another key, `chart:x` is no key)
        if key in found or key == "releases":
            return None  # written twice, or a recipe
        found[key] = _plain_name(rest)
    release = _plain_name(release) if release is not None else found.get("release")
    kind, accelerator = found.get("chart"), found.get("accelerator")
    if not release or not kind:
        return None
    from helm_nemo import resources

    charts = os.path.join(resources.data_root_name(), "charts")
    shared = os.path.join(charts, kind)  # values/plan.py's order: a chart for every accelerator first
    if os.path.isfile(os.path.join(shared, "Chart.yaml")):
        return release, shared
    if accelerator:
        own = os.path.join(charts, accelerator, kind)
        if os.path.isfile(os.path.join(own, "Chart.yaml")):
            return release, own
    return None


def start_template(params: dict) -> None:
    """For `template`/`lint` parameters from cli/direct.py: start `helm template` when the guess is safe."""
    values = params["values_files"]
    if (len(values) != 1 or values[0] == "-" or params.get("chart") or params.get("chart_version")
            or params.get("chart_repo") or os.environ.get("HELM_NEMO_CHART_REPO")
            or params.get("target", "kubernetes") != "kubernetes"):
        return
    helm = os.environ.get("HELM_BIN") or os.environ.get("HELM_NEMO_HELM")  # actions/helm.py's order
    if not hasattr(os, "posix_spawn"):  # Windows: helm starts after validation, as before
        return
    guessed = guess_release(values[0], params.get("release")) if helm else None
    if guessed is None:
        return
    release, chart = guessed
    extra = ["--namespace", params["namespace"]] if params.get("namespace") else []
    if params.get("kube_version"):
        extra = ["--kube-version", params["kube_version"]] + extra  # lint passes its version to helm first
    args = [helm, "template", release, chart, "-f", "-", *extra]
    try:
        _started.append((args, StartedHelm(args)))
    except OSError:
        return  # helm cannot be started: the command says so in its own words later
    from helm_nemo.timings import mark

    mark("helm started (before validation)")


def take(args: list[str]):
    """The process started for exactly `args`, still waiting (then it is the caller's), or None."""
    for index, (started, proc) in enumerate(_started):
        if started == args and proc.poll() is None:
            del _started[index]
            return proc
    return None


def discard() -> None:
    """Kill every started helm not taken (it has read no values) and reap it."""
    from helm_nemo.actions import process

    while _started:
        _, proc = _started.pop()
        process.kill(proc)


class StartedHelm:
    """A helm started with os.posix_spawn: its own process group, pipes for stdin/stdout/stderr, the signals
    Python ignores set back to their defaults (as subprocess does); poll/wait/send_signal/communicate
    (text) as subprocess.Popen's, for render_all and the signal forwarding."""

    def __init__(self, args: list[str]):
        import _signal  # the C module behind `signal`, whose import (enum) costs ~4 ms here
        import _thread

        self.args, self.returncode = args, None
        self._lock = _thread.allocate_lock()
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        try:
            self.pid = os.posix_spawn(args[0], args, os.environ, setpgroup=0,
                                      setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ),
                                      file_actions=[(os.POSIX_SPAWN_DUP2, stdin_r, 0), (os.POSIX_SPAWN_DUP2, stdout_w, 1),
                                                    (os.POSIX_SPAWN_DUP2, stderr_w, 2)])
        except OSError:
            for fd in (stdin_r, stdin_w, stdout_r, stdout_w, stderr_r, stderr_w):
                os.close(fd)
            raise
        for fd in (stdin_r, stdout_w, stderr_w):
            os.close(fd)
        self.stdin = os.fdopen(stdin_w, "wb")
        self.stdout = os.fdopen(stdout_r, "rb")
        self.stderr = os.fdopen(stderr_r, "rb")

    def _reap(self, block: bool) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if not self._lock.acquire(block):
            return None  # another thread is waiting for it: still running as far as we know
        try:
            if self.returncode is None:
                try:
                    pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
                except ChildProcessError:
                    pid, status = self.pid, 255 << 8
                if pid == self.pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        finally:
            self._lock.release()
        return self.returncode

    def poll(self) -> int | None:
        return self._reap(block=False)

    def wait(self) -> int:
        return self._reap(block=True)

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def communicate(self, text: str) -> tuple[str, str]:
        """Write `text` to helm's stdin and close it, read stdout and stderr to their ends, wait for helm."""
        import selectors

        data = memoryview(text.encode("utf-8"))
        got = {self.stdout: bytearray(), self.stderr: bytearray()}
        with selectors.DefaultSelector() as selector:
            if len(data):
                selector.register(self.stdin, selectors.EVENT_WRITE)
            else:
                self.stdin.close()
            for stream in got:
                selector.register(stream, selectors.EVENT_READ)
            while selector.get_map():
                for key, _ in selector.select():
                    stream = key.fileobj
                    if stream is self.stdin:
                        try:
                            data = data[os.write(stream.fileno(), data[:65536]):]
                        except BrokenPipeError:  # helm stopped reading (it failed)
                            data = data[:0]
                        if not len(data):
                            selector.unregister(stream)
                            stream.close()
                        continue
                    chunk = os.read(stream.fileno(), 65536)
                    if chunk:
                        got[stream] += chunk
                    else:
                        selector.unregister(stream)
                        stream.close()
        self.wait()
        return tuple(bytes(got[s]).decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
                     for s in (self.stdout, self.stderr))
