"""The modules of helm_nemo import one another without circles.

The graph is read from the source with ast (nothing is imported): an edge A -> B for every `import B` or
`from B import x` in A, whether at module level, under `if TYPE_CHECKING:` or inside a function (a lazy import
keeps start-up fast, but a circle through it still means two rooms that cannot be read apart). An import of a
module's own package (`from helm_nemo.cli import COMMANDS` in helm_nemo/cli/group.py) is no edge: Python runs a
package's __init__ before any of its modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "helm_nemo"


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports(module: str, path: Path, modules: dict[str, Path], *, lazy: bool) -> set[str]:
    """The helm_nemo modules `module` imports: module level (and TYPE_CHECKING blocks), plus function bodies
    when `lazy`."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()

    def target(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not lazy:
                continue
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package[: len(package) - child.level + 1] + ([base] if base else []))
                # `from pkg import submodule` is an edge to the submodule; `from pkg import name` to pkg
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in child.names]
            else:
                visit(child)
                continue
            for name in names:
                imported = target(name)
                if imported and imported != module and not module.startswith(imported + "."):
                    found.add(imported)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def graph(*, lazy: bool) -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports(name, path, modules, lazy=lazy) for name, path in modules.items()}


@pytest.mark.parametrize("lazy", [False, True], ids=["module-level", "with-lazy-imports"])
def test_no_import_circles(lazy):
    assert circles(graph(lazy=lazy)) == []


def test_the_graph_reader_sees_circles_and_lazy_imports():
    """The reader itself: a planted circle is found, and lazy imports are edges only when asked for."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    modules = module_names()
    top, every = graph(lazy=False), graph(lazy=True)
    # helm_nemo/cli/release_commands.py: `from helm_nemo.cli import _fail, …` at module level (its own package:
    # no edge), `from helm_nemo.values.plan import build_plans` inside a function (lazy)
    assert "helm_nemo.cli" not in top["helm_nemo.cli.release_commands"]
    assert "helm_nemo.values.plan" in every["helm_nemo.cli.release_commands"]
    assert "helm_nemo.values.plan" not in top["helm_nemo.cli.release_commands"]
    assert all(name in modules for edges in every.values() for name in edges)
