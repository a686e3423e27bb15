"""The package's modules import one another without a circle: read from the source with `ast`,
counting imports inside functions too (a lazy import is still a dependency), but not those
under ``if TYPE_CHECKING:`` (annotations only, never run).

An import of ``trajcore.a.b`` also runs ``trajcore/a/__init__.py`` first, so it counts as an
import of the package ``trajcore.a`` too; the root package ``trajcore`` is left out of that
rule: it is where every user starts, and it imports the public names of every module."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "trajcore"
ROOT = "trajcore"


def _modules() -> dict[str, Path | None]:
    """Every module of the package by dotted name (a compiled one, known by its stub: None)."""
    out: dict[str, Path | None] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    for stub in sorted(PACKAGE.rglob("*.pyi")):
        out.setdefault(".".join(stub.relative_to(PACKAGE.parent).with_suffix("").parts), None)
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement below `node`, at any depth, except under ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                if isinstance(other, ast.Import | ast.ImportFrom):
                    yield other
                yield from _imports(other)
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        yield from _imports(child)


def _targets(
    name: str, is_package: bool, node: ast.Import | ast.ImportFrom, modules: dict[str, Path | None]
) -> set[str]:
    """The package's modules an import statement in module `name` runs."""
    named: set[str] = set()
    if isinstance(node, ast.Import):
        named.update(alias.name for alias in node.names)
    else:
        base = node.module or ""
        if node.level:
            here = name.split(".") if is_package else name.split(".")[:-1]
            here = here[: len(here) - (node.level - 1)]
            base = ".".join([*here, base] if base else here)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            named.add(sub if sub in modules else base)
    out = set()
    for target in named:
        parts = target.split(".")
        # The module itself and the packages above it, the root excepted.
        out.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))
    return {t for t in out if t in modules and t != name and not name.startswith(t + ".")}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = set()
        if path is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _imports(tree):
            graph[name] |= _targets(name, path.name == "__init__.py", node, modules)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of `graph` (its modules in import order, the first repeated last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_the_graph_sees_the_package() -> None:
    graph = import_graph()
    assert {"trajcore.read.dataset", "trajcore.read.episode", "trajcore.viewer", "trajcore.formats.frames"} <= set(
        graph
    )
    assert "trajcore.read.episodes" in graph["trajcore.read.dataset"]
    # A lazy import counts: the notebook hook of an episode imports the viewer.
    assert "trajcore.viewer" in graph["trajcore.read.episode"]
    # An import under TYPE_CHECKING does not.
    assert "trajcore.read.dataset" not in graph["trajcore.read.episode"]


def test_the_checker_finds_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle_in_the_package() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "an import circle: " + " -> ".join(cycle or [])
