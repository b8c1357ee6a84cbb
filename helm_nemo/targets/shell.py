"""Shell text from values: one word per value whatever it holds, secrets as references, here-documents.

Used by the Slurm target (helm_nemo.targets.slurm); nothing here knows about Slurm.
"""

from __future__ import annotations

import re
import shlex
from typing import Any
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from helm_nemo.values.release_plan import ReleasePlan

from helm_nemo.secrets import MASK, is_secret, mask_within


def quote(value: Any) -> str:
    """One shell word whatever the value holds (`;`, `$()`, quotes, newlines): POSIX single quotes."""
    return shlex.quote(text_of(value))


def text_of(value: Any) -> str:
    """A value as the charts write it: Helm's text for a number (1e6 is 1000000, not 1000000.0)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        from helm_nemo.values.helm_yaml import helm_text

        return helm_text(value)
    return "" if value is None else str(value)


def _double_quoted(text: str) -> str:
    """Text for inside double quotes, where nothing expands."""
    return re.sub(r'([\\"$`])', r"\\\1", text)


class Secrets:
    """Which values came from secret variables (helm_nemo.secret_policy), and how the script refers to them instead."""

    def __init__(self, plan: ReleasePlan, env: Mapping[str, str], declared: list[str], show: bool):
        self.show = show
        self.declared = list(declared)
        self.required: dict[str, str | None] = {}  # name -> value install passes to sbatch (None: from its env)
        self.by_path: dict[tuple[Any, ...], list[tuple[str, str]]] = {}  # values path -> [(secret text, variable)]
        self.handled: set[tuple[Any, ...]] = set()  # paths whose value went through word()/env_word(): never in clear
        result = plan.substitution
        prefix = tuple(plan.json_prefix)
        if result is None:
            return
        for where, names in result.used.items():
            if tuple(where[: len(prefix)]) != prefix:
                continue
            pairs = [(env[name], name) for name in names if env.get(name) and is_secret(name, env[name])]
            if pairs:
                self.by_path[tuple(where[len(prefix) :])] = pairs

    def word(self, value: Any, where: tuple[Any, ...]) -> str:
        self.handled.add(tuple(where))
        """The shell word for the value at `where`: quoted, secrets as `${VAR}` references."""
        text = text_of(value)
        pairs = [] if self.show else [(s, n) for s, n in self.by_path.get(tuple(where), []) if s in text]
        if not pairs:
            return quote(text)
        pieces = [text]
        for secret, name in sorted(pairs, key=lambda p: len(p[0]), reverse=True):
            self.required.setdefault(name, None)
            split: list[Any] = []
            for piece in pieces:
                if isinstance(piece, tuple):
                    split.append(piece)
                    continue
                parts = piece.split(secret)
                for index, part in enumerate(parts):
                    if index:
                        split.append((name,))
                    split.append(part)
            pieces = split
        return '"' + "".join("${" + p[0] + "}" if isinstance(p, tuple) else _double_quoted(p) for p in pieces) + '"'

    def env_word(self, name: str, value: Any, where: tuple[Any, ...], env: Mapping[str, str]) -> str:
        self.handled.add(tuple(where))
        if text_of(value) == "${" + name + "}":
            # `{name: HF_TOKEN, value: ${HF_TOKEN}}`: substitution left it for the job (the values define that
            # env name), so the job takes it from the environment sbatch runs in.
            self.required.setdefault(name, None)
            return '"${' + name + '}"'
        if name in self.declared and not self.show:
            self.required[name] = text_of(value)
            return '"${' + name + '}"'
        return self.word(value, where)

    def mask(self, data: Any, where: tuple[Any, ...] = ()) -> Any:
        """`data` (found at `where` in the values) with the secrets masked where they were substituted,
        only there: a short secret (`1`) does not mask every `1`."""
        if self.show:
            return data
        if isinstance(data, dict):
            return {k: self.mask(v, where + (k,)) for k, v in data.items()}
        if isinstance(data, list):
            return [self.mask(v, where + (i,)) for i, v in enumerate(data)]
        pairs = self.by_path.get(tuple(where))
        if not pairs:
            return data
        if not isinstance(data, str):
            return MASK
        return mask_within(data, [secret for secret, _ in pairs])


def heredoc(target: str, text: str) -> list[str]:
    """`cat > target` with a quoted here-document (the shell expands nothing inside); the file ends with
    one newline. The end marker is chosen so that no line of the text equals it."""
    if not text:
        return [f": > {target}"]
    lines = text.split("\n")
    if text.endswith("\n"):
        lines = lines[:-1]
    marker, n = "HELM_NEMO_EOF", 0
    while marker in lines:
        n += 1
        marker = f"HELM_NEMO_EOF_{n}"
    return [f"cat > {target} <<'{marker}'", *lines, marker]


def comment(text: str) -> str:
    """User text inside a `#` comment: one line whatever it holds."""
    return str(text).replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
