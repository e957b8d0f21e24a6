"""Storage: engines, tables, repositories (the only SQL) and migrations."""
