"""Reading one event file into chunks of rows, with no database access.

This is the part of a conversion that runs in worker processes (``--jobs``): a
:class:`FileTask` says what to read, :func:`read_file` yields :class:`Chunk` s that the single
writer applies in order.  Series are announced as ``rows.SeriesDefinition`` s with local
numbers that the writer maps to store ids; rows carry file id 0 until the writer knows the
file's id.

Files of one owner (run, context) are read in order by one reader, which passes the known
metadata of the owner's tags from earlier files to later ones (TF1 writers send it once per
tag, and ``FileWriter.reopen`` starts a new file without it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tbconvert.filters import Selection
from tbconvert.reading.decode_stats import DecodeStats
from tbconvert.reading.decoder import EventDecoder
from tbconvert.reading.fast.template import LearntKeys
from tbconvert.reading.first_record import head_digest
from tbconvert.reading.large_records import MAX_RECORD_SIZE
from tbconvert.reading.records import Damage, RecordReader, open_event_file
from tbconvert.reading.remote_reads import RemoteReads
from tbconvert.reading.routing import KnownMetadata, KnownMetadataByOwner
from tbconvert.reading.tuning import DEFAULT_TUNING, ReadTuning
from tbconvert.rows import FileRows, SeriesDefinition, TagMetadata

if TYPE_CHECKING:
    from tbconvert.reading.fast.blocks import Block

# Records per block handed to the decoder (fewer when a chunk holds fewer points).
_RECORD_BATCH = 8192
# Images and audio make few points of many bytes: bound a chunk by bytes too.  A chunk's
# blobs are held while its last record is decoded, so this adds to the twice the largest
# record that memory is bounded by.
CHUNK_BYTES = 16 << 20

__all__ = [
    "CHUNK_BYTES",
    "Chunk",
    "FileTask",
    "KnownMetadataByOwner",
    "ReadSettings",
    "bytes_to_read",
    "known_metadata_of",
    "read_file",
    "restart_of",
    "unreadable_reason",
]


@dataclass(frozen=True)
class ReadSettings:
    """What every file of a conversion is read with.

    Attributes:
        selection: The plugins and tags to keep.
        chunk_points: Points per chunk (one transaction each).
        full: Read every file from its start, whatever the store holds.
        max_record_size: Records with more payload bytes are skipped unread, as damage.
        tuning: Which path a file takes and how records are batched (never the rows).
        remote: How this pass reads remote objects (storage options, heads read once).
        learnt_keys: The single-scalar keys the conversion's decoders have learnt (in each
            worker process, its own copy), shared by every file it reads.
    """

    selection: Selection
    chunk_points: int
    full: bool = False
    max_record_size: int = MAX_RECORD_SIZE
    tuning: ReadTuning = DEFAULT_TUNING
    remote: RemoteReads | None = field(default=None, compare=False, repr=False)
    learnt_keys: LearntKeys = field(default_factory=LearntKeys, compare=False, repr=False)


@dataclass(frozen=True)
class FileTask:
    """One file to read and the state the store holds for it.

    Attributes:
        index: Position in the conversion's file order.
        path: The file on disk; rel_path, its path relative to the logdir.
        run_path, context: The (run, context) it belongs to.
        size, mtime_ns: Its size and mtime when planned (nothing past ``size`` is read).
        offset: The stored offset read to (0 when new).
        stored_size, stored_digest: The stored size and first-record digest (None when new).
        known_metadata: The known metadata the store holds for the tags of its owner.
        from_start: Read from 0 whatever the store holds (stored under a narrower selection).
        sidecar: A sidecar of params (``reading.sidecars``), not an event file.
    """

    index: int
    path: str
    rel_path: str
    run_path: str
    context: str
    size: int
    mtime_ns: int
    offset: int
    stored_size: int | None
    stored_digest: str | None
    known_metadata: dict[str, TagMetadata]
    from_start: bool = False
    sidecar: bool = False


@dataclass
class Chunk:
    """Rows decoded from a stretch of one file, and where the file stands after it.

    Attributes:
        rows: Rows per table (iterable more than once: a writer may retry a chunk).
        blobs: sha256 -> bytes of the blobs the rows point to.
        new_series: Series first met in this chunk, in local-number order.
        consumed: The offset read to; records: records read so far in this read.
        damage: Damaged regions skipped in this chunk.
        first_wall_time, last_wall_time: The file's wall-time span so far in this read.
        done: The file's last chunk; torn: it ends inside a record.
        restart: First chunk only: read from 0 (the file's counters start again).
        replaces: First chunk only: and the points stored from it go first (the file was
            replaced, shrank, or ``--full``).
        digest: sha256 of the first record (first chunk only).
        error: Why the file could not be opened (no rows then).
        warning: What the user should hear about the file (a sidecar not read, say).
        stats: What the decoder saw (last chunk only).
        read: Bytes of the file this chunk covers (from where the one before ended).
    """

    rows: dict[str, FileRows]
    blobs: dict[str, bytes]
    new_series: list[SeriesDefinition]
    consumed: int
    records: int
    damage: list[Damage]
    first_wall_time: float | None
    last_wall_time: float | None
    done: bool = False
    torn: bool = False
    restart: bool = False
    replaces: bool = False
    digest: str | None = None
    error: str | None = None
    warning: str | None = None
    stats: DecodeStats | None = None
    read: int = 0

    def points(self) -> int:
        """Rows of every table."""
        return sum(len(rows) for rows in self.rows.values())

    def blob_bytes(self) -> int:
        """Bytes of its blobs (images, audio)."""
        return sum(len(data) for data in self.blobs.values())


def unreadable_reason(error: OSError) -> str:
    """The one-line reason a file could not be stat'ed or opened."""
    return f"cannot read: {error.strerror or error}"


def bytes_to_read(task: FileTask, settings: ReadSettings) -> int:
    """What reading the task will cover, for the progress bar (a restart reads it all)."""
    if settings.full or task.from_start or task.size < task.offset:
        return task.size
    return task.size - task.offset


def read_file(
    task: FileTask, settings: ReadSettings, known_metadata: KnownMetadataByOwner
) -> Iterator[Chunk]:
    """Yield the chunks of one file; the first tells whether it restarts from 0.
    ``known_metadata`` holds what earlier files of this read found, and gets this file's."""
    try:
        handle = open_event_file(task.path, task.size, settings.remote)
    except OSError as error:
        yield _failed(task, unreadable_reason(error))
        return
    with handle:
        digest = head_digest(handle)
        restart, replaces = restart_of(task, settings, digest)
        handle.seek(0)
        reader = RecordReader(
            handle,
            0 if restart else task.offset,
            end=task.size,
            max_record=settings.max_record_size,
            tuning=settings.tuning,
        )
        by_record = task.size - (0 if restart else task.offset) < settings.tuning.by_record_bytes
        decoder = EventDecoder(
            settings.selection,
            known_metadata_of(task, known_metadata),
            by_record=by_record,
            learnt_keys=settings.learnt_keys,
            huge_record_bytes=settings.tuning.huge_record_bytes,
        )
        size = max(1, min(_RECORD_BATCH, settings.chunk_points))
        # Checked record by record too: NumPy's checks of a whole buffer cost more on so few.
        stretches = reader.record_lists(size) if by_record else reader.blocks(size)
        first = True
        while True:
            chunk = _next_chunk(settings, reader, stretches, decoder)
            if first:
                chunk.restart, chunk.replaces, chunk.digest = restart, replaces, digest
                first = False
            if chunk.done:
                chunk.stats = decoder.stats
                owner = (task.run_path, task.context)
                known_metadata.setdefault(owner, {}).update(decoder.metadata())
            yield chunk
            if chunk.done:
                return


def restart_of(task: FileTask, settings: ReadSettings, digest: str | None) -> tuple[bool, bool]:
    """Whether the task reads its file from 0, and whether the points stored from it go first
    (replaced, shrank, or ``--full``), given the digest of its first record now."""
    replaces = settings.full or (
        task.stored_size is not None
        and (
            task.size < task.offset
            or (task.stored_digest is not None and digest != task.stored_digest)
        )
    )
    return replaces or task.from_start, replaces


def known_metadata_of(task: FileTask, known_metadata: KnownMetadataByOwner) -> KnownMetadata:
    """The known metadata of the tags of the task's owner: what the store holds, as
    protobuf messages, updated with what earlier files of this read found."""
    from tensorboard.compat.proto.summary_pb2 import SummaryMetadata

    known: KnownMetadata = {
        tag: SummaryMetadata(
            display_name=stored.display_name or "",
            summary_description=stored.description or "",
            plugin_data=SummaryMetadata.PluginData(
                plugin_name=stored.plugin, content=stored.plugin_content or b""
            ),
        )
        for tag, stored in task.known_metadata.items()
    }
    known.update(known_metadata.get((task.run_path, task.context), {}))
    return known


def _next_chunk(
    settings: ReadSettings,
    reader: RecordReader,
    stretches: Iterator[Block | list[tuple[int, bytes]]],
    decoder: EventDecoder,
) -> Chunk:
    before = reader.consumed
    damage_seen = len(reader.damage)
    announced = len(decoder.definitions)
    done = False
    while decoder.pending() < settings.chunk_points and reader.consumed - before < CHUNK_BYTES:
        records = next(stretches, None)
        if records is None:
            done = True
            break
        decoder.feed(records)
    rows, blobs = decoder.take()
    stats = decoder.stats
    return Chunk(
        rows,
        blobs,
        decoder.definitions[announced:],
        reader.consumed,
        reader.records,
        reader.damage[damage_seen:],
        stats.first_wall_time,
        stats.last_wall_time,
        done=done,
        torn=reader.torn if done else False,
        read=reader.consumed - before,
    )


def _failed(task: FileTask, message: str) -> Chunk:
    return Chunk({}, {}, [], task.offset, 0, [], None, None, done=True, error=message)
