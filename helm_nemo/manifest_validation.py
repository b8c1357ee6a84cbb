"""Offline validation of rendered manifests: every object against its Kubernetes or CRD schema, plus
the checks a schema cannot express. No cluster needed.

Schemas
  * Core kinds: the strict schema files of the `kubernetes-validate` package (one folder per Kubernetes
    minor; Draft 2020-12 with `$ref`s into `_definitions.json`), used as data only. The Kubernetes
    version is a parameter; the newest shipped minor <= the one asked for is used.
  * CRD kinds: schemas/k8s/<group>/<kind>_<version>.json (see schemas/k8s/NOTICE), adjusted in memory
    when loaded: the root `metadata` gets the core ObjectMeta schema; every object schema with
    `properties` is closed (`additionalProperties: false`, the root too) unless it has
    `x-kubernetes-preserve-unknown-fields` (the API server prunes unknown fields silently, so a typo
    would be lost without a word); `null` is accepted where a value is typed (the API server drops
    nulls for CRDs, as the core schemas accept them); Go (RE2) regex patterns Python's `re` rejects
    are translated.
  * One compiled validator per (apiVersion, kind, Kubernetes minor), cached; every error of every
    document is reported. A kind without a schema is an error, not a warning.

Checks beyond the schemas (ids in CHECKS): DNS names and length limits (incl. the names the JobSet and
Job controllers derive), label syntax, resource quantities, requests vs limits, GPUs per pod vs the
accelerator profile, fabric devices vs fabric env, duplicate env / container / volume names, volume
mounts naming a volume, and the GKE multi-network annotation parsing as JSON.

Public API: validate_manifests(docs, kube_version=...) -> [ManifestProblem]; format_problems(problems).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from . import paths

DEFAULT_KUBE_VERSION = "1.32"
ACCELERATOR_LABEL = "helm-nemo.dev/accelerator"
GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"  # used when a profile names no fabric resource
INTERFACES_ANNOTATION = "networking.gke.io/interfaces"
DEFAULT_INTERFACE_ANNOTATION = "networking.gke.io/default-interface"
DEFS_ID = "https://kubernetes.io/api/_definitions.json"
OBJECTMETA_REF = DEFS_ID + "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

# check id -> what it means (format_problems and the docs use the same words)
CHECKS = {
    "yaml": "the document is not YAML or not a mapping",
    "document": "apiVersion, kind or metadata.name missing",
    "unknown-kind": "no schema for this apiVersion/kind (neither a core kind of this Kubernetes version nor a vendored CRD)",
    "schema": "the object does not match its Kubernetes or CRD schema",
    "dns-name": "a name is not a valid DNS-1123/1035 name or too long",
    "derived-name": "a name the JobSet or Job controller derives (job, pod, hostname) would be invalid or longer than 63",
    "label": "a label or annotation key, or a label value, is malformed",
    "quantity": "a resource quantity does not parse",
    "resources": "requests exceed limits, or an extended resource is fractional or requested unlike its limit",
    "gpu-count": "GPUs per pod differ from the accelerator profile's GPUs per node (multi-node workloads)",
    "accelerator": "the helm-nemo.dev/accelerator label names no accelerator profile",
    "fabric": "fabric env (EFA, gIB/RDMA) is set but the pod does not get the fabric devices",
    "duplicate-env": "an env variable is defined twice in one container",
    "duplicate-name": "two containers or two volumes of a pod share a name",
    "volume-mount": "a volumeMount names no volume of the pod, or two mounts share a mountPath",
    "interfaces-json": "networking.gke.io/interfaces is not a JSON list of {interfaceName, network}",
}


@dataclass(frozen=True)
class ManifestProblem:
    kind: str
    name: str
    path: str  # JSON path inside the object, e.g. $.spec.replicatedJobs[0].template
    message: str
    check: str  # one of CHECKS
    source: str | None = None  # helm's "# Source:" template of the document, when known
    index: int | None = None  # position of the document in the stream

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}: {self.path}: {self.message} [{self.check}]"


# ---------------------------------------------------------------------------------------------
# documents


@dataclass
class Document:
    data: Any
    source: str | None = None
    index: int = 0


_SEPARATOR = re.compile(r"^---[ \t]*(?:#.*)?$", re.M)
_SOURCE = re.compile(r"^# Source: (.+)$", re.M)


def parse_documents(text: str) -> tuple[list[Document], list[ManifestProblem]]:
    """Split a `helm template` stream into documents, keeping each one's `# Source:` template."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs: list[Document] = []
    problems: list[ManifestProblem] = []
    for chunk in _SEPARATOR.split(text):
        if not chunk.strip():
            continue
        found = _SOURCE.search(chunk)
        source = found.group(1).strip() if found else None
        try:
            loaded = list(yaml.load_all(chunk, Loader=loader))
        except yaml.YAMLError as err:
            problems.append(ManifestProblem("?", "?", "$", f"not YAML: {err}".replace("\n", " "), "yaml", source,
                                            len(docs)))
            continue
        for data in loaded:
            if data is not None:
                docs.append(Document(data, source, len(docs)))
    return docs, problems


# ---------------------------------------------------------------------------------------------
# schemas


def _kubernetes_validate_root() -> Path:
    """The schema folder kubernetes-validate ships, found without importing it (its import pulls in
    jsonschema: ~100 ms that a clean validation never needs)."""
    import importlib.util

    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or not spec.submodule_search_locations:  # pragma: no cover - a venv made before the dependency
        raise RuntimeError("the kubernetes-validate package is missing: pip install -e . (or make setup)")
    return Path(list(spec.submodule_search_locations)[0]).resolve() / "kubernetes-json-schema"


@lru_cache(maxsize=None)
def shipped_kube_versions() -> tuple[tuple[int, int], ...]:
    out = []
    for folder in _kubernetes_validate_root().glob("v*-local-strict"):
        m = re.fullmatch(r"v(\d+)\.(\d+)\.\d+-local-strict", folder.name)
        if m:
            out.append((int(m.group(1)), int(m.group(2))))
    return tuple(sorted(out))


def resolve_kube_version(version: str) -> tuple[int, int]:
    """"1.32", "v1.32.3" -> (1, 32): the newest shipped minor <= the one asked for."""
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


def _core_dir(kube: tuple[int, int]) -> Path:
    return _kubernetes_validate_root() / f"v{kube[0]}.{kube[1]}.0-local-strict"


@lru_cache(maxsize=None)
def _registry(kube: tuple[int, int]):
    from referencing import Registry, Resource

    defs = json.loads((_core_dir(kube) / "_definitions.json").read_text(encoding="utf-8"))
    return Resource.from_contents(defs) @ Registry()


def crd_schemas_dir() -> Path:
    return paths.schemas_dir() / "k8s"


def _core_file(api_version: str, kind: str, kube: tuple[int, int]) -> Path:
    # kubernetes-validate's naming: <kind>-<first label of the group>-<version>.json; core v1 has no group.
    suffix = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return _core_dir(kube) / f"{kind.lower()}-{suffix.lower()}.json"


def _crd_file(api_version: str, kind: str) -> Path | None:
    group, _, version = api_version.rpartition("/")
    if not group or "." not in group:
        return None
    return crd_schemas_dir() / group / f"{kind.lower()}_{version}.json"


_GO_LEADING_FLAGS = re.compile(r"^\^\(\?([a-zA-Z]+)\)")
_POSIX_CLASSES = {
    "[:alpha:]": "a-zA-Z", "[:digit:]": "0-9", "[:alnum:]": "a-zA-Z0-9", "[:upper:]": "A-Z", "[:lower:]": "a-z",
    "[:space:]": r"\s", "[:xdigit:]": "0-9A-Fa-f", "[:word:]": r"\w", "[:punct:]": r"!-/:-@\[-`{-~",
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
_SCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
               "unevaluatedProperties", "unevaluatedItems", "additionalItems")


def prepare_crd_schema(node: Any, *, root: bool = True) -> Any:
    """The in-memory adjustments of a vendored CRD schema (see the module doc). Returns a new dict."""
    if not isinstance(node, dict):
        return node
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
    if isinstance(out.get("pattern"), str):
        out["pattern"] = _compilable(out["pattern"])
        if out["pattern"] is None:
            del out["pattern"]
    if out.get("x-kubernetes-preserve-unknown-fields") is True:
        if out.get("additionalProperties") is False:
            del out["additionalProperties"]
    elif "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    typ = out.get("type")
    if isinstance(typ, str) and not root:
        out["type"] = [typ, "null"]
    elif isinstance(typ, list) and "null" not in typ and not root:
        out["type"] = [*typ, "null"]
    if "enum" in out and not root and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    if root and isinstance(out.get("properties"), dict) and "metadata" in out["properties"]:
        out["properties"] = {**out["properties"], "metadata": {"$ref": OBJECTMETA_REF}}
    return out


def _compilable(pattern: str) -> str | None:
    for candidate in (pattern, go_regex_to_python(pattern)):
        try:
            re.compile(candidate)
            return candidate
        except re.error:
            continue
    UNCHECKED_PATTERNS.append(pattern)
    return None


# ---------------------------------------------------------------------------------------------
# fast path: the schema compiled to closures that only answer "valid?". jsonschema walks a JobSet in
# ~1 ms; the closures in a fraction of that. Only when a document is invalid does jsonschema run, so
# every message and path still comes from jsonschema. A schema with a keyword not handled here is
# validated by jsonschema alone (tests/test_manifest_validation.py checks both agree).

_IGNORED = {"description", "default", "format", "$schema", "$id", "title", "examples", "nullable", "deprecated",
            "readOnly", "writeOnly", "$comment"}


class _Unsupported(Exception):
    pass


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    return a == b


def _type_test(name: str):
    return {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "null": lambda v: v is None,
        "boolean": lambda v: isinstance(v, bool),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    }[name]


class _FastCompiler:
    def __init__(self, root: dict, defs: dict):
        self.root = root
        self.defs = defs  # $defs of kubernetes-validate's _definitions.json
        self.cache: dict[str, Any] = {}

    def ref(self, ref: str, in_defs: bool):
        """`#/$defs/X` is relative to the resource being compiled (the kind's file or _definitions.json)."""
        if ref.startswith("#/$defs/"):
            name = ref[len("#/$defs/"):]
        elif re.search(r"_definitions\.json#/\$defs/", ref):
            name, in_defs = ref.split("#/$defs/", 1)[1], True
        else:
            raise _Unsupported(ref)
        base = self.defs if in_defs else (self.root.get("$defs") or {})
        key = ("defs:" if in_defs else "local:") + name
        if key not in self.cache:
            if name not in base:
                raise _Unsupported(ref)
            cell: list = []
            self.cache[key] = lambda v: cell[0](v)  # recursion: filled in below
            compiled = self.compile(base[name], in_defs)
            cell.append(compiled)
            self.cache[key] = compiled
        return self.cache[key]

    def compile(self, schema: Any, in_defs: bool = False):
        if schema is True:
            return lambda v: True
        if schema is False:
            return lambda v: False
        if not isinstance(schema, dict):
            raise _Unsupported(repr(schema))
        tests = []
        for key in schema:
            if key not in _IGNORED and not key.startswith("x-") and key not in _FAST_KEYWORDS:
                raise _Unsupported(key)
        if "$ref" in schema:
            tests.append(self.ref(schema["$ref"], in_defs))
        if "type" in schema:
            types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            checks = tuple(_type_test(t) for t in types)
            tests.append(checks[0] if len(checks) == 1 else (lambda v, c=checks: any(t(v) for t in c)))
        if "enum" in schema:
            options = list(schema["enum"])
            plain = all(isinstance(o, str) for o in options)
            allowed = frozenset(options) if plain else None
            tests.append((lambda v, a=allowed: isinstance(v, str) and v in a) if plain
                         else (lambda v, o=options: any(_json_equal(v, x) for x in o)))
        if "const" in schema:
            tests.append(lambda v, c=schema["const"]: _json_equal(v, c))
        if "pattern" in schema:
            regex = re.compile(schema["pattern"])
            tests.append(lambda v, r=regex: not isinstance(v, str) or r.search(v) is not None)
        for key, op in (("maxLength", "le"), ("minLength", "ge")):
            if key in schema:
                n = schema[key]
                tests.append((lambda v, n=n: not isinstance(v, str) or len(v) <= n) if op == "le"
                             else (lambda v, n=n: not isinstance(v, str) or len(v) >= n))
        for key, op in (("maxItems", "le"), ("minItems", "ge")):
            if key in schema:
                n = schema[key]
                tests.append((lambda v, n=n: not isinstance(v, list) or len(v) <= n) if op == "le"
                             else (lambda v, n=n: not isinstance(v, list) or len(v) >= n))
        for key, op in (("maxProperties", "le"), ("minProperties", "ge")):
            if key in schema:
                n = schema[key]
                tests.append((lambda v, n=n: not isinstance(v, dict) or len(v) <= n) if op == "le"
                             else (lambda v, n=n: not isinstance(v, dict) or len(v) >= n))
        number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
        for key, cmp in (("minimum", lambda v, n: v >= n), ("maximum", lambda v, n: v <= n),
                         ("exclusiveMinimum", lambda v, n: v > n), ("exclusiveMaximum", lambda v, n: v < n)):
            if key in schema:
                tests.append(lambda v, n=schema[key], c=cmp: not number(v) or c(v, n))
        if "required" in schema:
            required = tuple(schema["required"])
            tests.append(lambda v, r=required: not isinstance(v, dict) or all(k in v for k in r))
        if any(k in schema for k in ("properties", "additionalProperties", "patternProperties")):
            tests.append(self._object(schema, in_defs))
        if "items" in schema:
            item = self.compile(schema["items"], in_defs)
            tests.append(lambda v, i=item: not isinstance(v, list) or all(i(x) for x in v))
        for key in ("allOf", "anyOf", "oneOf"):
            if key in schema:
                subs = tuple(self.compile(s, in_defs) for s in schema[key])
                if key == "allOf":
                    tests.append(lambda v, s=subs: all(t(v) for t in s))
                elif key == "anyOf":
                    tests.append(lambda v, s=subs: any(t(v) for t in s))
                else:
                    tests.append(lambda v, s=subs: sum(1 for t in s if t(v)) == 1)
        if "not" in schema:
            sub = self.compile(schema["not"], in_defs)
            tests.append(lambda v, s=sub: not s(v))
        if not tests:
            return lambda v: True
        if len(tests) == 1:
            return tests[0]
        tests = tuple(tests)
        return lambda v: all(t(v) for t in tests)

    def _object(self, schema: dict, in_defs: bool):
        props = {k: self.compile(s, in_defs) for k, s in (schema.get("properties") or {}).items()}
        patterns = tuple((re.compile(p), self.compile(s, in_defs))
                         for p, s in (schema.get("patternProperties") or {}).items())
        extra = schema.get("additionalProperties", True)
        extra_test = None if extra is True else (False if extra is False else self.compile(extra, in_defs))

        def check(v):
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
                for regex, ptest in patterns:
                    if regex.search(key):
                        matched = True
                        if not ptest(value):
                            return False
                if test is None and not matched and extra_test is not None:
                    if extra_test is False or not extra_test(value):
                        return False
            return True

        return check


_FAST_KEYWORDS = {"$ref", "$defs", "definitions", "type", "enum", "const", "pattern", "maxLength", "minLength",
                  "maxItems", "minItems", "maxProperties", "minProperties", "minimum", "maximum", "exclusiveMinimum",
                  "exclusiveMaximum", "required", "properties", "additionalProperties", "patternProperties", "items",
                  "allOf", "anyOf", "oneOf", "not"}


@lru_cache(maxsize=None)
def _definitions(kube: tuple[int, int]) -> dict:
    """The shared $defs of the core schemas (the document _registry() serves as DEFS_ID), read directly."""
    return json.loads((_core_dir(kube) / "_definitions.json").read_text(encoding="utf-8")).get("$defs", {})


class _Checker:
    """A jsonschema validator with a compiled yes/no fast path in front of it."""

    def __init__(self, schema: dict, kube: tuple[int, int]):
        self.schema, self.kube, self._slow = schema, kube, None
        try:
            self.fast = _FastCompiler(schema, _definitions(kube)).compile(schema)
        except _Unsupported:
            self.fast = None

    @property
    def slow(self):
        """jsonschema, built only when a document fails the fast check (or the check cannot be compiled)."""
        if self._slow is None:
            from jsonschema import Draft202012Validator

            self._slow = Draft202012Validator(self.schema, registry=_registry(self.kube))
        return self._slow

    def iter_errors(self, doc: Any):
        if self.fast is not None and self.fast(doc):
            return iter(())
        return self.slow.iter_errors(doc)


@lru_cache(maxsize=None)
def _validator(api_version: str, kind: str, kube: tuple[int, int]):
    """The compiled validator for one kind, or None when there is no schema for it."""
    crd = _crd_file(api_version, kind)
    if crd is not None and crd.is_file():
        schema = prepare_crd_schema(json.loads(crd.read_text(encoding="utf-8")))
        schema["$id"] = f"https://helm-nemo.dev/crd/{api_version}/{kind}"
    else:
        core = _core_file(api_version, kind, kube)
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


# ---------------------------------------------------------------------------------------------
# helpers


def json_path(parts: Iterable[Any]) -> str:
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(part)):
            out += f".{part}"
        else:
            out += f"[{json.dumps(str(part))}]"
    return out


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_IANA_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def dns_problems(value: Any, rule: str) -> list[str]:
    """Why `value` is not a valid name under `rule` (label1123 | label1035 | subdomain | path-segment)."""
    if not isinstance(value, str) or not value:
        return [f"must be a non-empty string, got {_short(value)}"]
    if rule == "path-segment":
        if value in (".", ".."):
            return [f"{value!r} may not be used as a name"]
        return [f"{value!r} may not contain {c!r}" for c in "/%" if c in value]
    limit, regex, words = {
        "label1123": (63, _DNS1123_LABEL, "a DNS-1123 label (lower-case letters, digits and '-', starting and ending "
                                          "with a letter or digit)"),
        "label1035": (63, _DNS1035_LABEL, "a DNS-1035 label (lower-case letters, digits and '-', starting with a "
                                          "letter, ending with a letter or digit)"),
        "subdomain": (253, _DNS1123_SUBDOMAIN, "a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', each "
                                               "part starting and ending with a letter or digit)"),
    }[rule]
    out = []
    if len(value) > limit:
        out.append(f"{value!r} is {len(value)} characters, more than {limit}")
    if not regex.match(value):
        out.append(f"{value!r} is not {words}")
    return out


# Kubernetes name rules per kind (the rest: DNS-1123 subdomain).
_NAME_RULES = {
    "Service": "label1035", "Namespace": "label1123",
    # The Job's name is the value of its pods' batch.kubernetes.io/job-name label (<= 63).
    "Job": "label1123", "CronJob": "label1123",  # CronJob: <= 52 as well, see _check_names
    # A JobSet's name starts its Jobs' names, which the JobSet webhook checks as DNS-1035 labels.
    "JobSet": "label1035",
    "Role": "path-segment", "ClusterRole": "path-segment", "RoleBinding": "path-segment",
    "ClusterRoleBinding": "path-segment",
}

_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_SUFFIX = {"": 1, "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal(10) ** 3,
           "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12, "P": Decimal(10) ** 15,
           "E": Decimal(10) ** 18, "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50,
           "Ei": 2 ** 60}


def parse_quantity(value: Any) -> Decimal | None:
    """A Kubernetes resource.Quantity as a Decimal, or None when it does not parse."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return Decimal(str(value))
        except InvalidOperation:  # pragma: no cover - inf/nan
            return None
    if not isinstance(value, str):
        return None
    m = _QUANTITY.match(value.strip() if value.strip() == value else "\0")
    if not m:
        return None
    number, suffix = Decimal(m.group(1)), m.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return number * (Decimal(10) ** int(suffix[1:]))
    return number * Decimal(_SUFFIX[suffix])


def _is_extended(resource: str) -> bool:
    """Extended resources (device plugins: nvidia.com/gpu, vpc.amazonaws.com/efa): whole numbers, requests = limits."""
    return "/" in resource and not resource.startswith(("kubernetes.io/", "requests.")) \
        and not resource.split("/", 1)[0].endswith(".kubernetes.io")


@dataclass
class PodTemplate:
    spec: dict
    meta: dict
    path: tuple  # path of the pod spec inside the object
    meta_path: tuple
    pods: int  # how many pods this template makes (for "multi-node")


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def pod_templates(doc: Mapping) -> list[PodTemplate]:
    """The pod templates of a workload object, with the number of pods each makes."""
    kind = doc.get("kind")
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    out: list[PodTemplate] = []

    def add(template: Any, where: tuple, pods: int) -> None:
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            meta = template.get("metadata") if isinstance(template.get("metadata"), dict) else {}
            out.append(PodTemplate(template["spec"], meta, where + ("spec",), where + ("metadata",), pods))

    def job_pods(job_spec: dict) -> int:
        return max(_int(job_spec.get("parallelism"), 1), 1)

    if kind == "Pod":
        out.append(PodTemplate(spec, doc.get("metadata") or {}, ("spec",), ("metadata",), 1))
    elif kind in ("Deployment", "StatefulSet", "ReplicaSet", "ReplicationController"):
        add(spec.get("template"), ("spec", "template"), _int(spec.get("replicas"), 1))
    elif kind == "DaemonSet":
        add(spec.get("template"), ("spec", "template"), 1)
    elif kind == "Job":
        add(spec.get("template"), ("spec", "template"), job_pods(spec))
    elif kind == "CronJob":
        job = ((spec.get("jobTemplate") or {}).get("spec")) or {}
        add(job.get("template"), ("spec", "jobTemplate", "spec", "template"), job_pods(job))
    elif kind == "JobSet":
        for i, rjob in enumerate(spec.get("replicatedJobs") or []):
            if not isinstance(rjob, dict):
                continue
            job = ((rjob.get("template") or {}).get("spec")) or {}
            if isinstance(job, dict):
                add(job.get("template"), ("spec", "replicatedJobs", i, "template", "spec", "template"),
                    job_pods(job) * max(_int(rjob.get("replicas"), 1), 1))
    elif kind == "PyTorchJob":
        for role, replica in (spec.get("pytorchReplicaSpecs") or {}).items():
            if isinstance(replica, dict):
                add(replica.get("template"), ("spec", "pytorchReplicaSpecs", role, "template"),
                    _int(replica.get("replicas"), 1))
    elif kind == "LeaderWorkerSet":
        lwt = spec.get("leaderWorkerTemplate") or {}
        groups = _int(spec.get("replicas"), 1)
        size = _int(lwt.get("size"), 1)
        if lwt.get("leaderTemplate"):
            add(lwt.get("leaderTemplate"), ("spec", "leaderWorkerTemplate", "leaderTemplate"), groups)
            add(lwt.get("workerTemplate"), ("spec", "leaderWorkerTemplate", "workerTemplate"), groups * max(size - 1, 0))
        else:
            add(lwt.get("workerTemplate"), ("spec", "leaderWorkerTemplate", "workerTemplate"), groups * size)
    return out


def _containers(pod: dict) -> Iterator[tuple[tuple, dict, bool]]:
    """(path inside the pod spec, container, is a regular or sidecar container)."""
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for i, container in enumerate(pod.get(group) or []):
            if isinstance(container, dict):
                regular = group == "containers" or (group == "initContainers" and container.get("restartPolicy") == "Always")
                yield (group, i), container, regular


def _env_value(container: dict, name: str) -> str | None:
    for entry in container.get("env") or []:
        if isinstance(entry, dict) and entry.get("name") == name and isinstance(entry.get("value"), str):
            return entry["value"]
    return None


def _resource(container: dict, which: str, name: str) -> Any:
    resources = container.get("resources") if isinstance(container.get("resources"), dict) else {}
    block = resources.get(which) if isinstance(resources.get(which), dict) else {}
    return block.get(name)


def _pod_resource(pod: dict, name: str) -> Decimal:
    """Effective per-pod amount of a resource: regular + sidecar containers, or the largest init container."""
    regular, init = Decimal(0), Decimal(0)
    for _, container, is_regular in _containers(pod):
        amount = parse_quantity(_resource(container, "limits", name)) or parse_quantity(
            _resource(container, "requests", name)) or Decimal(0)
        if is_regular:
            regular += amount
        else:
            init = max(init, amount)
    return max(regular, init)


# ---------------------------------------------------------------------------------------------
# the checks


class _Collector:
    def __init__(self, doc: Mapping, source: str | None, index: int):
        self.kind = str(doc.get("kind") or "?")
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        self.name = str(meta.get("name") or "?")
        self.source = source
        self.index = index
        self.problems: list[ManifestProblem] = []

    def add(self, path: Iterable[Any], message: str, check: str) -> None:
        assert check in CHECKS, check
        self.problems.append(ManifestProblem(self.kind, self.name, json_path(path), message, check, self.source,
                                             self.index))


def _schema_problems(out: _Collector, validator, doc: Mapping) -> None:
    for error in validator.iter_errors(doc):
        where = tuple(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = set((error.schema.get("properties") or {}))
            patterns = [re.compile(p) for p in (error.schema.get("patternProperties") or {})]
            extra = [k for k in error.instance if k not in allowed and not any(p.search(k) for p in patterns)]
            for key in extra or [None]:
                if key is None:
                    out.add(where, error.message, "schema")
                    continue
                hint = _did_you_mean(key, allowed)
                out.add(where + (key,), f"unknown field {key!r}{hint}", "schema")
            continue
        message = error.message
        if error.context and error.validator in ("oneOf", "anyOf"):
            from jsonschema.exceptions import best_match

            best = best_match(error.context)
            message = f"{_short(error.instance)} is invalid: {best.message}"
        out.add(where, message, "schema")


def _did_you_mean(key: str, allowed: Iterable[str]) -> str:
    import difflib

    close = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_names(out: _Collector, doc: Mapping, pods: list[PodTemplate]) -> None:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = meta.get("name")
    if name is not None:
        for why in dns_problems(name, _NAME_RULES.get(out.kind, "subdomain")):
            out.add(("metadata", "name"), f"{out.kind} name {why}", "dns-name")
    if out.kind == "CronJob" and isinstance(name, str) and len(name) > 52:
        out.add(("metadata", "name"), f"CronJob name {name!r} is {len(name)} characters, more than 52 (its Jobs "
                                      "append an 11-character suffix)", "dns-name")
    if meta.get("namespace") is not None:
        for why in dns_problems(meta["namespace"], "label1123"):
            out.add(("metadata", "namespace"), f"namespace {why}", "dns-name")
    if out.kind == "ConfigMap":
        for section in ("data", "binaryData"):
            for key in (doc.get(section) or {}) if isinstance(doc.get(section), dict) else {}:
                if not isinstance(key, str) or len(key) > 253 or not _CONFIGMAP_KEY.match(key):
                    out.add((section, key), f"ConfigMap key {key!r} must be letters, digits, '-', '_' or '.' "
                                            "(at most 253)", "dns-name")
    if out.kind == "Service":
        for i, port in enumerate(((doc.get("spec") or {}).get("ports") or [])):
            if isinstance(port, dict) and port.get("name") is not None:
                _port_name(out, ("spec", "ports", i, "name"), port["name"])
    for pod in pods:
        for key in ("hostname", "subdomain"):
            if pod.spec.get(key) is not None:
                for why in dns_problems(pod.spec[key], "label1123"):
                    out.add(pod.path + (key,), f"pod {key} {why}", "dns-name")
        for i, volume in enumerate(pod.spec.get("volumes") or []):
            if isinstance(volume, dict):
                for why in dns_problems(volume.get("name"), "label1123"):
                    out.add(pod.path + ("volumes", i, "name"), f"volume name {why}", "dns-name")
        for where, container, _ in _containers(pod.spec):
            for why in dns_problems(container.get("name"), "label1123"):
                out.add(pod.path + where + ("name",), f"container name {why}", "dns-name")
            for j, port in enumerate(container.get("ports") or []):
                if isinstance(port, dict) and port.get("name") is not None:
                    _port_name(out, pod.path + where + ("ports", j, "name"), port["name"])


def _port_name(out: _Collector, where: tuple, value: Any) -> None:
    if not (isinstance(value, str) and 0 < len(value) <= 15 and _IANA_SVC_NAME.match(value)
            and "--" not in value and re.search("[a-z]", value)):
        out.add(where, f"port name {value!r} must be an IANA service name (at most 15 lower-case letters, digits "
                       "and single '-', with a letter)", "dns-name")


def _check_derived_names(out: _Collector, doc: Mapping) -> None:
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    name = (doc.get("metadata") or {}).get("name")
    if not isinstance(name, str):
        return
    if out.kind == "JobSet":
        # jobset webhook: <jobset>-<rjob>-<replicas-1> and, for Indexed jobs (the default), the pod name
        # <jobset>-<rjob>-<jobIdx>-<podIdx>-<5 random> must be DNS-1035 labels (<= 63).
        network = spec.get("network") if isinstance(spec.get("network"), dict) else {}
        subdomain = network.get("subdomain")
        if subdomain:
            for why in dns_problems(subdomain, "label1035"):
                out.add(("spec", "network", "subdomain"), f"JobSet subdomain (the headless Service's name) {why}",
                        "derived-name")
        for i, rjob in enumerate(spec.get("replicatedJobs") or []):
            if not isinstance(rjob, dict) or not isinstance(rjob.get("name"), str):
                continue
            replicas = max(_int(rjob.get("replicas"), 1), 1)
            job = ((rjob.get("template") or {}).get("spec")) or {}
            job_name = f"{name}-{rjob['name']}-{replicas - 1}"
            for why in dns_problems(job_name, "label1035"):
                out.add(("spec", "replicatedJobs", i, "name"), f"derived Job name {why}", "derived-name")
            if job.get("completionMode", "Indexed") == "Indexed":
                completions = max(_int(job.get("completions"), _int(job.get("parallelism"), 1)), 1)
                pod_name = f"{job_name}-{completions - 1}-abcde"
                for why in dns_problems(pod_name, "label1035"):
                    out.add(("spec", "replicatedJobs", i, "name"),
                            f"derived pod name (hostname {job_name}-{completions - 1} + 6-character suffix) {why}",
                            "derived-name")
    elif out.kind == "Job" and spec.get("completionMode") == "Indexed":
        completions = max(_int(spec.get("completions"), _int(spec.get("parallelism"), 1)), 1)
        hostname = f"{name}-{completions - 1}"
        for why in dns_problems(hostname, "label1123"):
            out.add(("metadata", "name"), f"Indexed Job pod hostname {why}", "derived-name")


def _check_labels(out: _Collector, doc: Mapping, pods: list[PodTemplate]) -> None:
    metas = [(("metadata",), doc.get("metadata"))] + [(p.meta_path, p.meta) for p in pods]
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    selector = spec.get("selector")
    if isinstance(selector, dict):
        labels = selector.get("matchLabels") if out.kind != "Service" else selector
        if isinstance(labels, dict):
            metas.append((("spec", "selector") + (("matchLabels",) if out.kind != "Service" else ()),
                          {"labels": labels, "_selector": True}))
    for where, meta in metas:
        if not isinstance(meta, dict):
            continue
        labels_at = where if meta.get("_selector") else where + ("labels",)
        for key, value in (meta.get("labels") or {}).items() if isinstance(meta.get("labels"), dict) else ():
            for why in _qualified_name_problems(key):
                out.add(labels_at + (key,), f"label key {why}", "label")
            if isinstance(value, str) and (len(value) > 63 or not _LABEL_VALUE.match(value)):
                out.add(labels_at + (key,), f"label value {value!r} must be at most 63 letters, digits, '-', '_' "
                                            "or '.', starting and ending with a letter or digit", "label")
        for key in (meta.get("annotations") or {}) if isinstance(meta.get("annotations"), dict) else ():
            for why in _qualified_name_problems(key):
                out.add(where + ("annotations", key), f"annotation key {why}", "label")


def _qualified_name_problems(key: Any) -> list[str]:
    if not isinstance(key, str) or not key:
        return [f"{_short(key)} must be a non-empty string"]
    prefix, slash, name = key.rpartition("/")
    out = []
    if slash and (not prefix or dns_problems(prefix, "subdomain")):
        out.append(f"{key!r}: the prefix before '/' must be a DNS-1123 subdomain")
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        out.append(f"{key!r}: the name part must be at most 63 letters, digits, '-', '_' or '.', starting and "
                   "ending with a letter or digit")
    return out


_GCSFUSE_QUANTITY = re.compile(r"^gke-gcsfuse/(?:metadata-prefetch-)?(?:cpu|memory|ephemeral-storage)-(?:limit|request)$")


def _check_quantities(out: _Collector, doc: Mapping, pods: list[PodTemplate]) -> None:
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}

    def need(where: tuple, value: Any, what: str) -> Decimal | None:
        parsed = parse_quantity(value)
        if parsed is None:
            out.add(where, f"{what} {_short(value)} is not a Kubernetes quantity (e.g. 500m, 2, 64Gi, 1.5G)", "quantity")
        elif parsed < 0:
            out.add(where, f"{what} {_short(value)} must not be negative", "quantity")
            return None
        return parsed

    if out.kind == "PersistentVolume":
        for key, value in (spec.get("capacity") or {}).items() if isinstance(spec.get("capacity"), dict) else ():
            need(("spec", "capacity", key), value, f"capacity {key}")
    if out.kind == "PersistentVolumeClaim":
        _resources(out, ("spec", "resources"), spec.get("resources"), need, extended_rules=False)
    for pod in pods:
        for key, value in (pod.meta.get("annotations") or {}).items() if isinstance(pod.meta.get("annotations"), dict) else ():
            if _GCSFUSE_QUANTITY.match(str(key)):
                need(pod.meta_path + ("annotations", key), value, f"annotation {key}")
        for i, volume in enumerate(pod.spec.get("volumes") or []):
            empty = volume.get("emptyDir") if isinstance(volume, dict) else None
            if isinstance(empty, dict) and empty.get("sizeLimit") is not None:
                need(pod.path + ("volumes", i, "emptyDir", "sizeLimit"), empty["sizeLimit"], "emptyDir sizeLimit")
        if isinstance(pod.spec.get("overhead"), dict):
            for key, value in pod.spec["overhead"].items():
                need(pod.path + ("overhead", key), value, f"overhead {key}")
        for where, container, _ in _containers(pod.spec):
            _resources(out, pod.path + where + ("resources",), container.get("resources"), need, extended_rules=True)


def _resources(out: _Collector, where: tuple, resources: Any, need, *, extended_rules: bool) -> None:
    if not isinstance(resources, dict):
        return
    parsed: dict[str, dict[str, Decimal | None]] = {}
    for which in ("requests", "limits"):
        block = resources.get(which)
        if isinstance(block, dict):
            parsed[which] = {name: need(where + (which, name), value, f"{which[:-1]} {name}")
                             for name, value in block.items()}
    requests, limits = parsed.get("requests", {}), parsed.get("limits", {})
    for name, request in requests.items():
        limit = limits.get(name)
        if request is None:
            continue
        if limit is not None and request > limit:
            out.add(where + ("requests", name), f"request {name} {resources['requests'][name]} is more than the "
                                                f"limit {resources['limits'][name]}", "resources")
        if extended_rules and _is_extended(name) and limit is not None and request != limit:
            out.add(where + ("requests", name), f"extended resource {name}: request {resources['requests'][name]} "
                                                f"must equal the limit {resources['limits'][name]}", "resources")
    if extended_rules:
        for which, block in parsed.items():
            for name, amount in block.items():
                if amount is not None and _is_extended(name) and amount != amount.to_integral_value():
                    out.add(where + (which, name), f"extended resource {name} must be a whole number, got "
                                                   f"{resources[which][name]}", "resources")


def _check_gpus(out: _Collector, doc: Mapping, pods: list[PodTemplate], profile: dict | None) -> None:
    if profile is None or not pods:
        return
    per_node = profile.get("gpusPerNode")
    total_pods = sum(p.pods for p in pods)
    using = [(p, _pod_resource(p.spec, GPU_RESOURCE)) for p in pods]
    for pod, gpus in using:
        if gpus == 0:
            continue
        where = _gpu_path(pod)
        if total_pods > 1 and gpus != per_node:
            out.add(where, f"multi-node workload ({total_pods} pods): each pod takes {_num(gpus)} GPUs, but a "
                           f"{profile['id']} node has {per_node} (nvidia.com/gpu must equal gpusPerNode)", "gpu-count")
        elif gpus > per_node:
            out.add(where, f"{_num(gpus)} GPUs in one pod, but a {profile['id']} node has {per_node}: it can never "
                           "be scheduled", "gpu-count")
    if total_pods > 1 and out.kind in ("Job", "JobSet", "PyTorchJob", "LeaderWorkerSet") and all(g == 0 for _, g in using):
        out.add(pods[0].path, f"multi-node workload ({total_pods} pods) on {profile['id']} requests no GPUs "
                              f"(expected nvidia.com/gpu: {per_node} per pod)", "gpu-count")


def _num(value: Decimal) -> str:
    return str(int(value)) if value == value.to_integral_value() else str(value)


def _gpu_path(pod: PodTemplate) -> tuple:
    for where, container, _ in _containers(pod.spec):
        if _resource(container, "limits", GPU_RESOURCE) is not None:
            return pod.path + where + ("resources", "limits", GPU_RESOURCE)
        if _resource(container, "requests", GPU_RESOURCE) is not None:
            return pod.path + where + ("resources", "requests", GPU_RESOURCE)
    return pod.path


def _fabric_env(container: dict) -> str | None:
    """Which fabric the container's env sets up: "efa", "gib" or None."""
    if (_env_value(container, "FI_PROVIDER") or "").strip().lower() == "efa":
        return "efa"
    if (_env_value(container, "NCCL_NET") or "").strip().lower() == "gib":
        return "gib"
    plugin = _env_value(container, "NCCL_PLUGIN_PATH") or ""
    if any(re.search(r"(^|/)gib(/|$)", part) for part in plugin.split(":")):
        return "gib"
    return None


def _check_fabric(out: _Collector, pods: list[PodTemplate], profile: dict | None) -> None:
    fabric = (profile or {}).get("fabric")
    total_pods = sum(p.pods for p in pods)
    for pod in pods:
        for where, container, _ in _containers(pod.spec):
            kind = _fabric_env(container)
            if kind is None:
                continue
            cwhere = pod.path + where
            if fabric or kind == "efa":
                resource = fabric["resource"] if fabric else EFA_RESOURCE
                per_node = fabric["perNode"] if fabric else None
                trigger = "FI_PROVIDER=efa" if kind == "efa" else "gIB NCCL env"
                amount = parse_quantity(_resource(container, "limits", resource))
                if not amount:
                    source = f" ({profile['id']} profile: {per_node} per node)" if fabric else ""
                    out.add(cwhere + ("resources", "limits"), f"{trigger} is set but {resource} is not requested"
                            f"{source}: NCCL would fall back to TCP", "fabric")
                elif per_node and total_pods > 1 and amount != per_node:
                    out.add(cwhere + ("resources", "limits", resource), f"multi-node workload takes {_num(amount)} "
                            f"{resource}, but a {profile['id']} node has {per_node} (one pod per node should take all)",
                            "fabric")
            if kind == "gib" and not pod.spec.get("hostNetwork"):
                _check_rdma_interfaces(out, pod, profile, cwhere)


def _check_rdma_interfaces(out: _Collector, pod: PodTemplate, profile: dict | None, cwhere: tuple) -> None:
    annotations = pod.meta.get("annotations") if isinstance(pod.meta.get("annotations"), dict) else {}
    raw = annotations.get(INTERFACES_ANNOTATION)
    wanted = len(((profile or {}).get("network") or {}).get("interfaces") or []) or None
    if raw is None:
        out.add(cwhere + ("env",), f"gIB (RDMA) NCCL env is set but the pod has neither hostNetwork: true nor the "
                                   f"{INTERFACES_ANNOTATION} annotation: it gets no RDMA NICs", "fabric")
        return
    try:
        found = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return  # interfaces-json reports it
    if isinstance(found, list) and wanted and len(found) < wanted:
        out.add(pod.meta_path + ("annotations", INTERFACES_ANNOTATION),
                f"gIB (RDMA) needs all {wanted} interfaces of a {profile['id']} node, the annotation lists {len(found)}",
                "fabric")


def _check_containers(out: _Collector, pods: list[PodTemplate]) -> None:
    for pod in pods:
        volumes: dict[str, int] = {}
        for i, volume in enumerate(pod.spec.get("volumes") or []):
            if isinstance(volume, dict) and isinstance(volume.get("name"), str):
                if volume["name"] in volumes:
                    out.add(pod.path + ("volumes", i, "name"), f"volume {volume['name']!r} is defined twice (also "
                                                               f"volumes[{volumes[volume['name']]}])", "duplicate-name")
                volumes.setdefault(volume["name"], i)
        names: dict[str, tuple] = {}
        for where, container, _ in _containers(pod.spec):
            cname = container.get("name")
            if isinstance(cname, str):
                if cname in names:
                    out.add(pod.path + where + ("name",), f"container name {cname!r} is used twice (also "
                                                          f"{json_path(names[cname])[2:]})", "duplicate-name")
                names.setdefault(cname, where)
            seen: dict[str, int] = {}
            for j, entry in enumerate(container.get("env") or []):
                if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                    if entry["name"] in seen:
                        out.add(pod.path + where + ("env", j, "name"),
                                f"env {entry['name']!r} is defined twice in container {cname!r} (also env[{seen[entry['name']]}]); "
                                "the later one silently wins", "duplicate-env")
                    seen.setdefault(entry["name"], j)
            mount_paths: dict[str, int] = {}
            for j, mount in enumerate(container.get("volumeMounts") or []):
                if not isinstance(mount, dict):
                    continue
                if mount.get("name") not in volumes:
                    have = ", ".join(sorted(volumes)) or "none"
                    hint = _did_you_mean(str(mount.get("name")), volumes)
                    out.add(pod.path + where + ("volumeMounts", j, "name"), f"volumeMount names volume "
                            f"{mount.get('name')!r}, which the pod does not define{hint} (volumes: {have})", "volume-mount")
                path = mount.get("mountPath")
                if isinstance(path, str):
                    if path in mount_paths:
                        out.add(pod.path + where + ("volumeMounts", j, "mountPath"), f"mountPath {path!r} is used "
                                f"twice in container {cname!r} (also volumeMounts[{mount_paths[path]}])", "volume-mount")
                    mount_paths.setdefault(path, j)
            for j, device in enumerate(container.get("volumeDevices") or []):
                if isinstance(device, dict) and device.get("name") not in volumes:
                    out.add(pod.path + where + ("volumeDevices", j, "name"), f"volumeDevice names volume "
                            f"{device.get('name')!r}, which the pod does not define", "volume-mount")


def _check_interfaces(out: _Collector, doc: Mapping, pods: list[PodTemplate]) -> None:
    metas = [(("metadata",), doc.get("metadata"))] + [(p.meta_path, p.meta) for p in pods]
    for where, meta in metas:
        annotations = meta.get("annotations") if isinstance(meta, dict) else None
        if not isinstance(annotations, dict) or INTERFACES_ANNOTATION not in annotations:
            continue
        at = where + ("annotations", INTERFACES_ANNOTATION)
        raw = annotations[INTERFACES_ANNOTATION]
        try:
            value = json.loads(raw) if isinstance(raw, str) else None
        except ValueError as err:
            out.add(at, f"not JSON: {err}", "interfaces-json")
            continue
        if not isinstance(value, list) or not value:
            out.add(at, f"must be a non-empty JSON list of {{\"interfaceName\", \"network\"}}, got {_short(raw)}",
                    "interfaces-json")
            continue
        names = []
        for i, item in enumerate(value):
            if not (isinstance(item, dict) and isinstance(item.get("interfaceName"), str)
                    and isinstance(item.get("network"), str)):
                out.add(at, f"item {i} must be {{\"interfaceName\": \"ethN\", \"network\": \"NAME\"}}, got {_short(item)}",
                        "interfaces-json")
                continue
            if item["interfaceName"] in names:
                out.add(at, f"interface {item['interfaceName']!r} is listed twice", "interfaces-json")
            names.append(item["interfaceName"])
        default = annotations.get(DEFAULT_INTERFACE_ANNOTATION)
        if isinstance(default, str) and names and default not in names:
            out.add(where + ("annotations", DEFAULT_INTERFACE_ANNOTATION), f"default interface {default!r} is not one "
                    f"of the interfaces {names}", "interfaces-json")


# ---------------------------------------------------------------------------------------------
# entry points


@lru_cache(maxsize=1)
def _default_profiles() -> dict[str, dict]:
    from .profiles import load_profiles

    return load_profiles()


def validate_manifests(docs: str | Iterable[Any], *, kube_version: str = DEFAULT_KUBE_VERSION,
                       profiles: Mapping[str, dict] | None = None) -> list[ManifestProblem]:
    """Every problem of every document: schema errors (all of them), unknown kinds, and the extra checks.

    `docs`: a `helm template` stream (str), or parsed documents (dicts, or Documents). `profiles`:
    accelerator profiles by id (default: values/accelerators/, loaded on first need)."""
    kube = resolve_kube_version(kube_version)
    problems: list[ManifestProblem] = []
    if isinstance(docs, str):
        documents, problems = parse_documents(docs)
    else:
        documents = [d if isinstance(d, Document) else Document(d, None, i) for i, d in enumerate(docs) if d is not None]
    for document in documents:
        problems += _validate_one(document, kube, profiles)
    return problems


def _validate_one(document: Document, kube: tuple[int, int], profiles: Mapping[str, dict] | None) -> list[ManifestProblem]:
    doc = document.data
    if not isinstance(doc, dict):
        return [ManifestProblem("?", "?", "$", f"a manifest must be a mapping, got {_short(doc)}", "yaml",
                                document.source, document.index)]
    out = _Collector(doc, document.source, document.index)
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    meta = doc.get("metadata")
    for key, value in (("apiVersion", api_version), ("kind", kind)):
        if not isinstance(value, str) or not value:
            out.add((), f"{key} is missing", "document")
    if not isinstance(meta, dict) or not meta.get("name"):
        out.add(("metadata",), "metadata.name is missing", "document")
    if out.problems and not (isinstance(api_version, str) and isinstance(kind, str)):
        return out.problems
    validator = _validator(api_version, kind, kube)
    if validator is None:
        out.add(("kind",), f"no schema for {api_version} {kind} (not a core kind of Kubernetes {kube[0]}.{kube[1]}, "
                           f"nor a CRD in schemas/k8s/: {', '.join(known_kinds(kube))})", "unknown-kind")
    else:
        _schema_problems(out, validator, doc)
    pods = pod_templates(doc)
    _check_names(out, doc, pods)
    _check_derived_names(out, doc)
    _check_labels(out, doc, pods)
    _check_quantities(out, doc, pods)
    _check_containers(out, pods)
    _check_interfaces(out, doc, pods)
    accelerator = ((meta or {}).get("labels") or {}).get(ACCELERATOR_LABEL) if isinstance(meta, dict) else None
    profile = None
    if accelerator is not None:
        known = profiles if profiles is not None else _default_profiles()
        profile = known.get(accelerator)
        if profile is None:
            out.add(("metadata", "labels", ACCELERATOR_LABEL), f"no accelerator profile {accelerator!r} "
                    f"(have: {', '.join(sorted(known))})", "accelerator")
    if pods:
        _check_gpus(out, doc, pods, profile)
        _check_fabric(out, pods, profile)
    return out.problems


def format_problems(problems: Iterable[ManifestProblem], *, title: str | None = None) -> str:
    """Problems grouped per object, in stream order; the last line counts them."""
    problems = list(problems)
    if not problems:
        return (title + "\n" if title else "") + "no problems"
    groups: dict[tuple, list[ManifestProblem]] = {}
    for problem in problems:
        groups.setdefault((problem.index, problem.kind, problem.name, problem.source), []).append(problem)
    lines = [title] if title else []
    for (_, kind, name, source), items in groups.items():
        lines.append(f"{kind}/{name}" + (f" ({source})" if source else "") + ":")
        for item in items:
            lines.append(f"  {item.path}: {item.message} [{item.check}]")
    lines.append(f"{len(problems)} problem(s) in {len(groups)} object(s)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# release plans (the CLI's lint, and template/install before they output or install)


def kube_version_from_flags(extra: Iterable[str], default: str = DEFAULT_KUBE_VERSION) -> str:
    """The `--kube-version` the user passes through to helm, if any: validate for the same version."""
    args = list(extra)
    for i, arg in enumerate(args):
        if arg == "--kube-version" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--kube-version="):
            return arg.split("=", 1)[1]
    return default


def _kube_label(kube_version: str) -> str:
    major, minor = resolve_kube_version(kube_version)
    return f"{major}.{minor}"


def check_rendered(plan, text: str, *, kube_version: str = DEFAULT_KUBE_VERSION, echo=print,
                   hint: str | None = None) -> bool:
    """Validate one release's rendered text; echo its problems (if any). True when clean."""
    problems = validate_manifests(text, kube_version=kube_version)
    if problems:
        echo(format_problems(problems, title=f"helm nemo: release {plan.release} ({plan.chart}): the rendered "
                                             f"manifests do not validate (Kubernetes {_kube_label(kube_version)}):"))
        if hint:
            echo(hint)
    return not problems


def lint_plans(plans, helm, extra: list[str], *, kube_version: str = DEFAULT_KUBE_VERSION, echo=print,
               err=print) -> int:
    """Render every release with helm template and validate it: 0 clean, 2 problems, helm's code if rendering fails."""
    from . import commands

    clean = True
    for plan in plans:
        for warning in plan.warnings:
            err(f"warning: {warning}")
        proc = commands.render(plan, helm, extra)
        if proc.returncode != 0:
            err(proc.stderr.rstrip())
            err(f"helm nemo: rendering release {plan.release} failed")
            return proc.returncode or 1
        if check_rendered(plan, proc.stdout, kube_version=kube_version, echo=echo):
            count = len(parse_documents(proc.stdout)[0])
            echo(f"ok: release {plan.release} ({plan.chart}): {count} object(s) valid "
                 f"(Kubernetes {_kube_label(kube_version)} and CRD schemas)")
        else:
            clean = False
    return 0 if clean else commands.EXIT_INVALID_MANIFESTS


SKIP_HINT = "(--skip-manifest-validation skips this check)"


def preflight(plans, helm, extra: list[str], *, echo=print) -> int:
    """Before installing: render and validate every release of the recipe, so none is installed if one is
    invalid. 0 when all are clean."""
    from . import commands

    kube_version = kube_version_from_flags(extra)
    clean = True
    for plan in plans:
        proc = commands.render(plan, helm, extra)
        if proc.returncode != 0:
            echo(proc.stderr.rstrip())
            echo(f"helm nemo: rendering release {plan.release} for validation failed; nothing was installed {SKIP_HINT}")
            return proc.returncode or 1
        clean = check_rendered(plan, proc.stdout, kube_version=kube_version, echo=echo) and clean
    if not clean:
        echo(f"helm nemo: nothing was installed {SKIP_HINT}")
        return commands.EXIT_INVALID_MANIFESTS
    return 0
