"""The `chainkeys` command line (entry point `chainkeys.cli:app`)."""

from chainkeys.cli.main import app

__all__ = ["app"]
