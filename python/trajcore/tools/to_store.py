"""What the tools that write a whole dataset (`convert`, `import_minari`) do with a store URL, and
the one error of those that need a local path: a dataset is written into a local directory as
always, and its shards go up under the URL once it is complete (`written_to_store`), so the
store never shows part of a copy."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from trajcore import _core
from trajcore._store import configure
from trajcore.errors import InvalidArgumentError
from trajcore.read.dataset import holds_shards

__all__ = ["shards_under", "written_to_store"]


def _refuse_existing(url: str) -> None:
    """Refuses a prefix that already holds shards: a copy is a new dataset, and trajcore removes
    nothing from a store (`force` cannot replace what is there)."""
    if url.lower().startswith(("http://", "https://")):
        raise InvalidArgumentError(f"{url}: HTTP(S) URLs are read-only: write to an s3:// prefix")
    if url.lower().endswith(f".{_core.SHARD_EXTENSION}"):
        raise InvalidArgumentError(f"{url}: name a prefix to write the dataset under, not a shard")
    if not holds_shards(url):
        return
    raise InvalidArgumentError(
        f"{url} already holds shards: write to a new prefix (trajcore removes nothing from a store)"
    )


@contextmanager
def written_to_store(url: str, storage_options: Mapping[str, str] | None = None) -> Iterator[str]:
    """Yields a local path (not yet existing) to write a dataset directory into; when the block
    succeeds, uploads each of its shards to ``url/NAME`` (an object appears only whole), then
    removes the local copy, which is removed as well when the block fails.

    Raises:
        InvalidArgumentError: `url` is HTTP(S) (read-only), names a shard, or already holds
            shards.
        TrajcoreIOError: an upload failed (after the store's retries), naming the URL.
    """
    url = url.rstrip("/")
    configure(url, storage_options)
    _refuse_existing(url)
    with tempfile.TemporaryDirectory(prefix="trajcore-upload-") as tmp:
        local = os.path.join(tmp, "dataset")
        yield local
        for name in sorted(os.listdir(local)):
            if name.endswith(f".{_core.SHARD_EXTENSION}"):
                _core.upload_file(os.path.join(local, name), f"{url}/{name}")


def shards_under(url: str, paths: Sequence[str]) -> list[str]:
    """Where shards written locally at `paths` are under `url` once uploaded."""
    return [f"{url.rstrip('/')}/{os.path.basename(p)}" for p in paths]
