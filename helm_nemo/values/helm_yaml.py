"""YAML as helm reads values: PyYAML's node tree turned into plain Python with every position kept.

Plain scalars are typed as go-yaml v2 types them (`helm_scalar`: `yes` is true, `1.10` the float 1.1, `12:30`
a string), quoted ones stay strings; keys are spelled as helm's YAML-to-JSON step writes them; duplicate keys,
`.inf`/`.nan`, NUL characters and tags other than the core ones (ALLOWED_TAGS) are problems at their line.
values/load.py reads the file, checks its limits and hands the tree to `NodeBuilder`.
"""

from __future__ import annotations

import math
import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any

    from yaml.error import Mark
    from yaml.nodes import Node, ScalarNode

    from helm_nemo.values.loaded import LoadedValues

from helm_nemo.user_errors import Problem, json_path


# go-yaml v2 resolve table (gopkg.in/yaml.v2 resolve.go), which helm 3 and 4 use through sigs.k8s.io/yaml,
# except single-letter y/Y/n/N: helm reads them as booleans, we keep the string (`name: y`, key `n:`), which
# is what a user means; where a boolean is wanted the schema then says so at the line.
_HELM_WORDS: dict[str, Any] = {
    **dict.fromkeys(("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
_GO_INT = re.compile(
    r"(?P<sign>[-+]?)(?:0[xX](?P<hex>[0-9a-fA-F]+)|0[oO](?P<oct>[0-7]+)|0[bB](?P<bin>[01]+)"
    r"|0(?P<octal>[0-7]+)|(?P<dec>[1-9][0-9]*|0))"
)
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")  # go-yaml's yamlStyleFloat
_GO_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")
_INT_BASES = (("hex", 16), ("oct", 8), ("bin", 2), ("octal", 8), ("dec", 10))


def _implicit_tag(text: str) -> str:
    """The tag PyYAML's resolver gives a plain scalar written without a tag."""
    import yaml

    tag: str = yaml.resolver.Resolver().resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    return tag


def helm_scalar(text: str) -> Any:
    """Type a plain (unquoted) scalar the way helm does (go-yaml v2), so the plugin checks what helm would get."""
    if text in _HELM_WORDS:
        return _HELM_WORDS[text]
    first = text[:1]
    if first == ".":
        return float(text) if _GO_DOT_FLOAT.fullmatch(text) else text
    if not first or first not in "+-0123456789":
        return text
    plain = text.replace("_", "")
    match = _GO_INT.fullmatch(plain)  # strconv.ParseInt(plain, 0, 64), then ParseUint
    if match:
        base, digits = next((b, match.group(g)) for g, b in _INT_BASES if match.group(g) is not None)
        value = int(digits, base) * (-1 if match.group("sign") == "-" else 1)
        if -(2**63) <= value < 2**64:
            return value
    if _GO_FLOAT.fullmatch(plain):
        return float(plain)
    return text


# Explicit tags a values file may carry: the core YAML types, which mean to helm what they mean here. Every other
# tag is an error: `!!python/…` (code in other loaders), `!!binary` (helm decodes it, we would not), `!!timestamp`,
# `!!set`, `!!omap`, local `!foo` tags and the non-specific `!`.
ALLOWED_TAGS = frozenset("tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "map", "seq"))
_IMPLICIT_TAGS = {"tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "timestamp")}
_STRING_TAGS = {"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:str"}  # resolved timestamps stay strings


class NodeBuilder:
    """Node tree -> plain Python, filling the position tables and collecting every problem."""

    def __init__(self, loaded: LoadedValues, tags: dict[tuple[int, int], str] | None = None):
        import yaml

        self.loaded = loaded
        self.tags = dict(tags or {})  # explicit tags that are refused, by node position (reported once each)
        self.constructor = yaml.constructor.SafeConstructor()
        self.problems: list[Problem] = []

    def problem(self, mark: Mark, where: tuple[Any, ...], message: str, hint: str | None = None) -> None:
        self.problems.append(
            Problem(str(self.loaded.path), mark.line + 1, mark.column + 1, json_path(where), message, hint=hint)
        )

    def key(self, key_node: Node) -> str:
        """A key as helm's YAML-to-JSON step spells it: `true`, `null`, `8`, never `True`/`None`."""
        import yaml

        if not isinstance(key_node, yaml.ScalarNode):
            return str(key_node.value)  # complex keys: helm rejects them anyway; keep something readable
        value = self.scalar(key_node, ())
        if isinstance(value, bool):
            return "true" if value else "false"
        if value is None:
            return "null"
        if isinstance(value, float):
            text = repr(value)
            return text[:-2] if text.endswith(".0") else text  # Go's FormatFloat(f, 'g', -1): 1.0 -> "1"
        return str(value)

    def refused_tag(self, node: Node, where: tuple[Any, ...]) -> bool:
        """An explicit tag other than the core ones: one problem at the node (once, however often an alias repeats it)."""
        tag = self.tags.pop((node.start_mark.line, node.start_mark.column), None)
        if tag is None:
            return False
        shown = "!!" + tag[len("tag:yaml.org,2002:") :] if tag.startswith("tag:yaml.org,2002:") else tag
        self.problem(
            node.start_mark,
            where,
            f"the YAML tag {shown} is not allowed in values",
            hint="remove the tag (values are plain strings, numbers, booleans, lists and mappings); "
            "quote the value if you mean the text",
        )
        return True

    def scalar(self, node: ScalarNode, where: tuple[Any, ...]) -> Any:
        value = self._scalar(node, where)
        if isinstance(value, str) and "\0" in value:
            self.problem(
                node.start_mark,
                where,
                "a NUL character (\\0) in a string: helm, JSON and Kubernetes do not carry it",
                hint="remove the \\0 (or \\x00, \\u0000) escape",
            )
        return value

    def _scalar(self, node: ScalarNode, where: tuple[Any, ...]) -> Any:
        if self.tags and self.refused_tag(node, where):  # `! x` resolves to a core tag: only the position tells
            return node.value
        if not node.style and node.tag == "tag:yaml.org,2002:str" and _implicit_tag(node.value) != node.tag:
            return node.value  # an explicit `!!str 16`: a plain scalar that would otherwise not be a string
        if not node.style and node.tag in _IMPLICIT_TAGS:
            value = helm_scalar(node.value)
        elif node.tag in _STRING_TAGS:
            return node.value
        else:
            value = self.construct(node, where)
        if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
            self.problem(
                node.start_mark,
                where,
                f"{node.value!r} is not a number JSON can hold (helm gets JSON)",
                hint="quote it if you mean the string",
            )
            return node.value
        return value

    def construct(self, node: Node, where: tuple[Any, ...]) -> Any:
        """Explicitly tagged scalars (`!!int "8"`, `!foo x`): PyYAML's constructor; unknown tags are errors."""
        try:
            return self.constructor.construct_object(node)
        except Exception as err:  # unknown tag (`!foo`), `!!int abc` …
            self.problem(
                node.start_mark,
                where,
                f"cannot read this value: {getattr(err, 'problem', None) or err}",
                hint="remove the tag or quote the value",
            )
            return node.value

    def convert(self, node: Any, where: tuple[Any, ...]) -> Any:  # a Node; a scalar one when no collection
        import yaml

        loaded = self.loaded  # sizes and depth are bounded already (_check_limits)
        if not isinstance(node, yaml.ScalarNode) and self.refused_tag(node, where):
            return {} if isinstance(node, yaml.MappingNode) else []
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            first: dict[str, tuple[int, int]] = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: keys written here win
                    merged = self.convert(value_node, where)
                    items = merged if isinstance(merged, list) else [merged]
                    if not all(isinstance(item, dict) for item in items) or not items:
                        self.problem(
                            value_node.start_mark,
                            where + ("<<",),
                            "the merge key << takes a mapping (an alias such as *defaults) or a list of mappings",
                            hint="helm refuses anything else; remove the << line or point it at a mapping",
                        )
                        continue
                    for item in items:
                        for k, v in item.items():
                            out.setdefault(k, v)
                    continue
                key = self.key(key_node)
                line, col = key_node.start_mark.line + 1, key_node.start_mark.column + 1
                child = where + (key,)
                if key in first:
                    first_line, first_col = first[key]
                    self.problem(
                        key_node.start_mark,
                        child,
                        f"duplicate key {key!r} (first defined on line {first_line}, column {first_col})",
                        hint="YAML keeps only one of them; remove or rename the other",
                    )
                    continue
                first[key] = (line, col)
                loaded.key_positions[child] = (line, col)
                loaded.positions[child] = (value_node.start_mark.line + 1, value_node.start_mark.column + 1)
                out[key] = self.convert(value_node, child)
            return out
        if isinstance(node, yaml.SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                child = where + (index,)
                loaded.positions[child] = (item.start_mark.line + 1, item.start_mark.column + 1)
                items.append(self.convert(item, child))
            return items
        value = self.scalar(node, where)
        if isinstance(value, str) and not node.style:  # libyaml reports plain style as ""
            loaded.plain_scalars.add(where)
        return value


def helm_text(value: Any) -> str:
    """A scalar as Helm's toYaml writes it (what a chart's env list shows). Helm reads a values file's numbers
    as float64 (12345678901234567890 becomes 12345678901234567000), which go through Go's JSON and back through
    go-yaml v2: a whole number below 2^64 is its digits (1e6 -> 1000000), any other Go's shortest %g
    (1234567.5 -> 1.2345675e+06, 1e-07); booleans true/false; null empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) < 2**53:
        return str(value)
    if isinstance(value, (int, float)):  # helm reads a values file's numbers as float64
        return _go_float_text(float(value))
    return str(value)


def _go_float_text(number: float) -> str:
    from decimal import Decimal

    if math.isnan(number) or math.isinf(number):
        return str(number)
    digits_tuple = Decimal(repr(number)).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple.digits)) or "0"
    exponent = int(digits_tuple.exponent)  # value = digits * 10**exponent
    sign = "-" if digits_tuple.sign and number != 0 else ""
    if number == 0:
        return "0"
    point = len(digits) + exponent  # digits before the decimal point
    if exponent >= 0 and abs(number) < 1e21:  # Go's JSON writes it without an exponent: an integer to go-yaml
        whole = int(digits + "0" * exponent)
        if (sign and whole <= 2**63) or (not sign and whole < 2**64):
            return sign + str(whole)
    if point - 1 < -4 or point - 1 >= 6:  # go-yaml writes floats with strconv's shortest 'g': %e out of this range
        return _go_exponent(sign, digits, point - 1)
    if point <= 0:
        return sign + "0." + "0" * -point + digits
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return sign + digits[:point] + "." + digits[point:]


def _go_exponent(sign: str, digits: str, exp: int) -> str:
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
