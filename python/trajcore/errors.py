"""The trajcore error hierarchy, rooted at `TrajcoreError`.

The classes are defined here; the Rust extension raises them (its one mapping from the core's
error type to Python looks them up here once). Each also derives from the builtin a user would
reach for: `SchemaError`, `CorruptFileError` and `InvalidArgumentError` (a bad option) are
`ValueError`s, `RecorderError` is a `RuntimeError`, `TrajcoreIOError` is an `OSError` and
`TrajcoreFileNotFoundError` a `FileNotFoundError`. An index out of range, from any entry
point, is a `TrajcoreIndexError`: an `IndexError` and also an `InvalidArgumentError`.

`MissingDependencyError` is raised only by Python code (an optional package such as pandas or
pyarrow is not installed); it is also an `ImportError`, which is what a user checking for
optional packages catches.
"""

__all__ = [
    "CorruptFileError",
    "InvalidArgumentError",
    "MissingDependencyError",
    "RecorderError",
    "SchemaError",
    "TrajcoreError",
    "TrajcoreFileNotFoundError",
    "TrajcoreIndexError",
    "TrajcoreIOError",
    "TrajcoreWarning",
]


class TrajcoreError(Exception):
    """Root of every trajcore error."""


class InvalidArgumentError(TrajcoreError, ValueError):
    """An argument or option is invalid."""


class CorruptFileError(TrajcoreError, ValueError):
    """A file is not a trajcore file, or is damaged; the message names the file and byte offset."""


class SchemaError(TrajcoreError, ValueError):
    """A value does not fit its column (dtype, shape, kind); the message names the column."""


class TrajcoreIndexError(InvalidArgumentError, IndexError):
    """An index (of an episode, a step, a window, a recording) is past the end of what it counts.

    Also an `InvalidArgumentError`: code that caught an index out of range as a bad argument
    before it was an `IndexError` still does."""


class RecorderError(TrajcoreError, RuntimeError):
    """The recorder cannot take the call: closed, writer thread stopped, buffer full."""


class TrajcoreIOError(TrajcoreError, OSError):
    """Reading or writing a file failed."""


class TrajcoreFileNotFoundError(TrajcoreIOError, FileNotFoundError):
    """A path that should exist does not."""


class TrajcoreWarning(UserWarning):
    """Something was skipped (an unsupported info entry) or damaged data was left out."""


class MissingDependencyError(TrajcoreError, ImportError):
    """An optional package a feature needs is not installed; the message names it and the pip
    command that installs it."""
