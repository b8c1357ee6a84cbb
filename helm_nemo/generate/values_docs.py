"""The values table of a chart README, derived from its schema so the docs cannot drift."""

from __future__ import annotations

import json
from typing import Any

from helm_nemo.values import value_at


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/definitions/"):
        target = schema["definitions"][ref.split("/")[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(schema, merged) if "$ref" in target else merged
    return node


def _type_of(node: dict[str, Any]) -> str:
    if "const" in node:
        return f"const {json.dumps(node['const'])}"
    if "enum" in node:
        return " \\| ".join(json.dumps(v) for v in node["enum"])
    kind = node.get("type")
    if isinstance(kind, list):
        return " \\| ".join(kind)
    if kind:
        return str(kind)
    if node.get("x-helm-nemo-legacy"):
        return "legacy"
    if "anyOf" in node:
        return (
            " \\| ".join(_type_of(n) for n in node["anyOf"] if isinstance(n, dict) and ("type" in n or "$ref" not in n))
            or "any"
        )
    return "any"


def _default_text(value: Any) -> str:
    if value is None:
        return ""
    text = json.dumps(value, ensure_ascii=False)
    if "\n" in text or len(text) > 60:
        text = text[:57] + "..." if len(text) > 60 else text
    return "`" + text.replace("|", "\\|") + "`"


def values_table(schema: dict[str, Any], defaults: dict[str, Any]) -> list[dict[str, str]]:
    """One row per documented key: path, type, default, description."""
    rows: list[dict[str, str]] = []

    def visit(node: dict[str, Any], path: list[str]) -> None:
        node = _resolve(schema, node)
        for key, child in (node.get("properties") or {}).items():
            child = _resolve(schema, child)
            sub = path + [key]
            nested = child.get("properties")
            if nested and child.get("type") in ("object", ["object", "null"]):
                if child.get("description"):
                    rows.append(_row(sub, child, defaults, nested_object=True))
                visit(child, sub)
            else:
                rows.append(_row(sub, child, defaults))

    visit(schema, [])
    return rows


def _row(path: list[str], node: dict[str, Any], defaults: Any, nested_object: bool = False) -> dict[str, str]:
    description = " ".join((node.get("description") or "").split()).replace("|", "\\|")
    return {
        "key": ".".join(path),
        "type": "object" if nested_object else _type_of(node),
        "default": "" if nested_object else _default_text(value_at(defaults, path)),
        "description": description,
    }
