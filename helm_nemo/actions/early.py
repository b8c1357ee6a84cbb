"""Start `helm template` before the values are validated, and give it the values only once they are.

helm spends most of a `helm template` starting (the Go runtime and helm's packages: ~55 of ~65 ms here)
before it reads a single value, and helm-nemo spends about as long starting Python and validating. So
`template` and `lint` start helm first thing, with the release name and chart read off the values file's
top-level lines (`release:`, `chart:`, `accelerator:`; for a recipe, each release's lines) and the values
to come on stdin (`-f -`), then validate as usual. When validation passes and the command the plan needs is exactly the one started, that
process gets the values; otherwise (a guess that does not match, an error, a signal, any exit) it is killed
(SIGKILL to its process group) before it has read anything: a helm started this way never sees a value,
prints nothing that is shown and touches nothing (`helm template` with a local chart reads no network and
no cluster before its values).

Only for a single values or recipe file naming chart folders shipped with helm-nemo, helm given by $HELM_BIN or
$HELM_NEMO_HELM, no --chart/--version/--chart-repo/$HELM_NEMO_CHART_REPO and no flag for helm but -n
(nothing that could make helm read a repository or registry first). install/upgrade never start helm
before validation. This module imports nothing but `os` before helm is started (no re, pathlib or
subprocess: ~20 ms of imports that now run while helm starts); the process is a StartedHelm, which
answers what render_all and the signal forwarding ask of a subprocess.Popen.
"""

from __future__ import annotations

import os
from stat import S_ISREG

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any

_READ_AT_MOST = 1 << 20
_KEYS = ("chart", "accelerator", "release", "releases")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_started: list[tuple[list[str], StartedHelm]] = []  # not taken yet


def _plain_name(text: str) -> str | None:
    """`jobset`, `a4`, `run-1`: a lower-case name written plainly (a comment after it allowed), else None."""
    value = text.split(" #", 1)[0].split("\t#", 1)[0].strip()
    if value and value[0] != "-" and set(value) <= _NAME_CHARS:
        return value
    return None


def _read_regular(values_file: str) -> str | None:
    """The values file's text (up to 1 MiB) when it is a regular file; a pipe (`-f <(…)`, a FIFO) is not even
    opened (that alone would disturb its writer): it must be left whole for the real read."""
    try:
        if not S_ISREG(os.stat(values_file).st_mode):
            return None
        fd = os.open(values_file, os.O_RDONLY | os.O_NONBLOCK)
        try:
            if not S_ISREG(os.fstat(fd).st_mode):
                return None
            return os.read(fd, _READ_AT_MOST).decode("utf-8")
        finally:
            os.close(fd)
    except (OSError, ValueError):  # ValueError: not UTF-8, a NUL in the path
        return None


def _shipped_chart(kind: str | None, accelerator: str | None) -> str | None:
    if not kind:
        return None
    from helm_nemo import resources

    return resources.shipped_chart_name(kind, accelerator)


def _key_value(text: str) -> tuple[str, str] | None:
    """`key: value` -> (key, the rest); None when the line is no such pair (`chart:x` is no key)."""
    key, colon, rest = text.partition(":")
    if not colon or rest[:1] not in ("", " ", "\t") or not key or " " in key:
        return None
    return key, rest


def guess_releases(values_file: str, release: str | None) -> list[tuple[str, str]] | None:
    """[(release name, chart folder)] the values or recipe file most likely names, or None when unsure. Only
    a guess: a started command is used only if it equals the one a validated plan needs."""
    text = _read_regular(values_file)
    if text is None:
        return None
    top: dict[str, str | None] = {}
    lines = text.splitlines()
    for number, line in enumerate(lines):
        pair = _key_value(line) if line[:1] not in ("", " ", "\t", "#", "-") else None
        if pair is None or pair[0] not in _KEYS:
            continue
        key, rest = pair
        if key in top:
            return None  # written twice
        if key == "releases":
            if release is not None or _plain_name(rest) is not None or rest.split("#")[0].strip():
                return None  # a recipe names its releases itself; `releases: [...]` inline: unsure
            return _recipe_releases(lines[number + 1 :])
        top[key] = _plain_name(rest)
    name = _plain_name(release) if release is not None else top.get("release")
    folder = _shipped_chart(top.get("chart"), top.get("accelerator"))
    return [(name, folder)] if name and folder else None


def _recipe_releases(lines: list[str]) -> list[tuple[str, str]] | None:
    """The releases of a recipe's `releases:` list, written in block style: each item's own `release`,
    `chart`, `accelerator` lines, or the same keys at the top of its `values:` (which win, as in
    values/recipe.py). Anything unusual (flow style, tabs, `version:`): None."""
    items: list[dict[str, Any]] = []
    dash: int | None = None
    key_col: int | None = None
    values_col: int | None = None
    in_values = False
    for line in lines:
        content = line.lstrip(" ")
        if not content or content.startswith("#"):
            continue
        col = len(line) - len(content)
        if col == 0:
            break  # the next top-level key
        if content.startswith("\t") or content.startswith(("{", "[", "&", "*", "!")):
            return None
        if content.startswith("- ") and (dash is None or col == dash):
            if content[2:3] in (" ", ""):
                return None  # `-   key:`: unusual
            dash, key_col, in_values, values_col = col, col + 2, False, None
            items.append({"item": {}, "values": {}})
            content, col = content[2:], col + 2
        if not items or key_col is None or col < key_col:
            return None
        pair = _key_value(content.split(" #")[0].rstrip())
        if col == key_col:
            in_values = pair is not None and pair[0] == "values"
            values_col = None
            if pair is None:
                return None
            if pair[0] == "version":
                return None  # a chart version: helm gets --version
            if pair[0] in ("release", "chart", "accelerator"):
                items[-1]["item"][pair[0]] = _plain_name(pair[1])
            if in_values and pair[1].strip():
                return None  # `values: {...}` inline
            continue
        if in_values:
            values_col = col if values_col is None else values_col
            if col == values_col and pair is not None and pair[0] in ("release", "chart", "accelerator"):
                items[-1]["values"][pair[0]] = _plain_name(pair[1])
    out = []
    for found in items:
        merged = {**found["item"], **found["values"]}
        folder = _shipped_chart(merged.get("chart"), merged.get("accelerator"))
        if not merged.get("release") or folder is None:
            return None
        out.append((merged["release"], folder))
    return out or None


def start_template(params: dict[str, Any]) -> None:
    """For `template`/`lint` parameters from cli/direct.py: start `helm template` for each release the values
    or recipe file names, when the guess is safe."""
    values = params["values_files"]
    if (
        len(values) != 1
        or values[0] == "-"
        or params.get("chart")
        or params.get("chart_version")
        or params.get("chart_repo")
        or os.environ.get("HELM_NEMO_CHART_REPO")
        or params.get("target", "kubernetes") != "kubernetes"
    ):
        return
    helm = os.environ.get("HELM_BIN") or os.environ.get("HELM_NEMO_HELM")  # actions/helm.py's order
    if not hasattr(os, "posix_spawn"):  # Windows: helm starts after validation, as before
        return
    guessed = guess_releases(values[0], params.get("release")) if helm else None
    if not guessed:
        return
    extra = ["--namespace", params["namespace"]] if params.get("namespace") else []
    if params.get("kube_version"):
        extra = ["--kube-version", params["kube_version"]] + extra  # lint passes its version to helm first
    for release, chart in guessed:
        args = [helm, "template", release, chart, "-f", "-", *extra]
        try:
            _started.append((args, StartedHelm(args)))
        except OSError:
            return  # helm cannot be started: the command says so in its own words later
    from helm_nemo.timings import mark

    mark("helm started (before validation)")


def take(args: list[str]) -> StartedHelm | None:
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

        self.args = args
        self.returncode: int | None = None
        self._lock = _thread.allocate_lock()
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        try:
            self.pid = os.posix_spawn(
                args[0],
                args,
                os.environ,
                setpgroup=0,
                setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ),
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, stdin_r, 0),
                    (os.POSIX_SPAWN_DUP2, stdout_w, 1),
                    (os.POSIX_SPAWN_DUP2, stderr_w, 2),
                ],
            )
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
        code = self._reap(block=True)
        assert code is not None  # a blocking wait ends with the exit code
        return code

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def communicate(self, text: str) -> tuple[str, str]:
        """Write `text` to helm's stdin and close it, read stdout and stderr to their ends (process.Pump, as for
        every helm), wait for helm; newlines read as subprocess's text mode reads them."""
        from helm_nemo.actions.process import Pump

        pump = Pump(self, text, None, None)
        pump.run()
        self.wait()
        out, err = (pump.text(s).replace("\r\n", "\n").replace("\r", "\n") for s in (self.stdout, self.stderr))
        return out, err
