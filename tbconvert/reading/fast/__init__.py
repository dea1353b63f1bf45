"""Speed-only paths: each gives exactly the rows the general path (``reading.decoder``) gives.

A newcomer can skip this package: the general pipeline in ``reading/`` is complete without
it.  What it adds is speed on the commonest records, single-scalar Events:

- ``template``: the byte template of a single-scalar Event, the per-record parser, the
  table of keys learnt by a conversion (a record's bytes less its values) and the loop that
  decodes records fed one by one through it.
- ``blocks``: whole buffers framed and CRC-checked at once (CRC linearity, NumPy).
- ``block_template``: the template read from every record of a block at once (NumPy).
- ``block_scalars``: a block's single-scalar records of known keys made packed rows.
- ``batch``: the records of a batch of small files parsed together; a file that needs no
  decoder is settled from the batch alone.

The contract: a fast path never decides what a record means.  Where a series is defined, it
asks the decoding rule (``reading.routing``: the ``routing`` of :class:`GeneralPath`, which
``EventDecoder`` satisfies) through ``scalar_definition``, ``define_scalar`` and
``scalar_series``, and it hands every record it cannot take whole to ``feed_records``, in
record order.  Each module is pinned by equivalence tests against the general path
(``tests/reading/``) and by TensorBoard's own reader (``tests/safety/test_oracle.py``).
Modules here import nothing from the decoder or the readers above it (``tests/test_layers.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tbconvert.reading.decode_stats import DecodeStats
from tbconvert.reading.routing import Routing
from tbconvert.reading.row_buffer import RowBuffer
from tbconvert.rows import SeriesDefinition


class GeneralPath(Protocol):
    """What the fast paths use of the general path: the decoding rule of its file, where
    rows go, and the decoding of every record they do not take whole."""

    routing: Routing
    buffer: RowBuffer
    stats: DecodeStats
    definitions: list[SeriesDefinition]

    def feed_records(self, records: Sequence[tuple[int, bytes]]) -> None:
        """Decode ``(offset, payload)`` records in order, with protobuf."""

    def feed(self, records: list[tuple[int, bytes]]) -> None:
        """Decode ``(offset, payload)`` records in order, by their learnt keys where it can."""
