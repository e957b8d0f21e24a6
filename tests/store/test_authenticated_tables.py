"""The registry of authenticated tables is complete: every table with a `mac` column is
in it, and every other column of such a table is covered or left out with a reason."""

from __future__ import annotations

from chainkeys.store.integrity import AUDIT_ROWS, REGISTRY
from chainkeys.store.tables import metadata


def test_every_table_with_a_mac_column_is_registered() -> None:
    with_mac = {t.name for t in metadata.tables.values() if "mac" in t.c}
    assert with_mac == {entry.table.name for entry in REGISTRY} | {"audit"}


def test_every_column_is_covered_or_left_out_with_a_reason() -> None:
    for entry in (*REGISTRY, AUDIT_ROWS):
        columns = {c.name for c in entry.table.c} - {"mac"}
        covered, left_out = set(entry.covered), set(entry.left_out)
        assert not covered & left_out, entry.table.name
        assert covered | left_out == columns, (entry.table.name, columns - covered - left_out)
        assert all(reason.strip() for reason in entry.left_out.values())
    # a MAC is bound to its record name: two tables share one only where a row moves
    # between them as it is (an account deleted and restored) and both cover the same
    records: dict[str, tuple[str, ...]] = {}
    for entry in REGISTRY:
        assert records.setdefault(entry.record, entry.covered) == entry.covered, entry.record
    assert {e.record for e in REGISTRY if e.record == "account"} == {"account"}
    assert len(records) == len(REGISTRY) - 1  # accounts and deleted_accounts
