"""Compiled validators: one per (apiVersion, kind, Kubernetes minor), a fast yes/no closure in front
of jsonschema, which still writes every message."""

from __future__ import annotations

import json
from functools import cache

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Callable, Iterable, Mapping

    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

    Check = Callable[[Any], bool]  # a compiled schema node: is the value valid?
    Prepare = Callable[..., dict[str, Any]]  # schemas.prepare_crd_node

from helm_nemo.schema_check import format_error, pattern_regex, whole_string_jsonschema
from helm_nemo.validate.documents import Collector, short
from helm_nemo.validate.schema_cache import load_defs, load_json
from helm_nemo.validate.schemas import (
    core_dir,
    core_file,
    crd_file,
    crd_schemas_dir,
    prepare_crd_node,
    prepare_crd_schema,
    registry,
)

# fast path: the schema compiled to closures that only answer "valid?". jsonschema walks a JobSet in
# ~1 ms; the closures in a fraction of that. Only when a document is invalid does jsonschema run, so
# every message and path still comes from jsonschema. A schema with a keyword not handled here is
# validated by jsonschema alone (tests/test_manifest_validation.py checks both agree).

_IGNORED = {
    "description",
    "default",
    "$schema",
    "$id",
    "title",
    "examples",
    "nullable",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
}


class _Unsupported(Exception):
    pass


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_TYPE_TESTS = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "number": _is_number,
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}


_BOUNDS = (
    ("minimum", lambda v, n: v >= n),
    ("maximum", lambda v, n: v <= n),
    ("exclusiveMinimum", lambda v, n: v > n),
    ("exclusiveMaximum", lambda v, n: v < n),
)


def _always(v: Any) -> bool:
    return True


def _never(v: Any) -> bool:
    return False


class _FastCompiler:
    """Compiles a schema to a yes/no closure. Lazily (the default): a node is compiled when a value first
    reaches it, so compiling follows the documents validated, not the size of the schema (a JobSet's
    schema holds every field of a PodSpec; a chart's JobSet uses a few dozen). A child's slot (a
    property, `items`, a `$ref` target ...) first holds a stub that compiles the child, puts the result in
    its place and calls it; a keyword the compiler lacks raises _Unsupported when its node is reached.
    `prepare`: applied to each node of `root` (not to the shared $defs) before it is compiled (a CRD's
    in-memory adjustments, schemas.prepare_crd_node). `lazy=False` compiles everything at once (tests)."""

    def __init__(
        self, root: dict[str, Any], defs: Mapping[str, Any], prepare: Prepare | None = None, lazy: bool = True
    ):
        self.root = root
        self.defs = defs  # $defs of kubernetes-validate's _definitions.json
        self.prepare = prepare
        self.lazy = lazy
        self.cache: dict[str, Check] = {}

    def _target(self, ref: str, in_defs: bool) -> tuple[str, Any, bool]:
        """`#/$defs/X` is relative to the resource being compiled (the kind's file or _definitions.json)."""
        if ref.startswith("#/$defs/"):
            name = ref[len("#/$defs/") :]
        elif "_definitions.json#/$defs/" in ref:
            name, in_defs = ref.split("#/$defs/", 1)[1], True
        else:
            raise _Unsupported(ref)
        base = self.defs if in_defs else (self.root.get("$defs") or {})
        if name not in base:
            raise _Unsupported(ref)
        return ("defs:" if in_defs else "local:") + name, base[name], in_defs

    def ref(self, ref: str, in_defs: bool, holder: Any = None, index: Any = None) -> Check:
        """The check of a $ref's target; lazily a stub that compiles the target on first use (once: every
        $ref to it then shares it) and, when given, puts it in holder[index] in its own place."""
        key, target, in_defs = self._target(ref, in_defs)
        compiled = self.cache.get(key)
        if compiled is not None:
            return compiled
        if not self.lazy:
            cell: list[Any] = []
            self.cache[key] = lambda v: cell[0](v)  # recursion: filled in below
            compiled = self.compile(target, in_defs)
            cell.append(compiled)
            self.cache[key] = compiled
            return compiled

        def first(v: Any) -> bool:
            fn = self.cache.get(key)
            if fn is None:
                fn = self.compile(target, in_defs)
                self.cache[key] = fn
            if holder is not None:
                holder[index] = fn
            return fn(v)

        first.ref_key = key  # type: ignore[attr-defined]  # see _later: its holder then takes the target itself
        return first

    def _later(self, holder: Any, index: Any, schema: Any, in_defs: bool) -> None:
        """holder[index] = the check of `schema`, compiled now (eager) or on its first call (lazy)."""
        if not self.lazy or schema is True or schema is False:
            holder[index] = self.compile(schema, in_defs)
            return

        def first(v: Any) -> bool:
            fn = self.compile(schema, in_defs)
            holder[index] = fn
            result = fn(v)
            key = getattr(fn, "ref_key", None)
            if key is not None and self.cache.get(key) is not None:
                holder[index] = self.cache[key]  # a lone $ref: the target itself, without the stub
            return result

        holder[index] = first

    def compile(self, schema: Any, in_defs: bool = False, root: bool = False) -> Check:
        if schema is True:
            return _always
        if schema is False:
            return _never
        if not isinstance(schema, dict):
            raise _Unsupported(repr(schema))
        if self.prepare is not None and not in_defs:
            schema = self.prepare(schema, root=root)
        for key in schema:
            if key not in _FAST_KEYWORDS and key not in _IGNORED and not key.startswith("x-"):
                raise _Unsupported(key)
        tests: list[Any] = []  # Checks (lambdas with default arguments: mypy cannot type them as Check)
        if "$ref" in schema:
            tests.append(self.ref(schema["$ref"], in_defs, tests, len(tests)))
        if "type" in schema:
            types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            checks = tuple(_TYPE_TESTS[t] for t in types)
            tests.append(checks[0] if len(checks) == 1 else (lambda v, c=checks: any(t(v) for t in c)))
        if "enum" in schema:
            options = list(schema["enum"])
            plain = all(isinstance(o, str) for o in options)
            allowed = frozenset(options) if plain else None
            tests.append(
                (lambda v, a=allowed: isinstance(v, str) and v in a)
                if plain
                else (lambda v, o=options: any(_json_equal(v, x) for x in o))
            )
        if "const" in schema:
            tests.append(lambda v, c=schema["const"]: _json_equal(v, c))
        if "format" in schema:
            tests.append(lambda v, f=schema["format"]: format_error(v, f) is None)
        if "pattern" in schema:
            regex = pattern_regex(schema["pattern"])
            tests.append(lambda v, r=regex: not isinstance(v, str) or r.search(v) is not None)
        for key, op in (("maxLength", "le"), ("minLength", "ge")):
            if key in schema:
                n = schema[key]
                tests.append(
                    (lambda v, n=n: not isinstance(v, str) or len(v) <= n)
                    if op == "le"
                    else (lambda v, n=n: not isinstance(v, str) or len(v) >= n)
                )
        for key, op in (("maxItems", "le"), ("minItems", "ge")):
            if key in schema:
                n = schema[key]
                tests.append(
                    (lambda v, n=n: not isinstance(v, list) or len(v) <= n)
                    if op == "le"
                    else (lambda v, n=n: not isinstance(v, list) or len(v) >= n)
                )
        for key, op in (("maxProperties", "le"), ("minProperties", "ge")):
            if key in schema:
                n = schema[key]
                tests.append(
                    (lambda v, n=n: not isinstance(v, dict) or len(v) <= n)
                    if op == "le"
                    else (lambda v, n=n: not isinstance(v, dict) or len(v) >= n)
                )
        for key, cmp in _BOUNDS:
            if key in schema:
                tests.append(lambda v, n=schema[key], c=cmp: not _is_number(v) or c(v, n))
        if "required" in schema:
            required = tuple(schema["required"])
            tests.append(lambda v, r=required: not isinstance(v, dict) or all(k in v for k in r))
        if any(k in schema for k in ("properties", "additionalProperties", "patternProperties")):
            tests.append(self._object(schema, in_defs))
        if "items" in schema:
            item: list[Any] = [None]
            self._later(item, 0, schema["items"], in_defs)
            tests.append(lambda v, i=item: not isinstance(v, list) or all(i[0](x) for x in v))
        for key in ("allOf", "anyOf", "oneOf"):
            if key in schema:
                subs: list[Any] = [None] * len(schema[key])
                for index, sub in enumerate(schema[key]):
                    self._later(subs, index, sub, in_defs)
                if key == "allOf":
                    tests.append(lambda v, s=subs: all(t(v) for t in s))
                elif key == "anyOf":
                    tests.append(lambda v, s=subs: any(t(v) for t in s))
                else:
                    tests.append(lambda v, s=subs: sum(1 for t in s if t(v)) == 1)
        if "not" in schema:
            negated: list[Any] = [None]
            self._later(negated, 0, schema["not"], in_defs)
            tests.append(lambda v, s=negated: not s[0](v))
        if not tests:
            return _always
        if len(tests) == 1:
            only: Check = tests[0]
            return only
        return lambda v: all(t(v) for t in tests)  # a list: a $ref's stub replaces itself in it

    def _object(self, schema: dict[str, Any], in_defs: bool) -> Check:
        props: dict[str, Any] = {}
        for name, sub in (schema.get("properties") or {}).items():
            self._later(props, name, sub, in_defs)
        patterns = []
        for pattern, sub in (schema.get("patternProperties") or {}).items():
            entry: list[Any] = [pattern_regex(pattern), None]  # [regex, its test (filled in later)]
            self._later(entry, 1, sub, in_defs)
            patterns.append(entry)
        extra = schema.get("additionalProperties", True)
        extra_test: list[Any] = [None]
        if extra is False:
            extra_test[0] = False
        elif extra is not True:
            self._later(extra_test, 0, extra, in_defs)

        def check(v: Any) -> bool:
            if not isinstance(v, dict):
                return True
            for key, value in v.items():
                test = props.get(key)
                if test is not None:
                    if not test(value):
                        return False
                    if not patterns:
                        continue
                matched = False
                for entry in patterns:
                    if entry[0].search(key):
                        matched = True
                        if not entry[1](value):
                            return False
                if test is None and not matched:
                    other = extra_test[0]
                    if other is False or (other is not None and not other(value)):
                        return False
            return True

        return check


_FAST_KEYWORDS = {
    "$ref",
    "$defs",
    "definitions",
    "type",
    "enum",
    "const",
    "format",
    "pattern",
    "maxLength",
    "minLength",
    "maxItems",
    "minItems",
    "maxProperties",
    "minProperties",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "required",
    "properties",
    "additionalProperties",
    "patternProperties",
    "items",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
}


@cache
def _definitions(kube: tuple[int, int]) -> Mapping[str, Any]:
    """The shared $defs of the core schemas (the document registry() serves as DEFS_ID), read directly."""
    return load_defs(core_dir(kube) / "_definitions.json")


class _Checker:
    """A jsonschema validator with a compiled yes/no fast path in front of it. `prepare`: the adjustments
    of a CRD's schema (schemas.prepare_crd_node), applied node by node as the fast path reaches them, and
    to the whole schema only when jsonschema is needed; `schema_id`: the $id jsonschema sees."""

    def __init__(
        self,
        schema: dict[str, Any],
        kube: tuple[int, int],
        prepare: Prepare | None = None,
        schema_id: str | None = None,
        lazy: bool = True,
    ):
        self.raw, self.kube, self._prepare, self._schema_id = schema, kube, prepare, schema_id
        self._schema = None if prepare is not None or schema_id is not None else schema
        self._slow: Validator | None = None
        self.fast: Check | None
        try:
            self.fast = _FastCompiler(schema, _definitions(kube), prepare, lazy).compile(schema, root=True)
        except _Unsupported:
            self.fast = None

    @property
    def schema(self) -> dict[str, Any]:
        """The schema as jsonschema validates with it (a CRD's: prepared whole, with its $id)."""
        if self._schema is None:
            schema = prepare_crd_schema(self.raw) if self._prepare is not None else dict(self.raw)
            if self._schema_id is not None:
                schema["$id"] = self._schema_id
            self._schema = schema
        return self._schema

    @property
    def slow(self) -> Validator:
        """jsonschema, built only when a document fails the fast check (or the check cannot be compiled)."""
        if self._slow is None:
            from jsonschema import Draft202012Validator

            self._slow = whole_string_jsonschema(Draft202012Validator)(self.schema, registry=registry(self.kube))
        return self._slow

    def is_valid_fast(self, doc: Any) -> bool | None:
        """The fast path's verdict, or None when it cannot give one (a keyword it lacks, met in this
        document: from then on jsonschema alone validates with this checker)."""
        if self.fast is None:
            return None
        try:
            return self.fast(doc)
        except _Unsupported:
            self.fast = None
            return None

    def iter_errors(self, doc: Any) -> Iterable[ValidationError]:
        if self.is_valid_fast(doc):
            return iter(())
        return self.slow.iter_errors(doc)


@cache
def validator_for(api_version: str, kind: str, kube: tuple[int, int]) -> _Checker | None:
    """The compiled validator for one kind, or None when there is no schema for it."""
    crd = crd_file(api_version, kind)
    if crd is not None and crd.is_file():
        return _Checker(
            load_json(crd), kube, prepare=prepare_crd_node, schema_id=f"https://helm-nemo.dev/crd/{api_version}/{kind}"
        )
    core = core_file(api_version, kind, kube)
    if not core.is_file():
        return None
    schema = json.loads(core.read_text(encoding="utf-8"))
    if schema.get("properties", {}).get("kind", {}).get("enum") not in (None, [kind]):
        return None  # the file name matched case-insensitively but the kind is spelt differently
    return _Checker(schema, kube)


def known_kinds(kube: tuple[int, int]) -> list[str]:
    """Vendored CRD kinds as apiVersion/kind (for messages)."""
    out = []
    for path in sorted(crd_schemas_dir().glob("*/*.json")):
        kind, _, version = path.stem.rpartition("_")
        out.append(f"{path.parent.name}/{version} {kind}")
    return out


def schema_problems(out: Collector, validator: _Checker, doc: Mapping[str, Any]) -> None:
    for error in validator.iter_errors(doc):
        where = tuple(error.absolute_path)
        if (
            error.validator == "additionalProperties"
            and isinstance(error.instance, dict)
            and isinstance(error.schema, dict)
        ):
            allowed = set(error.schema.get("properties") or {})
            patterns = [pattern_regex(p) for p in (error.schema.get("patternProperties") or {})]
            extra = [k for k in error.instance if k not in allowed and not any(p.search(k) for p in patterns)]
            for key in extra or [None]:
                if key is None:
                    out.add(where, error.message, "schema")
                    continue
                hint = did_you_mean(key, allowed)
                out.add(where + (key,), f"unknown field {key!r}{hint}", "schema")
            continue
        message = error.message
        if error.context and error.validator in ("oneOf", "anyOf"):
            from jsonschema.exceptions import best_match

            best = best_match(error.context)
            message = f"{short(error.instance)} is invalid: {best.message}"
        out.add(where, message, "schema")


def did_you_mean(key: str, allowed: Iterable[str]) -> str:
    import difflib

    close = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""
