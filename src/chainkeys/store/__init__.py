"""Storage: one `Backend` per engine (`backend.py`; `sqlite/`, `postgres/`), the tables,
migrations and `chainkeys db copy`. Each domain package keeps its own SQL in its
`repository.py`; this package holds what they share."""
