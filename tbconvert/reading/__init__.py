"""Bytes to rows, with no database: what ``--jobs`` worker processes run.

The pipeline, one module per stage:

``discovery`` (a logdir to runs, contexts and event files) -> ``records`` (TFRecord framing:
torn tails, damage and resynchronisation; ``crc`` holds the masked CRC, ``blocks`` verifies
whole buffers at once) -> ``events`` (payloads to Event messages, tolerating bad UTF-8) ->
``decoder`` (Events to rows through the plugins; ``fast.block_scalars`` decodes blocks of
single-scalar Events with NumPy) -> ``chunks`` (one file into chunks of rows and the offset
they reach; ``small_files`` reads many small files as one batch, making the same chunks).

Nothing here imports SQLAlchemy, Alembic or ``tbconvert.store``.
"""
