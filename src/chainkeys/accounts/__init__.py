"""Accounts: create, import, look up, list, delete and restore, within one tenant."""

from chainkeys.accounts.models import AccountView, Created, CreateRequest, Page
from chainkeys.accounts.service import AccountService

__all__ = ["AccountService", "AccountView", "CreateRequest", "Created", "Page"]
