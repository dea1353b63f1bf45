"""Bytes to rows, with no database: what ``--jobs`` worker processes run.

The general pipeline, one module per stage:

``discovery`` (a logdir to runs, contexts and event files) -> ``records`` (TFRecord framing:
torn tails, damage and resynchronisation, with ``crc`` and ``resync``) -> ``events`` (payloads
to Event messages, tolerating bad UTF-8) -> ``decoder`` (the protobuf loop over ``routing``,
the one rule of what a record becomes: its plugin, its series, its rows, into a
``row_buffer``) -> ``chunks`` (one file into chunks of rows and the offset they reach;
``small_files`` reads many small files as one batch, making the same chunks).

``fast/`` gives the same rows faster for single-scalar records and ``huge_images`` for huge
images, both asking ``routing``; they can be skipped on a first read.  Nothing here imports
SQLAlchemy, Alembic or ``tbconvert.store``.
"""
