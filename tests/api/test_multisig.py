"""Multisig co-signing on Dogecoin and Litecoin, through real HTTP on both engines,
checked by bitcoinjs-lib: addresses from `payments.p2ms` over the sorted keys, PSBTs
built, co-signed by a local bitcoinjs wallet, validated and finalized by bitcoinjs."""

from __future__ import annotations

import base64
import os
import random
from typing import Any

import httpx
import pytest
from embit import ec  # type: ignore[import-untyped]
from embit.descriptor.checksum import add_checksum  # type: ignore[import-untyped]
from embit.psbt import PSBT  # type: ignore[import-untyped]
from tests.api.tenants import Tenant
from tests.conftest import Server
from tests.node import run_node

from chainkeys.chains import hd
from chainkeys.chains.cosmos import NETWORKS as COSMOS
from chainkeys.chains.dogecoin import NETWORKS as DOGE
from chainkeys.chains.litecoin import NETWORKS as LTC
from chainkeys.chains.secp256k1 import generate_key, key_from_secret
from chainkeys.chains.tx.cosmos.multisig import parse_cosmos_multisig
from chainkeys.chains.tx.utxo.multisig import parse_multisig

pytestmark = pytest.mark.long(60)  # seconds (busy run): scheduled first

COSMOS_OTHER = "cosmos1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5lzv7xu"
RECIPIENT = {
    "litecoin": "ltc1qw508d6qejxtdg4y5r3zarvary0c5xw7kgmn4n9",
    "dogecoin": "DH5yaieqoZN36fDVciNyRueRGvGLR3mr7L",
}


def keypair() -> tuple[str, str]:
    """(private hex, compressed public hex) of a fresh key."""
    k = generate_key()
    return k.secret.hex(), k.public.hex()


def held(c: httpx.Client, family: str, network: str = "mainnet") -> tuple[str, str]:
    """A key held by chainkeys: (its account's address, its public key)."""
    secret, public = keypair()
    r = c.post(f"/{family}", json={"private_key": secret, "network": network})
    assert r.status_code == 200, r.text
    assert key_from_secret(bytes.fromhex(secret)).public.hex() == public
    return r.json()["address"], public


def register(c: httpx.Client, family: str, m: int, keys: list[str], **extra: Any) -> Any:
    r = c.post(f"/{family}/multisig", json={"threshold": m, "public_keys": keys, **extra})
    assert r.status_code == 200, r.text
    return r.json()["data"]


def test_addresses_equal_bitcoinjs_for_many_key_sets() -> None:
    """The pure layer against bitcoinjs-lib: 40 random sets from 2-of-2 to 15-of-15."""
    rng = random.Random(38)
    for family, nets in (("litecoin", LTC), ("dogecoin", DOGE)):
        for network in ("mainnet", "testnet"):
            sets: list[dict[str, Any]] = []
            for _ in range(20):
                n = rng.randint(2, 15)
                sets.append({"m": rng.randint(1, n), "pubkeys": [keypair()[1] for _ in range(n)]})
            seen = run_node(
                "utxo.mjs",
                {
                    "action": "multisig_addresses",
                    "network": f"{family}/{network}",
                    "sets": sets,
                    "noSegwit": family == "dogecoin",
                },
            )
            for given, theirs in zip(sets, seen, strict=True):
                kinds = ["p2sh"] if family == "dogecoin" else ["p2wsh", "p2sh-p2wsh", "p2sh"]
                for kind in kinds:
                    ms = parse_multisig(given["m"], given["pubkeys"], kind, family == "litecoin")
                    assert ms.address(nets[network]) == theirs[kind], (family, kind, given)


@pytest.mark.parametrize(
    ("family", "kind"),
    [("litecoin", "p2wsh"), ("litecoin", "p2sh-p2wsh"), ("litecoin", "p2sh"), ("dogecoin", "p2sh")],
)
def test_a_2_of_3_spent_with_two_held_keys_and_with_one_and_a_local_wallet(
    client: httpx.Client, family: str, kind: str
) -> None:
    (_, a), (_, b) = held(client, family), held(client, family)
    local_secret, c_pub = keypair()
    body = {"address_type": kind} if family == "litecoin" else {}
    both = register(client, family, 2, [c_pub, b, a], **body)
    assert both["address_type"] == kind and both["threshold"] == 2
    assert [m["held"] for m in both["members"]].count(True) == 2
    net = f"{family}/mainnet"
    built = run_node(
        "utxo.mjs",
        {
            "action": "build_multisig_psbt",
            "network": net,
            "m": 2,
            "pubkeys": [a, b, c_pub],
            "kind": kind,
            "amountIn": 1_000_000,
            "outputs": [
                {"address": RECIPIENT[family], "value": 600_000},
                {"address": both["address"], "value": 390_000},
            ],
        },
    )
    assert built["address"] == both["address"]
    path = f"/{family}/{both['address']}/sign-psbt"

    # chainkeys holds two of the three keys: one request signs and finalizes
    r = client.post(path, json={"psbt": built["psbt"], "finalize": True})
    assert r.status_code == 200, r.text
    done = r.json()["data"]
    assert done["complete"] is True
    partial = client.post(path, json={"psbt": built["psbt"], "finalize": False}).json()["data"]
    assert partial["complete"] is False
    theirs = run_node("utxo.mjs", {"action": "check_psbt", "network": net, "psbt": partial["psbt"]})
    assert theirs["valid"] is True and theirs["hex"] == done["hex"]
    assert theirs["txid"] == done["txid"]

    # one held key and a local bitcoinjs wallet's: chainkeys signs first, then the wallet
    (_, d), (_, e_pub) = held(client, family), (None, keypair()[1])
    one = register(client, family, 2, [d, c_pub, e_pub], **body)
    assert [m["account"] is not None for m in one["members"]].count(True) == 1
    built = run_node(
        "utxo.mjs",
        {
            "action": "build_multisig_psbt",
            "network": net,
            "m": 2,
            "pubkeys": [d, c_pub, e_pub],
            "kind": kind,
            "amountIn": 500_000,
            "outputs": [{"address": RECIPIENT[family], "value": 400_000}],
        },
    )
    path = f"/{family}/{one['address']}/sign-psbt"
    mine = client.post(path, json={"psbt": built["psbt"]}).json()["data"]
    assert mine["complete"] is False  # one signature of two: not finalized
    cosigned = run_node(
        "utxo.mjs",
        {"action": "cosign_psbt", "network": net, "psbt": mine["psbt"], "privateKey": local_secret},
    )
    final = run_node("utxo.mjs", {"action": "check_psbt", "network": net, "psbt": cosigned["psbt"]})
    assert final["valid"] is True
    # the other order: the wallet signs first, chainkeys checks its signature and finalizes
    first = run_node(
        "utxo.mjs",
        {
            "action": "cosign_psbt",
            "network": net,
            "psbt": built["psbt"],
            "privateKey": local_secret,
        },
    )
    r = client.post(path, json={"psbt": first["psbt"]})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["complete"] is True and r.json()["data"]["hex"] == final["hex"]


def test_refusals_are_clear_and_audited(client: httpx.Client) -> None:
    (address, a) = held(client, "litecoin")
    others = [keypair()[1] for _ in range(16)]

    def refused(body: dict[str, Any], code: str, family: str = "litecoin") -> str:
        r = client.post(f"/{family}/multisig", json=body)
        assert r.status_code == 400, r.text
        assert r.json()["code"] == code, r.text
        return str(r.json()["message"])

    assert "threshold" in refused(
        {"threshold": 3, "public_keys": [a, others[0]]}, "invalid_multisig"
    )
    refused({"threshold": 0, "public_keys": [a, others[0]]}, "invalid_field")
    assert "twice" in refused({"threshold": 1, "public_keys": [a, a.upper()]}, "invalid_multisig")
    not_on_curve = "02" + "00" * 32
    assert "public_keys[1]" in refused(
        {"threshold": 1, "public_keys": [a, not_on_curve]}, "invalid_multisig"
    )
    refused({"threshold": 1, "public_keys": [a, *others[:15]]}, "invalid_field")  # 16 keys
    assert "held" in refused({"threshold": 1, "public_keys": others[:3]}, "invalid_multisig")
    _, d = held(client, "dogecoin")
    assert "segwit" in refused(
        {"threshold": 1, "public_keys": [d, others[0]], "address_type": "p2wsh"},
        "invalid_multisig",
        "dogecoin",
    )
    r = client.post("/cosmos/multisig", json={"threshold": 1, "public_keys": [a, others[0]]})
    assert r.status_code in (400, 404, 405)

    local_secret, local = keypair()
    ms = register(client, "litecoin", 1, [a, local])
    again = client.post("/litecoin/multisig", json={"threshold": 1, "public_keys": [local, a]})
    assert again.status_code == 409  # the same multisig, whatever the order of its keys
    path = f"/litecoin/{ms['address']}"
    assert client.get(path).json()["address"] == ms["address"]
    assert client.get(f"{path}/multisig").json()["data"]["descriptor"] == ms["descriptor"]
    assert client.post(f"{path}/export").status_code in (400, 403)
    r = client.post(f"{path}/sign-message", json={"message": "hi"})
    assert r.status_code == 400 and r.json()["code"] == "multisig_unsupported"

    # a PSBT carrying another member's signature that does not verify is refused
    built = run_node(
        "utxo.mjs",
        {
            "action": "build_multisig_psbt",
            "network": "litecoin/mainnet",
            "m": 1,
            "pubkeys": [a, local],
            "kind": "p2wsh",
            "amountIn": 10_000,
            "outputs": [{"address": RECIPIENT["litecoin"], "value": 9_000}],
        },
    )
    signed = run_node(
        "utxo.mjs",
        {
            "action": "cosign_psbt",
            "network": "litecoin/mainnet",
            "psbt": built["psbt"],
            "privateKey": local_secret,
        },
    )
    psbt = PSBT.parse(base64.b64decode(signed["psbt"]))
    ((pub, sig),) = psbt.inputs[0].partial_sigs.items()
    psbt.inputs[0].partial_sigs[pub] = sig[:10] + bytes((sig[10] ^ 1,)) + sig[11:]
    tampered = base64.b64encode(psbt.serialize()).decode()
    r = client.post(f"{path}/sign-psbt", json={"psbt": tampered})
    assert r.status_code == 400 and r.json()["code"] == "invalid_signature", r.text
    # and one by a key that is not a member
    psbt.inputs[0].partial_sigs = {ec.PublicKey.parse(bytes.fromhex(others[0])): sig}
    r = client.post(f"{path}/sign-psbt", json={"psbt": base64.b64encode(psbt.serialize()).decode()})
    assert r.status_code == 400 and r.json()["code"] == "invalid_signature", r.text

    # a PSBT spending another multisig (none of our keys in its script) signs nothing
    strangers = run_node(
        "utxo.mjs",
        {
            "action": "build_multisig_psbt",
            "network": "litecoin/mainnet",
            "m": 1,
            "pubkeys": others[:2],
            "kind": "p2wsh",
            "amountIn": 10_000,
            "outputs": [{"address": RECIPIENT["litecoin"], "value": 9_000}],
        },
    )
    r = client.post(f"{path}/sign-psbt", json={"psbt": strangers["psbt"]})
    assert r.status_code == 400 and r.json()["code"] == "not_owner", r.text

    # the member account deleted: the multisig no longer signs here
    assert client.delete(f"/litecoin/{address}").status_code == 200
    r = client.post(f"{path}/sign-psbt", json={"psbt": built["psbt"]})
    assert r.status_code == 400 and r.json()["code"] == "multisig_no_key", r.text
    events = client.get("/audit", params={"action": "sign", "limit": 20}).json()["data"]["events"]
    codes = [e["outcome"] for e in events]
    assert {"multisig_no_key", "invalid_signature", "multisig_unsupported"} <= set(codes)
    creates = client.get("/audit", params={"action": "create", "outcome": "refused"})
    assert len(creates.json()["data"]["events"]) >= 5


def test_policies_and_approvals_gate_chainkeys_share(server: Server, tenant: Tenant) -> None:
    """A multisig's outputs count toward the caps and meet the allow-list as any
    account's (its change back to itself exempt); a refusal signs nothing; above the
    approval threshold chainkeys' signatures wait for a person, then are given."""
    c = tenant.client
    (_, a), (_, b) = held(c, "litecoin"), held(c, "litecoin")
    outside = keypair()[1]
    ms = register(c, "litecoin", 2, [a, b, outside])
    stranger, _ = held(c, "litecoin")
    tenant.policy(
        {
            "family": "litecoin",
            "max_per_tx": {"LTC": "500000"},
            "recipients": [RECIPIENT["litecoin"]],
            "above": {"LTC": "300000"},
            "approval": {"quorum": 1, "group": "treasury"},
        }
    )

    def psbt(value: int, to: str = RECIPIENT["litecoin"]) -> str:
        built = run_node(
            "utxo.mjs",
            {
                "action": "build_multisig_psbt",
                "network": "litecoin/mainnet",
                "m": 2,
                "pubkeys": [a, b, outside],
                "kind": "p2wsh",
                "amountIn": value + 2_000,
                "outputs": [
                    {"address": to, "value": value},
                    {"address": ms["address"], "value": 1_000},
                ],
            },
        )
        return str(built["psbt"])

    path = f"/litecoin/{ms['address']}/sign-psbt"
    assert tenant.allowed(path, {"psbt": psbt(200_000)})["complete"] is True
    r = tenant.sign(path, {"psbt": psbt(400_000)})
    assert r.status_code == 202, r.text
    held_back = r.json()["data"]
    assert held_back["state"] == "pending" and held_back.get("result") is None
    assert server.services is not None
    _, alice = server.call(
        server.services.tokens.create(
            tenant.name, "alice", frozenset({"approve"}), None, None, "treasury"
        )
    )
    with server.client(alice) as approver:
        vote = approver.post(
            f"/approvals/{held_back['id']}/approve", json={"digest": held_back["digest"]}
        )
        assert vote.status_code == 200, vote.text
    done = c.get(f"/approvals/{held_back['id']}").json()["data"]
    assert done["state"] == "signed" and done["result"]["complete"] is True
    theirs = run_node(
        "utxo.mjs",
        {"action": "extract", "network": "litecoin/mainnet", "psbt": done["result"]["psbt"]},
    )
    assert theirs["txid"] == done["result"]["txid"]
    tenant.denied(path, {"psbt": psbt(600_000)}, "cap")
    tenant.denied(path, {"psbt": psbt(1_000, stranger)})
    refusals = [e for e in tenant.sign_events() if e["outcome"] == "policy_denied"]
    assert len(refusals) == 2 and {e["account_name"] for e in refusals} == {ms["address"]}


# ---- Cosmos: LegacyAminoPubKey, sign-amino and combine, checked by cosmjs ---------------


def cosmos_held(c: httpx.Client) -> str:
    """A Cosmos key held by chainkeys: its compressed public key (hex)."""
    secret, public = keypair()
    r = c.post("/cosmos", json={"private_key": secret})
    assert r.status_code == 200, r.text
    return public


def test_cosmos_addresses_and_keys_equal_cosmjs() -> None:
    rng = random.Random(118)
    sets: list[dict[str, Any]] = []
    for _ in range(20):
        n = rng.randint(2, 15)
        sets.append({"m": rng.randint(1, n), "pubkeys": [keypair()[1] for _ in range(n)]})
    for prefix, network in (("cosmos", "cosmoshub"), ("osmo", "osmosis")):
        seen = run_node(
            "cosmos.mjs", {"action": "multisig_addresses", "prefix": prefix, "sets": sets}
        )
        for given, theirs in zip(sets, seen, strict=True):
            ms = parse_cosmos_multisig(given["m"], given["pubkeys"])
            assert ms.address(COSMOS[network]) == theirs["address"], given
            assert ms.pubkey_json() == theirs["pubkey"], given


def send_doc(multisig: str, sequence: int = 3) -> dict[str, Any]:
    return {
        "chain_id": "cosmoshub-4",
        "account_number": "77",
        "sequence": str(sequence),
        "fee": {"amount": [{"denom": "uatom", "amount": "2000"}], "gas": "200000"},
        "msgs": [
            {
                "type": "cosmos-sdk/MsgSend",
                "value": {
                    "from_address": multisig,
                    "to_address": COSMOS_OTHER,
                    "amount": [{"denom": "uatom", "amount": "150000"}],
                },
            }
        ],
        "memo": "payroll <march> & co",
    }


def test_cosmos_2_of_3_combined_from_chainkeys_and_a_local_cosmjs_wallet(
    client: httpx.Client,
) -> None:
    a = cosmos_held(client)
    local_secret, b = keypair()
    c_pub = keypair()[1]
    r = client.post("/cosmos/multisig", json={"threshold": 2, "public_keys": [c_pub, a, b]})
    assert r.status_code == 200, r.text
    ms = r.json()["data"]
    theirs = run_node(
        "cosmos.mjs",
        {
            "action": "multisig_addresses",
            "prefix": "cosmos",
            "sets": [{"m": 2, "pubkeys": [a, b, c_pub]}],
        },
    )[0]
    assert ms["address"] == theirs["address"] and ms["pubkey"] == theirs["pubkey"]
    assert "descriptor" not in ms and ms["address_type"] == "multisig"
    doc = send_doc(ms["address"])
    base = f"/cosmos/{ms['address']}"

    r = client.post(f"{base}/sign-amino", json={"signDoc": doc})
    assert r.status_code == 200, r.text
    mine = r.json()["data"]["signatures"]
    assert len(mine) == 1 and r.json()["data"]["signature"] == mine[0]
    wallet = run_node(
        "cosmos.mjs",
        {"action": "sign_amino", "signDoc": doc, "privateKey": local_secret, "prefix": "cosmos"},
    )
    other = {
        "pub_key": {
            "type": "tendermint/PubKeySecp256k1",
            "value": base64.b64encode(bytes.fromhex(b)).decode(),
        },
        "signature": wallet["signature"],
    }
    r = client.post(f"{base}/combine", json={"signDoc": doc, "signatures": [other, mine[0]]})
    assert r.status_code == 200, r.text
    combined = r.json()["data"]
    reference = run_node(
        "cosmos.mjs",
        {
            "action": "multisigned_tx",
            "prefix": "cosmos",
            "m": 2,
            "pubkeys": [a, b, c_pub],
            "signDoc": doc,
            "signatures": [mine[0], other],
        },
    )
    assert reference["verdicts"] == [True, True]
    assert combined["signedTx"] == reference["signedTx"]

    def refused(signatures: list[dict[str, Any]], code: str) -> None:
        r = client.post(f"{base}/combine", json={"signDoc": doc, "signatures": signatures})
        assert r.status_code == 400 and r.json()["code"] == code, r.text

    refused([mine[0]], "invalid_signature")  # one of two
    sig = base64.b64decode(other["signature"])
    bad = {
        **other,
        "signature": base64.b64encode(sig[:5] + bytes((sig[5] ^ 1,)) + sig[6:]).decode(),
    }
    refused([mine[0], bad], "invalid_signature")
    stranger = {
        **other,
        "pub_key": {
            **other["pub_key"],
            "value": base64.b64encode(bytes.fromhex(keypair()[1])).decode(),
        },
    }
    refused([mine[0], stranger], "invalid_signature")
    r = client.post(
        f"{base}/combine",
        json={"signDoc": {**doc, "memo": "changed"}, "signatures": [mine[0], other]},
    )
    assert r.status_code == 400 and r.json()["code"] == "invalid_signature"
    r = client.post(
        f"{base}/sign-direct",
        json={
            "signDoc": {
                "bodyBytes": "",
                "authInfoBytes": "",
                "chainId": "cosmoshub-4",
                "accountNumber": "1",
            }
        },
    )
    assert r.status_code == 400 and r.json()["code"] == "multisig_unsupported", r.text


def test_cosmos_two_held_members_sign_in_one_request(client: httpx.Client) -> None:
    a, b, c_pub = cosmos_held(client), cosmos_held(client), keypair()[1]
    ms = client.post(
        "/cosmos/multisig", json={"threshold": 2, "public_keys": [a, b, c_pub]}
    ).json()["data"]
    assert sum(m["held"] for m in ms["members"]) == 2
    doc = send_doc(ms["address"], sequence=0)
    sigs = client.post(f"/cosmos/{ms['address']}/sign-amino", json={"signDoc": doc}).json()["data"][
        "signatures"
    ]
    assert len(sigs) == 2
    r = client.post(f"/cosmos/{ms['address']}/combine", json={"signDoc": doc, "signatures": sigs})
    assert r.status_code == 200, r.text
    reference = run_node(
        "cosmos.mjs",
        {
            "action": "multisigned_tx",
            "prefix": "cosmos",
            "m": 2,
            "pubkeys": [a, b, c_pub],
            "signDoc": doc,
            "signatures": sigs,
        },
    )
    assert reference["verdicts"] == [True, True]
    assert r.json()["data"]["signedTx"] == reference["signedTx"]


def test_a_cosmos_multisig_of_the_keys_the_cosmos_answers_give(client: httpx.Client) -> None:
    """The keys exactly as GET /cosmos/{name} and its list give them (issue 55, item 5):
    the base64 `key` inside Moon's `pubkey` and the hex `public_key` beside it register
    the multisig cosmjs derives from the same keys, which then signs and combines."""
    import json

    made = []
    for _ in range(2):
        secret, public = keypair()
        r = client.post("/cosmos", json={"private_key": secret})
        assert r.status_code == 200, r.text
        made.append((r.json()["data"]["data"]["address"], public))
    (a_address, a_hex), (b_address, b_hex) = made
    a = client.get(f"/cosmos/{a_address}").json()["data"]["data"]
    b = client.get(f"/cosmos/{b_address}").json()["data"]["data"]
    a_base64 = json.loads(a["pubkey"])["key"]  # Moon's shape: base64 in a JSON string
    assert (a["public_key"], b["public_key"]) == (a_hex, b_hex)  # and the hex beside it
    listed = client.get("/cosmos").json()["data"]["data"]["keys"]
    assert sorted((k["address"], k["public_key"]) for k in listed) == sorted(made)
    assert all(
        json.loads(k["pubkey"])["key"] == base64.b64encode(bytes.fromhex(k["public_key"])).decode()
        for k in listed
    )
    local = base64.b64encode(bytes.fromhex(keypair()[1])).decode()  # a co-signer's, base64
    r = client.post(
        "/cosmos/multisig", json={"threshold": 2, "public_keys": [a_base64, b["public_key"], local]}
    )
    assert r.status_code == 200, r.text
    ms = r.json()["data"]
    # listed beside the keys it is made of, saying what it is
    listed = {k["address"]: k for k in client.get("/cosmos").json()["data"]["data"]["keys"]}
    assert listed[ms["address"]] == {
        "address": ms["address"],
        "pubkey": "",
        "public_key": "",
        "kind": "multisig",
    }
    assert all("kind" not in listed[address] for address, _ in made)
    hexes = [a_hex, b_hex, base64.b64decode(local).hex()]
    theirs = run_node(
        "cosmos.mjs",
        {"action": "multisig_addresses", "prefix": "cosmos", "sets": [{"m": 2, "pubkeys": hexes}]},
    )[0]
    assert ms["address"] == theirs["address"] and ms["pubkey"] == theirs["pubkey"]
    assert sorted(m["public_key"] for m in ms["members"] if m["held"]) == sorted([a_hex, b_hex])
    # the same keys in the other form are the same multisig
    again = client.post("/cosmos/multisig", json={"threshold": 2, "public_keys": hexes})
    assert again.status_code == 409, again.text
    twice = client.post("/cosmos/multisig", json={"threshold": 1, "public_keys": [a_hex, a_base64]})
    assert twice.status_code == 400 and "twice" in twice.json()["message"]
    for bad in (a_base64.rstrip("=")[:-1] + "=", a_base64[:-1] + "!", "0x" + a_hex[2:]):
        r = client.post("/cosmos/multisig", json={"threshold": 1, "public_keys": [bad, b_hex]})
        assert r.status_code == 400 and "public_keys[0]" in r.json()["message"], r.text
    doc = send_doc(ms["address"], sequence=0)
    sigs = client.post(f"/cosmos/{ms['address']}/sign-amino", json={"signDoc": doc}).json()["data"][
        "signatures"
    ]
    r = client.post(f"/cosmos/{ms['address']}/combine", json={"signDoc": doc, "signatures": sigs})
    assert r.status_code == 200, r.text
    reference = run_node(
        "cosmos.mjs",
        {
            "action": "multisigned_tx",
            "prefix": "cosmos",
            "m": 2,
            "pubkeys": hexes,
            "signDoc": doc,
            "signatures": sigs,
        },
    )
    assert reference["verdicts"] == [True, True]
    assert r.json()["data"]["signedTx"] == reference["signedTx"]


# ---- HD multisig of a wallet (Litecoin, BIP48), checked by bip32 + bitcoinjs-lib --------


def test_an_hd_multisig_of_a_wallet_derives_the_addresses_bip32_derives_and_spends(
    client: httpx.Client,
) -> None:
    wallet = client.post("/wallets", json={"name": "treasury"}).json()["data"]
    path = "m/48'/2'/0'/2'"
    alice, bob = hd.Seed(os.urandom(64)), hd.Seed(os.urandom(64))
    a_key = alice.xpub(path, "xpub")
    given = [f"[{a_key.fingerprint}/48'/2'/0'/2']{a_key.xpub}", bob.xpub(path, "Ltub").xpub]
    r = client.post(
        f"/wallets/{wallet['id']}/multisig",
        json={"family": "litecoin", "threshold": 2, "xpubs": given},
    )
    assert r.status_code == 200, r.text
    made = r.json()["data"]
    assert made["path"] == path and made["key"].startswith("[") and made["address_type"] == "p2wsh"
    desc = made["descriptor"]
    assert desc.startswith("wsh(sortedmulti(2,") and str(add_checksum(desc.split("#")[0])) == desc
    assert all(k.split("]")[-1] in desc for k in [made["key"], given[0]])
    base = f"/wallets/{wallet['id']}/multisig/{made['id']}"
    assert client.get(base).json()["data"]["descriptor"] == desc
    listed = client.get(f"/wallets/{wallet['id']}/multisig").json()["data"]["multisigs"]
    assert [m["id"] for m in listed] == [made["id"]]

    r = client.post(f"{base}/accounts", json={"count": 3})
    assert r.status_code == 200, r.text
    accounts = r.json()["data"]["accounts"]
    own = made["key"].split("]")[1]
    theirs = run_node(
        "hd.mjs",
        {
            "action": "multisig_from_xpubs",
            "family": "litecoin",
            "network": "mainnet",
            "m": 2,
            "type": "p2wsh",
            "indices": [0, 1, 2, 3, 4],
            "xpubs": [
                {"xpub": own, "version": hd.VERSIONS["xpub"]},
                {"xpub": a_key.xpub, "version": hd.VERSIONS["xpub"]},
                {"xpub": given[1], "version": hd.VERSIONS["Ltub"]},
            ],
        },
    )
    assert [a["address"] for a in accounts] == [t["address"] for t in theirs[:3]]
    assert all(sum(m["held"] for m in a["members"]) == 1 for a in accounts)
    preview = client.post(f"{base}/accounts", json={"preview": True}).json()["data"]["accounts"]
    assert preview[0]["address"] == theirs[3]["address"]
    assert client.get(f"/litecoin/{theirs[3]['address']}").status_code == 404  # not stored
    again = client.post(f"{base}/accounts", json={}).json()["data"]["accounts"]
    assert again[0]["address"] == theirs[3]["address"]
    one = client.post(f"{base}/accounts", json={"index": 1})  # derived before: the same answer
    assert one.status_code == 200 and one.json()["data"]["accounts"][0] == accounts[1], one.text
    after = client.post(f"{base}/accounts", json={}).json()["data"]["accounts"]
    assert [a["address"] for a in after] == [theirs[4]["address"]]  # the counter went on

    # index 1 spent: chainkeys signs with the wallet's key, Alice's wallet adds hers
    spent = accounts[1]
    built = run_node(
        "utxo.mjs",
        {
            "action": "build_multisig_psbt",
            "network": "litecoin/mainnet",
            "m": 2,
            "pubkeys": theirs[1]["pubkeys"],
            "kind": "p2wsh",
            "amountIn": 300_000,
            "outputs": [{"address": RECIPIENT["litecoin"], "value": 290_000}],
        },
    )
    assert built["address"] == spent["address"]
    mine = client.post(f"/litecoin/{spent['address']}/sign-psbt", json={"psbt": built["psbt"]})
    assert mine.status_code == 200 and mine.json()["data"]["complete"] is False, mine.text
    alice_key = alice.key(f"{path}/0/1").secret.hex()
    cosigned = run_node(
        "utxo.mjs",
        {
            "action": "cosign_psbt",
            "network": "litecoin/mainnet",
            "psbt": mine.json()["data"]["psbt"],
            "privateKey": alice_key,
        },
    )
    final = run_node(
        "utxo.mjs",
        {"action": "check_psbt", "network": "litecoin/mainnet", "psbt": cosigned["psbt"]},
    )
    assert final["valid"] is True


def test_hd_multisig_refusals(server: Server, tenant: Tenant) -> None:
    client = tenant.client
    wallet = client.post("/wallets", json={}).json()["data"]
    other = hd.Seed(os.urandom(64)).xpub("m/48'/2'/0'/2'", "xpub").xpub
    url = f"/wallets/{wallet['id']}/multisig"

    def refused(body: dict[str, Any], status: int, code: str) -> None:
        r = client.post(url, json={"family": "litecoin", "threshold": 1, "xpubs": [other], **body})
        assert r.status_code == status and r.json()["code"] == code, r.text

    refused({"threshold": 3}, 400, "invalid_multisig")
    refused({"xpubs": [other, other]}, 400, "invalid_multisig")
    tpub = hd.Seed(os.urandom(64)).xpub("m/48'/1'/0'/2'", "tpub").xpub
    refused({"xpubs": [tpub]}, 400, "invalid_xpub")  # a test network's key on mainnet
    refused({"xpubs": [other[:-2] + "zz"]}, 400, "invalid_xpub")  # checksum
    refused({"family": "dogecoin"}, 400, "invalid_multisig")
    assert client.post(f"{url}/wms_000000000000/accounts", json={}).status_code == 404
    assert server.services is not None
    _, cosmos_only = server.call(
        server.services.tokens.create(
            tenant.name, "c", frozenset({"create", "read"}), None, frozenset({"cosmos"}), None
        )
    )
    with server.client(cosmos_only) as limited:
        r = limited.post(url, json={"family": "litecoin", "threshold": 1, "xpubs": [other]})
        assert r.status_code == 403 and r.json()["code"] == "forbidden", r.text
