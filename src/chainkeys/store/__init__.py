"""Storage: the engines (`db.py`: SQLite with group commit, PostgreSQL through asyncpg),
the tables, migrations and `chainkeys db copy`. Each domain package keeps its own SQL
in its `repository.py`; this package holds what they share."""
