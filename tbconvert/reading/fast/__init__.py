"""Speed-only paths: each gives exactly the rows the general path (``reading.decoder``) gives.

A newcomer can skip this package: the general pipeline in ``reading/`` is complete without
it.  What it adds is speed on the commonest records, single-scalar Events:

- ``template``: the byte template of a single-scalar Event, its field bytes named, the
  per-record parser, and the process-wide cache of keys (a record's bytes less its values).
- ``blocks``: whole buffers framed and CRC-checked at once (CRC linearity, NumPy).
- ``block_scalars``: a block's single-scalar records of known keys parsed into packed rows.
- ``batch``: the records of a batch of small files parsed together; a file that needs no
  decoder is settled from the batch alone.

The contract: a fast path never decides what a record means.  Where a series is defined, it
asks the general path (:class:`GeneralPath`, which ``EventDecoder`` satisfies) through
``scalar_definition``/``define_scalar``, and it hands every record it cannot take whole to
``feed_records``, in record order.  Each module is pinned by equivalence tests against the
general path (``tests/reading/``) and by TensorBoard's own reader (``tests/safety/test_oracle.py``).
Modules here import nothing from the decoder or the readers above it (``tests/test_layers.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from tbconvert.reading.decode_stats import DecodeStats
from tbconvert.reading.row_buffer import RowBuffer
from tbconvert.rows import SeriesDefinition

# Plugin metadata remembered per tag (from its first occurrence: TF1 writers send it once).
KnownMetadata = dict[str, Any]


class GeneralPath(Protocol):
    """What the fast paths use of the general path: where rows go, how a single-scalar
    series is defined, and the decoding of every record they do not take whole."""

    buffer: RowBuffer
    stats: DecodeStats
    definitions: list[SeriesDefinition]

    def feed_records(self, records: Sequence[tuple[int, bytes]], *, keyed: bool = True) -> None:
        """Decode ``(offset, payload)`` records in order."""

    def scalar_definition(self, tag: str, simple: bool, own: Any) -> SeriesDefinition | None:
        """The series a single-scalar record of ``tag`` would define, numbered 0, if any."""

    def define_scalar(self, definition: SeriesDefinition, simple: bool, own: Any) -> int | None:
        """Define that series now, when the record alone decides it; its number, or None."""

    def scalar_series(self, tag: str, simple: bool) -> int | None:
        """The series whose values of ``tag`` the general path appends without protobuf."""

    def metadata(self) -> KnownMetadata:
        """The first metadata of every tag seen so far."""
