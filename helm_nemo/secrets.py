"""Secrets from the environment are never printed: `***` instead, unless the user asks (--show-secrets).

A `${NAME}` substituted from the environment may hold a token or a password, and what helm nemo prints
ends up in CI logs. So every such value that helm_nemo.secret_policy calls secret (a secret-looking name,
a value that looks like a credential, a `--mask NAME`) is masked in everything helm nemo prints (its
messages, the helm output it relays, --debug tracebacks, dry runs, diff, status, preflight); every other
value is shown, so an error can say which bucket or queue was wrong. `template` prints the manifests
themselves, which is what it is asked for. docs/security.md states the guarantee.

* `Masker(values).text(s)` replaces each value in `s`, in the forms a message or helm may print it:
  as is, escaped as Python's repr or JSON write it (`\\n`, `\\'`, `\\u00e9`), line by line for a multi-line
  value, and base64 (a Kubernetes Secret's `data`). A value shorter than `MIN_FREE` characters is
  masked where it stands quoted (`'ab'`, `"ab"`: how every message quotes a value) or is the whole text,
  not inside other words: replacing `1` everywhere would garble the output and hide nothing. Where two
  values overlap or touch in a text (`abcdef` and `defgh` in `abcdefgh`), the whole stretch they cover
  becomes one `***`: replacing one first would leave the other's rest in clear.
* `collecting(show=False, mask=())`: the CLI runs each command inside it (`mask`: its `--mask` names);
  `note(value, name)` (called by the substitution for every value it takes from the environment) adds
  the value to the active masker when the policy calls it secret, so an error raised half-way is masked
  as well as the output of a finished plan. `is_secret(name, value)` is the policy with the active
  `--mask` names. Outside a block `note` does nothing and `mask` returns its text unchanged (library
  callers decide for themselves).

`helm nemo diff` and any other printer call `Masker.text` / `Masker.value` with the values they hold
(`SubstitutionResult.secret_values()`), or `mask()` inside the CLI's collecting context.
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


def _replaced(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """`text` with each stretch the (start, end) spans cover, overlapping or touching ones merged, as one `***`."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if not merged:
        return text
    out, index = [], 0
    for start, end in merged:
        out += [text[index:start], MASK]
        index = end
    out.append(text[index:])
    return "".join(out)


def mask_within(text: str, values: Iterable[str]) -> str:
    """`text`, known to hold `values` (substituted there), with every occurrence of each masked, short ones
    too; overlapping occurrences become one `***` (no value left half in clear)."""
    spans = []
    for value in {v for v in values if v}:
        start = text.find(value)
        while start >= 0:
            spans.append((start, start + len(value)))
            start = text.find(value, start + 1)
    return _replaced(text, spans)


class Masker:
    """Replaces known values with `***` in text and in data; disabled (`enabled=False`) it changes nothing.

    `names`: the variables the user asked to mask (--mask), which the policy adds to its own rules."""

    def __init__(self, values: Iterable[str] = (), *, enabled: bool = True, names: Iterable[str] = ()):
        self.enabled = enabled
        self.names = frozenset(names)
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
            ordered = sorted(free | quoted, key=len, reverse=True)  # longest first at each position
            # a lookahead matches at every position, so overlapping values are all found (see `text`)
            self._regex = re.compile("(?=(" + "|".join(re.escape(form) for form in ordered) + "))")
        return self._regex

    def text(self, text: str) -> str:
        """`text` with every known value replaced by `***` (a quoted short value keeps its quotes).

        Every occurrence of every form is found, overlapping ones included, and each stretch of text they
        cover together becomes one `***`: no value is left half in clear by another replaced before it."""
        if not self or not isinstance(text, str):
            return text
        if text in self.values:
            return MASK
        regex = self._compiled()
        spans: list[tuple[int, int]] = []
        for match in regex.finditer(text) if regex else ():
            found = match.group(1)
            start, end = match.start(), match.start() + len(found)
            if found in self._quoted:  # the quotes stay: `'***'`
                start, end = start + 1, end - 1
            spans.append((start, end))
        return _replaced(text, spans)

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
def collecting(*, show: bool = False, mask: Iterable[str] = ()) -> Iterator[Masker]:
    """Collect the secrets substitution takes from the environment while the block runs; yields the masker.

    `mask`: names of variables to mask whatever the policy says of them (--mask)."""
    masker = Masker(enabled=not show, names=mask)
    token = _ACTIVE.set(masker)
    try:
        yield masker
    finally:
        _ACTIVE.reset(token)


def masked_names() -> frozenset[str]:
    """The names the active `collecting` block masks whatever they hold (--mask); empty outside one."""
    masker = _ACTIVE.get()
    return masker.names if masker is not None else frozenset()


def is_secret(name: str, value: str) -> bool:
    """helm_nemo.secret_policy's verdict on `name`=`value`, with the active block's --mask names."""
    from helm_nemo.secret_policy import is_secret as policy

    return policy(name, value, masked_names())


def note(value: Any, name: str | None = None) -> None:
    """`value` (of variable `name`) was taken from the environment: masked from now on in what the active
    `collecting` block prints when it is a secret (helm_nemo.secret_policy; without a name: always)."""
    masker = _ACTIVE.get()
    if masker is not None and isinstance(value, str) and value and (name is None or is_secret(name, value)):
        masker.add(value)


def masking() -> bool:
    """True inside a `collecting` block that masks (not --show-secrets)."""
    masker = _ACTIVE.get()
    return masker is not None and masker.enabled


def mask(text: str) -> str:
    """`text` masked by the active `collecting` block's masker (unchanged outside one)."""
    masker = _ACTIVE.get()
    return masker.text(text) if masker is not None else text
