"""The package's modules import one another without a circle: read from the source with `ast`,
counting imports inside functions too (a lazy import is still a dependency), but not those
under ``if TYPE_CHECKING:`` (annotations only, never run).

An import of ``trajcore.a.b`` also runs ``trajcore/a/__init__.py`` first, so it counts as an
import of the package ``trajcore.a`` too; the root package ``trajcore`` is left out of that
rule: it is where every user starts, and it imports the public names of every module."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

# The check CI runs (`.ci/import_cycles.py`): its graph and its cycle finder.
SCRIPT = Path(__file__).resolve().parent.parent / ".ci" / "import_cycles.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_cycles", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


import_cycles = _script()


def import_graph() -> dict[str, set[str]]:
    return {name: set(targets) for name, targets in import_cycles.python_graph().items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of `graph` (its modules in import order, the first repeated last), or None."""
    found: list[list[str]] = import_cycles.cycles(graph)
    return found[0] if found else None


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
