"""Check values against a chart's values.schema.json and say where, what and how to fix, for every error.

Helm's own schema errors name neither the file nor the line and stop at a summary; here each error
becomes a Problem at the offending node of the user's file (the parent mapping for a missing key, the
key itself for an unexpected one, with "did you mean …?"), with a human `expected` and the schema's
description as a hint.

Engine: draft-07. helm_nemo.schema_check (no import cost, all errors, checked against jsonschema by
tests/test_schema_check.py) runs first; a schema using a keyword it does not know falls back to
jsonschema.Draft7Validator, imported only then (~80 ms).
"""

from __future__ import annotations

import json
import re
from collections import namedtuple

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Callable

from helm_nemo.secrets import mask
from helm_nemo.user_errors import Problem, json_path, raise_if_problems

__all__ = ["validate", "extra_problems", "raise_if_problems", "schema_errors"]

if TYPE_CHECKING:
    Positions = Callable[[tuple[Any, ...]], "tuple[int | None, int | None]"]
MAX_MESSAGE = 200
_REQUIRED = re.compile(r"^'(?P<name>.*)' is a required property$", re.S)


class SchemaError(namedtuple("SchemaError", "path validator validator_value message schema instance")):
    """The engine-neutral part of a validation error: path (tuple), validator (the keyword), validator_value,
    message, schema (the node holding the keyword), instance."""

    __slots__ = ()


def schema_errors(data: Any, schema: dict[str, Any]) -> list[SchemaError]:
    """Every draft-07 error of `data` (fast validator first, jsonschema for keywords it lacks)."""
    from helm_nemo.schema_check import Validator

    try:
        return [
            SchemaError(tuple(e.path), e.validator, e.validator_value, e.message, e.schema, e.instance)
            for e in Validator(schema).iter_errors(data)
        ]
    except (ValueError, KeyError):  # unsupported keyword or $ref: let jsonschema decide
        pass
    import jsonschema

    from helm_nemo.schema_check import whole_string_jsonschema

    validator = whole_string_jsonschema(jsonschema.Draft7Validator)(schema)
    return [
        SchemaError(tuple(e.absolute_path), e.validator, e.validator_value, e.message, e.schema, e.instance)
        for e in validator.iter_errors(data)
    ]


def _resolve(schema: dict[str, Any], node: Any) -> Any:
    """Follow local `#/definitions/…` refs so descriptions and properties behind them are seen."""
    seen = 0
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/definitions/"):
        target = (schema.get("definitions") or {}).get(node["$ref"].split("/")[-1])
        if not isinstance(target, dict) or seen > 20:
            break
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        seen += 1
    return node if isinstance(node, dict) else {}


def _expected(validator: str, value: Any) -> str | None:
    """What the schema wants, in words."""
    if validator == "type":
        return " or ".join(value) if isinstance(value, list) else str(value)
    if validator == "enum":
        return "one of " + ", ".join(json.dumps(v) for v in value)
    if validator == "const":
        return json.dumps(value)
    if validator == "pattern":
        return f"a string matching {value}"
    if validator in (
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
    ):
        return f"{validator} {value}"
    if validator == "uniqueItems":
        return "no repeated items"
    if validator in ("anyOf", "oneOf") and isinstance(value, list):
        parts = []
        for option in value:
            if isinstance(option, dict):
                parts.append(", ".join(f"{k} {v}" for k, v in option.items() if k not in ("description", "title")))
        return (
            " or ".join(f"({p})" for p in parts)
            if validator == "anyOf"
            else "exactly one of " + " or ".join(f"({p})" for p in parts)
        )
    return None


def _expected_of(schema: dict[str, Any]) -> str | None:
    """A property schema's shape in words (for a key that is missing)."""
    for keyword in ("enum", "const", "type", "pattern"):
        if keyword in schema:
            return _expected(keyword, schema[keyword])
    return None


def _short(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def _allowed_keys(node: dict[str, Any], instance: Any) -> tuple[list[str], list[str]]:
    """(declared property names, keys of `instance` that are neither declared nor match patternProperties)."""
    allowed = list((node.get("properties") or {}).keys())
    from helm_nemo.schema_check import pattern_regex

    patterns = [pattern_regex(p) for p in (node.get("patternProperties") or {})]
    extra = (
        [k for k in instance if k not in allowed and not any(p.search(k) for p in patterns)]
        if isinstance(instance, dict)
        else []
    )
    return allowed, extra


def validate(
    loaded_or_data: Any,
    schema: dict[str, Any],
    *,
    filename: str | None = None,
    positions: Positions | None = None,
    prefix: tuple[Any, ...] = (),
    files: Callable[[tuple[Any, ...]], str] | None = None,
) -> list[Problem]:
    """Every schema error as a Problem pointing into the user's file, sorted by line.

    `loaded_or_data` is a values_file.LoadedValues (filename and positions then default to its own) or plain
    data; `prefix` says where the data sits in the file (a release inside a recipe file): it moves the
    positions, while JSON paths stay those of the chart's values. `files` names the file of a path when
    several were merged (`-f a -f b`). Messages are masked (helm_nemo.secrets) before they are shortened,
    so a value from the environment never shows, not even cut.
    """
    data = loaded_or_data
    if hasattr(loaded_or_data, "data") and hasattr(loaded_or_data, "position"):
        data = loaded_or_data.data
        filename = filename if filename is not None else str(loaded_or_data.path)
        positions = positions or loaded_or_data.position
    where_is: Positions = positions or (lambda _where: (None, None))

    def problem(at: tuple[Any, ...], message: str, expected: str | None = None, hint: str | None = None) -> Problem:
        line, column = where_is(prefix + at)
        return Problem(
            files(prefix + at) if files else filename,
            line,
            column,
            json_path(at),
            _short(mask(message)),
            expected,
            hint,
        )

    problems: list[Problem] = []
    for error in schema_errors(data, schema):
        where = error.path
        node = _resolve(schema, error.schema)
        if error.validator == "additionalProperties":
            allowed, extra = _allowed_keys(node, error.instance)
            shown = ", ".join(sorted(allowed)[:12]) + (", …" if len(allowed) > 12 else "")
            for key in extra:
                import difflib

                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"did you mean {close[0]!r}?" if close else (f"allowed keys here: {shown}" if allowed else None)
                problems.append(problem(where + (key,), f"unknown key {key!r}", hint=hint))
            if not extra:
                problems.append(problem(where, error.message))
            continue
        if error.validator == "required":
            match = _REQUIRED.match(error.message)
            missing = match.group("name") if match else str(error.message)
            wanted = _resolve(schema, (node.get("properties") or {}).get(missing, {}))
            hint = f"add `{missing}:` under {json_path(where)}"
            if wanted.get("description"):
                hint += f" ({wanted['description']})"
            problems.append(problem(where, f"required key {missing!r} is missing", _expected_of(wanted), hint))
            continue
        message = error.message
        if error.validator in ("anyOf", "oneOf"):
            message = f"{json.dumps(error.instance)} is not valid here"
        problems.append(
            problem(where, message, _expected(error.validator, error.validator_value), node.get("description"))
        )
    return sorted(problems, key=lambda p: (p.line or 0, p.column or 0, p.json_path))


LABEL_MAPS = {"labels": "label", "nodeSelector": "nodeSelector"}  # values keys that become labels / a nodeSelector


def extra_problems(
    data: Any,
    defaults: Any,
    *,
    filename: str | None = None,
    positions: Positions | None = None,
    prefix: tuple[Any, ...] = (),
    files: Callable[[tuple[Any, ...]], str] | None = None,
) -> list[Problem]:
    """What the chart schemas cannot say, found in the user's values with the line:

    * `key: null` where the chart's defaults hold a mapping: helm drops the key with its defaults and the
      templates, which read keys under it, fail (`volumes: null`, `network: null`); the schemas accept null
      there for gpu-recipes files that leave such a key empty;
    * `labels:` / `nodeSelector:` maps: keys and values as Kubernetes checks labels (a value of at most 63
      letters, digits, `-`, `_`, `.`); `annotations:` maps: key syntax and 256 KiB in all.
    """
    from helm_nemo.validate.checks.names import MAX_ANNOTATIONS_BYTES, label_key_problems, label_value_problem

    where_is: Positions = positions or (lambda _where: (None, None))
    problems: list[Problem] = []

    def add(at: tuple[Any, ...], message: str, expected: str | None = None, hint: str | None = None) -> None:
        line, column = where_is(prefix + at)
        problems.append(
            Problem(
                files(prefix + at) if files else filename,
                line,
                column,
                json_path(at),
                _short(mask(message)),
                expected,
                hint,
            )
        )

    def labels(node: dict[str, Any], at: tuple[Any, ...], what: str) -> None:
        for key, value in node.items():
            for why in label_key_problems(key):
                add(at + (key,), f"{what} key {why}")
            if isinstance(value, str) and label_value_problem(value):
                add(at + (key,), f"{what} value {label_value_problem(value)}")

    def visit(node: Any, default: Any, at: tuple[Any, ...]) -> None:
        if isinstance(node, list):
            for index, item in enumerate(node):
                visit(item, None, at + (index,))
            return
        if not isinstance(node, dict):
            return
        default = default if isinstance(default, dict) else {}
        for key, value in node.items():
            if value is None and isinstance(default.get(key), dict):
                add(
                    at + (key,),
                    "null would remove the chart's default mapping here, and the templates read keys under it",
                    "a mapping (object): {} for none",
                    "leave the key out to keep the defaults",
                )
            elif key in LABEL_MAPS and isinstance(value, dict):
                labels(value, at + (key,), LABEL_MAPS[key])
            elif key == "annotations" and isinstance(value, dict):
                for name in value:
                    for why in label_key_problems(name):
                        add(at + (key, name), f"annotation key {why}")
                size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in value.items())
                if size > MAX_ANNOTATIONS_BYTES:
                    add(
                        at + (key,),
                        f"annotations are {size} bytes together, more than the "
                        f"{MAX_ANNOTATIONS_BYTES // 1024} KiB the API server accepts",
                    )
            else:
                visit(value, default.get(key), at + (key,))

    visit(data, defaults, ())
    return problems
