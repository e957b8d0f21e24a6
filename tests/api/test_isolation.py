"""Tenants are walls: B can neither list, get nor delete A's accounts, nor tell they exist."""

from __future__ import annotations

from typing import Any

import pytest

FAMILIES = ["cosmos", "dogecoin", "eos", "litecoin"]
# Valid names that no test tenant here owns (the public scalar-one vector's addresses).
NOBODYS = {
    "cosmos": "cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c",
    "dogecoin": "DFpN6QqFfUm3gKNaxN6tNcab1FArL9cZLE",
    "eos": "nosuchacct",
    "litecoin": "ltc1qw508d6qejxtdg4y5r3zarvary0c5xw7kgmn4n9",
}


@pytest.mark.parametrize("family", FAMILIES)
def test_another_tenants_account_is_indistinguishable_from_a_missing_one(
    server: Any, family: str
) -> None:
    with server.client(server.new_token()) as a, server.client(server.new_token()) as b:
        name = a.post(f"/{family}", json={}).json()["data"]["data"]["address"]

        listed = b.get(f"/{family}").json()["data"]
        keys = listed["data"]["keys"] if family == "cosmos" else listed["keys"]
        assert keys == []

        theirs = b.get(f"/{family}/{name}")
        missing = b.get(f"/{family}/{NOBODYS[family]}")
        # Same status, code and message (but for the name) as an account that exists nowhere.
        assert theirs.status_code == missing.status_code == 404
        assert theirs.json()["code"] == missing.json()["code"] == "account_not_found"
        assert theirs.json()["message"].replace(name, "N") == missing.json()["message"].replace(
            NOBODYS[family], "N"
        )

        assert b.delete(f"/{family}/{name}").status_code == 404

        assert a.get(f"/{family}/{name}").status_code == 200  # still there for its owner
        audit = b.get("/audit").json()["data"]["events"]
        assert all(e.get("account_name") != name or e["outcome"] != "ok" for e in audit)


def test_same_key_in_two_tenants_is_two_accounts(server: Any) -> None:
    key = "0c28fca386c7a227600b2fe50b7cae11ec86d3bf1fbe471be89827e19d72aa1d"
    with server.client(server.new_token()) as a, server.client(server.new_token()) as b:
        ra = a.post("/dogecoin", json={"private_key": key})
        rb = b.post("/dogecoin", json={"private_key": key})
        assert ra.status_code == rb.status_code == 200  # not a 409 across tenants
        assert ra.json()["address"] == rb.json()["address"]
        assert b.delete("/dogecoin/" + rb.json()["address"]).status_code == 200
        assert a.get("/dogecoin/" + ra.json()["address"]).status_code == 200  # A's still there
        assert b.get("/dogecoin/" + rb.json()["address"]).status_code == 404
