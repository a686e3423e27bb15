"""A real S3 server on loopback for the object storage tests and benchmarks: moto's standalone
server (real HTTP, the core's own client talking to it), with a boto3 client to fill buckets."""

from __future__ import annotations

import itertools
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import boto3
from moto.server import ThreadedMotoServer

_BUCKETS = itertools.count(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3:
    """The server's endpoint, a boto3 client for filling buckets, and the options that point the
    core's client at the server."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        self.options = {
            "endpoint": endpoint,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
            "region": "us-east-1",
            "allow_http": "true",
        }
        self.buckets = 0

    def bucket(self) -> str:
        # Unique in the process: the core's client keeps each bucket's options for the process,
        # so a name reused by another module's server would reach the first server.
        self.buckets += 1
        name = f"bucket-{next(_BUCKETS)}"
        self.client.create_bucket(Bucket=name)
        return name

    def upload(self, local: Path, bucket: str, prefix: str) -> list[str]:
        """Puts every shard (and annotation sidecar) of the dataset directory `local` under
        `prefix`; their keys."""
        keys = []
        for f in sorted([*local.glob("*.trj"), *local.glob("*.trja")]):
            key = f"{prefix}/{f.name}"
            self.client.upload_file(str(f), bucket, key)
            keys.append(key)
        return keys


@contextmanager
def s3_server() -> Iterator[S3]:
    """A moto S3 server on a free loopback port, stopped on exit."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3(f"http://127.0.0.1:{port}")
    finally:
        server.stop()
