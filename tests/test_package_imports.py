"""The package's modules import one another without a circle: read from the source with `ast`,
counting imports inside functions too (a lazy import is still a dependency), but not those
under ``if TYPE_CHECKING:`` (annotations only, never run).

An import of ``trajcore.a.b`` also runs ``trajcore/a/__init__.py`` first, so it counts as an
import of the package ``trajcore.a`` too; the root package ``trajcore`` is left out of that
rule: it is where every user starts, and it imports the public names of every module."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
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


def test_the_rust_graph_sees_uses_and_paths(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "room").mkdir(parents=True)
    (src / "lib.rs").write_text("mod room;\npub mod top;\n")
    (src / "room" / "mod.rs").write_text("pub mod a;\npub mod b;\npub use a::Thing;\n")
    (src / "room" / "a.rs").write_text("use super::{b::{self, Other}};\n// crate::top is only a comment\n")
    (src / "room" / "b.rs").write_text(
        "pub fn f() { crate::top::g(); }\n#[cfg(test)]\nmod tests {\n  use crate::room::a;\n}\n"
    )
    (src / "top.rs").write_text("pub fn g() { let _ = crate::room::a::Thing; }\n")
    graph = {k: set(v) for k, v in import_cycles._rust_crate_graph(src, "c").items()}
    assert graph["c::room"] == {"c::room::a"}  # a child named bare in a `use`
    assert graph["c::room::a"] == {"c::room::b"}  # a group; the comment is no import
    assert graph["c::room::b"] == {"c::top"}  # a path in code; its tests' imports are left out
    assert find_cycle(graph) == ["c::room::a", "c::room::b", "c::top", "c::room::a"]


def test_no_import_circle_in_the_rust_crates() -> None:
    graph = {name: set(targets) for name, targets in import_cycles.rust_graph().items()}
    assert {"trajcore_core::reader::store::shard", "trajcore_core::objstore::uploads", "trajcore_py::batch"} <= set(
        graph
    )
    cycle = find_cycle(graph)
    assert cycle is None, "an import circle: " + " -> ".join(cycle or [])


# What `import trajcore` leaves for later, and the public names that bring it when asked for.
LEFT_FOR_LATER = [
    "fractions",
    "trajcore.formats.from_lerobot",
    "trajcore.formats.lerobot_stats",
    "trajcore.formats.to_lerobot",
    "trajcore.formats.to_mp4",
    "trajcore.tools.card",
    "trajcore.tools.lerobot",
]


def test_import_leaves_lerobot_until_it_is_asked_for() -> None:
    # A fresh interpreter: this one imported whatever earlier tests needed.
    code = f"""if True:
        import json, sys
        import trajcore
        before = sorted(m for m in {LEFT_FOR_LATER!r} if m in sys.modules)
        import trajcore.formats
        names = (trajcore.from_lerobot, trajcore.to_lerobot, trajcore.formats.from_lerobot)
        ns = {{}}
        exec("from trajcore import *", ns)
        print(json.dumps({{
            "before": before,
            "functions": [f.__module__ + "." + f.__name__ for f in names],
            "same": trajcore.from_lerobot is trajcore.formats.from_lerobot is ns["from_lerobot"],
            "star": ns["to_lerobot"] is trajcore.to_lerobot,
            "after": "trajcore.tools.lerobot" in sys.modules,
        }}))
    """
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert out["before"] == []
    assert out["functions"] == [
        "trajcore.formats.from_lerobot.from_lerobot",
        "trajcore.tools.lerobot.to_lerobot",
        "trajcore.formats.from_lerobot.from_lerobot",
    ]
    assert out["same"] and out["star"] and out["after"]


# Getting data out, looking at episodes and the tools over files: `import trajcore` leaves each of
# these packages to the first use of a name that needs it.
LEFT_FOR_FIRST_USE = [
    "trajcore.formats",
    "trajcore.images",
    "trajcore.plots",
    "trajcore.tools",
    "trajcore.video",
    "trajcore.viewer",
]


def test_import_leaves_exports_plots_viewer_and_tools_until_asked_for() -> None:
    code = f"""if True:
        import json, sys
        import trajcore
        packages = {LEFT_FOR_FIRST_USE!r}
        before = sorted(m for m in sys.modules if ".".join(m.split(".")[:2]) in packages)
        listed = dir(trajcore)
        functions = {{}}
        for name in ("export", "to_pandas", "summaries_frame", "import_minari", "annotate", "convert"):
            functions[name] = getattr(trajcore, name).__module__
        import trajcore.formats, trajcore.tools.annotate, trajcore.tools.convert
        same = [
            trajcore.export is trajcore.formats.export,
            trajcore.to_pandas is trajcore.formats.to_pandas,
            trajcore.summaries_frame is trajcore.formats.summaries_frame,
            trajcore.import_minari is trajcore.formats.import_minari,
            trajcore.annotate is trajcore.tools.annotate.annotate,
            trajcore.convert is trajcore.tools.convert.convert,
        ]
        subpackages = ("plots", "viewer", "video", "images", "spaces", "tools")
        modules = {{n: getattr(trajcore, n).__name__ for n in subpackages}}
        ns = {{}}
        exec("from trajcore import *", ns)
        print(json.dumps({{
            "before": before,
            "listed": [n for n in ("export", "plots", "viewer", "formats", "tools", "video", "images") if n in listed],
            "functions": functions,
            "same": same,
            "modules": modules,
            "star": ns["plots"] is trajcore.plots and ns["export"] is trajcore.export,
        }}))
    """
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert out["before"] == []
    assert out["listed"] == ["export", "plots", "viewer", "formats", "tools", "video", "images"]
    assert out["functions"] == {
        "export": "trajcore.formats",
        "to_pandas": "trajcore.formats.frames",
        "summaries_frame": "trajcore.formats.frames",
        "import_minari": "trajcore.formats.from_minari",
        "annotate": "trajcore.tools.annotate",
        "convert": "trajcore.tools.convert",
    }
    assert out["same"] == [True] * 6
    assert out["modules"] == {n: f"trajcore.{n}" for n in ("plots", "viewer", "video", "images", "spaces", "tools")}
    assert out["star"]
