"""Load a values file keeping where every key and value came from (line and column).

PyYAML's composer (libyaml, in C) gives a node tree with positions; we build plain Python from it (so
the rest of the code and json.dumps see ordinary dicts, lists, str, int, float, bool, None) and keep a
position table keyed by JSON-path tuples. Scalars resolve as helm reads values (YAML 1.1: `yes` is
true), duplicate keys are an error (helm would silently keep the last), and scalar styles are kept:
substitution re-types only plain (unquoted) whole-scalar references.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .user_errors import Problem, UserError


@dataclass
class LoadedValues:
    path: Path
    data: dict[str, Any]
    positions: dict[tuple, tuple[int, int]] = field(default_factory=dict)  # value positions
    key_positions: dict[tuple, tuple[int, int]] = field(default_factory=dict)
    plain_scalars: set[tuple] = field(default_factory=set)  # unquoted string scalars

    def position(self, where: tuple) -> tuple[int | None, int | None]:
        """(line, column), 1-based, of a key (preferred) or value; the nearest parent when absent."""
        where = tuple(where)
        while True:
            if where in self.key_positions:
                return self.key_positions[where]
            if where in self.positions:
                return self.positions[where]
            if not where:
                return (1, 1)
            where = where[:-1]


def _loader():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~20x faster


def load_values(path: str | Path) -> LoadedValues:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(Problem(str(path), None, None, "$", "values file not found",
                                hint="check the path given to --values")) from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(Problem(str(path), None, None, "$", f"cannot read values file: {err}")) from None
    return load_values_text(text, path)


def load_values_text(text: str, filename: str | Path) -> LoadedValues:
    """Parse like helm does (YAML 1.1 scalars: `yes` is true), keeping every node's position."""
    import yaml

    path = Path(filename)
    try:
        documents = [d for d in yaml.compose_all(text, Loader=_loader()) if d is not None]
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise UserError(Problem(str(path), line, col, "$", f"invalid YAML: {err.problem or err.context}",
                                hint="check indentation and quoting around this line")) from None
    if len(documents) > 1:
        raise UserError(Problem(str(path), None, None, "$", "a values file holds one YAML document, found "
                                f"{len(documents)}", hint="use a recipe file with `releases:` for several releases"))
    loaded = LoadedValues(path=path, data={})
    if not documents:
        return loaded
    root = documents[0]
    if not isinstance(root, yaml.MappingNode):
        raise UserError(Problem(str(path), root.start_mark.line + 1, root.start_mark.column + 1, "$",
                                "the top level must be a mapping"))
    loaded.data = _convert(root, (), loaded, yaml.constructor.SafeConstructor())
    return loaded


_STRING_TAGS = {"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary", "tag:yaml.org,2002:str"}


def _convert(node, where: tuple, loaded: LoadedValues, constructor) -> Any:
    import yaml

    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                merged = _convert(value_node, where, loaded, constructor)
                for item in merged if isinstance(merged, list) else [merged]:
                    if isinstance(item, dict):
                        for k, v in item.items():
                            out.setdefault(k, v)
                continue
            key = str(constructor.construct_object(key_node)) if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            line, col = key_node.start_mark.line + 1, key_node.start_mark.column + 1
            if key in first_line:
                raise UserError(Problem(str(loaded.path), line, col, _json_path(where + (key,)),
                                        f"duplicate key {key!r} (first defined on line {first_line[key]})",
                                        hint="YAML keeps only one of them; remove or rename the other"))
            first_line[key] = line
            child = where + (key,)
            loaded.key_positions[child] = (line, col)
            loaded.positions[child] = (value_node.start_mark.line + 1, value_node.start_mark.column + 1)
            out[key] = _convert(value_node, child, loaded, constructor)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            child = where + (index,)
            loaded.positions[child] = (item.start_mark.line + 1, item.start_mark.column + 1)
            items.append(_convert(item, child, loaded, constructor))
        return items
    if node.tag in _STRING_TAGS:
        if not node.style and node.tag == "tag:yaml.org,2002:str":  # libyaml reports plain as ""
            loaded.plain_scalars.add(where)
        return node.value
    return constructor.construct_object(node)


def _json_path(parts: tuple) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
