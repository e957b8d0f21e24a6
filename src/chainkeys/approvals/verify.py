"""Offline verification of an approval as `GET /approvals/{id}` gives it (the API's
envelope or its `data`): from its raw `request` and `signer`, decode the request again
here, with no server and no store, and name every difference between what the file
says (`digest`, `summary`) and what the request is.

It decodes with the chain layer this package ships (signing/requests.py `prepare`),
so it answers "is this what the request says?" for a file a compromised server, screen
or database handed out; the client libraries' verifiers (`verify_approval`,
`verifyApproval`) decode with code of their own.
"""

from __future__ import annotations

from typing import Any

import msgspec

from chainkeys.accounts.families import family_of
from chainkeys.approvals.summaries import form
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.spec import ChainError
from chainkeys.chains.tx.base import Owner
from chainkeys.errors import ChainkeysError
from chainkeys.signing.requests import kind_of, prepare

REQUIRED = ("family", "account", "kind", "digest", "summary", "request", "signer")


def approval_of(document: Any) -> dict[str, Any]:
    """The approval in `document`: the API's envelope (`data`) or the approval itself."""
    if isinstance(document, dict) and isinstance(document.get("data"), dict):
        document = document["data"]
    if not isinstance(document, dict):
        raise ValueError("not an approval: a JSON object as GET /approvals/{id} gives it")
    missing = [k for k in REQUIRED if k not in document]
    if missing:
        raise ValueError(f"not an approval as GET /approvals/{{id}} gives it: no {missing}")
    return document


def differences(approval: dict[str, Any]) -> list[str]:
    """Every difference between the approval's digest and summary and those of its raw
    request, decoded here (empty: the approval says what its request does)."""
    family, kind_path = approval["family"], approval["kind"]
    signer = approval["signer"]
    if family not in FAMILIES or not isinstance(signer, dict):
        return [f"family {family!r} or signer is not one this version knows"]
    if signer.get("multisig"):
        return ["a multisig account's request is not verified offline (its members sign)"]
    try:
        fam = family_of(family)
        owner = Owner(
            family,
            str(approval["account"]),
            str(signer["address"]),
            fam.public_key_bytes(str(signer["public_key"])),
            fam.network(str(signer["network"])),
            signer.get("address_type"),
        )
        kind = kind_of(family, kind_path)
        request = msgspec.json.decode(msgspec.json.encode(approval["request"]), type=kind.request)
        summary = prepare(kind, request, owner).summary
    except (ChainkeysError, ChainError, msgspec.MsgspecError, KeyError, ValueError) as exc:
        return [f"request: it does not decode ({getattr(exc, 'message', exc)})"]
    found: list[str] = []
    if summary.digest != approval["digest"]:
        found.append(f"digest: the file says {approval['digest']}, the request is {summary.digest}")
    _diff("summary", approval["summary"], form(str(approval["account"]), summary), found)
    return found


def _diff(path: str, said: Any, real: Any, found: list[str]) -> None:
    if isinstance(said, dict) and isinstance(real, dict):
        for key in sorted(set(said) | set(real), key=str):
            if key not in real:
                found.append(f"{path}.{key}: the file says {said[key]!r}; the request has none")
            elif key not in said:
                found.append(f"{path}.{key}: the file has none; the request says {real[key]!r}")
            else:
                _diff(f"{path}.{key}", said[key], real[key], found)
    elif isinstance(said, list) and isinstance(real, list) and len(said) == len(real):
        for i, (a, b) in enumerate(zip(said, real, strict=True)):
            _diff(f"{path}[{i}]", a, b, found)
    elif said != real or type(said) is not type(real):
        found.append(f"{path}: the file says {said!r}, the request says {real!r}")
