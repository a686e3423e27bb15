"""Optional packages: imported when a feature needs them, with one clear error when missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from trajcore.errors import MissingDependencyError

__all__ = ["require"]


def require(module: str, purpose: str, pip: str | None = None) -> ModuleType:
    """Imports an optional package.

    Args:
        module: the module to import (``"pandas"``, ``"pyarrow.parquet"``).
        purpose: what needs it, for the message (``"trajcore.to_pandas"``).
        pip: what to pip-install when it is not the module's top-level name.

    Raises:
        MissingDependencyError: the package is not installed (an `ImportError` too).
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.partition(".")[0]
        raise MissingDependencyError(
            f"{purpose} needs the optional package {top!r}, which is not installed: pip install {pip or top}",
            name=top,
        ) from e
