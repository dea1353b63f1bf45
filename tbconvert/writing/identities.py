"""Store ids of runs, contexts, series and blobs: looked up or created, cached for the writer's
life, forgotten again when the transaction that made them rolls back.

A sweep meets thousands of new runs, each with a few series: every statement per series or per
file counts (issue #14).  A run or context costs one look-up and, when new, one insert that
returns its id; the series of a file are resolved together, three statements whatever their
number.  Look-ups come first: on PostgreSQL even an insert that conflicts draws a sequence
number, and ids would then depend on how many re-runs a store has seen.

Two strategies behind one interface.  :class:`Identities` (a server, shared with other
converters) inserts a new row at once and reads its id back.  :class:`AllocatingIdentities`
(SQLite, where the writer holds the store's only write lock for the whole transaction) gives
new runs, series and files their ids itself (the next after the table's largest, as SQLite
would) and inserts them when the transaction ends, one statement per table: a group of a
thousand new files then costs a handful of statements, not thousands.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from tbconvert.rows import SeriesDefinition
from tbconvert.writing import statements as sql
from tbconvert.writing.statements import Statements

# Runs looked up in one statement (SQLite takes up to 32,766 parameters).
_LOOKUP_BATCH = 500


class Identities:
    """Get-or-create of the rows points refer to, with a cache of their ids; a new row is
    inserted at once and its id read back (a store other converters write to as well).

    Args:
        statements: The writer's statements.
        text_value: How the backend stores a text (PostgreSQL cannot hold U+0000).
    """

    def __init__(
        self, statements: Statements, text_value: Callable[[str | None], str | None]
    ) -> None:
        """Start with an empty cache."""
        self._statements = statements
        self._text_value = text_value
        # Runs of the open transaction's group that the store does not hold (prefetch_runs).
        self._absent_runs: set[tuple[str, str]] = set()
        self._ids: dict[tuple[Any, ...], int] = {}
        self._new_in_transaction: list[tuple[Any, ...]] = []
        self.created_runs: set[int] = set()
        self.created_series: set[int] = set()
        # Series made by the open transaction and not yet summarised: no summary row can
        # exist for them, so the writer need not look one up (summaries.add_rows).
        self.unsummarised: set[int] = set()
        # Runs made by the open transaction: nothing of theirs can be stored before it.
        self._made_runs: set[int] = set()

    def rolled_back(self) -> None:
        """Forget the ids made by the transaction that just rolled back."""
        for key in self._new_in_transaction:
            self._ids.pop(key, None)
        self.ended()

    def ended(self) -> None:
        """The transaction ended (either way): start a new list of what it made."""
        self._new_in_transaction.clear()
        self.unsummarised.clear()
        self._made_runs.clear()
        self._absent_runs.clear()

    def summaries_recounted(self) -> None:
        """Every series the open transaction made has a summary row now (recounted, or made
        with one): from here on each is looked up like any other."""
        self.unsummarised.clear()

    def new_file_id(self) -> int | None:
        """The id of a new event file's row, or None: its insert numbers it."""
        return None

    def deleted(self) -> None:
        """Rows were deleted: nothing to do where the store numbers new rows."""

    def flush(self) -> None:
        """Insert what waits for the end of the transaction: nothing, here."""

    def _make_absent_run(self, params: dict[str, Any]) -> int | None:
        """Make a run the store is known not to hold without inserting it now (None: insert
        it now)."""
        return None

    def _make_series(
        self, where: dict[str, Any], keys: list[tuple[Any, ...]], rows: list[tuple[Any, ...]]
    ) -> dict[tuple[Any, ...], int]:
        """Insert new series (``rows`` in the order of ``sql.SERIES_COLUMNS``); their ids."""
        self._statements.insert(sql.INSERT_SERIES, rows)
        stored = self._stored_series(where)
        # Series are made under the run's lock (SQLite's write lock, a server's advisory
        # lock), so the ones missing before the insert are the ones it made.
        return {key: stored[key] for key in keys}

    def prefetch_runs(self, source: str, run_paths: Collection[str]) -> None:
        """Look up the runs of a group at once (cached ones too: another converter may have
        deleted them): those found are cached, and those the store does not hold are made
        without a look-up of their own.  Under the runs' locks (the writer's, and a server's
        advisory ones), they stay absent until the transaction ends but for another
        converter's insert, which ``run_id`` still finds."""
        wanted = sorted(set(run_paths))
        for start in range(0, len(wanted), _LOOKUP_BATCH):
            part = wanted[start : start + _LOOKUP_BATCH]
            marks = ", ".join(f":p{index}" for index in range(len(part)))
            params: dict[str, Any] = {f"p{index}": path for index, path in enumerate(part)}
            params["source"] = source
            found = dict(self._statements.all(sql.RUNS_OF.format(marks=marks), params))
            for path in part:
                key = ("runs", source, path)
                cached = self._ids.get(key)
                if cached is not None and cached != found.get(path):
                    # Deleted by another converter since (a conversion of a logdir inside or
                    # around this one took its files over): its ids and its series' are stale.
                    self.forget(set(), {cached})
                if path in found:
                    self._remember(key, int(found[path]))
                else:
                    self._absent_runs.add((source, path))

    def run_id(
        self, source: str, run_path: str, *, host: str, logdir: str, group_path: str, name: str
    ) -> int:
        """Get or create the run (``source``, ``run_path``), made with the other columns."""
        params = {
            "source": source,
            "host": host,
            "logdir": logdir,
            "run_path": run_path,
            "group_path": group_path,
            "name": name,
        }
        key = ("runs", source, run_path)
        cached = self._ids.get(key)
        if cached is not None:
            return cached
        absent = (params["source"], params["run_path"]) in self._absent_runs
        made = self._make_absent_run(params) if absent else None
        if made is None:
            found = None if absent else self._statements.scalar(sql.RUN_ID, params)
            if found is not None:
                return self._remember(key, int(found))
            made = self._statements.scalar(sql.INSERT_RUN, params)
            if made is None:  # made by another converter since the look-up
                return self._remember(key, int(self._statements.scalar(sql.RUN_ID, params)))
        self.created_runs.add(int(made))
        self._made_runs.add(int(made))
        return self._remember(key, int(made))

    def made_now(self, run_id: int) -> bool:
        """True when the open transaction made the run (it has no files or series yet but
        those this transaction made)."""
        return run_id in self._made_runs

    def context_id(self, name: str) -> int:
        """Get or create the context called ``name``."""
        key = ("contexts", name)
        cached = self._ids.get(key)
        if cached is not None:
            return cached
        params = {"name": name}
        found = self._statements.scalar(sql.CONTEXT_ID, params)
        if found is None:
            found = self._statements.scalar(sql.INSERT_CONTEXT, params)
            if found is None:  # another converter made it since the look-up
                found = self._statements.scalar(sql.CONTEXT_ID, params)
        return self._remember(key, int(found))

    def series_ids(
        self, run_id: int, context_id: int, definitions: Sequence[SeriesDefinition]
    ) -> list[int]:
        """Get or create the series of a (run, context), in the order of ``definitions``;
        a new series takes its metadata from the tag's first occurrence."""
        text_value = self._text_value
        keys = [
            ("series", run_id, context_id, text_value(series.tag), series.plugin)
            for series in definitions
        ]
        if any(key not in self._ids for key in keys):
            self._resolve_series(run_id, context_id, definitions, keys)
        return [self._ids[key] for key in keys]

    def _resolve_series(
        self,
        run_id: int,
        context_id: int,
        definitions: Sequence[SeriesDefinition],
        keys: list[tuple[Any, ...]],
    ) -> None:
        where = {"run_id": run_id, "context_id": context_id}
        stored = {key: self._ids[key] for key in keys if key in self._ids}
        # A run this transaction made has only the series it made, all of them cached.
        if run_id not in self._made_runs:
            stored.update(self._stored_series(where))
        missing = dict(
            (key, series)
            for key, series in zip(keys, definitions, strict=True)
            if key not in stored
        )
        if missing:
            text_value = self._text_value
            # Tuples in the order of ``sql.SERIES_COLUMNS`` after their id, where this side
            # gives it (a sweep makes tens of thousands).
            rows = [
                (
                    run_id,
                    context_id,
                    key[3],
                    series.plugin,
                    series.dtype,
                    text_value(series.display_name),
                    text_value(series.description),
                    series.plugin_content,
                )
                for key, series in missing.items()
            ]
            new = self._make_series(where, list(missing), rows)
            stored.update(new)
            made = list(new.values())
            self.created_series.update(made)
            self.unsummarised.update(made)
        self._ids.update((key, stored[key]) for key in keys)
        self._new_in_transaction.extend(keys)

    def adopt_series(self, run_id: int, context_id: int, series: Iterable[Sequence[Any]]) -> None:
        """Cache series (id, name, plugin) that a statement moved into (run, context) whole
        (``writing.moves``): a run this transaction made is not looked up for its series."""
        for series_id, name, plugin in series:
            self._remember(("series", run_id, context_id, name, plugin), int(series_id))

    def _stored_series(self, where: dict[str, Any]) -> dict[tuple[Any, ...], int]:
        rows = self._statements.all(sql.SERIES_OF, where)
        run_id, context_id = where["run_id"], where["context_id"]
        return {
            ("series", run_id, context_id, name, plugin): int(series_id)
            for series_id, name, plugin in rows
        }

    def blob_id(self, sha: str) -> int | None:
        """The cached id of a blob, None when not known yet."""
        return self._ids.get(("blob", sha))

    def remember_blob(self, sha: str) -> None:
        """Look up the id of a blob just inserted (or already stored) and cache it."""
        self._remember(("blob", sha), int(self._statements.scalar(sql.BLOB_ID, {"sha": sha})))

    def forget(self, series: set[int], runs: set[int]) -> None:
        """Drop cached ids of deleted rows (and count new ids from the tables again)."""
        for key, cached in list(self._ids.items()):
            if (key[0] == "series" and (cached in series or key[1] in runs)) or (
                key[0] == "runs" and cached in runs
            ):
                del self._ids[key]
        self.deleted()

    def _remember(self, key: tuple[Any, ...], new_id: int) -> int:
        self._ids[key] = new_id
        self._new_in_transaction.append(key)
        return new_id


class AllocatingIdentities(Identities):
    """:class:`Identities` for a writer alone on its store for a whole transaction
    (SQLite's): new runs, series and files get their ids here and are inserted at
    :meth:`flush`, one statement per table."""

    def __init__(
        self, statements: Statements, text_value: Callable[[str | None], str | None]
    ) -> None:
        super().__init__(statements, text_value)
        # The next free id of each table in the open transaction.
        self._next_id: dict[str, int] = {}
        # New rows with their ids, inserted at flush: tuples of the id, then the values of
        # ``sql.RUN_COLUMNS`` or ``sql.SERIES_COLUMNS``.
        self.staged: dict[str, list[tuple[Any, ...]]] = {"runs": [], "series": []}

    def ended(self) -> None:
        super().ended()
        self._next_id.clear()
        self.staged = {"runs": [], "series": []}

    def allocate(self, table: str, count: int = 1) -> int:
        """The id of a new row of ``table``: the next after the largest stored or given out
        in this transaction, which is the id SQLite would give it; with ``count``, the first
        of that many consecutive ids."""
        next_id = self._next_id.get(table)
        if next_id is None:
            next_id = int(self._statements.scalar(sql.NEXT_ID.format(table=table), {}))
        self._next_id[table] = next_id + count
        return next_id

    def new_file_id(self) -> int:
        return self.allocate("event_files")

    def deleted(self) -> None:
        """Rows were deleted (after a flush): ids are counted from the tables again."""
        self._next_id.clear()

    def flush(self) -> None:
        """Insert the runs and series staged with their ids."""
        staged, self.staged = self.staged, {"runs": [], "series": []}
        if staged["runs"]:
            self._statements.insert(sql.INSERT_RUN_WITH_ID, staged["runs"])
        if staged["series"]:
            self._statements.insert(sql.INSERT_SERIES_WITH_ID, staged["series"])

    def _make_absent_run(self, params: dict[str, Any]) -> int:
        made = self.allocate("runs")
        self.staged["runs"].append((made, *(params[column] for column in sql.RUN_COLUMNS)))
        return made

    def _make_series(
        self, where: dict[str, Any], keys: list[tuple[Any, ...]], rows: list[tuple[Any, ...]]
    ) -> dict[tuple[Any, ...], int]:
        first = self.allocate("series", len(rows))
        made = range(first, first + len(rows))
        self.staged["series"].extend(
            (series_id, *row) for series_id, row in zip(made, rows, strict=True)
        )
        return dict(zip(keys, made, strict=True))
