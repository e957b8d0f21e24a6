"""HTTP JSON API on Litestar: routes per domain, auth guards, one error table, the transport layer.

`chainkeys.api.app.create_app(settings)` builds the application.
"""
