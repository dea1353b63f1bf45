"""One conversion pass (:func:`convert`) and its repetition (:func:`watch`): classify the
logdir, plan its files, decode them and apply the chunks through the store's one writer."""

from __future__ import annotations

import copy
import gc
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from tbconvert.conversion import takeover
from tbconvert.conversion.job import Job
from tbconvert.conversion.options import ConvertOptions
from tbconvert.conversion.plan import plan_files, reclassified
from tbconvert.conversion.sources import Origin
from tbconvert.conversion.summary import Summary
from tbconvert.reading import discovery
from tbconvert.reading.remote import is_remote, logdir_name
from tbconvert.reading.remote_reads import RemoteReads
from tbconvert.store.engine import (
    DEFAULT_STORE,
    check_store_location,
    create_store_engine,
    expand_path,
    sqlite_path,
    store_display,
    store_url,
)
from tbconvert.store.file_heads import read_file_heads
from tbconvert.writing.file_heads import save_file_heads
from tbconvert.writing.writer import StoreWriter

# The made-up run whose lock a pass holds while it replaces a source's ``file_heads``, as
# ``conversion.takeover`` locks its own.
_HEADS_LOCK_SOURCE, _HEADS_LOCK_RUN = "", "file-heads"
# Allocations between two collections of the youngest generation while converting.
_GC_YOUNGEST = 100_000


def convert(
    logdir: str | os.PathLike[str],
    store: str | os.PathLike[str] | None = None,
    options: ConvertOptions | None = None,
    **keywords: Any,
) -> Summary:
    """Convert every event file of ``logdir`` into ``store`` and return the summary.

    The options are ``options`` (a :class:`ConvertOptions`, default: all defaults) with the
    keywords below applied over it; each is checked before any work.

    Args:
        logdir: The TensorBoard log directory: a path, or a URL of any fsspec file system
            (``s3://bucket/prefix``, ``gs://``, ``az://``, ``hf://`` ...) read by ranges.
        store: A SQLite file path or a SQLAlchemy URL (default ``./tbconvert.db``).
        options: The options as one value, as the command line builds them.
        layout: ``auto``: one run per training run, as its writer laid it out; ``aim``: Aim's
            documented rules (``--layout``).
        flat: Every directory with event files is a run (``--flat``).
        skip_orphans: Leave out event files directly in the logdir or in a group, as Aim
            does (by default they are kept as a run of their directory, ``.`` for the logdir).
        dry_run: Classify and plan only; write nothing, not even the store file.
        full: Read every file again from its start (no duplicates result).
        plugins: Plugin names to convert (default: all).
        runs: Globs on run paths; tags / exclude_tags: globs on tags.
        jobs: Worker processes decoding files (1: decode in this process).
        source: The logdir's name in the store (default: its resolved absolute path, so a
            symlink to a logdir is that logdir).  Runs are identified by (source, run path);
            on a shared server, name each machine's logdir.
        upgrade_store: Upgrade a server store's schema if it is older than this converter
            (a SQLite file is upgraded anyway, after a backup).
        progress: Show a progress bar (None: only when stderr is a terminal).
        chunk_points: Points per transaction.
        storage_options: Options of a URL logdir's file system, as fsspec takes them
            (``endpoint_url``, ``anon``, ``key``...); credentials otherwise come from the
            protocol's own chain (environment, config files, instance roles).
        max_record_size: Records with more payload bytes are skipped unread, each counted
            as damage (the exit code is then 3); at least 1 MiB.
        notify: Called with a line to show the user while waiting (e.g. for a lock).
        tuning: Speed thresholds (:class:`ConvertTuning`); they never change what is stored.

    Raises:
        UsageError: an option no conversion can take (before any work).
        LogdirError: the logdir is missing or unreadable.
        StoreError: the store cannot be opened, created or written, or ``source`` is taken
            on a shared server by another machine's logdir of the same path.
    """
    options = (options or ConvertOptions()).with_keywords(**keywords)
    return _convert_pass(logdir, store, options)


def _convert_pass(
    logdir: str | os.PathLike[str], store: str | os.PathLike[str] | None, options: ConvertOptions
) -> Summary:
    started = time.monotonic()
    logdir = expand_path(logdir)  # ~ and $VARIABLES, from the API as from the CLI
    if store is None:
        store = os.environ.get("TBCONVERT_STORE", DEFAULT_STORE)
    url = store_url(store)
    source = options.source
    known_heads, nested_heads = {}, {}
    remote = RemoteReads(options.storage_options)  # this pass's, with the heads it reads
    if is_remote(logdir):
        known_heads = read_file_heads(url, source or logdir_name(logdir))
        nested_heads = takeover.nested_heads(
            url, source or logdir_name(logdir), logdir_name(logdir)
        )
    classified = discovery.classify(
        logdir,
        layout=options.layout,
        flat=options.flat,
        skip_orphans=options.skip_orphans,
        known_heads={**nested_heads, **known_heads},
        remote=remote,
    )
    classification = discovery.select_shard(
        discovery.filter_runs(classified, options.runs), options.shard
    )
    summary = Summary(
        logdir=classification.logdir,
        store=store_display(url),
        dry_run=options.dry_run,
        runs=len(classification.runs),
        shard=None if options.shard is None else str(options.shard),
        runs_in_logdir=len(classified.runs),
        files_total=len(classification.files),
        orphans=list(classification.orphans),
        orphans_skipped=options.skip_orphans,
        warnings=list(classification.warnings),
    )
    origin = Origin(
        source or classification.logdir, explicit=source is not None, host=socket.gethostname()
    )
    if options.dry_run:
        summary.plan = _dry_run_plan(classification, url, origin, options, summary)
    else:
        check_store_location(url)
        # The layout's reads are written only when they changed: a re-run writes nothing.
        changed = classification.heads if classification.heads != known_heads else None
        _convert_into(url, classification, summary, origin, options, changed)
    summary.elapsed = time.monotonic() - started
    return summary


def watch(
    logdir: str | os.PathLike[str],
    store: str | os.PathLike[str] | None = None,
    *,
    interval: float = 5.0,
    passes: int | None = None,
    on_pass: Callable[[Summary], Any] | None = None,
    options: ConvertOptions | None = None,
    **keywords: Any,
) -> Summary:
    """Repeat :func:`convert` every ``interval`` seconds until stopped (or ``passes`` passes).

    Args:
        on_pass: Called with each pass's summary once it is done.
        options, keywords: The options of every pass, as :func:`convert` takes them (built
            and checked once, before the first pass).

    Returns the summary of all passes together (see :meth:`Summary.absorb`).  A pass stopped
    by Ctrl-C or SIGTERM (:mod:`tbconvert.conversion.stopping`) ends the watch: it has
    committed whole chunks only, and ``stopped`` says what is kept.
    """
    from tbconvert.conversion import stopping

    options = (options or ConvertOptions()).with_keywords(**keywords)
    started = time.monotonic()
    total: Summary | None = None
    done = 0
    try:
        while passes is None or done < passes:
            if done:
                stopping.pause(interval)
            summary = convert(logdir, store, options)
            if on_pass is not None:
                on_pass(summary)
            if total is None:
                total = copy.deepcopy(summary)
            else:
                total.absorb(summary)
            done += 1
    except (stopping.Interrupted, KeyboardInterrupt) as stop:
        if total is None:
            raise
        # The stopped pass committed whole chunks, which the watch stored: they count.
        stopped_pass = getattr(stop, "summary", None)
        if stopped_pass is not None:
            total.absorb(stopped_pass)
        total.stopped = _stopped(stop)
    assert total is not None
    total.elapsed = time.monotonic() - started
    return total


def _stopped(stop: BaseException) -> str:
    from tbconvert.conversion.stopping import Interrupted

    if isinstance(stop, Interrupted):
        return f"{stop}: {stop.kept} is kept; the next run continues from there"
    return "stopped at once: the transaction under way was rolled back, every one before it is kept"


def _convert_into(
    url: str,
    classification: discovery.Classification,
    summary: Summary,
    origin: Origin,
    options: ConvertOptions,
    heads: Mapping[str, tuple[int, int, tuple[str, ...]]] | None,
) -> None:
    """Convert into the store at ``url``; ``heads``: the layout's reads of remote files to
    keep (``file_heads``), None when the store holds them already."""
    from tbconvert.store.errors import translate_errors
    from tbconvert.store.migrate import create_sqlite_store, ensure_schema

    path = sqlite_path(url)
    if path is not None and not os.path.exists(path):
        with translate_errors(summary.store):
            create_sqlite_store(path)
    engine = create_store_engine(url)
    try:
        with translate_errors(summary.store):
            change = ensure_schema(engine, allow_upgrade=options.upgrade_store or None)
            if change is not None and change.from_revision is not None:
                summary.schema_change = (
                    f"schema upgraded {change.from_revision} -> {change.to_revision}"
                    + (f" (backup: {change.backup})" if change.backup else "")
                )
            writer = StoreWriter(engine)
            try:
                job = Job(writer, classification, origin, summary, options)
                with few_collections():
                    # A conversion of some runs only must not mark the others' files gone.
                    job.run(prune=not options.runs)
                if heads is not None:
                    with writer.transaction():
                        # The shards of one logdir (--shard) each save every file's head:
                        # one after the other, so none deletes rows another is inserting.
                        writer.lock_runs(_HEADS_LOCK_SOURCE, [_HEADS_LOCK_RUN])
                        save_file_heads(writer.statements, origin.source, heads)
            finally:
                writer.close()
    finally:
        engine.dispose()


@contextmanager
def few_collections() -> Iterator[None]:
    """Run the cyclic garbage collector rarely while a conversion lasts, as before after it.

    A conversion allocates millions of rows, tuples of numbers and strings, and makes no
    reference cycles of its own: the collector's passes over them free nothing and cost
    5-10% of a conversion's time (docs/performance.md#the-passes-of-14).
    """
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], _GC_YOUNGEST), max(before[1], 50), max(before[2], 100))
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _dry_run_plan(
    classification: discovery.Classification,
    url: str,
    origin: Origin,
    options: ConvertOptions,
    summary: Summary,
) -> list[dict[str, Any]]:
    from tbconvert.store.file_states import read_file_states

    known = read_file_states(url, origin.source)
    moves = takeover.dry_run_moves(url, origin, classification, known, whole=not options.runs)
    summary.files_taken_over, summary.taken_over = len(moves), takeover.notices(moves)
    summary.orphans_new, summary.runs_merged = reclassified(classification, known)
    plans = plan_files(classification, known, options.full, options.selection)
    summary.files_moved = sum(plan.moved for plan in plans)
    return [
        {
            # A moved file says so; "then" is what reading it does in its new place.
            "action": "moved" if plan.moved else plan.action,
            "then": plan.action,
            "run_path": plan.run.run_path,
            "context": plan.file.context,
            "path": plan.file.rel_path,
            "bytes": plan.bytes_to_read,
        }
        for plan in plans
    ]
