"""`files: {values.key: path}`: a file's text put under a values key, as helm's --set-file does, with a line number.

A path is relative to the values file that names it and stays inside the root (values/paths.py: regular files,
size caps); the bytes read in one run, over every release, stay under paths.MAX_TOTAL_BYTES (`FileBudget`).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from pathlib import Path
    from typing import Any

    from helm_nemo.values.loaded import LoadedValues

from helm_nemo.values.recipe import problem


class FileBudget:
    """Bytes read through `files:` in one run (all releases): at most paths.MAX_TOTAL_BYTES."""

    def __init__(self) -> None:
        self.used = 0


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    node = data
    keys = dotted.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value


def read_file_refs(
    loaded: LoadedValues,
    values: dict[str, Any],
    prefix: tuple[Any, ...],
    root: Path | None = None,
    budget: FileBudget | None = None,
) -> list[Any]:
    """`files: {key: path}` -> the file's text under that values key (like --set-file, with a line number).

    A path is relative to the file that names it and must stay inside `root` (default: that file's
    folder); regular files only, within the size limits of values/paths.py."""
    from helm_nemo.values.paths import MAX_FILE_BYTES, MAX_TOTAL_BYTES, PathRefused, inside, read_regular
    from helm_nemo.values.load import not_utf8, text_position

    budget = budget or FileBudget()
    problems = []
    refs = values.get("files") or {}
    for key, rel in refs.items():
        where = prefix + ("files", key)
        base = loaded.base_dir(where)
        try:
            target = inside(base, rel, root or base, what="file")
        except PathRefused as refused:
            problems.append(problem(loaded, where, str(refused), hint=refused.hint))
            continue
        limit = min(MAX_FILE_BYTES, MAX_TOTAL_BYTES - budget.used)
        raw = b""
        try:
            raw = read_regular(target, limit)
            text = raw.decode("utf-8")  # as --set-file reads it (a BOM stays)
        except FileNotFoundError:
            problems.append(
                problem(
                    loaded,
                    where,
                    f"file {rel!r} not found (looked in {target.parent})",
                    hint="paths are relative to the values file",
                )
            )
            continue
        except PathRefused as refused:
            if refused.too_large and limit < MAX_FILE_BYTES:
                refused = PathRefused(
                    f"would take the files of this run over {MAX_TOTAL_BYTES // 2**20} MiB together",
                    hint="keep large data in a bucket or a volume",
                )
            problems.append(problem(loaded, where, f"cannot read {rel!r}: it {refused}", hint=refused.hint))
            continue
        except UnicodeDecodeError as err:
            problems.append(
                problem(
                    loaded,
                    where,
                    f"cannot read {rel!r}: not UTF-8 text at {not_utf8(raw, err)}",
                    hint="files are read as UTF-8 text",
                )
            )
            continue
        except OSError as err:
            problems.append(problem(loaded, where, f"cannot read {rel!r}: {err.strerror or err}"))
            continue
        if "\0" in text:
            line, column = text_position(text, text.index("\0"))
            problems.append(
                problem(
                    loaded,
                    where,
                    f"cannot read {rel!r}: a NUL character at line {line}, column {column} "
                    "(helm, JSON and Kubernetes do not carry it)",
                    hint="files are read as text",
                )
            )
            continue
        budget.used += len(raw)
        _set_dotted(values, key, text)
    return problems
