"""A local S3-compatible server for tests and benchmarks: moto's server in a process of its
own, on 127.0.0.1, counting what it serves.

The counts are the server's, not the converter's: the bytes of object data it sent (the
bodies of GET requests for objects) and the requests by method, readable over HTTP at
``/_counts`` and reset by ``POST /_counts``.  That is what "a re-run fetches nothing" and
"a grown object costs its new bytes" are checked against.  Every request signed with the
access key :data:`DENIED_KEY` is answered 403, as a store answers credentials it refuses.

Run as a script it prints ``PORT`` once listening, then serves until killed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import urllib.request
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BUCKET = "tb-logs"
KEY, SECRET = "test-key", "test-secret"
DENIED_KEY = "denied-key"


class _Counting:
    """WSGI middleware: count object bytes served and requests, and deny one access key."""

    def __init__(self, app: Any, denied: str) -> None:
        self.app = app
        self.denied = denied
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/_counts":
            return self._counts(environ, start_response)
        if f"Credential={self.denied}/" in environ.get("HTTP_AUTHORIZATION", ""):
            start_response("403 Forbidden", [("Content-Type", "application/xml")])
            return [b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"]
        method = environ.get("REQUEST_METHOD", "")
        # An object GET: /bucket/key..., not a listing (/bucket?list-type=2).
        is_object = method == "GET" and path.strip("/").count("/") >= 1
        with self.lock:
            self.counts[f"requests_{method}"] += 1
            if is_object:
                self.counts["object_gets"] += 1
        body = self.app(environ, start_response)
        if not is_object:
            return body
        return self._counted(body)

    def _counted(self, body: Iterable[bytes]) -> Iterator[bytes]:
        for piece in body:
            with self.lock:
                self.counts["object_bytes"] += len(piece)
            yield piece

    def _counts(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        with self.lock:
            data = json.dumps(dict(self.counts)).encode()
            if environ["REQUEST_METHOD"] == "POST":
                self.counts.clear()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [data]


def _serve(port: int, denied: str) -> None:
    import logging

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = _Counting(DomainDispatcherApplication(create_backend_app), denied)
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


@dataclass
class S3Server:
    """A running server: its endpoint, and the options and environment that reach it."""

    process: subprocess.Popen[str]
    endpoint: str

    @property
    def storage_options(self) -> dict[str, Any]:
        return {"endpoint_url": self.endpoint, "key": KEY, "secret": SECRET}

    @property
    def env(self) -> dict[str, str]:
        """The environment a ``tbconvert`` subprocess reaches the server with (boto's own
        chain: no option on the command line)."""
        return {
            "AWS_ACCESS_KEY_ID": KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            region_name="us-east-1",
        )

    def bucket(self, name: str) -> str:
        """A new empty bucket; returns its name."""
        self.client().create_bucket(Bucket=name)
        return name

    def upload(self, local: Path, bucket: str, prefix: str) -> str:
        """Every file below ``local`` as objects under ``prefix``; returns the logdir URL."""
        client = self.client()
        for path in sorted(local.rglob("*")):
            if path.is_file():
                key = f"{prefix}/{path.relative_to(local).as_posix()}"
                client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
        return f"s3://{bucket}/{prefix}"

    def counts(self, reset: bool = False) -> Counter[str]:
        request = urllib.request.Request(
            f"{self.endpoint}/_counts", method="POST" if reset else "GET"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return Counter(json.loads(response.read()))

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def start(port: int = 0) -> S3Server:
    """Start the server in a process of its own; it listens when this returns."""
    command = [sys.executable, "-m", "tests.support.s3server", "--port", str(port)]
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        command,
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.isdigit():
        process.kill()
        raise RuntimeError(f"the S3 test server did not start: {line!r}")
    # The port is printed once the socket listens: connections from now on are queued.
    return S3Server(process, f"http://127.0.0.1:{line}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--deny-key", default=DENIED_KEY)
    arguments = parser.parse_args()
    _serve(arguments.port, arguments.deny_key)
