"""Rendered manifests as data: parse, normalise for semantic comparison, and diff with readable paths.

Semantic means: key order, the order of named list items (env, volumes, containers …), null versus
absent, and blank lines or trailing spaces in scripts do not count; everything else does. A
difference path reads like `JobSet/parity .spec.replicatedJobs[workload]…env[NCCL_DEBUG].value`.
Named list items are keyed by `name` (tolerations by `key:effect`, unnamed items by position); a
second item or object under a key already taken becomes `NAME#2`, so duplicates show up as added.
A changed script line is two differences at the script's path: the old line removed, the new added.

`helm nemo diff` (helm_nemo.diff.objects) uses the same comparison with `text=True`: a changed script is
one difference holding both texts (shown as a unified diff), and map keys that are not plain words
(`kueue.x-k8s.io/queue-name`) are written `["…"]`, so a path reads unambiguously.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any

# Lists whose items are identified by a field rather than their position.
NAMED_LISTS = {
    "env": "name",
    "volumes": "name",
    "volumeMounts": "name",
    "containers": "name",
    "initContainers": "name",
    "ports": "name",
    "resourceClaims": "name",
    "claims": "name",
    "replicatedJobs": "name",
    "envFrom": None,
}


def parse_manifests(text: str) -> list[dict[str, Any]]:
    from ruamel.yaml import YAML

    return [d for d in YAML(typ="safe", pure=True).load_all(text) if isinstance(d, dict) and d]


def object_key(doc: dict[str, Any]) -> str:
    return f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}"


def _unique(key: str, seen: set[str]) -> str:
    """`key`, or `key#2`, `key#3` … when it is taken: a duplicate stays visible as an extra item."""
    unique, n = key, 1
    while unique in seen:
        n += 1
        unique = f"{key}#{n}"
    seen.add(unique)
    return unique


def index_by_kind_name(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`Kind/name` -> object. A second object with the same kind and name is kept as `Kind/name#2`
    (helm install would reject it; the comparison must not hide it)."""
    seen: set[str] = set()
    return {_unique(object_key(d), seen): d for d in docs}


def _item_key(list_name: str | None, item: Any, index: int) -> str:
    if isinstance(item, dict):
        field = NAMED_LISTS.get(list_name or "", "name")
        if field and field in item:
            return str(item[field])
        if list_name == "tolerations":
            return f"{item.get('key', '')}:{item.get('effect', '')}"
    return str(index)


def _script(text: str) -> dict[str, list[str]]:
    return {"__script__": [line.rstrip() for line in text.split("\n") if line.strip()]}


def normalize(node: Any, list_name: str | None = None) -> Any:
    """Plain data fit for comparison (see the module docstring)."""
    if isinstance(node, dict):
        return {k: normalize(v, k) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        named = list_name in NAMED_LISTS or list_name == "tolerations"
        if named and all(isinstance(i, dict) for i in node):
            seen: set[str] = set()  # two env entries of one name both count (the duplicate is `NAME#2`)
            return {
                "__named__": {
                    _unique(_item_key(list_name, item, i), seen): normalize(item) for i, item in enumerate(node)
                }
            }
        return [normalize(item) for item in node]
    if isinstance(node, str) and "\n" in node:
        return _script(node)
    return node


@dataclass(frozen=True)
class Difference:
    """One field that differs between the installed and the new object."""

    path: str
    change: str  # added | removed | changed
    expected: Any = None
    actual: Any = None

    def __str__(self) -> str:
        if self.change == "changed":
            return f"{self.path}: changed {self.expected!r} -> {self.actual!r}"
        value = self.actual if self.change == "added" else self.expected
        shown = repr(value) if not isinstance(value, (dict, list)) or len(repr(value)) < 80 else "{…}"
        return f"{self.path}: {self.change} {shown}"


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: Any, text: bool) -> str:
    return f".{key}" if not text or _PLAIN_KEY.match(str(key)) else "[" + json.dumps(str(key)) + "]"


def _diff(expected: Any, actual: Any, path: str, out: list[Difference], text: bool = False) -> None:
    # "echo x\n" (a script) and "echo x" (one line) are the same text once trailing blank lines go.
    if isinstance(expected, dict) and "__script__" in expected and isinstance(actual, str):
        actual = _script(actual)
    elif isinstance(actual, dict) and "__script__" in actual and isinstance(expected, str):
        expected = _script(expected)
    if isinstance(expected, dict) and isinstance(actual, dict):
        if "__named__" in expected and "__named__" in actual:
            e, a = expected["__named__"], actual["__named__"]
            for key in list(e) + [k for k in a if k not in e]:
                sub = f"{path}[{key}]"
                if key not in a:
                    out.append(Difference(sub, "removed", expected=e[key]))
                elif key not in e:
                    out.append(Difference(sub, "added", actual=a[key]))
                else:
                    _diff(e[key], a[key], sub, out, text)
            return
        if "__script__" in expected and "__script__" in actual:
            if text:
                if expected["__script__"] != actual["__script__"]:
                    out.append(Difference(path, "changed", expected=_plain(expected), actual=_plain(actual)))
                return
            matcher = difflib.SequenceMatcher(a=expected["__script__"], b=actual["__script__"], autojunk=False)
            for op, i1, i2, j1, j2 in matcher.get_opcodes():
                if op in ("delete", "replace"):
                    out.extend(Difference(path, "removed", expected=line) for line in expected["__script__"][i1:i2])
                if op in ("insert", "replace"):
                    out.extend(Difference(path, "added", actual=line) for line in actual["__script__"][j1:j2])
            return
        for key in list(expected) + [k for k in actual if k not in expected]:
            sub = path + _key(key, text)
            if key not in actual:
                out.append(Difference(sub, "removed", expected=_plain(expected[key])))
            elif key not in expected:
                out.append(Difference(sub, "added", actual=_plain(actual[key])))
            else:
                _diff(expected[key], actual[key], sub, out, text)
        return
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            _diff(e, a, f"{path}[{i}]", out, text)
        return
    if expected != actual:
        out.append(Difference(path, "changed", expected=_plain(expected), actual=_plain(actual)))


def _plain(node: Any) -> Any:
    """Undo the comparison markers for display."""
    if isinstance(node, dict):
        if "__named__" in node:
            return [_plain(v) for v in node["__named__"].values()]
        if "__script__" in node:
            return "\n".join(node["__script__"])
        return {k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


def semantic_diff(expected_docs: list[dict[str, Any]], actual_docs: list[dict[str, Any]]) -> list[Difference]:
    expected = {k: normalize(v) for k, v in index_by_kind_name(expected_docs).items()}
    actual = {k: normalize(v) for k, v in index_by_kind_name(actual_docs).items()}
    out: list[Difference] = []
    for key in list(expected) + [k for k in actual if k not in expected]:
        if key not in actual:
            out.append(Difference(key, "removed", expected=_plain(expected[key])))
        elif key not in expected:
            out.append(Difference(key, "added", actual=_plain(actual[key])))
        else:
            _diff(expected[key], actual[key], key + " ", out)
    return [Difference(d.path.replace("  .", " .").rstrip(), d.change, d.expected, d.actual) for d in out]
