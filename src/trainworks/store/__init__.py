"""Durable state: SQLAlchemy rows, repositories and Alembic migrations (SQLite by default, PostgreSQL too)."""
