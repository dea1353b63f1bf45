"""Store ids of runs, contexts, series and blobs: looked up or created, cached for the writer's
life, forgotten again when the transaction that made them rolls back.

A sweep meets thousands of new runs, each with a few series: every statement per series or per
file counts (issue #14).  A run or context costs one look-up and, when new, one insert that
returns its id; the series of a file are resolved together, three statements whatever their
number.  Look-ups come first: on PostgreSQL even an insert that conflicts draws a sequence
number, and ids would then depend on how many re-runs a store has seen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from converter.rows import SeriesDefinition
from converter.store import statements as sql
from converter.store.statements import Statements


class Identities:
    """Get-or-create of the rows points refer to, with a cache of their ids.

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
        self._new_in_transaction.clear()
        self.unsummarised.clear()
        self._made_runs.clear()

    def ended(self) -> None:
        """The transaction ended (either way): start a new list of what it made."""
        self._new_in_transaction.clear()
        self.unsummarised.clear()
        self._made_runs.clear()

    def run_id(self, params: dict[str, Any]) -> int:
        """Get or create the run of ``params`` (source, run_path and the other columns)."""
        key = ("runs", params["source"], params["run_path"])
        cached = self._ids.get(key)
        if cached is not None:
            return cached
        found = self._statements.scalar(sql.RUN_ID, params)
        if found is None:
            found = self._statements.scalar(sql.INSERT_RUN, params)
            if found is not None:
                self.created_runs.add(int(found))
                self._made_runs.add(int(found))
            else:  # made by another converter since the look-up
                found = self._statements.scalar(sql.RUN_ID, params)
        return self._remember(key, int(found))

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
        # A run this transaction made has only the series it made, all of them cached.
        if run_id in self._made_runs:
            stored = {key: self._ids[key] for key in keys if key in self._ids}
        else:
            stored = self._stored_series(where)
        missing = [
            (key, series)
            for key, series in zip(keys, definitions, strict=True)
            if key not in stored
        ]
        if missing:
            text_value = self._text_value
            self._statements.many(
                sql.INSERT_SERIES,
                [
                    {
                        **where,
                        "name": key[3],
                        "plugin": series.plugin,
                        "dtype": series.dtype,
                        "display_name": text_value(series.display_name),
                        "description": text_value(series.description),
                        "plugin_content": series.plugin_content,
                    }
                    for key, series in dict(missing).items()
                ],
            )
            stored = self._stored_series(where)
            # Series are made under the run's lock (SQLite's write lock, a server's advisory
            # lock), so the ones missing before the insert are the ones it made.
            made = [stored[key] for key, _series in missing]
            self.created_series.update(made)
            self.unsummarised.update(made)
        for key in keys:
            self._remember(key, stored[key])

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
        """Drop cached ids of deleted rows."""
        for key, cached in list(self._ids.items()):
            if (key[0] == "series" and (cached in series or key[1] in runs)) or (
                key[0] == "runs" and cached in runs
            ):
                del self._ids[key]

    def _remember(self, key: tuple[Any, ...], new_id: int) -> int:
        self._ids[key] = new_id
        self._new_in_transaction.append(key)
        return new_id
