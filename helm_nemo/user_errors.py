"""The one error type users see: every problem with file:line:column, JSON path, expectation and hint."""

from __future__ import annotations

from dataclasses import dataclass

EXIT_USER_ERROR = 2
MAX_LINES = 40  # one screen


@dataclass(frozen=True)
class Problem:
    file: str | None
    line: int | None
    column: int | None
    json_path: str
    message: str
    expected: str | None = None
    hint: str | None = None

    def location(self) -> str:
        parts = [self.file or "<values>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def lines(self) -> list[str]:
        out = [f"{self.location()}: {self.json_path}: {self.message}"]
        if self.expected:
            out.append(f"    expected: {self.expected}")
        if self.hint:
            out.append(f"    hint: {self.hint}")
        return out


class UserError(Exception):
    """Bad input. The CLI prints `format()` and exits 2; nothing has been sent to helm."""

    def __init__(self, problems: list[Problem] | Problem, title: str | None = None):
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        self.title = title
        super().__init__(self.format())

    def format(self) -> str:
        lines: list[str] = [self.title] if self.title else []
        shown = 0
        for index, problem in enumerate(self.problems):
            block = problem.lines()
            if len(lines) + len(block) > MAX_LINES:
                lines.append(f"… and {len(self.problems) - index} more problem(s)")
                break
            lines += block
            shown += 1
        return "\n".join(lines)


def raise_if_problems(problems: list[Problem], title: str | None = None) -> None:
    if problems:
        raise UserError(sorted(problems, key=lambda p: (p.file or "", p.line or 0, p.column or 0)), title)
