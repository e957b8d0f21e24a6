"""A tenant of its own for a test: a token, its policy, its sign requests and audit."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from tests.conftest import Server


class Tenant:
    """A fresh tenant reached through a token of the default scopes."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.name = f"p-{uuid.uuid4().hex[:10]}"
        self.client = server.client(server.new_token(self.name))

    def policy(self, *rules: dict[str, Any]) -> None:
        assert self.server.services is not None
        text = json.dumps({"rules": list(rules)})
        self.server.call(self.server.services.policies.set(self.name, text, "json"))

    def clear(self) -> None:
        assert self.server.services is not None
        self.server.call(self.server.services.policies.clear(self.name))

    def age_spends(self, ms: int) -> None:
        """Move this tenant's counted spends `ms` into the past, in the database (the
        24 h windows run on the database's clock: no server's clock moves them)."""
        from sqlalchemy import select, update

        from chainkeys.store.tables import policy_spends, tenants

        assert self.server.services is not None
        db = self.server.services.db

        async def age() -> None:
            async with db.write() as tx:
                spends = policy_spends.c
                mine = select(tenants.c.id).where(tenants.c.name == self.name)
                await tx.execute(
                    update(policy_spends)
                    .where(spends.tenant_id.in_(mine.scalar_subquery()))
                    .values(created_ms=spends.created_ms - ms)
                )

        self.server.call(age())

    def sign(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.client.post(path, json=body)

    def denied(self, path: str, body: dict[str, Any], *words: str) -> str:
        r = self.sign(path, body)
        assert r.status_code == 403, r.text
        assert r.json()["code"] == "policy_denied"
        message: str = r.json()["message"]
        for word in words:
            assert word in message, message
        return message

    def allowed(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = self.sign(path, body)
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()["data"]
        return data

    def sign_events(self) -> list[dict[str, Any]]:
        """This tenant's sign events, oldest first (the API lists newest first)."""
        events = self.client.get("/audit", params={"action": "sign"}).json()["data"]["events"]
        return list(reversed(events))
