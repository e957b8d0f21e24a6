"""Regenerate utxo_signing.json: Dogecoin/Litecoin known answers made by bitcoinjs.

    .venv/bin/python -m tests.chains.vectors.make_utxo_signing

For the public test key of vectors.json, bitcoinjs-lib builds a PSBT spending a
deposit to each address type and signs, finalizes and extracts it
(`Psbt.signAllInputs`), and bitcoinjs-message signs messages with each coin's magic
and BIP137 segwit headers. RFC 6979 makes the bytes exact, so
tests/api/test_sign_vectors.py replays them through chainkeys without Node.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.api.test_sign_utxo import CASES, KEY, PSBT_CASES, RECIPIENT
from tests.node import run_node

OUT = Path(__file__).with_name("utxo_signing.json")
MESSAGES = ("known answer", "ünïcödé ✓")
SECRET = KEY["private_key_hex"]


def main() -> None:
    psbts = []
    for family, create, network, kind, witness in PSBT_CASES:
        pubkey = KEY["public_key_compressed_hex"]
        built = run_node(
            "utxo.mjs",
            {
                "action": "build_psbt",
                "network": network,
                "kind": kind,
                "pubkey": pubkey,
                "amountIn": 1_000_000,
                "witness": witness,
                "outputs": [{"address": RECIPIENT[family], "value": 600_000}],
            },
        )
        signed = run_node(
            "utxo.mjs",
            {
                "action": "sign_psbt",
                "network": network,
                "psbt": built["psbt"],
                "privateKey": SECRET,
            },
        )
        psbts.append(
            {
                "family": family,
                "create": create,
                "kind": kind,
                "request": {"psbt": built["psbt"]},
                **signed,
            }
        )
    messages = []
    for family, create, network, kind in CASES:
        compressed = create["private_key"] == SECRET  # else the uncompressed WIF of it
        for message in MESSAGES:
            answer = run_node(
                "utxo.mjs",
                {
                    "action": "sign_message",
                    "network": network,
                    "kind": kind,
                    "message": message,
                    "privateKey": SECRET,
                    "compressed": compressed,
                },
            )
            messages.append(
                {
                    "family": family,
                    "create": create,
                    "kind": kind,
                    "request": {"message": message},
                    **answer,
                }
            )
    vectors = {
        "about": "made by bitcoinjs-lib and bitcoinjs-message (tests/verifiers/package.json) "
        "with the key of tests/chains/vectors/vectors.json keys[0]; regenerate with "
        "make_utxo_signing.py",
        "sign-psbt": psbts,
        "sign-message": messages,
    }
    OUT.write_text(json.dumps(vectors, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
