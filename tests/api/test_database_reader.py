"""The database reader (docs/security.md, "Who can do what"): someone with a copy of the
database but not the master key finds no private key, no mnemonic and no token in it,
in any table or (SQLite) in the database and WAL files' raw bytes, on both engines."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from tests.api.tenants import Tenant
from tests.conftest import Server

from chainkeys.store.tables import metadata

ABANDON = "abandon " * 11 + "about"


def _every_value(server: Server) -> list[bytes]:
    """Every value of every row of every table, as bytes (text encoded)."""
    assert server.services is not None
    db = server.services.db

    async def dump() -> list[Any]:
        values: list[Any] = []
        async with db.read() as tx:
            for table in metadata.sorted_tables:
                for row in (await tx.execute(select(table))).all():
                    values.extend(row)
        return values

    found = server.call(dump())
    return [v if isinstance(v, bytes) else str(v).encode() for v in found if v is not None]


def test_a_database_copy_holds_no_key_mnemonic_or_token(server: Server, tenant: Tenant) -> None:
    made = tenant.client.post("/cosmos", json={}).json()["data"]["data"]
    private_hex = made["private_key"]
    wif = tenant.client.post("/dogecoin", json={}).json()["data"]["private_key"]
    from_words = tenant.client.post("/cosmos", json={"mnemonic": ABANDON})
    assert from_words.status_code == 200, from_words.text
    assert server.services is not None
    _, token = server.call(server.services.tokens.create(tenant.name, "reader-check"))
    secrets = {
        "a generated private key (hex)": private_hex.encode(),
        "its raw bytes": bytes.fromhex(private_hex),
        "a generated private key (WIF)": wif.encode(),
        "a mnemonic": ABANDON.encode(),
        "a token": token.encode(),
        "the tenant's own token": str(tenant.client.headers["Authorization"]).split()[-1].encode(),
    }
    values = _every_value(server)
    assert len(values) > 50  # the dump reads the rows it claims to: the address is there
    assert [v for v in values if made["address"].encode() in v]
    for what, secret in secrets.items():
        assert not [v for v in values if secret in v], f"{what} is readable in the database"
    if server.backend == "sqlite":
        db_file = server.settings.sqlite_path
        files = [p for p in db_file.parent.iterdir() if p.name.startswith(db_file.name)]
        assert files
        for path in files:
            raw = path.read_bytes()
            for what, secret in secrets.items():
                assert secret not in raw, f"{what} is in the bytes of {path.name}"
