"""The signing baseline: parse the request and sign it with coincurve, nothing else.

A bare ASGI callable served by Granian as chainkeys is: orjson decodes the
body, sha256 of its canonical bytes is signed (RFC 6979, recoverable), and a
base64 signature is answered in the usual envelope. No auth, no account
lookup, no key decryption, no summary, no audit: the floor chainkeys' sign
endpoints are measured against (bench/sign.py).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import orjson
from coincurve import PrivateKey

KEY = PrivateKey(bytes.fromhex("11" * 32))
HEALTH = b'{"status":"ok"}'


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    if scope["path"] == "/healthz":
        out = HEALTH
    else:
        request = orjson.loads(body)
        digest = hashlib.sha256(orjson.dumps(request, option=orjson.OPT_SORT_KEYS)).digest()
        signature = KEY.sign_recoverable(digest, hasher=None)
        data = {"signature": base64.b64encode(signature).decode()}
        out = orjson.dumps({"success": True, "message": "signed", "data": data})
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(out))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": out})
