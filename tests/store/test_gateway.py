"""Who may query an authenticated table: a fixed list of modules per table, each of
which authenticates what it reads (the gate: vault/gate.py, vault/integrity.py, or a
registry entry of store/integrity.py handed to `Tx.signer`). A new module that
reaches a registered table fails here until it is listed, with why; a listed module
that stops authenticating fails too.

Read from the source (imports of `chainkeys.store.tables` names and `tables.<name>`
attributes), not from a run: a query path no test exercises is seen as well."""

from __future__ import annotations

import ast
from pathlib import Path

from chainkeys.store.integrity import AUDIT_ROWS, REGISTRY

SRC = Path(__file__).resolve().parents[2] / "src" / "chainkeys"
# The store's own machinery (definitions, the registry, sealed columns, db copy, which
# copies every row as it is: the copy is checked by `integrity verify` where it lands).
STORE = {"store/tables/__init__.py", "store/integrity.py", "store/sealed.py"}
# The gate: generic reads of registered tables through their registry entries.
# (rotation.py MACs every registered row again under the writing key.)
GATE = {
    "vault/heads.py",
    "vault/pinned.py",
    "vault/adoption.py",
    "vault/verify.py",
    "vault/rotation.py",
}
OWNERS: dict[str, set[str]] = {
    "tokens": {"tokens/repository.py", "tokens/service.py"},
    "tenants": {
        "tokens/repository.py",
        "tokens/service.py",
        "accounts/repository.py",  # a tenant's accounts listed by name (operator)
        "approvals/credentials.py",  # credentials listed with their tenant's name
        "audit/chain.py",  # every tenant must have a chain
    },
    "policy_versions": {"policies/repository.py"},
    "policy_totals": {"policies/repository.py"},
    "approvals": {"approvals/repository.py"},
    "approval_votes": {"approvals/repository.py"},
    "approver_credentials": {"approvals/credentials.py"},
    "approver_invites": {"approvals/credentials.py"},
    "accounts": {"accounts/repository.py", "accounts/lookup.py"},
    "deleted_accounts": {"accounts/repository.py"},
    "wallets": {"wallets/repository.py"},
    "wallet_counters": {"wallets/counters.py"},
    "wallet_multisigs": {"wallets/repository.py"},
    "audit_heads": {"audit/chain.py", "audit/rekey.py"},  # (rekey: a rotation's new links)
    "audit": {"audit/repository.py", "audit/chain.py", "audit/rekey.py", "vault/adoption.py"},
    "webhook_outbox": {"webhooks/outbox.py", "vault/adoption.py"},
    "integrity_heads": {"vault/heads.py", "vault/adoption.py"},
    "freezes": {"freezes/repository.py", "freezes/service.py"},  # (service: its cache's name)
    "governance": {"governance/repository.py"},
    "changes": {"governance/repository.py"},
    "change_votes": {"governance/repository.py"},
    # the barrier's ring and heartbeats: read and written by their one repository
    "master_keys": {"vault/repository.py"},
    "key_ring": {"vault/repository.py"},
    "key_users": {"vault/repository.py"},
}
AUTHENTICATES = ("chainkeys.vault.gate", "chainkeys.vault.integrity", "chainkeys.store.integrity")


def _reached() -> dict[str, set[str]]:
    names = {str(e.table.name) for e in (*REGISTRY, AUDIT_ROWS)}
    found: dict[str, set[str]] = {n: set() for n in names}
    for path in SRC.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        where = str(path.relative_to(SRC))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "chainkeys.store.tables"
            ):
                for alias in node.names:
                    if alias.name in names:
                        found[alias.name].add(where)
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "tables"
                and node.attr in names
            ):
                found[node.attr].add(where)
    return found


def test_every_registered_table_is_reached_only_by_its_listed_modules() -> None:
    reached = _reached()
    assert set(reached) == set(OWNERS), "a registered table has no owners listed here"
    for table, modules in reached.items():
        outside = modules - OWNERS[table] - STORE - GATE
        assert not outside, f"{table} is reached from {sorted(outside)}: list it, with why"


def test_every_owner_authenticates_what_it_reads() -> None:
    for modules in OWNERS.values():
        for where in modules - STORE:
            source = (SRC / where).read_text()
            assert any(m in source for m in AUTHENTICATES), f"{where} reads unauthenticated"
