"""A file the classification now files elsewhere moves with its points (design §3, §7).

When a file's (run, context) changes between conversions of the same source (``--flat``
switched, a layout's rules changed, a store written by an earlier version's rules), its row,
points, series summaries and push marks move to its new place (``writing.moves``) in the
transaction that plans the conversion: nothing is read again, and the file is then planned
as it stands there (unchanged, grown, replaced).  Runs and series left empty go.
"""

from __future__ import annotations

from tbconvert.conversion.plan import misplaced
from tbconvert.conversion.sources import Origin
from tbconvert.reading.discovery import Classification
from tbconvert.store.file_states import KnownFile
from tbconvert.writing.moves import forget_pushes_of_gone_runs, move_file
from tbconvert.writing.writer import StoreWriter


def relocate(
    writer: StoreWriter,
    origin: Origin,
    classification: Classification,
    known: dict[str, KnownFile],
) -> int:
    """Move, in the writer's open transaction, every stored file of this source that the
    classification files under another (run, context); ``known`` (this source's stored
    files) becomes what the store holds afterwards.  Returns how many files moved."""
    found = misplaced(classification, known)
    if not found:
        return 0
    # Both places are held before anything changes (PostgreSQL), in one call as every
    # converter locks, then the store is read again: a converter of the same logdir may
    # have moved or read these files while this one waited.
    places = {stored.run_path for _run, _file, stored in found}
    places.update(run.run_path for run, _file, _stored in found)
    writer.lock_runs(origin.source, places)
    known.clear()
    known.update(writer.files.states_of_source(origin.source))
    left: set[int] = set()
    moved = 0
    for run, source, stored in misplaced(classification, known):
        if stored.run_path not in places:
            # Filed there by a converter that classifies otherwise since the lock was
            # taken: the next conversion settles it, as this one cannot hold it in order.
            continue
        target = file_into(
            writer,
            origin,
            classification.logdir,
            stored.state.id or 0,
            (run.run_path, run.group_path, source.context, source.rel_path),
            left,
        )
        if target is None:
            continue
        run_id, context_id = target
        state = stored.state.updated(run_id=run_id, context_id=context_id)
        known[source.rel_path] = KnownFile(state, run.run_path, source.context)
        moved += 1
    forget_pushes_of_gone_runs(writer, left)
    return moved


def file_into(
    writer: StoreWriter,
    origin: Origin,
    logdir: str,
    file_id: int,
    place: tuple[str, str, str, str],
    left: set[int],
) -> tuple[int, int] | None:
    """Move the stored file ``file_id`` to ``place``, this conversion's (run path, group path,
    context, file path relative to ``logdir``), dropping what it leaves empty and adding the
    run it left to ``left`` (whose push records go once all moves are done).  Returns the
    (run, context) ids it went to; None when another converter took it away first."""
    run_path, group_path, context, path = place
    run_id = origin.run_id(writer, logdir, run_path, group_path)
    context_id = writer.identities.context_id(context)
    old_place = move_file(writer, file_id, run_id, context_id, path)
    if old_place is None:
        return None
    writer.files.drop_empty(*old_place)
    left.add(old_place[0])
    return run_id, context_id
