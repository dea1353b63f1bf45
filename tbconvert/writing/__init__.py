"""Rows into the store: the one writer and its two backends.

``writer.StoreWriter`` is the converter's one writing connection: transactions, points and
blobs staged and inserted in them, summaries kept exact (``series_summaries``).  Two roles
hang off it on the same transaction: runs, contexts and series got or created
(``identities``, as ``writer.identities``) and the per-file state (``file_states``, as
``writer.files``).  ``conversions``, ``file_heads`` and ``moves`` write the rest through it.
The SQL it sends is the driver's own (``statements``), never the ORM's.  What differs
between backends is a ``bulk.Bulk``: ``sqlite.SqliteBulk`` (many rows a statement; the log
copied by ``sqlite_checkpoints``) or ``postgres.PostgresBulk`` (binary COPY written by
``pg_copy``; foreign keys checked per chunk, ``pg_foreign_keys``).
"""
