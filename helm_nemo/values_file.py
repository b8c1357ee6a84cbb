"""Load a values file keeping where every key and value came from (line and column).

ruamel.yaml's round-trip loader records positions; we convert its types to plain Python (so the
rest of the code and json.dumps see ordinary dicts, lists, str, int, float, bool, None) and keep a
position table keyed by JSON-path tuples. Scalar styles are kept too: substitution re-types only
plain (unquoted) whole-scalar references.
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


def _yaml():
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt", pure=True)
    yaml.allow_duplicate_keys = False
    yaml.preserve_quotes = True  # quoted scalars stay strings through substitution
    return yaml


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
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import MarkedYAMLError

    path = Path(filename)
    try:
        documents = list(_yaml().load_all(text))
    except DuplicateKeyError as err:
        line = err.problem_mark.line + 1 if err.problem_mark else None
        col = err.problem_mark.column + 1 if err.problem_mark else None
        first = err.context_mark.line + 1 if err.context_mark else None
        key = str(err.problem).split('"')[1] if '"' in str(err.problem) else "?"
        raise UserError(Problem(str(path), line, col, "$", f"duplicate key {key!r} (first defined on line {first})",
                                hint="YAML keeps only one of them; remove or rename the other")) from None
    except MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise UserError(Problem(str(path), line, col, "$", f"invalid YAML: {err.problem or err.context}",
                                hint="check indentation and quoting around this line")) from None
    documents = [d for d in documents if d is not None]
    if len(documents) > 1:
        raise UserError(Problem(str(path), None, None, "$", "a values file holds one YAML document, found "
                                f"{len(documents)}", hint="use a recipe file with `releases:` for several releases"))
    root = documents[0] if documents else {}
    if not isinstance(root, dict):
        raise UserError(Problem(str(path), 1, 1, "$", f"the top level must be a mapping, found {type(root).__name__}"))
    loaded = LoadedValues(path=path, data={})
    loaded.data = _convert(root, (), loaded)
    return loaded


def _convert(node: Any, where: tuple, loaded: LoadedValues) -> Any:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import ScalarString

    if isinstance(node, CommentedMap):
        out = {}
        for key, value in node.items():
            child = where + (str(key),)
            try:
                kl, kc = node.lc.key(key)
                loaded.key_positions[child] = (kl + 1, kc + 1)
                vl, vc = node.lc.value(key)
                loaded.positions[child] = (vl + 1, vc + 1)
            except (KeyError, TypeError, AttributeError):
                pass
            out[str(key)] = _convert(value, child, loaded)
        return out
    if isinstance(node, CommentedSeq):
        out_list = []
        for index, value in enumerate(node):
            child = where + (index,)
            try:
                il, ic = node.lc.item(index)
                loaded.positions[child] = (il + 1, ic + 1)
            except (KeyError, TypeError, AttributeError):
                pass
            out_list.append(_convert(value, child, loaded))
        return out_list
    if isinstance(node, ScalarString):
        return str(node)
    if isinstance(node, str):
        loaded.plain_scalars.add(where)
        return str(node)
    if isinstance(node, bool) or node is None:
        return node
    if type(node).__name__ == "ScalarBoolean":
        return bool(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node
