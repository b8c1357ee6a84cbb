"""Load a values file keeping where every key and value came from (line and column).

PyYAML's composer (libyaml, in C, when present) gives a node tree with positions; we build plain
Python from it (so the rest of the code and json.dumps see ordinary dicts, lists, str, int, float,
bool, None, in file order) and keep a position table keyed by JSON-path tuples. Plain scalars resolve
as helm reads values (`helm_scalar`: go-yaml v2 under sigs.k8s.io/yaml, YAML-1.1-like: `yes`/`on`
are true, `1.10` is the float 1.1, `08` and `1e3` are numbers, `12:30` and dates stay strings), not
as PyYAML's YAML 1.1 would (`12:30` -> 750, `1e3` -> "1e3"); quoted scalars are strings (`"1.10"`);
keys become strings as helm's YAML-to-JSON step writes them. Duplicate keys are
an error (helm would silently keep the last one), and so are `.inf`/`.nan` (JSON, which helm gets,
cannot hold them). Scalar styles are kept: substitution re-types only plain (unquoted) whole-scalar
references.

Limits, checked before anything is built (so memory and time stay bounded, and an alias bomb or a 100 000-level
nesting is one clear error, never a crash): MAX_VALUES_BYTES per file; MAX_DEPTH levels of nesting, first by our
own scan of the text (values/nesting.py: before any parser, whose own limits vary by version), then on the event
stream with aliases counted as deep as what they repeat; MAX_NODES values after expanding aliases. `-` reads stdin. Several
files (`-f a -f b`) merge as helm merges them (values/loaded.py `merge_loaded`), each value keeping the file it
came from.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any

    from yaml.error import Mark
    from yaml.nodes import Node, ScalarNode

from helm_nemo.user_errors import Problem, UserError, json_path
from helm_nemo.values.loaded import STDIN_NAME, LoadedValues

MAX_VALUES_BYTES = 4 * 1024 * 1024  # one values or recipe file (launcher scripts come in through `files:`)
MAX_NODES = 100_000  # values after expanding aliases: a "billion laughs" file must not hang the CLI
MAX_DEPTH = 100  # nesting levels (aliases count as deep as what they expand to)
STDIN = "-"


def _loader() -> Any:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~20x faster


def text_position(text: str, index: int) -> tuple[int, int]:
    """(line, column), 1-based, of the character at `index` of `text`."""
    start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - start + 1


def byte_position(raw: bytes, index: int) -> tuple[int, int]:
    """(line, column), 1-based, of byte `index` of UTF-8 `raw` (the column counts characters before it)."""
    start = raw.rfind(b"\n", 0, index) + 1
    return raw.count(b"\n", 0, index) + 1, len(raw[start:index].decode("utf-8", errors="replace")) + 1


def decode_utf8(raw: bytes) -> str:
    """UTF-8 text (a leading BOM dropped); UnicodeDecodeError's start is an index into `raw` either way."""
    if raw.startswith(b"\xef\xbb\xbf"):
        try:
            return raw[3:].decode("utf-8")
        except UnicodeDecodeError as err:
            raise UnicodeDecodeError(err.encoding, raw, err.start + 3, err.end + 3, err.reason) from None
    return raw.decode("utf-8")


def not_utf8(raw: bytes, err: UnicodeDecodeError) -> str:
    """Where and what the first byte that is not UTF-8 is: `line 3, column 9 (byte 0xe9 …)`."""
    line, column = byte_position(raw, err.start)
    return f"line {line}, column {column} (byte 0x{raw[err.start]:02x} at offset {err.start}: {err.reason})"


def _read_capped(path: Path) -> str:
    """At most MAX_VALUES_BYTES of a file (a FIFO and `<(…)` work; /dev/zero stops at the cap), or of stdin."""
    import sys

    if str(path) == STDIN_NAME:
        raw = sys.stdin.buffer.read(MAX_VALUES_BYTES + 1)
    else:
        with path.open("rb") as stream:
            raw = stream.read(MAX_VALUES_BYTES + 1)
    if len(raw) > MAX_VALUES_BYTES:
        raise UserError(
            Problem(
                str(path),
                None,
                None,
                "$",
                f"the values file is larger than {MAX_VALUES_BYTES // 2**20} MiB",
                hint="long scripts and configs go into their own files, read with `files:`",
            )
        )
    try:
        return decode_utf8(raw)
    except UnicodeDecodeError as err:
        line, column = byte_position(raw, err.start)
        raise UserError(
            Problem(
                str(path),
                line,
                column,
                "$",
                "cannot read values file: not UTF-8 text "
                f"(byte 0x{raw[err.start]:02x} at offset {err.start}: {err.reason})",
                hint="save the file as UTF-8",
            )
        ) from None


def load_values(path: str | Path) -> LoadedValues:
    """Read and parse a values file (`-`: stdin); UserError (with the path) when it is missing, unreadable,
    invalid or over the limits."""
    path = Path(STDIN_NAME) if str(path) == STDIN else Path(path)
    try:
        text = _read_capped(path)
    except FileNotFoundError:
        raise UserError(
            Problem(str(path), None, None, "$", "values file not found", hint="check the path given to --values")
        ) from None
    except IsADirectoryError:
        raise UserError(Problem(str(path), None, None, "$", "cannot read values file: it is a directory")) from None
    except OSError as err:
        raise UserError(
            Problem(str(path), None, None, "$", f"cannot read values file: {err.strerror or err}")
        ) from None
    return load_values_text(text, path)


def load_values_text(text: str, filename: str | Path) -> LoadedValues:
    """Parse like helm does (`helm_scalar`: `yes` is true, `1.10` a float), keeping every node's position."""
    import yaml

    path = Path(filename)
    _check_nesting(text, path)
    try:
        tags = _check_limits(text, path)
        documents = list(yaml.compose_all(text, Loader=_loader()))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        if mark and text[mark.index : mark.index + 1] == "\t":  # the parser's words ("cannot start any token") hide it
            raise UserError(
                Problem(
                    str(path),
                    line,
                    col,
                    "$",
                    "invalid YAML: a tab where YAML needs spaces",
                    hint="indent with spaces only; replace the tab(s) on this line",
                )
            ) from None
        raise UserError(
            Problem(
                str(path),
                line,
                col,
                "$",
                f"invalid YAML: {err.problem or err.context}",
                hint="check indentation and quoting around this line",
            )
        ) from None
    except yaml.reader.ReaderError as err:  # a character YAML never allows (NUL, other control characters)
        line, column = text_position(text, err.position) if isinstance(err.position, int) else (None, None)
        what = (
            "a NUL character"
            if err.character in (0, "\0")
            else f"the control character #x{int(err.character):04x}"
            if isinstance(err.character, int)
            else f"the character {err.character!r}"
        )
        raise UserError(
            Problem(
                str(path),
                line,
                column,
                "$",
                f"invalid YAML: {what} (YAML, JSON and helm do not carry it)",
                hint="remove it: values files are text",
            )
        ) from None
    except yaml.YAMLError as err:
        raise UserError(Problem(str(path), None, None, "$", f"invalid YAML: {err}")) from None
    documents = [d for d in documents if not _is_null(d)]
    if len(documents) > 1:
        second = documents[1].start_mark
        raise UserError(
            Problem(
                str(path),
                second.line + 1,
                second.column + 1,
                "$",
                f"a values file holds one YAML document, found {len(documents)}",
                hint="use a recipe file with `releases:` for several releases",
            )
        )
    loaded = LoadedValues(path=path, data={}, paths=[path])
    if not documents:
        return loaded  # empty file, comments only, `---` or `~`: no values
    root = documents[0]
    if not isinstance(root, yaml.MappingNode):
        kind = "a list" if isinstance(root, yaml.SequenceNode) else "a single value"
        raise UserError(
            Problem(
                str(path),
                root.start_mark.line + 1,
                root.start_mark.column + 1,
                "$",
                f"the top level must be a mapping (key: value), found {kind}",
            )
        )
    builder = _Builder(loaded, tags)
    data = builder.convert(root, ())
    if builder.problems:
        raise UserError(builder.problems, title=f"{path}: {len(builder.problems)} problem(s) reading the values:")
    loaded.data = data
    return loaded


def _check_nesting(text: str, path: Path) -> None:
    """Nesting deeper than MAX_DEPTH, found by our own scan of the text before any parser reads it (whose own
    limits and words differ between versions)."""
    from helm_nemo.values.nesting import TooDeep, nesting

    try:
        nesting(text, MAX_DEPTH)
    except TooDeep as deep:
        raise UserError(
            Problem(
                str(path),
                deep.line,
                deep.column,
                "$",
                f"the values nest deeper than {MAX_DEPTH} levels",
                hint="flatten the structure",
            )
        ) from None


def _check_limits(text: str, path: Path) -> dict[tuple[int, int], str]:
    """Walk the YAML events once (libyaml's parser does not recurse) and stop at the first limit exceeded:
    nesting deeper than MAX_DEPTH or more than MAX_NODES values, counting each alias as the size and depth
    of the node it repeats. Syntax errors are left to the composer, which reports them the usual way.
    Returns the explicit tags other than the core ones (ALLOWED_TAGS), by the (line, column) of their node:
    only the event stream tells a tag that was written from one the resolver gave."""
    import yaml

    tags: dict[tuple[int, int], str] = {}
    nodes = depth = 0
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (values, depth) of the anchored node
    open_nodes: list[list[Any]] = []  # [anchor, values before it, deepest level inside]

    def stop(event: Any, message: str, hint: str) -> None:
        mark = event.start_mark
        raise UserError(Problem(str(path), mark.line + 1, mark.column + 1, "$", message, hint=hint))

    def reached(level: int, event: Any) -> None:
        if level > MAX_DEPTH:
            stop(event, f"the values nest deeper than {MAX_DEPTH} levels", "flatten the structure")
        for entry in open_nodes:  # at most MAX_DEPTH of them
            if entry[2] < level:
                entry[2] = level

    event: Any  # the node events below have an .anchor (`kind is` is fast but does not narrow the type)
    for event in yaml.parse(text, Loader=_loader()):
        kind = type(event)
        tag = getattr(event, "tag", None)
        if tag is not None and tag not in ALLOWED_TAGS:
            mark = event.start_mark
            tags[(mark.line, mark.column) if mark else (0, 0)] = tag
        if kind is yaml.ScalarEvent:
            nodes += 1
            if event.anchor:
                sizes[event.anchor] = (1, 0)
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            nodes += 1
            depth += 1
            open_nodes.append([event.anchor, nodes, depth])
            reached(depth, event)
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            anchor, before, deepest = open_nodes.pop()
            if anchor:
                sizes[anchor] = (nodes - before + 1, deepest - depth + 1)
            depth -= 1
        elif kind is yaml.AliasEvent:
            if any(entry[0] == event.anchor for entry in open_nodes):
                stop(
                    event,
                    f"alias *{event.anchor} repeats the node it is inside of (an endless structure)",
                    "an alias may only repeat a node that is complete",
                )
            size, levels = sizes.get(event.anchor, (1, 0))
            nodes += size
            reached(depth + levels, event)
        else:
            continue
        if nodes > MAX_NODES:
            stop(
                event,
                f"more than {MAX_NODES} values after expanding aliases",
                "a values file this large is almost certainly an alias bomb",
            )
    return tags


def _is_null(node: Node | None) -> bool:
    import yaml

    return node is None or (isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null")


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


class _Builder:
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
