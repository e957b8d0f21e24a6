"""`python -m chainkeys.cli`."""

from chainkeys.cli.main import app

app()
