"""Paths a values file names (`files:`, a `chart:` folder) stay inside a root, and reading never hangs.

A values file may come from someone else (a shared recipe, a pull request). What it names is read on
the machine running helm nemo and sent to the cluster, so:

* a path is relative to the values file's folder, and it must stay inside the root: that folder, or the
  one given with `--root DIR`. Absolute paths, `..` leading out and symlinks leading out are refused;
* only regular files are read (a FIFO would hang, /dev/zero never ends, a directory is no text); the
  file is opened without blocking and checked on the descriptor that is read;
* MAX_FILE_BYTES per file and MAX_TOTAL_BYTES for all the files of one run (every release of a recipe):
  a Kubernetes object (the ConfigMap or the release secret helm writes) holds at most 1 MiB.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_FILE_BYTES = 1024 * 1024
MAX_TOTAL_BYTES = 4 * 1024 * 1024


class PathRefused(Exception):
    """A path a values file names that helm nemo will not use; the message says why, the hint what to do."""

    def __init__(self, message: str, hint: str | None = None, *, too_large: bool = False):
        super().__init__(message)
        self.hint = hint
        self.too_large = too_large


def inside(base: Path, rel: str, root: Path, *, what: str = "path") -> Path:
    """`rel` (relative to `base`) as a real path inside `root`, or PathRefused."""
    if os.path.isabs(rel) or rel.startswith("~"):
        raise PathRefused(
            f"{what} {rel!r} is absolute; only paths relative to the values file are read",
            hint=f"copy it under {root} and name it relatively, or pass --root DIR",
        )
    real_root = Path(os.path.realpath(root))
    lexical = Path(os.path.normpath(base / rel))
    real = Path(os.path.realpath(base / rel))
    if not lexical.is_relative_to(Path(os.path.normpath(root))):
        raise PathRefused(
            f"{what} {rel!r} leads outside {root}",
            hint="name a path under the values file's folder, or pass --root DIR to allow a wider one",
        )
    if not real.is_relative_to(real_root):
        raise PathRefused(
            f"{what} {rel!r} is a symlink (or goes through one) leading outside {root}, to {real}",
            hint="copy the file under the root, or pass --root DIR to allow a wider one",
        )
    return real


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_regular(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; PathRefused for anything else. Never blocks:
    the file is opened non-blocking and its type checked on the open descriptor."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise PathRefused("is a directory, not a file") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((words for test, words in _KINDS if test(info.st_mode)), "not a regular file")
            raise PathRefused(f"is {kind}, not a regular file")
        if info.st_size > limit:
            raise PathRefused(
                f"is {info.st_size} bytes, more than the {limit // 1024} KiB a file may have",
                hint="a ConfigMap holds at most 1 MiB: keep data in a bucket or a volume",
                too_large=True,
            )
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:  # it grew while being read
                raise PathRefused(f"is more than the {limit // 1024} KiB a file may have", too_large=True)
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
