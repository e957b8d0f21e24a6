"""HTTP JSON API: routes per domain, auth guards, one error table, a router of Starlette's
public parts, the transport layer, Granian as the server.

`chainkeys.api.app.create_app(settings)` builds the application.
"""
