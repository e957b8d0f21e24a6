"""PostgreSQL: `backend.py` (PostgresBackend), the asyncpg pool and statement plans."""
