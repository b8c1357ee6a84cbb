"""Where the schemas come from: kubernetes-validate's strict core schemas per Kubernetes minor, the
vendored CRD schemas (closed, null-tolerant, Go regexes translated)."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from referencing import Registry

from helm_nemo import resources
from helm_nemo.validate.documents import OBJECTMETA_REF


def _kubernetes_validate_root() -> Path:
    """The schema folder kubernetes-validate ships, found without importing it (its import pulls in
    jsonschema: ~100 ms that a clean validation never needs)."""
    import importlib.util

    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or not spec.submodule_search_locations:  # pragma: no cover - a venv made before the dependency
        raise RuntimeError("the kubernetes-validate package is missing: pip install -e . (or make setup)")
    return Path(list(spec.submodule_search_locations)[0]).resolve() / "kubernetes-json-schema"


@cache
def shipped_kube_versions() -> tuple[tuple[int, int], ...]:
    out = []
    for folder in _kubernetes_validate_root().glob("v*-local-strict"):
        m = re.fullmatch(r"v(\d+)\.(\d+)\.\d+-local-strict", folder.name)
        if m:
            out.append((int(m.group(1)), int(m.group(2))))
    return tuple(sorted(out))


def resolve_kube_version(version: str) -> tuple[int, int]:
    """ "1.32", "v1.32.3" -> (1, 32): the newest shipped minor <= the one asked for."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?", str(version).strip())
    if not m:
        raise ValueError(f"not a Kubernetes version: {version!r} (expected e.g. 1.32)")
    wanted = (int(m.group(1)), int(m.group(2)))
    shipped = shipped_kube_versions()
    fitting = [v for v in shipped if v <= wanted]
    if not fitting:
        have = ", ".join(f"{a}.{b}" for a, b in shipped)
        raise ValueError(f"no core schemas for Kubernetes {version} (kubernetes-validate ships {have})")
    return fitting[-1]


def core_dir(kube: tuple[int, int]) -> Path:
    return _kubernetes_validate_root() / f"v{kube[0]}.{kube[1]}.0-local-strict"


@cache
def registry(kube: tuple[int, int]) -> Registry[Any]:
    from referencing import Registry, Resource

    defs = json.loads((core_dir(kube) / "_definitions.json").read_text(encoding="utf-8"))
    return Resource.from_contents(defs) @ Registry()


def crd_schemas_dir() -> Path:
    return resources.schemas_dir() / "k8s"


def core_file(api_version: str, kind: str, kube: tuple[int, int]) -> Path:
    # kubernetes-validate's naming: <kind>-<first label of the group>-<version>.json; core v1 has no group.
    suffix = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return core_dir(kube) / f"{kind.lower()}-{suffix.lower()}.json"


def crd_file(api_version: str, kind: str) -> Path | None:
    group, _, version = api_version.rpartition("/")
    if not group or "." not in group:
        return None
    return crd_schemas_dir() / group / f"{kind.lower()}_{version}.json"


_GO_LEADING_FLAGS = re.compile(r"^\^\(\?([a-zA-Z]+)\)")
_POSIX_CLASSES = {
    "[:alpha:]": "a-zA-Z",
    "[:digit:]": "0-9",
    "[:alnum:]": "a-zA-Z0-9",
    "[:upper:]": "A-Z",
    "[:lower:]": "a-z",
    "[:space:]": r"\s",
    "[:xdigit:]": "0-9A-Fa-f",
    "[:word:]": r"\w",
    "[:punct:]": r"!-/:-@\[-`{-~",
}


def go_regex_to_python(pattern: str) -> str:
    """An RE2 (Go) pattern as Python `re` accepts it, same meaning for the constructs CRDs use.

    `^(?i)…` (flags after the anchor: an error in Python) becomes `(?i)^…`; `\\z` becomes `\\Z`;
    `\\Q…\\E` literals are escaped; POSIX classes `[[:alpha:]]` are spelled out."""
    out = _GO_LEADING_FLAGS.sub(r"(?\1)^", pattern)
    out = re.sub(r"\\Q(.*?)(?:\\E|$)", lambda m: re.escape(m.group(1)), out)
    out = out.replace(r"\z", r"\Z")
    for posix, plain in _POSIX_CLASSES.items():
        out = out.replace(posix, plain)
    return out


# Patterns neither Python nor the translation can compile: dropped from the schema, listed here.
UNCHECKED_PATTERNS: list[str] = []

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
)


def prepare_crd_schema(node: Any, *, root: bool = True) -> Any:
    """The in-memory adjustments of a vendored CRD schema (see the module doc), every node: a new schema
    (the input is not changed). The fast check applies prepare_crd_node to the nodes it reaches instead."""
    if not isinstance(node, dict):
        return node
    out = prepare_crd_node(node, root=root)
    if out is node:
        out = dict(node)
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: prepare_crd_schema(sub, root=False) for name, sub in out[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [prepare_crd_schema(sub, root=False) for sub in out[key]]
    for key in _SCHEMA_ONE:
        if isinstance(out.get(key), dict):
            out[key] = prepare_crd_schema(out[key], root=False)
    return out


def prepare_crd_node(node: Any, *, root: bool = False) -> Any:
    """prepare_crd_schema of one node, its subschemas left as they are: a new dict (or `node` itself when
    nothing changes)."""
    if not isinstance(node, dict):
        return node
    out = None
    if isinstance(node.get("pattern"), str):
        out = dict(node)
        out["pattern"] = _compilable(node["pattern"])
        if out["pattern"] is None:
            del out["pattern"]
    if node.get("x-kubernetes-preserve-unknown-fields") is True:
        if node.get("additionalProperties") is False:
            out = out or dict(node)
            del out["additionalProperties"]
    elif "properties" in node and "additionalProperties" not in node:
        out = out or dict(node)
        out["additionalProperties"] = False
    typ = node.get("type")
    if isinstance(typ, str) and not root:
        out = out or dict(node)
        out["type"] = [typ, "null"]
    elif isinstance(typ, list) and "null" not in typ and not root:
        out = out or dict(node)
        out["type"] = [*typ, "null"]
    if "enum" in node and not root and None not in node["enum"]:
        out = out or dict(node)
        out["enum"] = [*node["enum"], None]
    if root and isinstance(node.get("properties"), dict) and "metadata" in node["properties"]:
        out = out or dict(node)
        out["properties"] = {**node["properties"], "metadata": {"$ref": OBJECTMETA_REF}}
    return node if out is None else out


def _compilable(pattern: str) -> str | None:
    for candidate in (pattern, go_regex_to_python(pattern)):
        try:
            re.compile(candidate)
            return candidate
        except re.error:
            continue
    if pattern not in UNCHECKED_PATTERNS:
        UNCHECKED_PATTERNS.append(pattern)
    return None
