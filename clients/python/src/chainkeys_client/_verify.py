"""`verify_approval`: an approval, as `GET /approvals/{id}` gives it, checked offline
against its own raw request, with this client's decoders (never the server's).

From the raw `request` and the `signer` (address, public key, network), each kind's
sign bytes are rebuilt here and hashed (hashlib; the UTXO sighashes and the protobuf
and amino encodings of this package's answer checks), and the summary is rebuilt in
the server's one form: every output, message or action with its recipient and amounts
(the integer in the base unit, the display amount beside it), the fee, the memo, the
IBC route, a signed message. Every difference from what the approval shows is named by
its path. A kind, a message or a network this client does not read is named too: it
is never passed as verified. Every network a chainkeys server serves is read, testnets
too (_verify_networks.py: the request's chain id and the account's address are held to
the signer's network).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from chainkeys_client import _verify_networks as networks
from chainkeys_client._errors import AnswerMismatch
from chainkeys_client._verify_chains import DECODERS

SAFE_INTEGER = 2**53 - 1
MESSAGE_SHOWN = 4096


@dataclass(frozen=True)
class ApprovalCheck:
    """What `verify_approval` found: `ok` when the approval's digest and summary are
    exactly those of its raw request; else each difference, by path."""

    ok: bool
    differences: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.ok


def message_record(data: bytes) -> dict[str, Any]:
    shown = data[:MESSAGE_SHOWN]
    out: dict[str, Any] = {"length": len(data), "hex": shown.hex()}
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError:
        return out
    plain = text.replace("\n", "").replace("\t", "")
    if not any(
        ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c in "\u061c\u200e\u200f"
        or 0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069 for c in plain
    ):  # fmt: skip
        out["text"] = text
    return out


def _safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_safe(v) for v in value]
    if type(value) is int and abs(value) > SAFE_INTEGER:
        return str(value)
    return value


def verify_approval(approval: Any) -> ApprovalCheck:
    """Check an approval (the JSON of `GET /approvals/{id}`, its `data`, or an
    `Approval`) against its raw request: the digest and the summary are rebuilt here
    and every difference is named. A kind this client does not read is a difference."""
    if not isinstance(approval, dict):
        approval = msgspec.to_builtins(approval)
    if isinstance(approval.get("data"), dict):
        approval = approval["data"]
    missing = [k for k in ("family", "account", "kind", "digest", "summary", "request", "signer")
               if approval.get(k) is None]  # fmt: skip
    if missing:
        return ApprovalCheck(False, [f"not an approval with its raw request: no {missing}"])
    family, kind, signer = approval["family"], approval["kind"], approval["signer"]
    if not isinstance(signer, dict) or signer.get("multisig"):
        return ApprovalCheck(False, ["a multisig account's request is not verified here"])
    decode = DECODERS.get((family, kind))
    if decode is None:
        return ApprovalCheck(False, [f"{family} {kind}: not verified by this client"])
    strange = networks.unknown(family, signer)
    if strange is not None:
        return ApprovalCheck(False, [strange])
    try:
        rebuilt = decode(approval["request"], signer, str(approval["account"]))
    except AnswerMismatch as exc:
        return ApprovalCheck(False, [f"request: {exc}"])
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        return ApprovalCheck(False, [f"request: it does not decode here ({type(exc).__name__})"])
    summary: dict[str, Any] = {
        "account": approval["account"],
        "family": family,
        "network": signer.get("network"),
        "kind": kind,
        "chain_id": rebuilt.chain_id,
        "items": rebuilt.items,
        "fee": rebuilt.fee,
        "digest": rebuilt.digest,
        "raw": rebuilt.raw,
        "memo": rebuilt.memo,
    }
    if rebuilt.message is not None:
        summary["message"] = message_record(rebuilt.message)
    found: list[str] = []
    if rebuilt.digest != approval["digest"]:
        found.append(f"digest: the approval says {approval['digest']}, "
                     f"the request is {rebuilt.digest}")  # fmt: skip
    found += networks.differences(family, signer, str(approval["account"]), rebuilt.chain_id)
    _diff("summary", approval["summary"], _safe(summary), found)
    return ApprovalCheck(not found, found)


def _diff(path: str, said: Any, real: Any, found: list[str]) -> None:
    if isinstance(said, dict) and isinstance(real, dict):
        for key in sorted(set(said) | set(real), key=str):
            if key not in real:
                found.append(f"{path}.{key}: the approval says {said[key]!r}; "
                             "the request has none")  # fmt: skip
            elif key not in said:
                found.append(f"{path}.{key}: the approval has none; "
                             f"the request says {real[key]!r}")  # fmt: skip
            else:
                _diff(f"{path}.{key}", said[key], real[key], found)
    elif isinstance(said, list) and isinstance(real, list) and len(said) == len(real):
        for i, (a, b) in enumerate(zip(said, real, strict=True)):
            _diff(f"{path}[{i}]", a, b, found)
    elif said != real or type(said) is not type(real):
        found.append(f"{path}: the approval says {said!r}, the request says {real!r}")
