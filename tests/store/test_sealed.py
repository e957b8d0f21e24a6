"""The registry of sealed columns is complete: every key id and binary column is in it."""

from __future__ import annotations

from sqlalchemy import LargeBinary

from chainkeys.store.sealed import NOT_SEALED, REGISTRY
from chainkeys.store.tables import metadata


def test_every_sealed_column_is_registered() -> None:
    registered = {(c.table.name, c.blob) for c in REGISTRY}
    key_ids = {(c.table.name, c.key_id) for c in REGISTRY}
    for table in metadata.sorted_tables:
        for column in table.columns:
            where = f"{table.name}.{column.name}"
            if column.name == "key_id" and where not in NOT_SEALED:  # the key that sealed it
                assert (table.name, column.name) in key_ids, f"{where} is not in the registry"
            if isinstance(column.type, LargeBinary):
                assert (table.name, column.name) in registered or where in NOT_SEALED, (
                    f"{where} holds bytes: register it in store/sealed.py or say in NOT_SEALED "
                    "why no master key sealed it"
                )


def test_every_registered_column_exists_and_binds_its_rows() -> None:
    for c in REGISTRY:
        assert isinstance(c.table.c[c.blob].type, LargeBinary)
        assert c.key_id in c.table.c
        row = {name: f"<{name}>" for name in c.table.c.keys()}  # noqa: SIM118 - a ColumnCollection
        purpose, tenant, family, name = c.aad(row)
        assert purpose and tenant and family and name  # every part is set, from the row
