"""What approvers see is derived from the authenticated request each time it is shown,
through real HTTP on both engines: a summary column a database writer edited is never
what the API or the webhook's record shows, and a request column edited is no summary."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select, update
from tests.api.test_approvals import RULE, Team, pending, send, team  # noqa: F401
from tests.api.test_sign_cosmos import OTHER
from tests.conftest import Server

from chainkeys.store.tables import approvals

FORGED = {
    "family": "cosmos",
    "network": "cosmoshub",
    "kind": "sign-transfer",
    "items": [
        {
            "type": "/cosmos.bank.v1beta1.MsgSend",
            "recipient": OTHER,
            "amounts": [
                {"denom": "uatom", "amount": "9000", "base_unit": "uatom", "display": "0.009 ATOM"}
            ],
        }
    ],
}


async def _edit(server: Server, approval_id: str, **values: Any) -> None:
    assert server.services is not None
    async with server.services.db.write() as tx:
        await tx.execute(update(approvals).where(approvals.c.id == approval_id).values(**values))


async def _column(server: Server, approval_id: str, name: str) -> Any:
    assert server.services is not None
    async with server.services.db.read() as tx:
        found = await tx.execute(select(approvals.c[name]).where(approvals.c.id == approval_id))
        return found.scalar_one()


def _amounts(summary: dict[str, Any]) -> list[str]:
    return [a.get("display", "") for item in summary["items"] for a in item["amounts"]]


def test_an_edited_summary_column_is_never_shown(team: Team, server: Server) -> None:  # noqa: F811
    t = team.tenant
    t.policy({**RULE, "max_per_day": {"uatom": "10000000000000"}})
    waiting = pending(t, send(900_000_000_000, sequence=3))  # 900,000 ATOM
    honest = waiting["summary"]
    assert _amounts(honest) == ["900000 ATOM"] and honest["account"] == waiting["account"]
    assert honest["digest"] == waiting["digest"] and honest["items"][0]["recipient"] == OTHER
    server.call(_edit(server, waiting["id"], summary=json.dumps(FORGED)))
    assert "0.009 ATOM" in server.call(_column(server, waiting["id"], "summary"))
    one = team.alice.get(f"/approvals/{waiting['id']}").json()["data"]
    assert one["summary"] == honest and "summary_error" not in one
    listed = team.alice.get("/approvals", params={"state": "pending"}).json()["data"]
    [shown] = [a for a in listed["approvals"] if a["id"] == waiting["id"]]
    assert shown["summary"] == honest
    assert team.tenant.client.get(f"/approvals/{waiting['id']}").json()["data"]["summary"] == (
        honest
    )
    # a request edited in place fails the row's MAC: there is nothing to show or vote on
    request = json.loads(server.call(_column(server, waiting["id"], "request")))
    request["amount"] = "9000"
    server.call(_edit(server, waiting["id"], request=json.dumps(request)))
    forged = team.alice.get(f"/approvals/{waiting['id']}").json()["data"]
    assert forged["summary"] is None and "integrity" in forged["summary_error"]


def test_the_webhook_record_carries_the_derived_summary(team: Team, server: Server) -> None:  # noqa: F811
    from chainkeys.approvals.summaries import derive
    from chainkeys.approvals.transitions import record_of

    t = team.tenant
    waiting = pending(t, send(70_000, sequence=4))
    server.call(_edit(server, waiting["id"], summary="{}"))
    svc = server.services
    assert svc is not None and svc.approvals.integrity is not None
    gate = svc.approvals.integrity

    async def record() -> dict[str, Any]:
        row = await svc.approvals.row(waiting["id"])
        async with svc.db.read() as tx:
            return record_of(row, [], await derive(tx, gate, row))

    assert server.call(record())["summary"] == waiting["summary"]


def test_nothing_is_approved_without_a_summary(team: Team) -> None:  # noqa: F811
    """An account deleted since the request: no summary can be derived, so none is
    shown, and neither an approving vote nor its challenge is taken (409)."""
    t = team.tenant
    waiting = pending(t, send(60_000, sequence=5))
    assert t.client.delete(f"/cosmos/{waiting['account']}").status_code == 200
    shown = team.alice.get(f"/approvals/{waiting['id']}").json()["data"]
    assert shown["summary"] is None and "account is gone" in shown["summary_error"]
    voted = team.alice.post(
        f"/approvals/{waiting['id']}/approve", json={"digest": waiting["digest"]}
    )
    assert voted.status_code == 409 and voted.json()["code"] == "summary_unavailable"
    asked = team.alice.get(f"/approvals/{waiting['id']}/challenge", params={"decision": "approve"})
    assert asked.status_code == 409 and asked.json()["code"] == "summary_unavailable"
    rejected = team.bob.post(f"/approvals/{waiting['id']}/reject", json={"reason": "gone"})
    assert rejected.status_code == 200 and rejected.json()["data"]["state"] == "rejected"
