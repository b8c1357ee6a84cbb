"""Logs a user already has (`helm nemo logs --errors --file LOG…`): files, folders of them, `-` for stdin.

One file per pod or rank; a folder gives its files in name order (hidden files, `case.yaml` and torchrun's
error.json files are skipped; flight-recorder dumps `nccl_trace_rank_N` are read as such, and a folder of dumps
alone may be named beside the logs: `--file DUMPS/ --file LOGS/`). Bad input is a
UserError (exit 2): a missing path, a binary file named, a folder with no log in it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from helm_nemo.diagnose import flight
from helm_nemo.user_errors import Problem, UserError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

SNIFF = 8192
SKIPPED = {"case.yaml", "error.json"}


@dataclass
class Logs:
    """The texts to diagnose, in order, and the flight-recorder dumps found beside them."""

    texts: list[tuple[str, str, Path | None]] = field(default_factory=list)  # (name, text, its folder)
    dumps: dict[int, Path] = field(default_factory=dict)


def _bad(path: str, message: str, hint: str) -> UserError:
    return UserError(Problem(path, None, None, "", message, hint=hint))


def _binary(head: bytes) -> bool:
    return b"\x00" in head


def read(paths: list[str], stdin: object = None) -> Logs:
    """The logs named (a file, a folder, `-`)."""
    out = Logs()
    for given in paths:
        if given == "-":
            stream: Any = stdin if stdin is not None else sys.stdin
            text = stream.read()
            if isinstance(text, bytes):
                text = text.decode("utf-8", errors="replace")
            out.texts.append(("<stdin>", text, None))
            continue
        path = Path(given)
        if path.is_dir():
            _folder(path, given, out)
        elif path.is_file():
            rank = flight.rank_of(path.name)
            if rank is not None:
                out.dumps[rank] = path
                continue
            data = path.read_bytes()
            if _binary(data[:SNIFF]):
                raise _bad(given, "a binary file, not a log", "give the text log of a pod or rank (kubectl logs POD)")
            out.texts.append((given, data.decode("utf-8", errors="replace"), path.parent))
        else:
            raise _bad(given, "no such file or folder", "give a log file, a folder of logs, or - for stdin")
    if not out.texts:
        raise _bad(
            ", ".join(paths),
            "no log to read" + (" (only flight-recorder dumps)" if out.dumps else ""),
            "give a log file, a folder of logs, or - for stdin" + (", beside the dumps" if out.dumps else ""),
        )
    return out


def _folder(folder: Path, given: str, out: Logs) -> None:
    found = dumps = 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or path.name in SKIPPED:
            continue
        rank = flight.rank_of(path.name)
        if rank is not None:
            out.dumps[rank] = path
            dumps += 1
            continue
        data = path.read_bytes()
        if _binary(data[:SNIFF]) or path.suffix in (".pkl", ".pickle", ".gz", ".tgz", ".zip"):
            continue
        out.texts.append((str(Path(given) / rel), data.decode("utf-8", errors="replace"), path.parent))
        found += 1
    if not found and not dumps:  # a folder of dumps only goes with the logs named beside it (checked in read)
        raise _bad(given, "the folder holds no log", "give a folder with one log file per pod or rank")
