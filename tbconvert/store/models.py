"""SQLAlchemy 2.x models of the run store.

The schema is created and changed only by the Alembic revisions in ``migrations/``; these
models are what ``tbconvert db check`` compares them with.  SQL clients should use the
``v_*`` views (the documented contract), not these tables.

Point tables are keyed by where the value came from: ``(series_id, step, file_id,
record_offset, value_index)``.  That keeps every record of the logs as its own row (duplicate
and repeated steps included), makes re-reading the same bytes a no-op, and clusters each
series by step so a learning curve or a series' last value is one index range scan.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Batch migrations on SQLite and constraint drops on PostgreSQL need every constraint named.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# A plain BigInteger primary key would not alias SQLite's rowid (no autoincrement).
Id = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    """Declarative base carrying the naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Run(Base):
    """A run directory of a logdir: identity is (source, run_path).

    ``source`` names the logdir in the store: its absolute path unless the user gave a name
    (``--source``), so that logdirs of several machines never collide in a shared server.
    ``host`` is the machine that first wrote the run.
    """

    __tablename__ = "runs"
    __table_args__ = (UniqueConstraint("source", "run_path"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    source: Mapped[str] = mapped_column(Text)
    host: Mapped[str | None] = mapped_column(Text)
    logdir: Mapped[str] = mapped_column(Text)
    run_path: Mapped[str] = mapped_column(Text)
    group_path: Mapped[str] = mapped_column(Text, index=True)
    name: Mapped[str] = mapped_column(Text)


class Context(Base):
    """A context name shared by all runs ('' for the run directory itself, 'train', ...)."""

    __tablename__ = "contexts"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)


class Series(Base):
    """One stream of values: a tag of one plugin in one (run, context)."""

    __tablename__ = "series"
    __table_args__ = (
        UniqueConstraint("run_id", "context_id", "name", "plugin"),
        # The series of one tag, read from the index alone (a selection's aggregates).
        Index(
            "ix_series_name_plugin",
            "name",
            "plugin",
            "context_id",
            "run_id",
            postgresql_include=["id"],
        ),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    context_id: Mapped[int] = mapped_column(ForeignKey("contexts.id"))
    name: Mapped[str] = mapped_column(Text)
    plugin: Mapped[str] = mapped_column(Text)
    dtype: Mapped[str | None] = mapped_column(Text)
    display_name: Mapped[str | None] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    plugin_content: Mapped[bytes | None] = mapped_column(LargeBinary)


# The columns of a series' summary that a selection's aggregates read.
SUMMARY_VALUE_COLUMNS = (
    "last_value",
    "min_value",
    "max_value",
    "points",
    "value_sum",
    "value_count",
    "argmin_step",
    "argmax_step",
)


class SeriesSummary(Base):
    """What a series holds in one point table, kept exact by the writer in the transaction
    of the points (``writing.series_summaries``): counts, step and wall-time ranges, the last point
    (key, wall time, scalar value), and for scalars the value range.  ``v_series`` and
    ``v_last_scalars`` read it, so neither scans a point table."""

    __tablename__ = "series_summaries"
    __table_args__ = (
        PrimaryKeyConstraint("series_id", "point_table"),
        # Few series have the flag: a selection reads them alone.
        Index(
            "ix_series_summaries_maybe_resumed",
            "series_id",
            sqlite_where=text("maybe_resumed"),
            postgresql_where=text("maybe_resumed"),
        ),
        # A tag's summaries as one range of index entries, for a selection's aggregates.
        Index(
            "ix_series_summaries_tag",
            "point_table",
            "plugin",
            "name",
            "run_id",
            "context_id",
            "series_id",
            "maybe_resumed",
            *SUMMARY_VALUE_COLUMNS,
        ),
    )

    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"))
    point_table: Mapped[str] = mapped_column(Text)
    points: Mapped[int] = mapped_column(BigInteger)
    first_step: Mapped[int] = mapped_column(BigInteger)
    last_step: Mapped[int] = mapped_column(BigInteger)
    first_wall_time: Mapped[float | None] = mapped_column(Double)
    last_wall_time: Mapped[float | None] = mapped_column(Double)
    # The last point (highest step, then the file later in path byte order, then offset).
    last_file_id: Mapped[int] = mapped_column(ForeignKey("event_files.id"))
    last_record_offset: Mapped[int] = mapped_column(BigInteger)
    last_value_index: Mapped[int] = mapped_column(Integer)
    # The last point's wall time and (scalars) value, so that listing last values joins no
    # point table: a join on the five key columns misleads PostgreSQL's row estimates.
    last_point_wall_time: Mapped[float | None] = mapped_column(Double)
    last_value: Mapped[float | None] = mapped_column(Double)
    min_value: Mapped[float | None] = mapped_column(Double)  # scalars only; NaN skipped
    max_value: Mapped[float | None] = mapped_column(Double)
    # What every aggregate of a selection needs (scalars only, docs/schema.md): the sum of the
    # finite values, the count of those not NaN, the first step of the smallest and largest.
    value_sum: Mapped[float | None] = mapped_column(Double)
    value_count: Mapped[int | None] = mapped_column(BigInteger)
    argmin_step: Mapped[int | None] = mapped_column(BigInteger)
    argmax_step: Mapped[int | None] = mapped_column(BigInteger)
    # Points from several files, or going back in step within one: maybe several attempts.
    maybe_resumed: Mapped[bool] = mapped_column(Boolean, server_default=false())
    # The key of the series (``series``' own columns, moved with it): a tag's summaries
    # without a look-up of each series.
    run_id: Mapped[int | None] = mapped_column(Id)
    context_id: Mapped[int | None] = mapped_column(Id)
    name: Mapped[str | None] = mapped_column(Text)
    plugin: Mapped[str | None] = mapped_column(Text)


class CurrentSummary(Base):
    """The aggregates of a scalar series that may have several attempts (its summary's
    ``maybe_resumed``, or a ``SessionLog`` in its run and context) over the points its last
    attempt left (``store.attempts_rule``), kept by the writer in the transaction of the
    points (``writing.current_summaries``): what ``--resumed current`` reads instead of
    ``series_summaries``.  The same columns and NaN rules as there."""

    __tablename__ = "current_summaries"

    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), primary_key=True)
    points: Mapped[int] = mapped_column(BigInteger)  # the current points
    last_step: Mapped[int | None] = mapped_column(BigInteger)
    last_value: Mapped[float | None] = mapped_column(Double)
    min_value: Mapped[float | None] = mapped_column(Double)
    max_value: Mapped[float | None] = mapped_column(Double)
    value_sum: Mapped[float | None] = mapped_column(Double)
    value_count: Mapped[int | None] = mapped_column(BigInteger)
    argmin_step: Mapped[int | None] = mapped_column(BigInteger)
    argmax_step: Mapped[int | None] = mapped_column(BigInteger)
    # Every point of the series when the row was made, and the last of them in write order
    # (its file, offset, index and step): a point written after it, at a step not below it,
    # is added in place; anything else makes the row again from the points.
    all_points: Mapped[int] = mapped_column(BigInteger)
    written_file_id: Mapped[int] = mapped_column(ForeignKey("event_files.id"))
    written_record_offset: Mapped[int] = mapped_column(BigInteger)
    written_value_index: Mapped[int] = mapped_column(Integer)
    written_step: Mapped[int] = mapped_column(BigInteger)


class RunParam(Base):
    """The value a selection reads of one param of a run (``store.params_rule``: of the rows
    ``v_params`` shows, the first context by name, then the last written), kept by the writer
    in the transaction of the params rows (``writing.run_params``): a condition on a param
    probes the key, or leads from the index of the key's values."""

    __tablename__ = "run_params"
    # A condition on a number leads from the runs the index says pass: run_id is in it, so
    # that it answers without the table.  No index of the text: PostgreSQL refuses an index
    # entry over a third of a page, and a param's text may be a whole JSON config.
    __table_args__ = (Index("ix_run_params_key_value_num", "key", "value_num", "run_id"),)

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str | None] = mapped_column(Text)
    value_num: Mapped[float | None] = mapped_column(Double)
    value_type: Mapped[str] = mapped_column(Text)


class EventFile(Base):
    """Incremental state of one event file, committed together with the points read from it."""

    __tablename__ = "event_files"
    __table_args__ = (UniqueConstraint("run_id", "path"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    context_id: Mapped[int] = mapped_column(ForeignKey("contexts.id"))
    path: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(BigInteger, default=0)
    mtime_ns: Mapped[int] = mapped_column(BigInteger, default=0)
    head_digest: Mapped[str | None] = mapped_column(Text)
    offset_consumed: Mapped[int] = mapped_column(BigInteger, default=0)
    records: Mapped[int] = mapped_column(BigInteger, default=0)
    damaged_records: Mapped[int] = mapped_column(BigInteger, default=0)
    status: Mapped[str] = mapped_column(Text, default="new")
    last_error: Mapped[str | None] = mapped_column(Text)
    first_wall_time: Mapped[float | None] = mapped_column(Double)
    last_wall_time: Mapped[float | None] = mapped_column(Double)
    updated_at: Mapped[float | None] = mapped_column(Double)
    # The plugins and tags its points were read under (canonical JSON; NULL: everything).
    selection: Mapped[str | None] = mapped_column(Text)


class Scalar(Base):
    """One scalar value record; ``value`` is NULL exactly when the logged value was NaN."""

    __tablename__ = "scalars"
    __table_args__ = ({"sqlite_with_rowid": False},)

    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), primary_key=True)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    file_id: Mapped[int] = mapped_column(ForeignKey("event_files.id"), primary_key=True)
    record_offset: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    value_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    wall_time: Mapped[float | None] = mapped_column(Double)  # NULL when NaN
    value: Mapped[float | None] = mapped_column(Double)


class Conversion(Base):
    """One invocation of the converter, with its options and end summary (JSON)."""

    __tablename__ = "conversions"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    logdir: Mapped[str] = mapped_column(Text)
    tool_version: Mapped[str] = mapped_column(Text)
    started_at: Mapped[float] = mapped_column(Double)
    finished_at: Mapped[float | None] = mapped_column(Double)
    status: Mapped[str] = mapped_column(Text, default="running")
    options: Mapped[str | None] = mapped_column(Text)
    summary: Mapped[str | None] = mapped_column(Text)


class _PointKey:
    """Where a value came from: the key columns shared by every point table."""

    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"))
    step: Mapped[int] = mapped_column(BigInteger)
    file_id: Mapped[int] = mapped_column(ForeignKey("event_files.id"))
    record_offset: Mapped[int] = mapped_column(BigInteger)
    value_index: Mapped[int] = mapped_column(Integer)
    wall_time: Mapped[float | None] = mapped_column(Double)  # NULL when NaN


_KEY = ("series_id", "step", "file_id", "record_offset", "value_index")


def _point_table(*sub_key: str, wide: bool = False) -> tuple[Any, ...]:
    """Table args of a point table: its key, in clustering order, and no rowid on SQLite
    unless its rows are ``wide`` (a ``WITHOUT ROWID`` table moves what a row holds beyond about
    1 KB to overflow pages: see migration 0007)."""
    return (PrimaryKeyConstraint(*_KEY, *sub_key), {"sqlite_with_rowid": wide})


class Blob(Base):
    """Content-addressed bytes (images, audio, tensors): each distinct payload stored once."""

    __tablename__ = "blobs"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    sha256: Mapped[str] = mapped_column(Text, unique=True)
    size: Mapped[int] = mapped_column(BigInteger)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class Image(_PointKey, Base):
    """One encoded image (PNG, GIF, ...); ``idx`` is its position among the step's images."""

    __tablename__ = "images"
    __table_args__ = _point_table("idx")

    idx: Mapped[int] = mapped_column(Integer)
    blob_id: Mapped[int] = mapped_column(ForeignKey("blobs.id"), index=True)
    format: Mapped[str | None] = mapped_column(Text)
    width: Mapped[int | None] = mapped_column(Integer)
    height: Mapped[int | None] = mapped_column(Integer)


class Audio(_PointKey, Base):
    """One audio clip (WAV bytes) with its sample rate and label."""

    __tablename__ = "audio"
    __table_args__ = _point_table("idx")

    idx: Mapped[int] = mapped_column(Integer)
    blob_id: Mapped[int] = mapped_column(ForeignKey("blobs.id"), index=True)
    sample_rate: Mapped[float | None] = mapped_column(Double)
    num_channels: Mapped[int | None] = mapped_column(Integer)
    length_frames: Mapped[int | None] = mapped_column(BigInteger)
    content_type: Mapped[str | None] = mapped_column(Text)
    label: Mapped[str | None] = mapped_column(Text)


class Histogram(_PointKey, Base):
    """One histogram: TensorBoard's (left, right, count) buckets as JSON, and for a
    ``HistogramProto`` its own (limit, count) buckets as written (``raw_buckets``)."""

    __tablename__ = "histograms"
    __table_args__ = _point_table(wide=True)

    count: Mapped[float | None] = mapped_column(Double)
    min: Mapped[float | None] = mapped_column(Double)
    max: Mapped[float | None] = mapped_column(Double)
    sum: Mapped[float | None] = mapped_column(Double)
    sum_squares: Mapped[float | None] = mapped_column(Double)
    buckets: Mapped[str] = mapped_column(Text)
    raw_buckets: Mapped[str | None] = mapped_column(Text)


class TextValue(_PointKey, Base):
    """One element of a text (string) tensor; ``idx`` is its flat position."""

    __tablename__ = "texts"
    __table_args__ = _point_table("idx", wide=True)

    idx: Mapped[int] = mapped_column(Integer)
    value: Mapped[str] = mapped_column(Text)


class Param(_PointKey, Base):
    """One hyper-parameter of an hparams session (``session_start_info``) or of a sidecar
    (``hparams.yaml``, ``params.json``)."""

    __tablename__ = "params"
    # v_params looks up a run's keys by series to hide a sidecar's (revision 0012): without
    # it, each row scans its series' params, as key comes last in the primary key.
    __table_args__ = (Index("ix_params_series_id_key", "series_id", "key"), *_point_table("key"))

    key: Mapped[str] = mapped_column(Text)
    value: Mapped[str | None] = mapped_column(Text)
    value_num: Mapped[float | None] = mapped_column(Double)
    value_type: Mapped[str] = mapped_column(Text)


class Tensor(_PointKey, Base):
    """Any other value, kept raw: dtype, shape and bytes (pr_curves, mesh, graphs, session
    logs, log messages, unknown)."""

    __tablename__ = "tensors"
    __table_args__ = _point_table()

    dtype: Mapped[str] = mapped_column(Text)
    shape: Mapped[str] = mapped_column(Text)
    blob_id: Mapped[int] = mapped_column(ForeignKey("blobs.id"), index=True)


class PushRun(Base):
    """A run pushed into another tracker (``tbconvert push``), per destination: the
    tracker's id for it, and ``pending`` while a push may have sent points it has not marked.

    No foreign keys, here and in :class:`PushMark`: the converter deletes runs, series and
    files with SQLite's enforcement off, and a row that outlives its run is never matched.
    """

    __tablename__ = "push_runs"
    __table_args__ = (PrimaryKeyConstraint("destination", "run_id"),)

    destination: Mapped[str] = mapped_column(Text)
    run_id: Mapped[int] = mapped_column(BigInteger)
    remote_id: Mapped[str] = mapped_column(Text)
    pending: Mapped[bool] = mapped_column(Boolean)
    pushed_at: Mapped[float | None] = mapped_column(Double)


class PushMark(Base):
    """The last point of one (series, point table, event file) that a tracker acknowledged:
    a file's points are appended in (record offset, value index) order.  The file's path and
    first-record digest say which file it was: one replaced under the same id is new."""

    __tablename__ = "push_marks"
    __table_args__ = (PrimaryKeyConstraint("destination", "series_id", "point_table", "file_id"),)

    destination: Mapped[str] = mapped_column(Text)
    series_id: Mapped[int] = mapped_column(BigInteger)
    point_table: Mapped[str] = mapped_column(Text)
    file_id: Mapped[int] = mapped_column(BigInteger)
    file_path: Mapped[str] = mapped_column(Text)
    file_digest: Mapped[str | None] = mapped_column(Text)
    record_offset: Mapped[int] = mapped_column(BigInteger)
    value_index: Mapped[int] = mapped_column(Integer)
    points: Mapped[int] = mapped_column(BigInteger)


class PushDestination(Base):
    """A destination as a user names it (the tracker, where it is without credentials, the
    name of what the runs go into: an MLflow experiment) and the key its ``push_runs`` and
    ``push_marks`` have, which may hold an id only the tracker knows (the experiment's)."""

    __tablename__ = "push_destinations"
    __table_args__ = (PrimaryKeyConstraint("tracker", "location", "name"),)

    tracker: Mapped[str] = mapped_column(Text)
    location: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text)
    destination: Mapped[str] = mapped_column(Text)
    recorded_at: Mapped[float | None] = mapped_column(Double)


class FileHead(Base):
    """The tags of the first records of a remote logdir's file, as the layout read them, with
    the size and time the file had then (a cache: ``reading.discovery``, migration 0011)."""

    __tablename__ = "file_heads"
    __table_args__ = (PrimaryKeyConstraint("source", "path"),)

    source: Mapped[str] = mapped_column(Text)
    path: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(BigInteger)
    mtime_ns: Mapped[int] = mapped_column(BigInteger)
    tags: Mapped[str] = mapped_column(Text)  # a JSON list of strings
