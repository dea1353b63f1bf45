"""Rows into the store: the one writer and its two backends.

``writer.StoreWriter`` is the converter's one writing connection: runs, contexts and series
got or created (``identities``), per-file state, points staged per transaction, summaries kept
exact (``series_summaries``).  The SQL it sends is the driver's own (``statements``), never the
ORM's.  What differs between backends is a ``bulk.Bulk``: ``sqlite.SqliteBulk`` (many rows a
statement; the log copied by ``sqlite_checkpoints``) or ``postgres.PostgresBulk`` (binary COPY
written by ``pg_copy``; foreign keys checked per chunk, ``pg_foreign_keys``).
"""
