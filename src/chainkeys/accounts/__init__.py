"""Accounts: create, import, look up, list, delete and restore, within one tenant."""
