"""Reading a store: the Python API behind ``tbconvert runs``, ``show`` and ``export`` (design §10).

A run is named by its path relative to its logdir (``run_path``, ``.`` for the logdir itself)
or by its ``run_id``.  Filters on runs, contexts and tags are shell globs matched with
``fnmatch.fnmatchcase`` (``*`` also crosses ``/``), as in ``tbconvert tf --run/--tag``.
Points come back in step order; equal steps (resumed runs) keep the order they were written.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from tbconvert.errors import StoreError, UsageError
from tbconvert.filters import Globs
from tbconvert.query import groups, inventory, lookups, tables
from tbconvert.query.results import SeriesRef, StoredImage
from tbconvert.query.resumed import RESUMED_DEFAULT
from tbconvert.query.selection import RunSelection, select_runs
from tbconvert.query.thinning import Thinned, thin_series
from tbconvert.store.engine import (
    create_store_engine,
    default_store,
    require_existing,
    store_display,
    store_url,
)
from tbconvert.store.errors import translate_errors

if TYPE_CHECKING:
    import numpy
    import pandas


class Store:
    """A store opened for reading.  Use :func:`open_store`."""

    def __init__(self, engine: Engine, display: str) -> None:
        """Wrap an engine whose schema is current."""
        self.engine = engine
        self.display = display
        self._pinned: Connection | None = None  # the connection of an open snapshot()

    def __repr__(self) -> str:
        """Name the store, as errors do."""
        return f"Store({self.display!r})"

    def close(self) -> None:
        """Release the store's connections."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        """Use the store in a ``with`` block that closes it."""
        return self

    def __exit__(self, *_exc: object) -> None:
        """Close the store."""
        self.close()

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        """A read connection (one snapshot), with driver errors turned into StoreError;
        inside :meth:`snapshot`, the snapshot's connection."""
        if self._pinned is not None:
            yield self._pinned
            return
        with translate_errors(self.display), self.engine.connect() as conn:
            yield conn

    @contextmanager
    def snapshot(self) -> Iterator[Store]:
        """A block whose reads of this store all see one snapshot of it (one connection and
        transaction), however many calls they take: a command reads its runs, series and
        points consistently while a conversion writes.  Not for sharing between threads.
        """
        if self._pinned is not None:
            yield self
            return
        with self.connect() as conn:
            if conn.dialect.name == "postgresql":
                # Read committed, PostgreSQL's default, takes a snapshot per statement.
                conn.execution_options(isolation_level="REPEATABLE READ")
            self._pinned = conn
            try:
                yield self
            finally:
                self._pinned = None

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one SQL statement (named ``:parameters``) and return its rows as dicts."""
        with self.connect() as conn:
            return lookups.query(conn, sql, parameters)

    def runs(
        self, run: Globs = None, selection: RunSelection | None = None
    ) -> list[dict[str, Any]]:
        """Every run, or those whose path matches ``run``, sorted by logdir and path; or
        those ``selection`` chooses, in its order (:meth:`select_runs`), each with the
        ``values`` of its columns.

        Returns:
            Dicts with the columns of ``v_runs`` plus ``contexts`` (sorted), ``series``,
            ``points`` (rows per point table, non-zero only), ``scalar_points``, ``params``
            (``{context: {key: value}}``: one entry per hparams session) and
            ``file_problems`` (files not whole, by status: damaged, invalid, partial).
        """
        with self.connect() as conn:
            return inventory.list_runs(conn, run, selection)

    def select_runs(
        self,
        where: str | None = None,
        *,
        run: Globs = None,
        top: int | None = None,
        by: str | None = None,
        columns: Sequence[tuple[str, str]] = (),
        resumed: str = RESUMED_DEFAULT,
        with_params: bool = False,
    ) -> list[dict[str, Any]]:
        """The runs that meet an expression (docs/cli.md, "Selecting runs by expression").

        Args:
            where: A condition, e.g. ``'lr < 1e-3 and min(loss, context="val") < 0.2'``.
            run: Globs on run paths, applied first.
            top: Keep the first N runs by ``by``.
            by: A value to order by, descending (``-EXPR``: ascending), ties by path.
            columns: ``(name, expression)`` pairs whose values each row gets in ``values``.
            resumed: ``current`` (each series as its last attempt left it) or ``all``.
            with_params: Add ``params`` (``{context: {key: value}}``) to each row.

        Returns:
            ``v_runs`` rows, in the selection's order.

        Raises:
            UsageError: an expression that does not parse (its message names the column), or
                an aggregate without a context whose tag a run logs in several.
        """
        chosen = RunSelection(run, where, top, by, tuple(columns), resumed)
        with self.connect() as conn:
            return select_runs(conn, chosen, with_params=with_params)

    def describe(self, run: str | int) -> dict[str, Any]:
        """One run in full: its ``v_runs`` row, series, params and event files.

        Returns:
            ``{"run": {...}, "series": [...], "params": {context: {key: value}},
            "files": [...]}``.  Each series has its plugin, the table holding its points,
            the number of points, first and last step, and for scalars and texts the last
            value (highest step, then last written); a scalar series also its ``trend`` (for
            each of up to 24 equal step ranges, the mean of its first 32 points, for
            sparklines); each file its read state.

        Raises:
            UsageError: no run (or several runs in different logdirs) has that path.
        """
        with self.connect() as conn:
            return inventory.describe_run(conn, run, self.display)

    def series(
        self,
        run: Globs | int = None,
        tag: Globs = None,
        context: Globs = None,
        plugin: Globs = None,
    ) -> list[SeriesRef]:
        """The series matching the filters (globs; an int ``run`` is a run id), sorted.

        Text tags also match without the ``/text_summary`` suffix torch and tensorboardX add.
        """
        with self.connect() as conn:
            return lookups.series(conn, run, tag, context, plugin)

    def scalars_grouped(
        self,
        group_by: Sequence[str] = (),
        aggregate_over: Sequence[str] = (),
        run: Globs = None,
        tag: Globs = None,
        context: Globs = None,
    ) -> list[dict[str, Any]]:
        """Scalars aggregated over the runs of each group, step by step.

        Args:
            group_by: Hyper-parameter keys (runs with equal values form a group) or
                ``run:REGEX`` (runs whose path gives the same first capture group).
            aggregate_over: Keys to aggregate over: group by every other hyper-parameter.
            run, tag, context: Globs on the runs and series taken.

        Returns:
            One dict per (group, context, tag, step): the group's keys, then ``context``,
            ``tag``, ``step``, ``runs``, ``nan``, ``mean``, ``std`` (ddof=1), ``min``,
            ``max`` (see :mod:`tbconvert.query.groups`).

        Raises:
            UsageError: no grouping, or a ``run:`` key that is not a regular expression with
                a capture group.
        """
        columns, found = groups.scalars_grouped(
            self, groups.Grouping(tuple(group_by), tuple(aggregate_over)), run, tag, context
        )
        return [dict(zip(columns, row, strict=True)) for row in found]

    def scalars(self, run: str | int, tag: str, context: str | None = None) -> numpy.ndarray:
        """The learning curve of one scalar series as a NumPy structured array.

        Args:
            run: The run's path (``run_path``) or id.
            tag: The tag, exactly as logged.
            context: The context (``''`` for files in the run directory itself); may be left
                out when only one context of the run has the tag.

        Returns:
            Fields ``step`` (int64), ``wall_time`` and ``value`` (float64; NaN where the store
            holds NULL, i.e. a NaN was logged), in step order.  Every record is one element:
            a resumed run repeats the steps it logged twice, in the order written.

        Raises:
            UsageError: no such run or series, or the tag is in several contexts.
        """
        import numpy as np

        series = self._one_series(run, tag, context)
        with self.connect() as conn:
            rows = conn.execute(text(lookups.POINT_SQL["scalars"]), {"id": series.id}).all()
        dtype = np.dtype([("step", "<i8"), ("wall_time", "<f8"), ("value", "<f8")])
        array = np.empty(len(rows), dtype=dtype)
        if rows:
            for name, column in zip(dtype.names or (), zip(*rows, strict=True), strict=True):
                array[name] = np.array(column, dtype=dtype[name])  # None becomes NaN
        return array

    def params(self, run: str | int, context: str | None = None) -> dict[str, Any]:
        """A run's hyper-parameters, typed (float, int, bool, str, or parsed JSON).

        Args:
            run: The run's path or id.
            context: The hparams session (tensorboardX and torch write each ``add_hparams``
                into its own sub-directory); may be left out when the sessions agree.

        Raises:
            UsageError: no such run, or its sessions disagree and no context was given.
        """
        with self.connect() as conn:
            row = lookups.resolve_run(conn, run, self.display)
            sessions = lookups.param_sessions(conn, row["run_id"]).get(row["run_id"], {})
        if context is not None:
            return dict(sessions.get(context, {}))
        merged: dict[str, Any] = {}
        for values in sessions.values():
            for key, value in values.items():
                if key in merged and not _same(merged[key], value):
                    raise UsageError(
                        f"the hparams sessions of run {row['run_path']!r} disagree on {key!r}",
                        path=self.display,
                        hint=f"pass context= one of {sorted(sessions)}, or "
                        "use tbconvert.output.export.hparams_table(store)",
                    )
                merged[key] = value
        return merged

    def param_sessions(self, run_id: int | None = None) -> dict[int, dict[str, dict[str, Any]]]:
        """Typed params of every run (or one) as ``{run_id: {context: {key: value}}}``."""
        with self.connect() as conn:
            return lookups.param_sessions(conn, run_id)

    def images(
        self,
        run: Globs | int = None,
        tag: Globs = None,
        context: Globs = None,
        step: int | None = None,
    ) -> Iterator[StoredImage]:
        """The stored images matching the filters, in step order; ``.open()`` decodes one."""
        sql = (
            "SELECT step, wall_time, idx, format, width, height, blob_id FROM images "
            "WHERE series_id = :id"
            + ("" if step is None else " AND step = :step")
            + f" ORDER BY step, {lookups.WRITTEN}, idx"
        )
        with self.connect() as conn:
            chosen = lookups.series(conn, run, tag, context, plugin="images")
            found = [
                (series, conn.execute(text(sql), {"id": series.id, "step": step}).all())
                for series in chosen
            ]
        for series, rows in found:
            for point_step, wall_time, idx, encoding, width, height, blob_id in rows:
                yield StoredImage(
                    series.run_id,
                    series.run_path,
                    series.context,
                    series.tag,
                    point_step,
                    wall_time,
                    idx,
                    encoding,
                    width,
                    height,
                    blob_id,
                    store=self,
                )

    def points(
        self, table: str, chosen: Sequence[SeriesRef], resumed: str = "all", written: bool = False
    ) -> Iterator[tuple[Any, ...]]:
        """Long-format rows of ``scalars``, ``texts`` or ``params`` (the views' columns),
        streamed series by series from one snapshot of the store; ``resumed="current"``:
        each scalar series as its last attempt left it; ``written``: each series' scalars in
        write order, not by step."""
        return lookups.points(self, table, chosen, resumed, written)

    def points_by_series(
        self, table: str, chosen: Sequence[SeriesRef], resumed: str = "all", written: bool = False
    ) -> Iterator[tuple[SeriesRef, list[tuple[Any, ...]]]]:
        """Each chosen series with its rows as :meth:`points` gives them (none for a series
        without points), in the order chosen, all from one snapshot of the store."""
        return lookups.points_by_series(self, table, chosen, resumed, written)

    def to_pandas(self, kind: str = "scalars", **filters: Any) -> pandas.DataFrame:
        """A pandas DataFrame; see :func:`tbconvert.query.tables.to_pandas` for kinds and filters.

        Raises:
            MissingDependency: pandas is not installed (``pip install '.[pandas]'``).
        """
        return tables.to_pandas(self, kind, **filters)

    def thinned(
        self,
        run: str | int,
        tag: str,
        context: str | None = None,
        buckets: int = 500,
        **options: Any,
    ) -> Thinned:
        """One scalar series over a range, thinned in SQL to the points that keep its shape
        (each bucket's first, last, lowest, highest and first NaN point), or whole when short:
        :func:`tbconvert.query.thinning.thin_series`, whose keywords ``options`` takes (``lo``,
        ``hi``, ``x``, ``resumed``, ``exact_up_to``, ``attempt``).

        Raises:
            UsageError: no such run or scalar series, or the tag is in several contexts and
                ``context`` is not given.
        """
        chosen = self._one_series(run, tag, context)
        with self.connect() as conn:
            return thin_series(conn, chosen.id, buckets, **options)

    def _one_series(self, run: str | int, tag: str, context: str | None) -> SeriesRef:
        with self.connect() as conn:
            run_id = lookups.resolve_run(conn, run, self.display)["run_id"]
        scalars = self.series(run=run_id, plugin="scalars")
        found = [s for s in scalars if s.tag == tag and context in (None, s.context)]
        if len(found) == 1:
            return found[0]
        if found:
            raise UsageError(
                f"tag {tag!r} of run {run!r} is in several contexts",
                path=self.display,
                hint="pass context= one of " + ", ".join(repr(s.context) for s in found),
            )
        tags = sorted({s.tag for s in scalars if context in (None, s.context)})
        close = difflib.get_close_matches(tag, tags, n=3)
        where = "" if context is None else f", context {context!r}"
        raise UsageError(
            f"no scalar series {tag!r} in run {run!r}{where}",
            path=self.display,
            hint=f"did you mean {', '.join(close)}?"
            if close
            else f"its scalar tags: {', '.join(tags) or '(none)'}",
        )


def _same(first: Any, second: Any) -> bool:
    # A NaN hyper-parameter agrees with itself.
    return bool(first == second) or (first != first and second != second)


def open_store(store: str | os.PathLike[str] | None = None, *, upgrade: bool = False) -> Store:
    """Open an existing store for reading; never creates a SQLite file.

    Args:
        store: A SQLite file or a SQLAlchemy URL; default ``$TBCONVERT_STORE``, else
            ``./tbconvert.db`` (:func:`tbconvert.store.engine.default_store`).
        upgrade: Bring an older schema to this version's first, as ``tbconvert tf`` does
            (a SQLite file after a backup; :func:`tbconvert.store.migrate.ensure_schema`).
            False: refuse it, naming the command that upgrades it.

    Raises:
        StoreError: there is no store there, its schema is not this version's (and
            ``upgrade`` is False), or it cannot be upgraded.
    """
    url = store_url(store if store is not None else default_store())
    display = store_display(url)
    require_existing(url)
    engine = create_store_engine(url)
    try:
        with translate_errors(display):
            if upgrade:
                from tbconvert.store.migrate import ensure_schema

                ensure_schema(engine)
            else:
                _require_current(engine, display)
    except BaseException:
        engine.dispose()
        raise
    return Store(engine, display)


def _require_current(engine: Engine, display: str) -> None:
    from tbconvert.store.migrate import HEAD_REVISION, current_revision

    with engine.connect() as conn:
        current = current_revision(conn)
    # The constant, not the scripts: importing Alembic is most of `tbconvert runs`'s time.
    head = HEAD_REVISION
    if current == head:
        return
    if current is None:
        raise StoreError("not a tbconvert store", path=display, hint="check --store")
    raise StoreError(
        f"the store is at schema revision {current}, this version reads {head}",
        path=display,
        hint="run 'tbconvert db upgrade' (or upgrade tbconvert if the store is newer)",
    )
