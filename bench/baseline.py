"""The baseline: the leanest app that does chainkeys' create, import, get and list work.

A bare ASGI callable (no framework), orjson, coincurve, AES-GCM and the
standard sqlite3 module, served by uvicorn with uvloop and httptools (one
thread: `chainkeys serve` runs Granian, whose I/O threads make each release of
the GIL, as sqlite3 does on every statement, cost more; bench/README.md). It opens a copy of a chainkeys data directory (same
schema, same rows, same master key, same pragmas), and per request does what
chainkeys does:

- auth: the token's keyed digest (HMAC of its sha256 under the store's integrity key,
  opened at start from `meta` with the master key), one point lookup tokens JOIN
  tenants;
- create: os.urandom + PublicKey.from_secret, the family's address, AES-256-GCM
  seal with the same associated data, BEGIN IMMEDIATE / INSERT / COMMIT;
  import: the same from a 64-hex private key;
- get: the same columns by (tenant, family, name), details parsed;
- list: the same keyset page (limit + 1 rows, details parsed per row);
- sign (every family and kind): the account row, the request decoded and signed
  by chainkeys' own chain layer (the same decoder and the same libraries:
  protobuf, embit, coincurve; the ratio prices what is around them), the key
  opened with AES-256-GCM, and an audit row with the summary inserted and
  committed before the answer, as chainkeys does; create and import commit
  their audit row with the account, as chainkeys does;
- the same JSON bodies, byte for byte.

What it leaves out is what the benchmark prices: routing, middleware, request
ids, access logging, validation of names and options, the signing policy
lookup, error envelopes, SQLAlchemy.

Run: python -m bench.baseline --port P --data-dir D [--workers N]
(CHAINKEYS_SQLITE_SYNCHRONOUS as for chainkeys; default FULL).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import hmac
import os
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import orjson
from coincurve import PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bench import lean
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.secp256k1 import key_from_secret
from chainkeys.chains.tx.base import Owner, SignKind, summary_record
from chainkeys.vault.derive import Cursors
from chainkeys.vault.providers import MasterKey
from chainkeys.vault.seal import Vault

AUDIT_SQL = (
    "INSERT INTO audit (tenant_id, action, family, account_name, request_id, outcome,"
    " created_ms, actor_token_id, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
KINDS: dict[tuple[str, str], SignKind] = {
    (family, kind.path): kind for family, fam in FAMILIES.items() for kind in fam.signers
}
AUTH_SQL = (
    "SELECT tokens.tenant_id, tenants.name, tokens.id FROM tokens JOIN tenants"
    " ON tokens.tenant_id = tenants.id WHERE tokens.token_hash = ? AND tokens.revoked_ms IS NULL"
)
INSERT_SQL = (
    "INSERT INTO accounts (tenant_id, family, name, network, address, public_key, details,"
    " secret, key_id, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
GET_SQL = (
    "SELECT id, tenant_id, family, name, network, address, public_key, details, secret, key_id,"
    " created_ms FROM accounts WHERE tenant_id = ? AND family = ? AND name = ?"
)
PAGE_SQL = (
    "SELECT id, name, address, public_key, details FROM accounts"
    " WHERE tenant_id = ? AND family = ? AND id > ? ORDER BY id LIMIT ?"
)
DEFAULT_NETWORK = {
    "cosmos": "cosmoshub",
    "dogecoin": "mainnet",
    "eos": "eos",
    "litecoin": "mainnet",
}
LIST_LIMIT, LIST_MAX = 100, 1000

JSON_HEADERS = [(b"content-type", b"application/json")]


def account_of(family: str, secret: bytes) -> tuple[str, str, dict[str, str], str]:
    """(name, public key text, extra, exported private key) of a compressed key."""
    pub = PublicKey.from_secret(secret).format(compressed=True)
    if family == "cosmos":
        b64 = base64.b64encode(pub).decode()
        return lean.cosmos_address(pub), b64, {"pubkey": lean.COSMOS_KEYRING % b64}, secret.hex()
    if family == "dogecoin":
        return lean.p2pkh_address(pub), pub.hex(), {}, lean.wif(secret, lean.DOGE_WIF)
    if family == "litecoin":
        return lean.p2wpkh_address(pub), pub.hex(), {}, lean.wif(secret, lean.LTC_WIF)
    extra = {"public_key_k1": lean.eos_public_k1(pub)}
    return lean.eos_name(pub), lean.eos_public_legacy(pub), extra, lean.wif(secret, b"\x80", False)


def iso(ms: int) -> str:
    when = datetime.fromtimestamp(ms / 1000, UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def account_body(
    family: str,
    message: str,
    address: str,
    public_key: str,
    extra: dict[str, Any],
    private: str | None,
    network: str,
    created_ms: int,
) -> dict[str, Any]:
    if family == "cosmos":
        inner: dict[str, Any] = {"address": address}
        if private is not None:
            inner["private_key"] = private
        inner.update(
            pubkey=extra.get("pubkey", ""),
            public_key=base64.b64decode(public_key).hex(),
            network=network,
            created_at=iso(created_ms),
        )
        return {"success": True, "message": message, "data": {"data": inner}}
    fields: dict[str, Any] = {"address": address, "public_key": public_key}
    if private is not None:
        fields["private_key"] = private
    if "public_key_k1" in extra:
        fields["public_key_k1"] = extra["public_key_k1"]
    fields.update(network=network, created_at=iso(created_ms))
    return {
        "success": True,
        "message": message,
        "address": address,
        "data": {**fields, "data": fields},
    }


def list_body(family: str, rows: list[Any], cursor: str | None) -> dict[str, Any]:
    details = [orjson.loads(r[4]) for r in rows]  # chainkeys parses every row's details
    if family == "cosmos":
        keys: dict[str, Any] = {
            "keys": [
                {
                    "address": r[2],
                    "pubkey": d.get("extra", {}).get("pubkey", ""),
                    "public_key": base64.b64decode(r[3]).hex(),
                }
                for r, d in zip(rows, details, strict=True)
            ]
        }
        if cursor:
            keys["next_cursor"] = cursor
        return {"success": True, "message": "accounts listed", "data": {"data": keys}}
    names: dict[str, Any] = {"keys": [r[1] for r in rows]}
    if cursor:
        names["next_cursor"] = cursor
    return {"success": True, "message": "accounts listed", "data": {**names, "data": names}}


def token_digest(scope: dict[str, Any], key: bytes) -> str | None:
    """The keyed digest (hex) of the request's token, alone or as `Bearer <token>`: what
    chainkeys stores (vault/integrity.py)."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            header = value.decode("latin-1").strip()
            scheme, _, rest = header.partition(" ")
            token = rest.strip() if scheme.lower() == "bearer" else header
            sha = hashlib.sha256(token.encode()).digest()
            return hmac.new(key, b"token\x00" + sha, hashlib.sha256).hexdigest()
    return None


def integrity_key(aes: AESGCM, sealed: bytes) -> bytes:
    """The store's integrity key from its sealed `meta` record (vault/integrity.py: the
    bare 32 bytes, or JSON naming the key and the tables it adopted)."""
    aad = "\x00".join(("chainkeys/v1", "meta", "-", "-", "integrity_key")).encode()
    plain = aes.decrypt(sealed[1:13], sealed[13:], aad)
    return plain if len(plain) == 32 else base64.b64decode(orjson.loads(plain)["key"])


def got(family: str, row: Any) -> tuple[int, bytes]:
    """A get's answer for the account row (None: a 404)."""
    if row is None:
        return 404, b'{"success":false,"message":"not found","code":"account_not_found"}'
    details = orjson.loads(row[7])
    body = account_body(
        family, "account found", row[5], row[6], details.get("extra", {}), None, row[4], row[10]
    )
    return 200, orjson.dumps(body)


class Baseline:
    """The ASGI app. One reader and one writer connection, like chainkeys on SQLite."""

    def __init__(self, data_dir: Path, synchronous: str = "FULL") -> None:
        self.db_path = data_dir / "chainkeys.db"
        material = base64.b64decode((data_dir / "master.key").read_text().strip())
        self.aes = AESGCM(material)
        self.cursors = Cursors(Vault(MasterKey(material)))  # opaque cursors: the same AES block
        self.key_id = hashlib.sha256(b"chainkeys key id\x00" + material).hexdigest()[:16]
        self.token_key = b""  # the integrity key: read from the store at start
        if self.db_path.exists():
            with contextlib.closing(sqlite3.connect(self.db_path)) as conn:
                found = conn.execute(
                    "SELECT value FROM meta WHERE key = 'integrity_key'"
                ).fetchone()
            if found is not None:
                self.token_key = integrity_key(self.aes, bytes(found[0]))
        self.synchronous = synchronous
        self.reader: sqlite3.Connection | None = None
        self.writer: sqlite3.Connection | None = None
        self.requests = 0

    def page_of(self, tenant: str, family: str, query: bytes) -> tuple[int, int]:
        """A list's (limit, id after) from its query string (an opaque cursor opened)."""
        limit, after = LIST_LIMIT, 0
        for pair in query.decode("latin-1").split("&"):
            key, _, value = pair.partition("=")
            if key == "limit" and value.isdigit():
                limit = min(int(value), LIST_MAX)
            elif key == "cursor" and value:
                after = self.cursors.open(value, f"accounts/{tenant}/{family}/*") or 0
        return limit, after

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.execute("PRAGMA busy_timeout=5000")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        status, body = await self._handle(scope, receive)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [*JSON_HEADERS, (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.reader, self.writer = self._connect(), self._connect()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for conn in (self.reader, self.writer):
                    if conn is not None:
                        conn.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _caller(self, scope: dict[str, Any]) -> tuple[str, str] | None:
        """(tenant id, token id) of the request's token."""
        digest = token_digest(scope, self.token_key)
        if digest is None:
            return None
        assert self.reader is not None
        row = self.reader.execute(AUTH_SQL, (digest,)).fetchone()
        return None if row is None else (str(row[0]), str(row[2]))

    @staticmethod
    async def _body(receive: Any) -> bytes:
        body = b""
        while True:
            message = await receive()
            body += bytes(message.get("body", b""))
            if not message.get("more_body"):
                return body

    async def _handle(self, scope: dict[str, Any], receive: Any) -> tuple[int, bytes]:
        path: str = scope["path"]
        if path == "/healthz":
            return 200, b'{"success":true,"message":"ok"}'
        parts = path.strip("/").split("/")
        family = parts[0]
        if family not in DEFAULT_NETWORK or len(parts) > 3:
            return 404, b'{"success":false,"message":"no such endpoint","code":"not_found"}'
        caller = self._caller(scope)
        if caller is None:
            return 401, b'{"success":false,"message":"unauthorized","code":"unauthorized"}'
        method = scope["method"]
        if len(parts) == 3 and method == "POST" and (family, parts[2]) in KINDS:
            body = await self._body(receive)
            return self._sign(caller, family, parts[1], KINDS[(family, parts[2])], body)
        if len(parts) == 2 and method == "GET":
            return self._get(caller[0], family, parts[1])
        if len(parts) == 1 and method == "POST":
            body = await self._body(receive)
            return self._create(caller, family, orjson.loads(body) if body.strip() else {})
        if len(parts) == 1 and method == "GET":
            return self._list(caller[0], family, scope["query_string"])
        return 405, b'{"success":false,"message":"method not allowed","code":"method_not_allowed"}'

    def _audit(
        self,
        caller: tuple[str, str],
        action: str,
        family: str,
        name: str,
        details: dict[str, Any] | None,
        now: int,
    ) -> None:
        """The audit row chainkeys commits with the work (request id: a counter)."""
        self.requests += 1
        assert self.writer is not None
        self.writer.execute(
            AUDIT_SQL,
            (
                caller[0],
                action,
                family,
                name,
                f"b{self.requests:016x}",
                "ok",
                now,
                caller[1],
                None if details is None else orjson.dumps(details).decode(),
            ),
        )

    def _sign(
        self, caller: tuple[str, str], family: str, name: str, kind: SignKind, body: bytes
    ) -> tuple[int, bytes]:
        assert self.reader is not None and self.writer is not None
        row = self.reader.execute(GET_SQL, (caller[0], family, name)).fetchone()
        if row is None:
            return 404, b'{"success":false,"message":"not found","code":"account_not_found"}'
        fam = FAMILIES[family]
        details = orjson.loads(row[7])
        owner = Owner(
            family,
            row[3],
            row[5],
            fam.public_key_bytes(row[6]),
            fam.network(row[4]),
            details.get("address_type"),
        )
        prepared = kind.prepare(msgspec.json.decode(body, type=kind.request), owner)
        aad = "\x00".join(("chainkeys/v1", "account", caller[0], family, name)).encode()
        sealed: bytes = row[8]
        secret = self.aes.decrypt(sealed[1:13], sealed[13:], aad)
        signed = prepared.sign(key_from_secret(secret, len(owner.public_key) == 33))
        summary = prepared.summary
        record = {
            "kind": kind.path,
            "digest": summary.digest,
            "summary": summary_record(summary),
            "tx_id": signed.tx_id,
        }
        self.writer.execute("BEGIN IMMEDIATE")
        self._audit(caller, "sign", family, name, record, int(time.time() * 1000))
        self.writer.execute("COMMIT")
        return 200, msgspec.json.encode({"success": True, "message": "signed", "data": signed.data})

    def _create(
        self, caller: tuple[str, str], family: str, req: dict[str, Any]
    ) -> tuple[int, bytes]:
        tenant = caller[0]
        given = req.get("private_key")
        secret = bytes.fromhex(given) if given else os.urandom(32)
        name, public_key, extra, private = account_of(family, secret)
        details = {
            "extra": extra,
            "address_type": "p2wpkh" if family == "litecoin" else None,
            "compressed": True,
            "source": "private_key" if given else "generated",
            "path": None,
        }
        aad = "\x00".join(("chainkeys/v1", "account", tenant, family, name)).encode()
        nonce = os.urandom(12)
        sealed = b"\x01" + nonce + self.aes.encrypt(nonce, secret, aad)
        now = int(time.time() * 1000)
        row = (
            tenant,
            family,
            name,
            DEFAULT_NETWORK[family],
            name,
            public_key,
            orjson.dumps(details).decode(),
            sealed,
            self.key_id,
            now,
        )
        assert self.writer is not None
        self.writer.execute("BEGIN IMMEDIATE")
        try:
            self.writer.execute(INSERT_SQL, row)
        except sqlite3.IntegrityError:
            self.writer.execute("ROLLBACK")
            return 409, b'{"success":false,"message":"exists","code":"account_exists"}'
        self._audit(caller, "import" if given else "create", family, name, None, now)
        self.writer.execute("COMMIT")
        message = "account imported" if given else "account created"
        body = account_body(
            family,
            message,
            name,
            public_key,
            extra,
            None if given else private,
            DEFAULT_NETWORK[family],
            now,
        )
        return 200, orjson.dumps(body)

    def _get(self, tenant: str, family: str, name: str) -> tuple[int, bytes]:
        assert self.reader is not None
        return got(family, self.reader.execute(GET_SQL, (tenant, family, name)).fetchone())

    def _list(self, tenant: str, family: str, query: bytes) -> tuple[int, bytes]:
        limit, after = self.page_of(tenant, family, query)
        assert self.reader is not None
        rows = self.reader.execute(PAGE_SQL, (tenant, family, after, limit + 1)).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        scope = f"accounts/{tenant}/{family}/*"
        cursor = self.cursors.make(rows[-1][0], scope) if more else None
        return 200, orjson.dumps(list_body(family, rows, cursor))


def app_factory() -> Baseline:
    """uvicorn --factory entry point; settings come from the environment."""
    return Baseline(
        Path(os.environ["BENCH_BASELINE_DATA_DIR"]),
        os.environ.get("CHAINKEYS_SQLITE_SYNCHRONOUS", "FULL"),
    )


def main(app: str = "bench.baseline:app_factory") -> None:
    """Serve `app` (an app factory) with uvicorn, as every baseline runs."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    os.environ["BENCH_BASELINE_DATA_DIR"] = str(args.data_dir)
    uvicorn.run(
        app,
        factory=True,
        host="127.0.0.1",
        port=args.port,
        workers=args.workers,
        log_config=None,
        access_log=False,
        server_header=False,
        loop="uvloop",
        http="httptools",
    )


if __name__ == "__main__":
    main()
