#!/usr/bin/env python3
"""Fails on an import circle: builds the graph of which module imports which, finds its cycles and
prints each one; exit status 1 when there is any.

    python .ci/import_cycles.py            # every language it knows
    python .ci/import_cycles.py python     # only the Python package (or: rust)
    python .ci/import_cycles.py --type-checking   # imports under `if TYPE_CHECKING:` count too

Python (python/trajcore): every ``import x`` and ``from x import y`` statement counts, at the top of
a module or inside a function: a circle that only a deferred import breaks is still a circle (the
two modules cannot be understood, tested or moved apart). ``from package import name`` is an
edge to ``package.name`` when that is a module, else to the package. An import of ``trajcore.a.b``
runs ``trajcore/a/__init__.py`` first, so it is an edge to the package ``trajcore.a`` too; the
root package ``trajcore`` is left out of that rule (it gathers the public names of every module).

Imports under ``if TYPE_CHECKING:`` are left out (they never run: an annotation may name a type of
a module that imports this one). ``--type-checking`` counts them too; the package has one such
circle, on purpose: `trajcore.read.episode` shows itself in a notebook through the viewer
(``Episode._repr_html_``), and the viewer's functions are annotated with `Episode`.

Rust (rust/core/src and rust/python/src, each crate its own modules): see `rust_graph`.

Each language is one function that returns its graph ({module: {module it imports: where}}); the
cycle finder is shared.

Standard library only: CI runs it before anything is installed.
"""

from __future__ import annotations

import ast
import itertools
import re
import sys
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# module -> {imported module -> "file:line" of the first import of it}
Graph = dict[str, dict[str, str]]
# What the cycle finder reads of a graph: each module's imports (a Graph, or sets in tests).
Edges = Mapping[str, Collection[str]]


def _python_modules(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> source file, for every .py file of the package and every .pyi stub
    of an extension module (``_core.pyi``: it has no .py, and it imports nothing of ours)."""
    modules: dict[str, Path] = {}
    base = package_dir.parent
    sources = sorted(package_dir.rglob("*.py"))
    stubs = [p for p in sorted(package_dir.rglob("*.pyi")) if p.with_suffix(".py") not in sources]
    for path in [*sources, *stubs]:
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:``."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, type_checking: bool) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth; those under ``if TYPE_CHECKING:`` only with
    `type_checking`."""
    for node in ast.iter_child_nodes(tree):
        if not type_checking and isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), type_checking)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node, type_checking)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name an ``ImportFrom`` names (relative imports resolved against `module`)."""
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts.pop()
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, node.module] if node.module else parts)


def python_graph(type_checking: bool = False, package_dir: Path = ROOT / "python" / "trajcore") -> Graph:
    """The import graph of a Python package, restricted to its own modules."""
    modules = _python_modules(package_dir)
    graph: Graph = {name: {} for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in _imports(tree, type_checking):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve(name, is_package, node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            for target in targets:
                parts = target.split(".")
                # The module and the packages above it (whose __init__ runs first), the root
                # excepted; a name that is no module of ours (`import a.b.c` of a class) is left.
                for i in range(2, len(parts) + 1):
                    ran = ".".join(parts[:i])
                    if ran in modules and ran != name and not name.startswith(ran + "."):
                        graph[name].setdefault(ran, where)
    return graph


# Rust: a module is a file (``mod.rs`` its folder's). Every path that starts with ``crate::``,
# ``super::`` or ``self::`` (in ``use`` lines and in code), and every ``use`` of a child module by
# its bare name, is an edge to the longest module prefix it names; a module's own ancestors are
# left out (a child may use what its parent declares), and so are test modules (``#[cfg(test)]
# mod tests``: they see their file's items). Comments are skipped.
_RUST_PATH = re.compile(r"\b((?:crate|super|self)(?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))+)")
_RUST_USE = re.compile(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);")


def _rust_modules(src: Path) -> dict[tuple[str, ...], Path]:
    modules: dict[tuple[str, ...], Path] = {}
    for path in sorted(src.rglob("*.rs")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        modules[tuple(parts)] = path
    return modules


def _rust_use_paths(text: str) -> Iterable[tuple[str, int]]:
    """(path, offset) of each path a ``use`` brings in, groups flattened; ``a::{b, c::d}``."""
    for m in _RUST_USE.finditer(text):
        body = " ".join(m.group(1).split())
        for path in _flatten_use(body):
            yield path, m.start()


def _flatten_use(body: str) -> list[str]:
    brace = body.find("{")
    if brace < 0:
        return [body.split(" as ")[0].strip()]
    prefix = body[:brace].rstrip(":").strip()
    inner, depth, item, items = body[brace + 1 : body.rfind("}")], 0, "", []
    for ch in inner:
        depth += (ch == "{") - (ch == "}")
        if ch == "," and depth == 0:
            items.append(item)
            item = ""
        else:
            item += ch
    items.append(item)
    paths = []
    for part in filter(None, (i.strip() for i in items)):
        for sub in _flatten_use(part):
            paths.append(prefix if sub == "self" else f"{prefix}::{sub}")
    return paths


def _rust_resolve(path: str, here: tuple[str, ...], modules: Collection[tuple[str, ...]]) -> tuple[str, ...] | None:
    segments = path.split("::")
    if segments[0] == "crate":
        base: tuple[str, ...] = ()
        segments = segments[1:]
    elif segments[0] in ("super", "self"):
        base = here
        while segments and segments[0] in ("super", "self"):
            base = base[:-1] if segments[0] == "super" else base
            segments = segments[1:]
    elif (*here, segments[0]) in modules:  # a child module named bare, in a `use`
        base = here
    else:
        return None
    best, candidate = base, base
    for segment in segments:
        candidate = (*candidate, segment)
        if candidate not in modules:
            break
        best = candidate
    return best


def _rust_crate_graph(src: Path, crate: str) -> Graph:
    modules = _rust_modules(src)
    graph: Graph = {}
    for module, path in modules.items():
        name = "::".join((crate, *module))
        graph[name] = {}
        text = re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), path.read_text(encoding="utf-8"))
        tests = re.search(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)
        text = text[: tests.start()] if tests else text
        found = [*_rust_use_paths(text), *((m.group(1), m.start()) for m in _RUST_PATH.finditer(text))]
        for target_path, offset in found:
            target = _rust_resolve(target_path, module, modules)
            if target is None or target == module[: len(target)]:
                continue  # not ours, itself, or an ancestor
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            where = f"{shown}:{text.count(chr(10), 0, offset) + 1}"
            graph[name].setdefault("::".join((crate, *target)), where)
    return graph


def rust_graph(type_checking: bool = False) -> Graph:
    """The module graphs of the core crate and the bindings crate (one graph: their names are
    prefixed with the crate's); `type_checking` means nothing in Rust."""
    del type_checking
    return {
        **_rust_crate_graph(ROOT / "rust" / "core" / "src", "trajcore_core"),
        **_rust_crate_graph(ROOT / "rust" / "python" / "src", "trajcore_py"),
    }


LANGUAGES: dict[str, Callable[[bool], Graph]] = {"python": python_graph, "rust": rust_graph}


def cycles(graph: Edges) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan's algorithm,
    iterative), each given as a shortest path around it from its smallest module name."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = []
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work.append((root, iter(sorted(graph[root]))))
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return [_shortest_cycle(graph, component) for component in sorted(components, key=min)]


def component_of(graph: Edges, module: str) -> set[str]:
    """The modules on some cycle through `module`: those it reaches that reach it back."""
    reached = _reachable(graph, module)
    return {m for m in reached if module in _reachable(graph, m)} | {module}


def _reachable(graph: Edges, start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for child in graph.get(todo.pop(), {}):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def _shortest_cycle(graph: Edges, component: set[str]) -> list[str]:
    """A shortest path from the component's smallest module back to itself, inside it."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child not in component:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start} in a strongly connected component")


def main(argv: list[str]) -> int:
    type_checking = "--type-checking" in argv
    names = [a for a in argv if a != "--type-checking"] or list(LANGUAGES)
    unknown = [n for n in names if n not in LANGUAGES]
    if unknown:
        print(f"unknown language {', '.join(unknown)}; known: {', '.join(LANGUAGES)}", file=sys.stderr)
        return 2
    found = 0
    for language in names:
        graph = LANGUAGES[language](type_checking)
        for cycle in cycles(graph):
            found += 1
            print(f"{language}: import cycle of {len(cycle) - 1} modules:")
            for a, b in itertools.pairwise(cycle):
                print(f"    {a} -> {b}  ({graph[a][b]})")
            if len(component_of(graph, cycle[0])) > len(cycle) - 1:
                print(f"  (one of the cycles among: {', '.join(sorted(component_of(graph, cycle[0])))})")
        print(f"{language}: {len(graph)} modules, {sum(map(len, graph.values()))} imports", file=sys.stderr)
    if found:
        print(f"{found} import cycle(s): break each (move what both need to a module of its own)", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
