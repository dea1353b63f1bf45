"""Metric points written into an Aim run with their own wall time, a batch at a time.

Aim's SDK (``Run.track``) stamps a point with the time of the call and writes it as a dozen
separate RocksDB writes, each clearing a key range first (docs/performance.md, "Pushing to
Aim").  A metric in Aim's storage (its sequences format "v2") is four arrays
keyed by the step's hash, ``val``, ``epoch``, ``time`` and ``step``, in the run's ``seqs``
database, plus a summary of the series in the run's ``meta`` tree (its first and last value
and step, its minimum and maximum, its type).  This module writes the same keys with Aim's own
encoders, each batch of points as one RocksDB write, and the summary from the whole series.

The summary is written when a run's push ends, from what Aim then holds of the series
(:meth:`MetricWriter.describe`): a push killed before leaves the run pending, and the next
push reads every series back and writes every summary again.  A step is one key: writing a
step again replaces its point, so Aim keeps one point per step, the last written.  Aim 3.29's
layout; a test reads it back through Aim's SDK.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tbconvert.errors import PushError

CONTEXT_KEY = "subset"
# Aim's encoding of a float and of an int (aim.storage.encoding.encode: a type byte, then the
# number little-endian), written directly as it costs more than the rest of a point; a test
# holds the two equal.
_FLOAT, _INT = b"\x03", b"\x02"
_PACK_FLOAT, _PACK_INT = struct.Struct("<d").pack, struct.Struct("<q").pack
_ARRAYS = ("val", "epoch", "time", "step")
# Aim's sequence format of metrics (int and float values): steps hashed into keys.
_METRIC_VERSION = 2


def aim_context(context: str) -> dict[str, Any]:
    """The Aim context of a store context: none for the run directory itself, else
    ``{"subset": NAME}`` (one Aim context per store context, so two series never meet)."""
    return {} if context == "" else {CONTEXT_KEY: context}


@dataclass(frozen=True)
class MetricPoint:
    """One point as Aim holds it: its step, value and time (seconds since the epoch)."""

    step: int
    value: float
    time: float

    def identity(self) -> tuple[int, Any, Any]:
        """What tells two points apart: (step, time, value), NaN equal to NaN."""
        return (
            self.step,
            "nan" if math.isnan(self.time) else self.time,
            "nan" if math.isnan(self.value) else self.value,
        )


class MetricWriter:
    """Writes the metric series of one open Aim run (``aim.Run`` in write mode); a series is
    named by its store context (:func:`aim_context` gives Aim's) and its tag."""

    def __init__(self, run: Any) -> None:
        from aim.storage import encoding
        from aim.storage.hashing import hash_auto

        self.run, self.encoding, self.hash_auto = run, encoding, hash_auto
        self.seqs = run.repo.request_container("seqs", run.hash, read_only=False)
        self.contexts: dict[str, int] = {}  # store context -> Aim's id of its context
        self.keys: dict[tuple[str, str], list[bytes]] = {}
        self.steps: dict[int, bytes] = {}
        self.pending = self.seqs.batch()
        self.none = encoding.encode(None)

    def context_id(self, context: str) -> int:
        """Aim's id of a store context's Aim context, recorded in the run's and the repo's
        meta once."""
        from aim.storage.context import Context

        if context not in self.contexts:
            wanted = aim_context(context)
            idx = int(Context(wanted).idx)
            self.run.meta_tree["contexts", idx] = wanted
            self.run.meta_run_tree["contexts", idx] = wanted
            self.contexts[context] = idx
        return self.contexts[context]

    def history(self, context: str, name: str) -> dict[int, MetricPoint]:
        """The points Aim holds of a series, by step (empty when it holds none)."""
        from aim.storage.context import Context

        metric = self.run.get_metric(name, Context(aim_context(context)))
        if metric is None:
            return {}
        steps, (values, _, times) = metric.data.numpy()
        return {
            int(step): MetricPoint(int(step), float(value), float(time))
            for step, value, time in zip(steps, values, times, strict=True)
        }

    def describe(self, context: str, name: str, points: Sequence[MetricPoint]) -> None:
        """Write the summary of a series whose points are ``points`` (in step order)."""
        idx = self.context_id(context)
        tree = self.run.meta_run_tree
        finite = [p.value for p in points if not math.isnan(p.value)]
        summary: dict[str, Any] = {
            "dtype": "float",
            "version": _METRIC_VERSION,
            "first": points[0].value,
            "first_step": points[0].step,
            "last": points[-1].value,
            "last_step": points[-1].step,
        }
        if finite:
            summary.update(max=max(finite), min=min(finite))
        for key, value in summary.items():
            tree["traces", idx, name, key] = value
        tree["typed_traces", "metric", idx, name] = 1
        self.run.meta_tree["traces_types", "float", idx, name] = 1

    def put(self, context: str, name: str, points: Iterable[MetricPoint]) -> None:
        """Stage points of a series (written by :meth:`commit`)."""
        put, none = self.pending.put, self.none
        value_key, epoch_key, time_key, step_key = self._array_keys(context, name)
        for point in points:
            at = self._step_key(point.step)
            put(value_key + at, _FLOAT + _PACK_FLOAT(point.value))
            put(epoch_key + at, none)
            put(time_key + at, _FLOAT + _PACK_FLOAT(point.time))
            put(step_key + at, _INT + _PACK_INT(point.step))

    def delete(self, context: str, name: str, steps: Iterable[int]) -> None:
        """Stage the removal of the points of a series at ``steps``."""
        keys = self._array_keys(context, name)
        for step in steps:
            at = self._step_key(step)
            for key in keys:
                self.pending.delete(key + at)

    def commit(self) -> None:
        """Write what was staged, as one write."""
        self.seqs.commit(self.pending)
        self.pending = self.seqs.batch()

    def _step_key(self, step: int) -> bytes:
        """The key of a step in a series' arrays (a run's series share their steps)."""
        found = self.steps.get(step)
        if found is None:
            found = self.steps[step] = self.encoding.encode_path((self.hash_auto(step),))
        return found

    def _array_keys(self, context: str, name: str) -> list[bytes]:
        found = self.keys.get((context, name))
        if found is None:
            idx = self.context_id(context)
            base = ("seqs", f"v{_METRIC_VERSION}", "chunks", self.run.hash, idx, name)
            found = self.keys[context, name] = [
                self.encoding.encode_path((*base, array)) for array in _ARRAYS
            ]
        return found


class RemoteMetricWriter(MetricWriter):
    """Writes the metric series of a run of an Aim server (``aim://``), whose storage only
    Aim's tracker reaches: a point at a time, with its own wall time, through the call
    ``Run.track`` makes with the time of the call (Aim's own ``aim convert`` does the same)."""

    def __init__(self, run: Any) -> None:
        self.run, self.contexts, self.keys, self.steps = run, {}, {}, {}

    def put(self, context: str, name: str, points: Iterable[MetricPoint]) -> None:
        """Send points of a series (acknowledged by :meth:`commit`)."""
        wanted, track = aim_context(context), self.run._tracker._track
        for point in points:
            track(point.value, point.time, name, point.step, None, context=wanted)

    def delete(self, context: str, name: str, steps: Iterable[int]) -> None:
        """Aim's server takes no removal of a point.

        Raises:
            PushError: always, naming the series.
        """
        raise PushError(
            f"the series {name!r} (context {context!r}) went back to an earlier step, and an Aim "
            "server cannot remove the steps after it",
            hint="push into a local repo (--repo PATH), or into a new one",
        )

    def commit(self) -> None:
        """Wait until the server took every point sent."""
        self.run.repo._client.get_queue().wait_for_finish()
