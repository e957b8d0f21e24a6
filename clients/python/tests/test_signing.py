"""Every sign endpoint through the client, each answer checked independently
(coincurve, hashes) and against the repository's reference vectors (made by
cosmjs and bitcoinjs)."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from typing import Any

import coincurve
import pytest
from ckc_helpers import (
    EOS_MAINNET,
    amino_bytes,
    dsha256,
    eos_signature,
    eos_transfer_tx,
    first_input_script,
    legacy_tx,
    low_s,
    message_digest,
    p2pkh_script,
    pushes,
    recover,
    sign_doc_bytes,
    txid,
    verify_compact,
)
from conftest import SIGNING_VECTORS

from chainkeys_client import (
    BadRequest,
    Client,
    Conflict,
    CosmosSignDoc,
    CosmosTransfer,
    CosmosTx,
    PrevTx,
)

COSMOS = json.loads((SIGNING_VECTORS / "cosmos_signing.json").read_text())
UTXO = json.loads((SIGNING_VECTORS / "utxo_signing.json").read_text())
ONE = "0000000000000000000000000000000000000000000000000000000000000001"
PUB_ONE = bytes.fromhex("0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")


@pytest.fixture
def cosmos(client_for: Callable[..., Client]) -> tuple[Client, str]:
    ck = client_for(tenant="sign-cosmos")
    try:
        address = ck.accounts.create("cosmos", private_key=ONE).address
    except Conflict:  # imported by an earlier test of the session
        address = ck.accounts.get("cosmos", COSMOS["address"]).address
    assert address == COSMOS["address"]
    return ck, address


def test_sign_direct(cosmos: tuple[Client, str]) -> None:
    ck, address = cosmos
    doc = COSMOS["sign-direct"]["request"]["signDoc"]
    signed = ck.signing.sign_direct(address, CosmosSignDoc(**doc))
    assert signed.signature.signature == COSMOS["sign-direct"]["signature"]
    assert signed.signature.pub_key.value == COSMOS["pubkey"]
    assert signed.signed.chainId == doc["chainId"]
    # independently: the signature verifies over the SignDoc bytes cosmjs would sign
    sig = base64.b64decode(signed.signature.signature)
    assert low_s(sig)
    sign_doc = sign_doc_bytes(base64.b64decode(doc["bodyBytes"]), base64.b64decode(doc["authInfoBytes"]),
                              doc["chainId"], int(doc["accountNumber"]))  # fmt: skip
    assert verify_compact(PUB_ONE, sig, hashlib.sha256(sign_doc).digest())
    # a dict works as well as the Struct, and the answer is deterministic
    again = ck.signing.sign_direct(address, doc)
    assert again.signature.signature == signed.signature.signature


def test_sign_amino(cosmos: tuple[Client, str]) -> None:
    ck, address = cosmos
    doc = COSMOS["sign-amino"]["request"]["signDoc"]
    signed = ck.signing.sign_amino(address, doc)
    assert signed.signature.signature == COSMOS["sign-amino"]["signature"]
    sig = base64.b64decode(signed.signature.signature)
    assert verify_compact(PUB_ONE, sig, hashlib.sha256(amino_bytes(doc)).digest())


def test_sign_cosmos_message(cosmos: tuple[Client, str]) -> None:
    ck, address = cosmos
    request = COSMOS["sign-message"]["request"]
    if "message" in request:
        signed = ck.signing.sign_message("cosmos", address, request["message"])
    else:
        signed = ck.signing.sign_message("cosmos", address, data=base64.b64decode(request["data"]))
    assert signed.signedMessage == COSMOS["sign-message"]["signature"]
    assert signed.signed == COSMOS["sign-message"]["signed"]
    sig = base64.b64decode(signed.signedMessage)
    assert verify_compact(PUB_ONE, sig, hashlib.sha256(amino_bytes(signed.signed)).digest())
    raw = ck.signing.sign_message("cosmos", address, data=b"\x00\x01\x02\xff")
    assert raw.signed["msgs"][0]["value"]["data"] == "AAEC/w=="


def test_sign_transfer_and_ibc_transfer(cosmos: tuple[Client, str]) -> None:
    ck, address = cosmos
    transfer = COSMOS["sign-transfer"]["request"]
    tx = ck.signing.sign_transfer(address, CosmosTransfer(**transfer))
    assert isinstance(tx, CosmosTx)
    assert tx.signedTx == COSMOS["sign-transfer"]["signedTx"]
    assert tx.txHash == hashlib.sha256(base64.b64decode(tx.signedTx)).hexdigest().upper()
    ibc = ck.signing.sign_ibc_transfer(address, COSMOS["sign-ibc-transfer"]["request"])
    assert ibc.signedTx == COSMOS["sign-ibc-transfer"]["signedTx"]
    assert ibc.txHash == hashlib.sha256(base64.b64decode(ibc.signedTx)).hexdigest().upper()


def test_wrong_chain_is_a_bad_request_with_its_code(cosmos: tuple[Client, str]) -> None:
    ck, address = cosmos
    transfer = {**COSMOS["sign-transfer"]["request"], "chainId": "osmosis-1"}
    with pytest.raises(BadRequest) as refused:
        ck.signing.sign_transfer(address, transfer)
    assert refused.value.status == 400 and refused.value.code == "wrong_chain"


MAGIC = {"dogecoin": "Dogecoin Signed Message:\n", "litecoin": "Litecoin Signed Message:\n"}
HEADER = {"p2pkh": 31, "p2sh-p2wpkh": 35, "p2wpkh": 39}


@pytest.mark.parametrize(
    ("family", "address_type"),
    [("dogecoin", "p2pkh"), ("litecoin", "p2wpkh"), ("litecoin", "p2sh-p2wpkh")],
)
def test_utxo_sign_message_recovers_to_the_key(
    family: str, address_type: str, client_for: Callable[..., Client]
) -> None:
    ck = client_for(tenant=f"sign-msg-{family}-{address_type}")
    options = {"address_type": address_type} if family == "litecoin" else {}
    address = ck.accounts.create(family, private_key=ONE, **options).address
    signed = ck.signing.sign_message(family, address, "known answer")
    sig = base64.b64decode(signed.signature)
    assert len(sig) == 65 and sig[0] - HEADER[address_type] in range(4)
    digest = message_digest(MAGIC[family], "known answer")
    assert recover(sig, digest, HEADER[address_type]).format() == PUB_ONE
    case = next(c for c in UTXO["sign-message"] if c["family"] == family
                and c["create"].get("private_key") == ONE
                and c["create"].get("address_type", "p2wpkh" if family == "litecoin" else "p2pkh")
                == address_type and c["request"]["message"] == "known answer")  # fmt: skip
    assert signed.signature == case["signature"]  # what bitcoinjs-message made


@pytest.mark.parametrize("case", UTXO["sign-psbt"], ids=lambda c: f"{c['family']}-{c['kind']}")
def test_sign_psbt_gives_the_bitcoinjs_transaction(
    case: dict[str, Any], client_for: Callable[..., Client]
) -> None:
    ck = client_for(tenant=f"psbt-{case['family']}-{case['kind']}")
    address = ck.accounts.create(case["family"], **case["create"]).address
    signed = ck.signing.sign_psbt(case["family"], address, case["request"]["psbt"])
    assert signed.complete and (signed.hex, signed.txid) == (case["hex"], case["txid"])
    assert base64.b64decode(signed.psbt).startswith(b"psbt\xff")
    if case["kind"] == "p2pkh":  # no witness: the txid is the hash of the whole transaction
        assert txid(bytes.fromhex(signed.hex or "")).hex() == signed.txid
    as_bytes = ck.signing.sign_psbt(case["family"], address, base64.b64decode(case["request"]["psbt"]),
                                    finalize=False)  # fmt: skip
    assert as_bytes.hex is None and as_bytes.psbt


def test_sign_raw_transaction_verifies(
    client_for: Callable[..., Client], vectors: dict[str, Any]
) -> None:
    ck = client_for(tenant="rawtx")
    address = ck.accounts.create("dogecoin", private_key=ONE).address
    mine = p2pkh_script(bytes.fromhex(vectors["keys"][0]["hash160_hex"]))
    theirs = p2pkh_script(bytes.fromhex(vectors["keys"][1]["hash160_hex"]))
    fund = legacy_tx([(b"\x07" * 32, 0, b"")], [(1_000_000, mine)])
    spend = legacy_tx([(txid(fund), 0, b"")], [(900_000, theirs)])
    prev = PrevTx(txid=txid(fund).hex(), vout=0, scriptPubKey=mine.hex(), amount="0.01",
                  hex=fund.hex())  # fmt: skip
    signed = ck.signing.sign_raw_transaction("dogecoin", address, spend, [prev])
    assert signed.complete and signed.errors == []
    der_and_type, pubkey = pushes(first_input_script(bytes.fromhex(signed.hex)))
    assert pubkey == PUB_ONE and der_and_type[-1] == 1  # SIGHASH_ALL
    sighash = dsha256(
        legacy_tx([(txid(fund), 0, mine)], [(900_000, theirs)]) + (1).to_bytes(4, "little")
    )
    assert coincurve.PublicKey(pubkey).verify(der_and_type[:-1], sighash, hasher=None)
    with pytest.raises(BadRequest) as refused:  # a legacy input without its previous tx
        ck.signing.sign_raw_transaction("dogecoin", address, spend.hex(),
                                        [{"txid": prev.txid, "vout": 0,
                                          "scriptPubKey": prev.scriptPubKey, "amount": "0.01"}])  # fmt: skip
    assert refused.value.code == "missing_prev_tx"


def test_eos_sign_transaction_and_message(
    client_for: Callable[..., Client], vectors: dict[str, Any]
) -> None:
    ck = client_for(tenant="sign-eos")
    made = ck.accounts.create("eos", private_key=ONE, name="clienteos123")
    tx = eos_transfer_tx("clienteos123", "exchange1234", 12345)
    signed = ck.signing.sign_eos_transaction(made.name, EOS_MAINNET, tx)
    assert signed.serializedTransaction == tx.hex() and signed.serializedContextFreeData is None
    (sig,) = signed.signatures
    data = eos_signature(sig)
    digest = hashlib.sha256(bytes.fromhex(EOS_MAINNET) + tx + bytes(32)).digest()
    assert recover(data, digest, 31).format() == PUB_ONE
    assert data[1] < 0x80 and data[33] < 0x80  # canonical

    message = ck.signing.sign_message("eos", made.name, "I own this account")
    m = eos_signature(message.signature)
    assert recover(m, hashlib.sha256(b"I own this account").digest(), 31).format() == PUB_ONE
    raw = ck.signing.sign_message("eos", made.name, data=b"\x00\xff\x10")
    assert (
        recover(eos_signature(raw.signature), hashlib.sha256(b"\x00\xff\x10").digest(), 31).format()
        == PUB_ONE
    )

    with pytest.raises(BadRequest) as refused:  # an action authorized by another account
        ck.signing.sign_eos_transaction(
            made.name, EOS_MAINNET, eos_transfer_tx("someoneelse1", "exchange1234", 1)
        )
    assert refused.value.code == "not_owner"


@pytest.mark.parametrize("kind", ["p2wsh", "p2sh-p2wsh", "p2sh"])
def test_sign_psbt_of_a_multisig_checks_each_member_signature(
    kind: str, server: Any, client_for: Callable[..., Client], proxy: Any
) -> None:
    """chainkeys as a co-signer (docs/multisig.md): two held keys of a 2-of-3; the answer's
    partial signatures, then its finalized input, are checked against the script's keys."""
    from embit import ec
    from embit.psbt import PSBT
    from embit.script import Script, multisig, p2sh, p2wsh
    from embit.transaction import Transaction, TransactionInput, TransactionOutput

    tenant = f"ms-{kind}"
    ck = client_for(tenant=tenant)
    secrets_ = [hashlib.sha256(f"{kind}-{i}".encode()).digest() for i in range(3)]
    pubs = [coincurve.PrivateKey(s).public_key.format() for s in secrets_]
    for secret in secrets_[:2]:
        ck.accounts.create("litecoin", private_key=secret.hex())
    import httpx

    r = httpx.post(f"{server.url}/litecoin/multisig",
                   headers={"Authorization": server.token(tenant)},
                   json={"threshold": 2, "public_keys": [p.hex() for p in pubs],
                         "address_type": kind})  # fmt: skip
    assert r.status_code == 200, r.text
    address = r.json()["data"]["address"]
    ms = multisig(2, [ec.PublicKey.parse(p) for p in sorted(pubs)])
    inner = p2wsh(ms) if kind != "p2sh" else ms
    spk = inner if kind == "p2wsh" else p2sh(inner)
    fund = Transaction(vin=[TransactionInput(b"\x07" * 32, 0)],
                       vout=[TransactionOutput(1_000_000, spk)])  # fmt: skip
    spend = Transaction(vin=[TransactionInput(fund.txid(), 0)],
                        vout=[TransactionOutput(990_000, Script(b"\x00\x14" + b"\x01" * 20))])  # fmt: skip
    psbt = PSBT(spend)
    psbt.inputs[0].non_witness_utxo = fund
    if kind != "p2sh":
        psbt.inputs[0].witness_utxo = fund.vout[0]
        psbt.inputs[0].witness_script = ms
    if kind != "p2wsh":
        psbt.inputs[0].redeem_script = inner
    sent = base64.b64encode(psbt.serialize()).decode()
    partial = ck.signing.sign_psbt("litecoin", address, sent, finalize=False)
    assert not partial.complete and len(PSBT.parse(base64.b64decode(partial.psbt)).inputs[0]
                                         .partial_sigs) == 2  # fmt: skip
    final = ck.signing.sign_psbt("litecoin", address, sent)
    assert final.complete and final.hex and final.txid

    # answers altered on the way: a flipped signature, a signature by a key that is not a
    # member, a finalized input with a flipped signature; each is an AnswerMismatch
    from ckc_tamper import in_data, psbt_b64, psbt_of

    from chainkeys_client import AnswerMismatch

    def flipped(data: dict[str, Any]) -> dict[str, Any]:
        p = psbt_of(data["psbt"])
        pub, sig = next(iter(p.inputs[0].partial_sigs.items()))
        p.inputs[0].partial_sigs[pub] = sig[:8] + bytes((sig[8] ^ 1,)) + sig[9:]
        return {**data, "psbt": psbt_b64(p)}

    def stranger(data: dict[str, Any]) -> dict[str, Any]:
        p = psbt_of(data["psbt"])
        sig = next(iter(p.inputs[0].partial_sigs.values()))
        other = ec.PublicKey.parse(coincurve.PrivateKey(b"\x05" * 32).public_key.format())
        p.inputs[0].partial_sigs = {other: sig}
        return {**data, "psbt": psbt_b64(p)}

    def flipped_final(data: dict[str, Any]) -> dict[str, Any]:
        p = psbt_of(data["psbt"])
        inp = p.inputs[0]
        if inp.final_scriptwitness is not None:
            items = list(inp.final_scriptwitness.items)
            items[1] = items[1][:8] + bytes((items[1][8] ^ 1,)) + items[1][9:]
            inp.final_scriptwitness.items = items
        else:
            raw = bytearray(inp.final_scriptsig.data)
            raw[10] ^= 1  # inside the first signature (after OP_0 and its push byte)
            inp.final_scriptsig = Script(bytes(raw))
        return {**data, "psbt": psbt_b64(p), "hex": None, "txid": None}

    with Client(proxy.url, server.token(tenant)) as via:
        for rewrite, finalize, fragment in ((flipped, False, "does not verify"),
                                            (stranger, False, "not one of the multisig's"),
                                            (flipped_final, True, "none of its keys")):  # fmt: skip
            with proxy.rewriting(in_data(rewrite)), pytest.raises(AnswerMismatch) as caught:
                via.signing.sign_psbt("litecoin", address, sent, finalize=finalize)
            assert fragment in str(caught.value), caught.value
