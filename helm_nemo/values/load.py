"""Load a values file keeping where every key and value came from (line and column).

PyYAML's composer (libyaml, in C, when present) gives a node tree with positions; values/helm_yaml.py builds
plain Python from it (so the rest of the code and json.dumps see ordinary dicts, lists, str, int, float,
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

from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any

    from yaml.nodes import Node

from helm_nemo.user_errors import Problem, UserError
from helm_nemo.values.helm_yaml import ALLOWED_TAGS, NodeBuilder
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
    builder = NodeBuilder(loaded, tags)
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
