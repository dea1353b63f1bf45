"""The run store's schema and connections, shared by the write and the read side: ``engine``
(URLs, SQLite pragmas), ``models`` (SQLAlchemy), ``migrate`` and ``admin`` (Alembic),
``errors`` (driver errors as one line), ``file_states`` (per-file read state)."""
