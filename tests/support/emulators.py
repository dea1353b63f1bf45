"""Local emulators of Google Cloud Storage and Azure Blob Storage on 127.0.0.1, each in a
process of its own: ``gcp-storage-emulator`` (PyPI) and Azurite (npm; ``.ci/run`` installs it
under ``.ci/node``).  With ``s3server`` they let the URL logdir tests run against a server of
every object-store protocol but Hugging Face's, which has no emulator.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# Azurite's well-known development account (public, in Azure's documentation).
_AZURITE_ACCOUNT = "devstoreaccount1"
_AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


@dataclass
class Emulator:
    """A running emulator: the protocol, the fsspec options that reach it, its process."""

    protocol: str
    storage_options: dict[str, Any]
    process: subprocess.Popen[bytes]
    scratch: str | None = None
    _fs: Any = field(default=None, repr=False)

    @property
    def fs(self) -> Any:
        if self._fs is None:
            import fsspec

            self._fs = fsspec.filesystem(self.protocol, **self.storage_options)
        return self._fs

    def bucket(self, name: str) -> str:
        self.fs.mkdir(name)
        return name

    def upload(self, local: Path, bucket: str, prefix: str) -> str:
        """Every file below ``local`` as objects under ``prefix``; returns the logdir URL."""
        for path in sorted(local.rglob("*")):
            if path.is_file():
                key = f"{bucket}/{prefix}/{path.relative_to(local).as_posix()}"
                self.fs.pipe_file(key, path.read_bytes())
        return f"{self.protocol}://{bucket}/{prefix}"

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(port: int, process: subprocess.Popen[bytes], name: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise
            time.sleep(0.05)


def start_gcs() -> Emulator:
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "gcp_storage_emulator",
        "start",
        "--host=127.0.0.1",
        f"--port={port}",
        "--in-memory",
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(port, process, "gcp-storage-emulator")
    options = {"endpoint_url": f"http://127.0.0.1:{port}", "token": "anon", "project": "test"}
    return Emulator("gs", options, process)


def azurite_binary() -> str | None:
    """Azurite's blob server: under ``.ci/node`` (``.ci/run``) or on PATH."""
    local = REPO / ".ci" / "node" / "node_modules" / ".bin" / "azurite-blob"
    return str(local) if local.exists() else shutil.which("azurite-blob")


def start_azurite(binary: str) -> Emulator:
    port = _free_port()
    scratch = tempfile.mkdtemp(prefix="azurite-")
    command = [
        binary,
        "--blobHost",
        "127.0.0.1",
        "--blobPort",
        str(port),
        "--location",
        scratch,
        "--silent",
        "--skipApiVersionCheck",
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(port, process, "azurite")
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={_AZURITE_ACCOUNT};"
        f"AccountKey={_AZURITE_KEY};BlobEndpoint=http://127.0.0.1:{port}/{_AZURITE_ACCOUNT};"
    )
    return Emulator("az", {"connection_string": connection}, process, scratch)
