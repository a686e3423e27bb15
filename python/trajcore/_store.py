"""Datasets in object storage: the options of a URL's store, handed to the core (which keeps them
for the process: every later open of the same bucket or host uses them)."""

from __future__ import annotations

from collections.abc import Mapping

from trajcore import _core

__all__ = ["configure"]


def configure(path: str, storage_options: Mapping[str, str] | None) -> None:
    """Sets `storage_options` for the store `path` (a URL) is in; nothing without options.

    Raises:
        InvalidArgumentError: `path` is not an s3:// or http(s):// URL, an option is unknown or
            its value bad.
    """
    if storage_options:
        _core.configure_store(path, [(str(k), str(v)) for k, v in storage_options.items()])
