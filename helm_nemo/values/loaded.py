"""LoadedValues: a values file as plain data plus where each part of it is written (file, line and column).

values/load.py makes one per file; several `-f` files merge into one as helm merges them (`merge_loaded`),
every path keeping the file and position of the one that wrote it. Every error of the later steps (substitution,
`files:`, the schema, the other targets) finds its line here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any

STDIN_NAME = "<stdin>"


@dataclass
class LoadedValues:
    """Plain data plus where each part of it is written in the file."""

    path: Path
    data: dict[str, Any]
    positions: dict[tuple[Any, ...], tuple[int, int]] = field(default_factory=dict)  # value (or list item) positions
    key_positions: dict[tuple[Any, ...], tuple[int, int]] = field(default_factory=dict)
    plain_scalars: set[tuple[Any, ...]] = field(default_factory=set)  # unquoted string scalars (re-typable)
    sources: dict[tuple[Any, ...], Path] = field(default_factory=dict)  # merged files: the file each path came from
    paths: list[Path] = field(default_factory=list)  # every file merged into this one (just `path` otherwise)

    @property
    def filename(self) -> str:
        return str(self.path)

    @property
    def label(self) -> str:
        """The file name(s) for a title: `a.yaml`, or `a.yaml + b.yaml` for merged files."""
        return " + ".join(str(p) for p in self.paths) if len(self.paths) > 1 else str(self.path)

    def file_of(self, where: tuple[Any, ...]) -> Path:
        """The file a path (or its nearest existing parent) was written in."""
        where = tuple(where)
        while self.sources:
            if where in self.sources:
                return self.sources[where]
            if not where:
                break
            where = where[:-1]
        return self.path

    def base_dir(self, where: tuple[Any, ...] = ()) -> Path:
        """The folder relative paths written at `where` start from: that file's folder (stdin: the current one)."""
        source = self.file_of(where)
        return Path.cwd() if str(source) == STDIN_NAME else source.parent

    def position(self, where: tuple[Any, ...]) -> tuple[int | None, int | None]:
        """(line, column), 1-based, of a key (preferred) or value; the nearest existing parent when absent."""
        where = tuple(where)
        while True:
            if where in self.key_positions:
                return self.key_positions[where]
            if where in self.positions:
                return self.positions[where]
            if not where:
                return (1, 1)
            where = where[:-1]

    def value_position(self, where: tuple[Any, ...]) -> tuple[int | None, int | None]:
        """(line, column) of the value itself rather than its key (same fallback as position())."""
        where = tuple(where)
        if where in self.positions:
            return self.positions[where]
        return self.position(where)

    def is_plain(self, where: tuple[Any, ...]) -> bool:
        """True when the string at `where` was written unquoted (plain style)."""
        return tuple(where) in self.plain_scalars


def merge_maps(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Two `-f` files as helm merges them (mergeMaps in helm's pkg/cli/values): keys of the later file win;
    where both hold a mapping the two merge, key by key; anything else (lists, scalars, null) replaces."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_maps(out[key], value)
        else:
            out[key] = value
    return out


def merge_loaded(parts: list[LoadedValues]) -> LoadedValues:
    """Several values files as one, merged like helm's `-f a -f b`; every path keeps the position and the
    file of the one that wrote it (the last file holding that path: a later file wins every path it has)."""
    if len(parts) == 1:
        return parts[0]
    data: dict[str, Any] = {}
    for part in parts:
        data = merge_maps(data, part.data)
    merged = LoadedValues(path=parts[0].path, data=data, paths=[p for part in parts for p in part.paths])

    def visit(node: Any, where: tuple[Any, ...]) -> None:
        owner = next(
            part for part in reversed(parts) if where in part.positions or where in part.key_positions or not where
        )
        merged.sources[where] = owner.path
        for table in ("positions", "key_positions"):
            if where in getattr(owner, table):
                getattr(merged, table)[where] = getattr(owner, table)[where]
        if where in owner.plain_scalars:
            merged.plain_scalars.add(where)
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in items:
            visit(child, where + (key,))

    visit(data, ())
    return merged
