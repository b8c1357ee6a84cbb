"""How deep a YAML text nests, read before any YAML parser sees it.

Why our own scan: a parser's own limit speaks before ours and in its words, and it moves between releases
(PyYAML 6.0.4's libyaml stops flow nesting at 1,000 levels while it looks ahead for a key, so `[[[[…` never
reached helm-nemo's MAX_DEPTH check on the event stream). This scan reads the text line by line, knows
just enough YAML to tell structure from text (block collections by their indentation and `- `/`? `/`key:`
indicators, flow collections by their brackets, quoted and block scalars and comments skipped), and counts
collections the way the event stream does. It never raises on malformed YAML: the parser reports that.

One known under-count: an implicit single-pair mapping inside a flow sequence (`[a: b]`) is a mapping the
scan does not count, so such nesting is seen at most half as deep; the event-stream check after it counts it
exactly. Nothing is ever counted deeper than the parser sees it, so a valid file is never refused here.
"""

from __future__ import annotations

import re

_LEAD = re.compile(r"( *)((?:[-?:](?:[ \t]+|$))*)")  # indentation, then block indicators `- `, `? `, `: `
_INDICATOR = re.compile(r"[-?:]")
_PROPERTIES = re.compile(r"[ \t]*(?:[&!]\S*[ \t]+)*")  # spaces, anchors and tags before a node
_PLAIN_END = re.compile(r":(?:[ \t]|$)|[ \t]#")  # a plain scalar ends at `: ` (it was a key) or ` #`
_FLOW_SIGNIFICANT = re.compile(r"[\[\]{}\"'#]")
_DOUBLE_END = re.compile(r'(?:[^"\\]|\\.)*"')
_SINGLE_END = re.compile(r"(?:[^']|'')*'(?!')")
_NODE_START_BEFORE = frozenset("[{,:?")  # in flow, a quote opens a scalar only after one of these (or spaces)


class TooDeep(Exception):
    def __init__(self, line: int, column: int, depth: int):
        super().__init__(f"{depth} levels at line {line}, column {column}")
        self.line, self.column, self.depth = line, column, depth


class _Scan:
    def __init__(self, limit: int | None):
        self.limit = limit
        self.block: list[tuple[int, str]] = []  # open block collections: (column, "seq" | "map")
        self.flow = 0  # open flow collections
        self.quote = ""  # the quote of a scalar that continues on the next line
        self.block_scalar_parent: int | None = None  # lines indented more than this belong to a `|`/`>` scalar
        self.deepest = (0, 0, 0)  # depth, line, column (1-based) where it was first reached
        self.line = 0

    def _reached(self, column: int) -> None:
        depth = len(self.block) + self.flow
        if depth > self.deepest[0]:
            self.deepest = (depth, self.line, column + 1)
            if self.limit is not None and depth > self.limit:
                raise TooDeep(self.line, column + 1, depth)

    def _open_block(self, column: int, kind: str) -> None:
        block = self.block
        if kind == "map":  # a key at a column closes a compact sequence at that column (`a:\n- x\nb: y`)
            while block and (block[-1][0] > column or (block[-1][0] == column and block[-1][1] == "seq")):
                block.pop()
        else:
            while block and block[-1][0] > column:
                block.pop()
        if not block or block[-1] != (column, kind):
            block.append((column, kind))
            self._reached(column)

    def run(self, text: str) -> tuple[int, int, int]:
        for self.line, line in enumerate(text.split("\n"), start=1):
            line = line.rstrip("\r")
            position = 0
            if self.quote:
                position = self._quoted_end(line, 0)
                if position < 0:
                    continue
                if not self.flow:
                    self._after_block_scalar_text(line, position)
                    continue
            if self.flow:
                self._flow(line, position)
                continue
            if self.block_scalar_parent is not None:
                stripped = line.lstrip(" ")
                if not stripped or len(line) - len(stripped) > self.block_scalar_parent:
                    continue
                self.block_scalar_parent = None
            self._block_line(line)
        return self.deepest

    def _block_line(self, line: str) -> None:
        lead = _LEAD.match(line)
        assert lead is not None  # the pattern matches the empty string
        indent = len(lead.group(1))
        rest = line[indent:].lstrip("\t ")
        if not rest or rest[0] == "#":
            return  # blank lines and comments close nothing
        if indent == 0 and (line.startswith(("---", "...")) and line[3:4] in ("", " ", "\t") or line[0] == "%"):
            self.block.clear()  # a new document (or a directive): nothing is open
            return
        for indicator in _INDICATOR.finditer(line, indent, lead.end(2)):  # `- - ? x`: one collection each
            self._open_block(indicator.start(), "seq" if indicator.group() == "-" else "map")
        self._node(line, lead.end(2), key_allowed=True)

    def _node(self, line: str, position: int, key_allowed: bool) -> None:
        """A node starting at `position` of a block-context line: a key, a flow collection, a quoted or block
        scalar, or plain text."""
        position = _PROPERTIES.match(line, position).end()  # type: ignore[union-attr]
        first = line[position : position + 1]
        if not first or first == "#":
            return
        if first in "[{":
            self.flow = 1
            self._reached(position)
            self._flow(line, position + 1)
        elif first in "\"'":
            self.quote = first
            end = self._quoted_end(line, position + 1)
            if end >= 0 and key_allowed:
                self._after_block_scalar_text(line, end, key_column=position)
        elif first in "|>":
            self.block_scalar_parent = self.block[-1][0] if self.block else -1
        elif key_allowed:
            plain_end = _PLAIN_END.search(line, position)
            if plain_end and plain_end.group()[0] == ":":
                self._open_block(position, "map")
                self._node(line, plain_end.end(), key_allowed=False)

    def _after_block_scalar_text(self, line: str, position: int, key_column: int | None = None) -> None:
        """After a quoted scalar closed in block context: `: ` makes it a key (of a mapping at its column)."""
        rest = line[position:].lstrip(" \t")
        if key_column is not None and rest[:1] == ":" and rest[1:2] in ("", " ", "\t"):
            self._open_block(key_column, "map")
            self._node(line, len(line) - len(rest) + 1, key_allowed=False)

    def _quoted_end(self, line: str, position: int) -> int:
        """The position after the closing quote of the open quoted scalar, or -1 when it continues."""
        end = (_DOUBLE_END if self.quote == '"' else _SINGLE_END).match(line, position)
        if not end:
            return -1
        self.quote = ""
        return end.end()

    def _flow(self, line: str, position: int) -> None:
        """Inside flow collections (which may span lines): brackets count, quoted scalars and comments do not."""
        while True:
            found = _FLOW_SIGNIFICANT.search(line, position)
            if not found:
                return
            char, at = found.group(), found.start()
            if char in "[{":
                self.flow += 1
                self._reached(at)
                position = at + 1
            elif char in "]}":
                self.flow -= 1
                if not self.flow:
                    return  # the rest of the line (`]: value`, a comment) opens nothing the scan needs
                position = at + 1
            elif char == "#":
                if at == 0 or line[at - 1] in " \t":
                    return
                position = at + 1
            else:
                before = line[:at].rstrip(" \t")
                if before and before[-1] not in _NODE_START_BEFORE:
                    position = at + 1  # a quote inside plain text (`[it's]`)
                    continue
                self.quote = char
                position = self._quoted_end(line, at + 1)
                if position < 0:
                    return


_LEADS = re.compile(r"^[ \t?:-]*", re.M)


def depth_bound(text: str) -> int:
    """A cheap upper bound of the depth: a block collection starts at a column where a line's indicators or its
    first key are (at most two collections per column: a mapping and its compact sequence), and each flow
    collection needs an opening bracket. A 4 MiB file is bounded in ~0.1 s; scanning it takes seconds."""
    columns: set[int] = set()
    for lead in set(_LEADS.findall(text)):
        columns.add(len(lead))
        columns.update(found.start() for found in _INDICATOR.finditer(lead))
    return 2 * len(columns) + text.count("[") + text.count("{")


def nesting(text: str, limit: int | None = None) -> tuple[int, int, int]:
    """(depth, line, column) of the deepest nesting of collections in `text`, where it is first reached.
    With `limit`, stops at the first collection deeper than it: TooDeep(line, column, depth); a text whose
    depth_bound is within the limit is not scanned (then the depth returned is the bound, line and column 0)."""
    if limit is not None:
        bound = depth_bound(text)
        if bound <= limit:
            return (bound, 0, 0)
    return _Scan(limit).run(text)
