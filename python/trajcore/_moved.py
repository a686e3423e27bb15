"""Module paths of the previous version, kept working for this one: importing one imports the
module's new home and warns (`DeprecationWarning`). The modules moved into rooms named for the side
they serve (`trajcore.record`, `trajcore.read`, `trajcore.tools`); every name they define is the
same object under both paths. The names of `trajcore` itself (`trajcore.Dataset`, ...) did not
move."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

# Old public path -> new path (private modules, `trajcore._name`, moved without an alias).
MOVED = {
    "trajcore.agents": "trajcore.record.pettingzoo",
    "trajcore.bench": "trajcore.tools.bench",
    "trajcore.dataset": "trajcore.read.dataset",
    "trajcore.env_episodes": "trajcore.read.multiagent.env_episodes",
    "trajcore.episode": "trajcore.read.episode",
    "trajcore.episodes": "trajcore.read.episodes",
    "trajcore.recorder": "trajcore.record.env_wrapper",
    "trajcore.transitions": "trajcore.read.train.transitions",
    "trajcore.vector": "trajcore.record.vector_wrapper",
    "trajcore.writer": "trajcore.record.manual",
}


def _internal(module: str) -> bool:
    """A frame of the import machinery, of this module, or of `trajcore.__getattr__`."""
    return module in ("trajcore", __name__, "importlib") or module.startswith("importlib.")


def warn_moved(old: str) -> None:
    """The warning an import of `old` gives, pointed at the code that imported it (the first frame
    outside the import machinery and trajcore's own)."""
    level, frame = 2, sys._getframe(1)  # level 1 is this function's own frame
    while frame.f_back is not None and _internal(frame.f_globals.get("__name__", "")):
        frame = frame.f_back
        # `warnings` itself does not count the frames of importlib's bootstrap.
        bootstrap = "importlib" in frame.f_code.co_filename and "_bootstrap" in frame.f_code.co_filename
        level += 0 if bootstrap else 1
    warnings.warn(
        f"{old} moved to {MOVED[old]}: import it from there (or use trajcore's own names); "
        f"the old path goes in the next version",
        DeprecationWarning,
        stacklevel=level,
    )


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths (after every other finder: a module of that name, if one came back,
    would win) and loads each as the module at its new path."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a placeholder, replaced by the real module in `exec_module`

    def exec_module(self, module: ModuleType) -> None:
        warn_moved(module.__name__)
        # The import system returns what sys.modules holds under the name once this returns: the
        # module itself, so that both paths give the same objects (and a patch of one is seen by
        # the code that uses it).
        sys.modules[module.__name__] = importlib.import_module(MOVED[module.__name__])


def install() -> None:
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
