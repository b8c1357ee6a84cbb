"""The one error type users see: every problem with file:line:column, JSON path, expectation and hint.

Bad input is reported all at once (a user fixing one error per run loses patience), before anything
reaches helm. The CLI prints `UserError.format()` (no traceback) and exits with `EXIT_USER_ERROR`.
"""

from __future__ import annotations

import re
from collections import namedtuple

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Iterable

EXIT_USER_ERROR = 2  # usage, substitution or schema error found before helm runs (helm-ecosystem.md §6)
MAX_LINES = 40  # one screen

_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_\-\[\]/]+$")


def json_path(parts: Iterable[Any]) -> str:
    """`("volumes", "gcsMounts", 0, "bucketName")` -> `$.volumes.gcsMounts[0].bucketName`.

    Keys a reader could misparse (dots, spaces, quotes, empty) are written `['a.b']`.
    """
    out = "$"
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(str(part)):
            out += f".{part}"
        else:
            out += "[" + repr(str(part)) + "]"
    return out


class Problem(namedtuple("Problem", "file line column json_path message expected hint", defaults=(None, None))):
    """One thing wrong in the user's input: `file`, `line` and `column` (1-based, None when unknown), the
    `json_path`, the `message`, what was `expected` and a `hint`."""

    __slots__ = ()

    def location(self) -> str:
        parts = [self.file or "<values>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def lines(self) -> list[str]:
        """`file:line:col: $.path: message` (no path for input that is not a document: a log), then indented
        `expected:` / `hint:` lines."""
        path = f"{self.json_path}: " if self.json_path else ""
        out = [f"{self.location()}: {path}{_one_line(self.message)}"]
        if self.expected:
            out.append(f"    expected: {_one_line(self.expected)}")
        if self.hint:
            out.append(f"    hint: {_one_line(self.hint)}")
        return out

    def format(self) -> str:
        return "\n".join(self.lines())


def _one_line(text: str) -> str:
    """A message quoting user data must not break the one-problem-per-line layout."""
    return str(text).replace("\r", "\\r").replace("\n", "\\n")


class UserError(Exception):
    """Bad input. The CLI prints `format()` and exits `exit_code`; nothing has been sent to helm."""

    exit_code = EXIT_USER_ERROR

    def __init__(self, problems: Iterable[Problem] | Problem, title: str | None = None):
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        self.title = title
        super().__init__(self.format())

    def format(self, max_lines: int = MAX_LINES) -> str:
        """Every problem, capped to one screen; the rest is counted ("… and N more problem(s)")."""
        lines: list[str] = [self.title] if self.title else []
        for index, problem in enumerate(self.problems):
            block = problem.lines()
            if index and len(lines) + len(block) > max_lines - 1:
                lines.append(f"… and {len(self.problems) - index} more problem(s)")
                break
            lines += block
        return "\n".join(lines)


def _order(problem: Problem) -> tuple[Any, ...]:
    return (problem.file or "", problem.line or 0, problem.column or 0, problem.json_path)


def raise_if_problems(problems: Iterable[Problem], title: str | None = None) -> None:
    """Raise one UserError holding every problem (ordered by file and line), or return when there are none."""
    problems = list(problems)
    if problems:
        raise UserError(sorted(problems, key=_order), title)
