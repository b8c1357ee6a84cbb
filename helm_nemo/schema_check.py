"""A small draft-07 validator for the keywords our chart schemas use, reporting every error.

Why not jsonschema on the hot path: importing it (referencing, rpds, attrs) costs ~80 ms per CLI run,
more than helm's own render. This module covers the subset of draft-07 the generated schemas use
(checked by tests against jsonschema on the same inputs) and fails loudly on any other keyword.
"""

from __future__ import annotations

import json
import re
from collections import namedtuple
from functools import lru_cache, cache

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Iterator

    from jsonschema import ValidationError

ANNOTATIONS = {
    "$schema",
    "$id",
    "title",
    "description",
    "default",
    "examples",
    "definitions",
    "deprecated",
    "x-helm-nemo-legacy",
    "x-helm-nemo-open",
    "x-helm-nemo-checks",
    "$comment",
}
KEYWORDS = {
    "$ref",
    "type",
    "enum",
    "const",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "required",
    "properties",
    "additionalProperties",
    "propertyNames",
    "items",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "format",
}
# `format` as Kubernetes' OpenAPI uses it for numbers (the only formats checked; others are annotations,
# as draft-07 leaves them): the range a Go int32 / int64 field holds.
INTEGER_FORMATS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def format_error(value: Any, fmt: Any) -> str | None:
    """Why a number does not fit `format` (int32/int64), or None."""
    bounds = INTEGER_FORMATS.get(fmt) if isinstance(fmt, str) else None
    if bounds is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return f"{value} is not a whole number ({fmt})"
    if not bounds[0] <= value <= bounds[1]:
        return f"{_show(value)} does not fit {fmt} ({bounds[0]} to {bounds[1]})"
    return None


class SchemaError(namedtuple("SchemaError", "path validator validator_value message schema instance")):
    """One failed keyword of a schema check: `path` (a tuple) in the instance, `validator` (the failing keyword)
    with its `validator_value`, the `message` jsonschema would write, `schema` (the node holding the
    keyword) and the `instance` checked. (A named tuple, like all the small records made on every run:
    a dataclass costs ~0.5 ms to create at import.)"""

    __slots__ = ()


def whole_string_pattern(pattern: str) -> str:
    """A JSON Schema (ECMA-262) or Go (RE2) pattern for Python's `re`, with `$` meaning the end of the string.

    Python's `$` also matches just before a final newline, so `^[a-z]+$` would accept "abc\\n" (and the
    newline would reach helm); in ECMA-262 and RE2 without the multi-line flag `$` is the end of the input.
    Every `$` outside a character class and not escaped becomes `\\Z`; a pattern with an inline `m` flag
    (multi-line on purpose) is left as it is.
    """
    if "$" not in pattern or re.search(r"\(\?[a-zA-Z]*m[a-zA-Z]*[):]", pattern):
        return pattern
    out: list[str] = []
    index, in_class = 0, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            out.append(char)
            index += 1
            if pattern[index : index + 1] == "^":
                out.append("^")
                index += 1
            if pattern[index : index + 1] == "]":  # `[]…]`: a leading `]` is a literal
                out.append("]")
                index += 1
            continue
        elif char == "$":
            char = "\\Z"
        out.append(char)
        index += 1
    return "".join(out)


@lru_cache(maxsize=512)
def pattern_regex(pattern: str) -> re.Pattern[str]:
    """The compiled `whole_string_pattern` (cached): what `pattern` and `patternProperties` search with."""
    return re.compile(whole_string_pattern(pattern))


_regex = pattern_regex


@cache
def whole_string_jsonschema(cls: Any) -> Any:
    """A jsonschema validator class like `cls` whose `pattern` and `patternProperties` use `pattern_regex`
    (jsonschema searches with Python's own `$`)."""
    from jsonschema import ValidationError, validators

    def pattern(validator: Any, value: str, instance: Any, _schema: Any) -> Iterator[ValidationError]:
        if validator.is_type(instance, "string") and not pattern_regex(value).search(instance):
            yield ValidationError(f"{instance!r} does not match {value!r}")

    def pattern_properties(
        validator: Any, value: dict[str, Any], instance: Any, _schema: Any
    ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        for regex, subschema in value.items():
            for key, item in instance.items():
                if pattern_regex(regex).search(key):
                    yield from validator.descend(item, subschema, path=key, schema_path=regex)

    def integer_format(validator: Any, value: Any, instance: Any, _schema: Any) -> Iterator[ValidationError]:
        message = format_error(instance, value)
        if message:
            yield ValidationError(message)

    return validators.extend(
        cls,
        {
            "pattern": pattern,
            "patternProperties": pattern_properties,  # type: ignore[no-untyped-call]
            "format": integer_format,
        },
    )


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    raise ValueError(f"unsupported type {kind!r}")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and bool(a == b)
    return bool(a == b)


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)


class Validator:
    def __init__(self, schema: dict[str, Any]):
        self.schema = schema
        self.definitions = schema.get("definitions", {})

    def iter_errors(self, instance: Any) -> Iterator[SchemaError]:
        yield from self._check(self.schema, instance, ())

    def is_valid(self, instance: Any) -> bool:
        return next(self.iter_errors(instance), None) is None

    def _check(self, schema: Any, value: Any, path: tuple[Any, ...]) -> Iterator[SchemaError]:
        if schema is True or schema == {}:
            return
        if schema is False:
            yield SchemaError(path, "false", False, "False schema does not allow " + _show(value), {}, value)
            return
        unknown = set(schema) - KEYWORDS - ANNOTATIONS
        if unknown:
            raise ValueError(f"schema keyword(s) {sorted(unknown)} not supported by helm_nemo.schema_check")
        if "$ref" in schema:
            ref = schema["$ref"]
            if not ref.startswith("#/definitions/"):
                raise ValueError(f"unsupported $ref {ref!r}")
            yield from self._check(self.definitions[ref.split("/")[-1]], value, path)

        def err(keyword: str, message: str) -> SchemaError:
            return SchemaError(path, keyword, schema[keyword], message, schema, value)

        kind = schema.get("type")
        if kind is not None:
            kinds = kind if isinstance(kind, list) else [kind]
            if not any(_type_ok(value, k) for k in kinds):
                yield err("type", f"{_show(value)} is not of type {', '.join(repr(k) for k in kinds)}")
                return  # jsonschema also reports other keywords, but they rarely add information
        if "enum" in schema and not any(_equal(value, option) for option in schema["enum"]):
            yield err("enum", f"{_show(value)} is not one of {_show(schema['enum'])}")
        if "const" in schema and not _equal(value, schema["const"]):
            yield err("const", f"{_show(schema['const'])} was expected")
        if isinstance(value, str):
            if "pattern" in schema and not _regex(schema["pattern"]).search(value):
                yield err("pattern", f"{_show(value)} does not match {schema['pattern']!r}")
            if "minLength" in schema and len(value) < schema["minLength"]:
                yield err("minLength", f"{_show(value)} is too short")
            if "maxLength" in schema and len(value) > schema["maxLength"]:
                yield err("maxLength", f"{_show(value)} is too long")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in schema and value < schema["minimum"]:
                yield err("minimum", f"{value} is less than the minimum of {schema['minimum']}")
            if "maximum" in schema and value > schema["maximum"]:
                yield err("maximum", f"{value} is greater than the maximum of {schema['maximum']}")
            if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
                yield err("exclusiveMinimum", f"{value} is less than or equal to {schema['exclusiveMinimum']}")
            if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
                yield err("exclusiveMaximum", f"{value} is greater than or equal to {schema['exclusiveMaximum']}")
            if "format" in schema and (message := format_error(value, schema["format"])):
                yield err("format", message)
            if "multipleOf" in schema:
                quotient = value / schema["multipleOf"]
                if quotient != int(quotient):
                    yield err("multipleOf", f"{value} is not a multiple of {schema['multipleOf']}")
        if isinstance(value, list):
            if "minItems" in schema and len(value) < schema["minItems"]:
                yield err("minItems", f"{_show(value)} should have at least {schema['minItems']} item(s)")
            if "maxItems" in schema and len(value) > schema["maxItems"]:
                yield err("maxItems", f"{_show(value)} has more than {schema['maxItems']} item(s)")
            if schema.get("uniqueItems"):
                seen = [json.dumps(v, sort_keys=True) for v in value]
                if len(seen) != len(set(seen)):
                    yield err("uniqueItems", f"{_show(value)} has non-unique elements")
            if "items" in schema:
                for index, item in enumerate(value):
                    yield from self._check(schema["items"], item, path + (index,))
        if isinstance(value, dict):
            for name in schema.get("required", ()):
                if name not in value:
                    yield err("required", f"{name!r} is a required property")
            properties = schema.get("properties", {})
            for key, item in value.items():
                if key in properties:
                    yield from self._check(properties[key], item, path + (key,))
            if "additionalProperties" in schema:
                extra = [k for k in value if k not in properties]
                extra_schema = schema["additionalProperties"]
                if extra_schema is False and extra:
                    listed = ", ".join(repr(k) for k in extra)
                    were = "was" if len(extra) == 1 else "were"
                    yield err(
                        "additionalProperties", f"Additional properties are not allowed ({listed} {were} unexpected)"
                    )
                elif isinstance(extra_schema, dict):
                    for key in extra:
                        yield from self._check(extra_schema, value[key], path + (key,))
            if "propertyNames" in schema:
                for key in value:
                    for error in self._check(schema["propertyNames"], key, path):
                        yield SchemaError(
                            path + (key,),
                            error.validator,
                            error.validator_value,
                            f"property name {error.message}",
                            error.schema,
                            key,
                        )
        for keyword in ("anyOf", "oneOf"):
            if keyword in schema:
                matches = sum(1 for option in schema[keyword] if next(self._check(option, value, path), None) is None)
                if matches == 0 or (keyword == "oneOf" and matches > 1):
                    yield err(
                        keyword,
                        f"{_show(value)} is not valid under any of the given schemas"
                        if matches == 0
                        else f"{_show(value)} is valid under more than one of the given schemas",
                    )
        for option in schema.get("allOf", ()):
            yield from self._check(option, value, path)
        if "not" in schema and next(self._check(schema["not"], value, path), None) is None:
            yield err("not", f"{_show(value)} should not be valid under {_show(schema['not'])}")
