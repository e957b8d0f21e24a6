"""HTTP JSON API: thin handlers over the service layer."""

from chainkeys.api.app import create_app

__all__ = ["create_app"]
