"""The rules of chainkeys' requests that no request schema can state, each with the
error codes a refusal by it carries: where a schema-valid request may still be a 400.

tests/fuzz/fuzz_hooks.py checks every such refusal of a fuzzer's run against this table;
tests/fuzz/fuzz_run.py lets the run's positive_data_acceptance take a 400 on these
operations only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    codes: frozenset[str]
    why: str


def _rule(codes: str, why: str) -> Rule:
    return Rule(frozenset(codes.split()), why)


_SIGN = _rule(
    "invalid_sign_request invalid_amount not_owner wrong_chain message_is_transaction "
    "invalid_signature sighash_not_allowed invalid_ibc invalid_recipient not_multisig "
    "multisig_no_key multisig_unsupported",
    "the transaction is parsed whole (bytes a schema can only call hex or base64) and must "
    "fit the account it is for: its chain id, its inputs and keys, its kind (multisig or not)",
)
# Operations whose schema-valid requests may still be a 400, the codes such a refusal may
# carry, and why no JSON Schema of the request can state the rule.
BEYOND_SCHEMA: dict[str, Rule] = {
    r"POST /\w+/\{accountName\}/(sign-[a-z-]+|combine)": _SIGN,
    r"POST /policy/test": _rule(
        " ".join(sorted(_SIGN.codes)) + " invalid_account_name invalid_policy",
        "it holds a sign request (the rule above) for an account whose name has a checksum, "
        "and may hold a candidate policy, read whole as `policy set` reads one",
    ),
    r"POST /(\w+|wallets/\{wallet\})/multisig": _rule(
        "invalid_multisig invalid_xpub",
        "m is at most the number of keys, one key is held by this tenant, keys are distinct "
        "in any spelling; an xpub is of the body's network",
    ),
    r"POST /wallets/\{wallet\}/(multisig/\{multisig\}/)?accounts": _rule(
        "invalid_index", "index + count stays below 2^31 (JSON Schema has no sum of two fields)"
    ),
    r"POST /approvers/me/credentials(/options)?": _rule(
        "passkeys_not_configured registration_invalid",
        "passkeys need the server's public URL (an operator's setting, not the request's), "
        "and a credential is an attestation an authenticator made for this server's challenge",
    ),
    r"POST /approvals/\{id\}/(approve|reject)": _rule(
        "invalid_text",
        "an assertion is WebAuthn's free-form response object: a text in it holding NUL or an "
        "unpaired surrogate is refused, as everywhere (below)",
    ),
    r"POST /freezes": _rule(
        "invalid_account invalid_account_name invalid_until invalid_reason",
        "the account must be family/name of an account (a name with a checksum), until in "
        "the future (a schema has no now), the reason free of control and format characters "
        "(a pattern no error wording could say) and not only spaces",
    ),
    r"POST /changes": _rule(
        "unsupported_change_kind invalid_policy invalid_text",
        "kind names a kind of change this server builds, and the document is a whole policy "
        "validated as `chainkeys policy set` validates one (rules that depend on each other)",
    ),
    r"POST /changes/\{id\}/(approve|reject)": _rule(
        "invalid_text",
        "an assertion is WebAuthn's free-form response object: a text in it holding NUL or an "
        "unpaired surrogate is refused, as everywhere (below)",
    ),
    r"GET /wallets/\{wallet\}/xpub": _rule(
        "invalid_option unknown_network invalid_format",
        "the options must fit the family, and an OpenAPI query parameter cannot depend on another",
    ),
}
# Refused on every operation: text with an unpaired surrogate, which no JSON Schema
# pattern can name (README "Errors"; api/body.py), inside a free-form object (a
# Cosmos amino document, EOS abis) where no generator is told to avoid one.
EVERYWHERE = frozenset({"invalid_text"})


def rule_for(operation: str) -> Rule | None:
    """The rule beyond the schema for "METHOD /path", if any."""
    return next((r for p, r in BEYOND_SCHEMA.items() if re.fullmatch(p, operation)), None)
