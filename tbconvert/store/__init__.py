"""The run store: SQLAlchemy models, engine set-up, Alembic migrations, bulk writer, reader."""
