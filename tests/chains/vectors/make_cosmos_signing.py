"""Regenerate cosmos_signing.json: known answers made by cosmjs itself (tests/verifiers).

    .venv/bin/python -m tests.chains.vectors.make_cosmos_signing

A fixed public test key signs fixed documents with cosmjs' own wallets
(`DirectSecp256k1Wallet.signDirect`, `Secp256k1Wallet.signAmino`, an ADR-036
document as Keplr builds it, `SigningStargateClient.sign` offline for transfers).
RFC 6979 makes every signature exact, so tests/api/test_sign_vectors.py replays the
requests through chainkeys and compares bytes, without Node.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from tests.api.test_sign_cosmos import (
    ADDRESS,
    IBC_TRANSFER,
    PRIVATE,
    PUBKEY,
    TRANSFER,
    direct_doc,
)
from tests.node import run_node

OUT = Path(__file__).with_name("cosmos_signing.json")
AMINO = {
    "chain_id": "cosmoshub-4",
    "account_number": "99",
    "sequence": "7",
    "fee": {"amount": [{"denom": "uatom", "amount": "500"}], "gas": "200000"},
    "msgs": [
        {
            "type": "cosmos-sdk/MsgDelegate",
            "value": {
                "delegator_address": ADDRESS,
                "validator_address": "cosmosvaloper1sjllsnramtg3ewxqwwrwjxfgc4n4ef9u2lcnj0",
                "amount": {"denom": "uatom", "amount": "250000"},
            },
        }
    ],
    "memo": "stake ü",
}
MESSAGE = "I own this account: chainkeys known answer"


def cosmjs(action: str, **fields: Any) -> Any:
    return run_node(
        "cosmos.mjs", {"action": action, "privateKey": PRIVATE, "prefix": "cosmos", **fields}
    )


def main() -> None:
    direct = direct_doc()
    adr036 = run_node(
        "cosmos.mjs",
        {
            "action": "adr036_doc",
            "signer": ADDRESS,
            "pubkey": PUBKEY,
            "data": base64.b64encode(MESSAGE.encode()).decode(),
            "signature": base64.b64encode(b"\x01" * 64).decode(),  # the doc only
        },
    )["doc"]
    vectors = {
        "about": "made by cosmjs (tests/verifiers/package.json) with the key of "
        "tests/chains/vectors/vectors.json keys[0]; regenerate with make_cosmos_signing.py",
        "address": ADDRESS,
        "pubkey": PUBKEY,
        "sign-direct": {
            "request": {"signDoc": direct},
            "signature": cosmjs("sign_direct", signDoc=direct)["signature"],
        },
        "sign-amino": {
            "request": {"signDoc": AMINO},
            "signature": cosmjs("sign_amino", signDoc=AMINO)["signature"],
        },
        "sign-message": {
            "request": {"message": MESSAGE},
            "signed": adr036,
            "signature": cosmjs("sign_amino", signDoc=adr036)["signature"],
        },
        "sign-transfer": {
            "request": TRANSFER,
            "signedTx": cosmjs("sign_transfer", transfer=TRANSFER, ibc=False)["signedTx"],
        },
        "sign-ibc-transfer": {
            "request": IBC_TRANSFER,
            "signedTx": cosmjs("sign_transfer", transfer=IBC_TRANSFER, ibc=True)["signedTx"],
        },
    }
    OUT.write_text(json.dumps(vectors, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
