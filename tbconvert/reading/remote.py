"""Logdirs in object stores and other fsspec file systems (``s3://``, ``gs://``, ``az://``,
``hf://``, ``memory://`` ...): list them, and read their objects by byte ranges (design §12).

Only the file layer differs from a local logdir: one listing gives every object's size and
modification time (the stat of a local file), and an object is read by ranged requests from
the offset the store holds, so an unchanged object is never fetched and a grown one costs only
its new bytes.  Decoding, planning and the store are the local ones, which is what makes a
logdir read from a URL give the store a local copy of it gives.

A conversion's storage options (credentials, endpoints) travel with its pass, in a
:class:`RemoteReads` (with the objects' heads read once): the classification carries it to the
planner, and the read settings to the readers and ``--jobs`` workers.  fsspec makes each
process its own file-system instance.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO, cast

from tbconvert.errors import LogdirError, MissingDependency, install_hint
from tbconvert.reading.remote_reads import HEAD_BYTES, RemoteReads
from tbconvert.urls import redacted

__all__ = [
    "Listed",
    "RemoteFile",
    "fetch_all",
    "fetch_heads",
    "is_remote",
    "list_objects",
    "local_path",
    "logdir_name",
    "open_binary",
    "open_remote",
]

# Protocol -> the tbconvert extra that installs its fsspec implementation.
EXTRAS = {
    "s3": "s3",
    "s3a": "s3",
    "gs": "gcs",
    "gcs": "gcs",
    "az": "azure",
    "abfs": "azure",
    "abfss": "azure",
    "adl": "azure",
    "hf": "hf",
}
# A smaller read (a first record) fetches this much, and the reads that follow it are served
# from it: a small file is one request, and a grown file's head costs little (once a pass).
_SMALL_READ = HEAD_BYTES


def is_remote(path: str) -> bool:
    """Whether a logdir or file path is a URL read through fsspec (``file://`` is not)."""
    return "://" in path and not path.startswith("file://")


def local_path(path: str) -> str:
    """A ``file://`` URL as the local path it names; any other path unchanged."""
    return path[len("file://") :] if path.startswith("file://") else path


def logdir_name(url: str) -> str:
    """A URL logdir as it is stored and shown: as spelled, with no trailing slash and no
    credentials."""
    return redacted(url.rstrip("/"))


def _protocol(url: str) -> str:
    return url.split("://", 1)[0].lower()


def _filesystem(url: str, remote: RemoteReads | None) -> tuple[Any, str]:
    """The fsspec file system of ``url`` (with ``remote``'s options) and the path in it."""
    protocol = _protocol(url)
    try:
        import fsspec
        from fsspec.core import url_to_fs
    except ImportError as error:  # pragma: no cover - fsspec is a dependency
        raise MissingDependency("reading URLs needs fsspec", hint="pip install fsspec") from error
    try:
        options = {} if remote is None else remote.storage_options
        fs, path = url_to_fs(url, **options)
    except ImportError as error:
        extra = EXTRAS.get(protocol, "remote")
        raise MissingDependency(
            f"reading {protocol}:// URLs needs a package that is not installed ({error})",
            path=redacted(url),
            hint=install_hint(extra),
        ) from error
    except ValueError as error:
        if protocol not in fsspec.available_protocols():
            raise LogdirError(
                f"unknown protocol {protocol}://", path=redacted(url), hint="see fsspec's list"
            ) from error
        raise LogdirError(str(error), path=redacted(url)) from error
    except TypeError as error:  # an option the file system does not take
        raise LogdirError(
            f"bad storage option ({error})", path=redacted(url), hint="check --storage-option"
        ) from error
    return fs, str(path)


@dataclass(frozen=True)
class Listed:
    """An object as listed: its URL, size and modification time (0 when not given)."""

    url: str
    size: int
    mtime_ns: int


def list_objects(
    url: str,
    wanted: Callable[[str], bool] = lambda _name: True,
    remote: RemoteReads | None = None,
) -> tuple[str, dict[str, Listed]]:
    """Every object below ``url`` whose name is ``wanted``, by its path relative to it, from
    one recursive listing (with ``remote``'s storage options).

    Returns:
        The logdir's URL as stored (no trailing slash, no credentials) and the objects.

    Raises:
        LogdirError: the bucket or container does not exist, access is denied, the endpoint
            cannot be reached, or ``url`` names an object rather than a directory.
    """
    fs, root = _filesystem(url, remote)
    root = root.rstrip("/")
    base = url.rstrip("/")  # as the user spelled it: what runs are stored under
    shown = logdir_name(url)
    try:
        found = {
            path: info
            for path, info in fs.find(root, detail=True, withdirs=False).items()
            if wanted(path.rpartition("/")[2])
        }
        unsized = [path for path, info in found.items() if info.get("size") is None]
        if unsized:  # an HTTP listing is links: ask each object (HEAD requests)
            for path, size in zip(unsized, fs.sizes(unsized), strict=True):
                found[path] = {**found[path], "size": size}
        objects = {}
        for path, info in found.items():
            rel = path[len(root) :] if path.startswith(root + "/") else ""
            if rel and info.get("type", "file") == "file":
                rel = rel.lstrip("/")
                objects[rel] = Listed(f"{base}/{rel}", int(info.get("size") or 0), _mtime_ns(info))
        if not objects:
            _check_root(fs, root)
    except LogdirError as error:
        error.path = shown
        raise
    except Exception as error:  # any file system's own errors: one line, nothing written
        raise _listing_error(error, shown) from error
    return shown, objects


def _check_root(fs: Any, root: str) -> None:
    """Explain an empty listing: a root that is an object, or a bucket that does not exist
    (an empty prefix in a bucket is an empty logdir, as an empty local directory is)."""
    if fs.isfile(root):
        raise LogdirError(
            "logdir is not a directory",
            hint="pass the prefix that holds the event files, not an object",
        )
    bucket = root.split("/", 1)[0]
    if bucket and not fs.exists(bucket):
        raise LogdirError(
            f"bucket or container {bucket!r} does not exist", hint="check the --logdir URL"
        )


def _listing_error(error: BaseException, url: str) -> LogdirError:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    if isinstance(error, PermissionError) or "AccessDenied" in text or "Forbidden" in text:
        hint = "check the credentials (environment, config files, --storage-option)"
        return LogdirError(f"access denied ({text})", path=url, hint=hint)
    if "Credentials" in type(error).__name__:  # botocore's NoCredentialsError and kin
        hint = "set the protocol's credentials (environment, config files) or --storage-option"
        return LogdirError(f"credentials missing or incomplete ({text})", path=url, hint=hint)
    if isinstance(error, FileNotFoundError):
        return LogdirError(
            f"no such bucket or container ({text})", path=url, hint="check the --logdir URL"
        )
    hint = "check the endpoint, the network and the credentials"
    return LogdirError(
        f"cannot list the logdir ({type(error).__name__}: {text})", path=url, hint=hint
    )


def _mtime_ns(info: Mapping[str, Any]) -> int:
    """The modification time in a listing entry; the key differs between file systems."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "modified", "created"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, datetime):
            return int(value.timestamp() * 1e9)
        if isinstance(value, int | float):
            return int(value * 1e9)
        if isinstance(value, str):
            try:
                return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1e9)
            except ValueError:
                continue
    return 0


class RemoteFile(io.RawIOBase):
    """An object read by ranged requests.

    A small read fetches :data:`_SMALL_READ` bytes and serves the reads that follow from
    them (the first record, then the records after it, of a small file: one request).  A
    large sequential read has its next range fetched while the caller decodes this one,
    so a request's latency hides behind decoding.
    """

    def __init__(
        self, url: str, size: int | None = None, remote: RemoteReads | None = None
    ) -> None:
        """Read ``url``, listed with ``size`` (None: ask), as the pass ``remote`` reads."""
        super().__init__()
        self._url = url
        self._heads = None if remote is None else remote.heads
        self._fs, self._path = _filesystem(url, remote)
        self._size = int(self._fs.size(self._path)) if size is None else size
        self._pos = 0
        self._held = (0, b"")  # the last range fetched: (its offset, its bytes)
        self._ahead: tuple[int, int, Future[bytes]] | None = None
        self._pool: ThreadPoolExecutor | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def read(self, size: int | None = -1) -> bytes:
        left = max(self._size - self._pos, 0)
        wanted = left if size is None or size < 0 else min(size, left)
        data = self._read_at(self._pos, wanted)
        self._pos += len(data)
        return data

    def _read_at(self, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        held_at, held = self._held
        if held_at <= start and start + length <= held_at + len(held):
            return held[start - held_at : start + length - held_at]
        if length < _SMALL_READ:
            whole = self._small_read(start)
            self._held = (start, whole)
            return whole[:length]
        return self._fetch(start, length)

    def _small_read(self, start: int) -> bytes:
        if start:
            return self._fetch(start, min(_SMALL_READ, self._size - start))
        heads = self._heads
        head = None if heads is None else heads.kept(self._url, self._size)
        if head is None:
            head = self._fetch(0, min(_SMALL_READ, self._size))
            if heads is not None:
                heads.keep(self._url, self._size, head)
        return head

    def _fetch(self, start: int, length: int) -> bytes:
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[:2] == (start, length):
            data = ahead[2].result()
        else:
            if ahead is not None:
                ahead[2].cancel()
            data = self._range(start, length)
        following = min(length, self._size - start - length)
        if length > _SMALL_READ and following > 0:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="tbconvert-fetch")
            nxt = start + length
            self._ahead = (nxt, following, self._pool.submit(self._range, nxt, following))
        return data

    def _range(self, start: int, length: int) -> bytes:
        data: bytes = self._fs.cat_file(self._path, start=start, end=start + length)
        if len(data) > length:
            # A server that ignores Range (Python's http.server) sends the whole object.
            data = data[start : start + length]
        return data

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        super().close()


def open_binary(path: str, size: int | None = None, remote: RemoteReads | None = None) -> BinaryIO:
    """A local file or a remote object (read as the pass ``remote`` reads), open for binary
    reading."""
    if is_remote(path):
        return open_remote(path, size, remote)
    return open(path, "rb")


def open_remote(url: str, size: int | None = None, remote: RemoteReads | None = None) -> BinaryIO:
    """A binary file reading ``url`` by ranges; ``size`` (as listed) saves a request, and
    ``remote`` gives the pass's storage options and heads."""
    return cast(BinaryIO, RemoteFile(url, size, remote))


def fetch_all(
    files: Sequence[tuple[str, int]], remote: RemoteReads | None = None
) -> list[bytes | OSError]:
    """The first ``size`` bytes of each ``(url, size)``, fetched concurrently where the file
    system can (fsspec's async ones); an object that cannot be read is its error."""
    if not files:
        return []
    fs, _path = _filesystem(files[0][0], remote)
    paths = [fs._strip_protocol(url) for url, _size in files]
    ends = [size for _url, size in files]
    results = fs.cat_ranges(paths, [0] * len(files), ends, on_error="return")
    return [_as_result(result, end) for result, end in zip(results, ends, strict=True)]


def fetch_heads(objects: Sequence[tuple[str, int]], remote: RemoteReads) -> list[bytes | OSError]:
    """The head (what a small read at offset 0 fetches: the first 16 KiB) of each
    ``(url, listed size)``, read once per pass (``remote.heads``): the ones not held yet
    fetched together, as :func:`fetch_all` does."""
    heads = remote.heads
    found: list[bytes | OSError | None] = [heads.kept(url, size) for url, size in objects]
    missing = [index for index, head in enumerate(found) if head is None]
    wanted = [(objects[i][0], min(objects[i][1], _SMALL_READ)) for i in missing]
    fetched = fetch_all(wanted, remote)
    for index, head in zip(missing, fetched, strict=True):
        found[index] = head
        if isinstance(head, bytes):
            heads.keep(*objects[index], head)
    return [head for head in found if head is not None]


def _as_result(result: object, size: int) -> bytes | OSError:
    if isinstance(result, bytes):
        return result[:size]  # never past the size asked for, whatever the server sent
    if isinstance(result, OSError):
        return result
    return OSError(str(result))


def parse_storage_options(pairs: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as storage options: ``true``/``false`` are booleans, a value that
    starts with ``{`` or ``[`` is JSON (``client_kwargs={"region_name": "eu-west-1"}``),
    anything else a string (so a secret of digits stays a string)."""
    import json

    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError("a storage option is not KEY=VALUE")
        if value.lower() in ("true", "false"):
            options[key.strip()] = value.lower() == "true"
        elif value[:1] in ("{", "["):
            options[key.strip()] = json.loads(value)
        else:
            options[key.strip()] = value
    return options
