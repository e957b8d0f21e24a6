"""What a raw message signer must never sign is each family's to say (its registry row's
`never_sign`), and EOS's sign-message (which signs sha256 of the caller's bytes) asks
every family through the registry: a new family's transactions are guarded there
without EOS's module knowing it."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from chainkeys.chains import cosmos, registry
from chainkeys.chains.registry import FAMILIES, never_signed
from chainkeys.chains.spec import ChainError
from chainkeys.chains.tx.base import Owner
from chainkeys.chains.tx.eos import EosMessageRequest


def _sign_message(data: bytes) -> Any:
    kind = next(k for k in FAMILIES["eos"].signers if k.path == "sign-message")
    eos = FAMILIES["eos"]
    owner = Owner("eos", "custodytest1", "custodytest1", b"\x02" * 33, eos.network(None))
    return kind.prepare(EosMessageRequest(data=data.hex()), owner)


CHAIN_ID = bytes.fromhex(FAMILIES["eos"].network(None).chain_id or "")
AMINO = json.dumps({"chain_id": "cosmoshub-4", "msgs": [], "fee": {}}).encode()


@pytest.mark.parametrize(
    ("family", "data"),
    [
        ("eos", CHAIN_ID + b"tail"),
        ("dogecoin", bytes(32)),
        ("litecoin", b"\x11" * 32),
        ("cosmos", AMINO),
    ],
)
def test_each_familys_never_sign_refuses_its_own_and_eos_asks_it(family: str, data: bytes) -> None:
    assert FAMILIES[family].never_sign(data) is not None
    with pytest.raises(ChainError) as refused:
        _sign_message(data)
    assert refused.value.code == "message_is_transaction"
    assert refused.value.message == FAMILIES[family].never_sign(data)


def test_text_a_login_page_signs_is_no_familys() -> None:
    for data in (b"login nonce 8c1f", bytes.fromhex("00ff10" * 20)):
        assert never_signed(data) is None
        assert _sign_message(data).summary.raw


def test_a_new_familys_never_sign_is_asked_without_eos_knowing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fifth(data: bytes) -> str | None:
        return "a fifth family's sign bytes" if data.startswith(b"\x19fifth") else None

    table = {**FAMILIES, "fifth": replace(cosmos.FAMILY, name="fifth", never_sign=fifth)}
    monkeypatch.setattr(registry, "FAMILIES", table)
    with pytest.raises(ChainError, match="a fifth family's sign bytes"):
        _sign_message(b"\x19fifth transaction")
    assert never_signed(b"\x19fifth transaction", but="fifth") is None
