"""Values that came from the environment are never printed: `***` instead, unless the user asks (--show-secrets).

A `${NAME}` substituted from the environment may hold a token or a password, and what helm nemo prints
ends up in CI logs. So every value substitution takes from the environment is masked in everything helm
nemo prints (its messages, the helm output it relays, --debug tracebacks, dry runs); `template` prints
the manifests themselves, which is what it is asked for. docs/security.md states the guarantee.

* `Masker(values).text(s)` replaces each value in `s`, in the forms a message or helm may print it:
  as is, escaped as Python's repr or JSON write it (`\\n`, `\\'`, `\\u00e9`), line by line for a multi-line
  value, and base64 (a Kubernetes Secret's `data`). A value shorter than `MIN_FREE` characters is
  masked where it stands quoted (`'ab'`, `"ab"`: how every message quotes a value) or is the whole text,
  not inside other words: replacing `1` everywhere would garble the output and hide nothing.
* `collecting(show=False)`: the CLI runs each command inside it; `note(value)` (called by the
  substitution for every value it takes from the environment) adds to the active masker, so an error
  raised half-way is masked as well as the output of a finished plan. Outside it `note` does nothing
  and `mask` returns its text unchanged (library callers decide for themselves).

`helm nemo diff` and any other printer call `Masker.text` / `Masker.value` with the values they hold
(`SubstitutionResult.environment_values()`), or `mask()` inside the CLI's collecting context.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from contextvars import ContextVar

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Iterable, Iterator

MASK = "***"
MIN_FREE = 4  # shorter values are masked only where quoted or whole (see the module doc)


def _escaped_forms(value: str) -> set[str]:
    forms = {
        value,
        value.replace("\r", "\\r").replace("\n", "\\n"),
        repr(value)[1:-1],
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
    }
    if "\n" in value:
        forms.update(line for line in value.splitlines() if len(line.strip()) >= MIN_FREE)
    return {form for form in forms if form}


class Masker:
    """Replaces known values with `***` in text and in data; disabled (`enabled=False`) it changes nothing."""

    def __init__(self, values: Iterable[str] = (), *, enabled: bool = True):
        self.enabled = enabled
        self.values: set[str] = set()
        self._regex: re.Pattern[str] | None = None
        self._quoted: set[str] = set()  # the quoted forms of short values (they keep their quotes)
        for value in values:
            self.add(value)

    def add(self, value: Any) -> None:
        """Remember one more value to mask (empty strings and non-strings are ignored)."""
        if isinstance(value, str) and value and value not in self.values:
            self.values.add(value)
            self._regex = None

    def __bool__(self) -> bool:
        return self.enabled and bool(self.values)

    def _compiled(self) -> re.Pattern[str] | None:
        if self._regex is None and self.values:
            free: set[str] = set()
            quoted: set[str] = set()
            for value in self.values:
                forms = _escaped_forms(value)
                if len(value) >= MIN_FREE:
                    free |= forms
                    import base64

                    free.add(base64.b64encode(value.encode()).decode())
                else:
                    quoted |= {f"{q}{form}{q}" for form in forms for q in ("'", '"')}
            self._quoted = quoted
            ordered = sorted(free | quoted, key=len, reverse=True)  # longest first: no partial masks
            self._regex = re.compile("|".join(re.escape(form) for form in ordered))
        return self._regex

    def text(self, text: str) -> str:
        """`text` with every known value replaced by `***` (a quoted short value keeps its quotes)."""
        if not self or not isinstance(text, str):
            return text
        if text in self.values:
            return MASK
        regex = self._compiled()

        def replace(match: re.Match[str]) -> str:
            found = match.group(0)
            return found[0] + MASK + found[0] if found in self._quoted else MASK

        return regex.sub(replace, text) if regex else text

    def value(self, data: Any) -> Any:
        """`data` (dicts, lists, strings) with every string masked as `text` masks it."""
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, dict):
            return {key: self.value(item) for key, item in data.items()}
        if isinstance(data, list):
            return [self.value(item) for item in data]
        return data


_ACTIVE: ContextVar[Masker | None] = ContextVar("helm_nemo_masker", default=None)


@contextmanager
def collecting(*, show: bool = False) -> Iterator[Masker]:
    """Collect the values substitution takes from the environment while the block runs; yields the masker."""
    masker = Masker(enabled=not show)
    token = _ACTIVE.set(masker)
    try:
        yield masker
    finally:
        _ACTIVE.reset(token)


def note(value: Any) -> None:
    """A value taken from the environment: masked from now on in what the active `collecting` block prints."""
    masker = _ACTIVE.get()
    if masker is not None:
        masker.add(value)


def masking() -> bool:
    """True inside a `collecting` block that masks (not --show-secrets)."""
    masker = _ACTIVE.get()
    return masker is not None and masker.enabled


def mask(text: str) -> str:
    """`text` masked by the active `collecting` block's masker (unchanged outside one)."""
    masker = _ACTIVE.get()
    return masker.text(text) if masker is not None else text
