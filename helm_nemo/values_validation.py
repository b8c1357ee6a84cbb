"""Check values against a chart's values.schema.json and say where, what and how to fix, for every error."""

from __future__ import annotations

import difflib
import json
from typing import Any, Callable

from .user_errors import Problem

Positions = Callable[[tuple], "tuple[int | None, int | None]"]


def _json_path(parts) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _resolve(schema: dict[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/definitions/"):
        node = {**schema["definitions"][node["$ref"].split("/")[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _expected(error) -> str | None:
    validator, value = error.validator, error.validator_value
    if validator == "type":
        return " or ".join(value) if isinstance(value, list) else str(value)
    if validator == "enum":
        return "one of " + ", ".join(json.dumps(v) for v in value)
    if validator == "const":
        return json.dumps(value)
    if validator == "pattern":
        return f"a string matching {value}"
    if validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength",
                     "maxLength", "minItems", "maxItems"):
        return f"{validator} {value}"
    if validator == "anyOf":
        parts = []
        for option in value:
            parts.append(", ".join(f"{k} {v}" for k, v in option.items() if k not in ("description",)))
        return " or ".join(f"({p})" for p in parts)
    return None


def validate(data: Any, schema: dict[str, Any], *, filename: str | None, positions: Positions,
             prefix: tuple = ()) -> list[Problem]:
    """Every schema error as a Problem pointing into the user's file (prefix: where `data` sits in it)."""
    from .schema_check import Validator

    problems = []
    for error in Validator(schema).iter_errors(data):
        where = tuple(error.path)
        hint = None
        message = error.message
        if error.validator == "additionalProperties":
            node = _resolve(schema, error.schema)
            allowed = sorted((node.get("properties") or {}).keys())
            extra = [k for k in (error.instance or {}) if k not in allowed] if isinstance(error.instance, dict) else []
            for key in extra or [None]:
                at = where + ((key,) if key else ())
                close = difflib.get_close_matches(key or "", allowed, n=1)
                shown = ", ".join(allowed[:12]) + (", …" if len(allowed) > 12 else "")
                hint = f"did you mean {close[0]!r}?" if close else f"allowed keys here: {shown}"
                line, col = positions(prefix + at)
                problems.append(Problem(filename, line, col, _json_path(at), f"unknown key {key!r}", None, hint))
            continue
        if error.validator == "required":
            missing = message.split("'")[1] if "'" in message else message
            hint = f"add {_json_path(where + (missing,))}"
        description = _resolve(schema, error.schema).get("description") if isinstance(error.schema, dict) else None
        if not hint and description:
            hint = description
        if error.validator == "anyOf":
            message = f"{json.dumps(error.instance)} is not valid here"
        line, col = positions(prefix + where)
        problems.append(Problem(filename, line, col, _json_path(where), message, _expected(error), hint))
    return sorted(problems, key=lambda p: (p.line or 0, p.column or 0, p.json_path))
