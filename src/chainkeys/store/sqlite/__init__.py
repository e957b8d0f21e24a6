"""SQLite, the embedded default engine: `backend.py` (SqliteBackend) and its parts."""
