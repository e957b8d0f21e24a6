# mypy: disable-error-code="import-untyped"
"""Policy conditions: CEL expressions over what a sign request would do.

CEL (the Common Expression Language of Kubernetes admission policies, Google IAM
conditions and Envoy) through `cel-expr-python`, Google's own CEL runtime (cel-cpp):
expressions are type-checked when a policy is set against the variables declared
here, so a misspelled field or a wrong type is refused then, with its line and column.
docs/policies.md says why this library (against cel-python and
common-expression-language) and lists the variables.

The variables are protobuf messages declared here (`tx`, `account`, `token`), a map
(`spent`) and a timestamp (`now`), filled from the same decoded `Summary` the caps
count (never a second decoder). What a request lacks is absent, not zero: `has()`
tells (`has(tx.memo)`, `has(tx.chain_id)`), and a missing map key is a run-time error.

Evaluation is bounded before it runs: an expression is at most MAX_CHARS characters,
and what it may cost on the largest request is estimated from its checked tree when the
policy is set (`analysis.py`: a rule over RULE_COST, or the rules one request can meet
over SCOPE_COST together, are refused), so a decision holds the event loop for a few
milliseconds at most. Every list a request puts in `tx` holds at most MAX_ITEMS entries
(an expression that reads a longer one fails closed), and a number CEL's 64-bit int
cannot hold is bound as 0 with its part marked: an expression that reads that part
fails closed too, so no part of `tx` reads as a smaller number than was sent.
Each rule is evaluated on its own (its own iteration budget): an error, whatever its
kind, is that rule's "error: …" value, never an exception.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.tx.base import Summary
from chainkeys.policies.analysis import MAX_ITEMS, RULE_COST, analyse

MAX_CHARS = 4096
INT64 = 2**63
PACKAGE = "chainkeys.policy"
_F = descriptor_pb2.FieldDescriptorProto
# message -> fields: (name, type, label, message type); "?" marks a proto3 optional field
_MESSAGES: dict[str, list[tuple[str, int, int, str]]] = {
    "Output": [
        ("recipient", _F.TYPE_STRING, 1, ""),
        ("denom", _F.TYPE_STRING, 1, ""),
        ("amount", _F.TYPE_INT64, 1, ""),
    ],
    "Ibc": [
        ("channel", _F.TYPE_STRING, 1, ""),
        ("port", _F.TYPE_STRING, 1, ""),
        ("receiver", _F.TYPE_STRING, 1, ""),
        ("memo", _F.TYPE_STRING, 1, ""),
        ("timeout_height", _F.TYPE_STRING, 1, ""),
        ("timeout_timestamp", _F.TYPE_INT64, 1, ""),
    ],
    "Tx": [
        ("family", _F.TYPE_STRING, 1, ""),
        ("network", _F.TYPE_STRING, 1, ""),
        ("chain_id?", _F.TYPE_STRING, 1, ""),
        ("kind", _F.TYPE_STRING, 1, ""),
        ("outputs", _F.TYPE_MESSAGE, 3, "Output"),
        ("total", _F.TYPE_MESSAGE, 3, "map"),
        ("fee", _F.TYPE_MESSAGE, 3, "map"),
        ("fee_known", _F.TYPE_BOOL, 1, ""),
        ("messages", _F.TYPE_STRING, 3, ""),
        ("memo?", _F.TYPE_STRING, 1, ""),
        ("ibc", _F.TYPE_MESSAGE, 3, "Ibc"),
        ("message?", _F.TYPE_BYTES, 1, ""),
    ],
    "Account": [
        ("name", _F.TYPE_STRING, 1, ""),
        ("address", _F.TYPE_STRING, 1, ""),
        ("wallet", _F.TYPE_STRING, 1, ""),
        ("path", _F.TYPE_STRING, 1, ""),
        ("index", _F.TYPE_INT64, 1, ""),
    ],
    "Token": [
        ("id", _F.TYPE_STRING, 1, ""),
        ("label", _F.TYPE_STRING, 1, ""),
        ("scopes", _F.TYPE_STRING, 3, ""),
        ("families", _F.TYPE_STRING, 3, ""),
    ],
}
# What `tx.kind` says for each sign endpoint (DESIGN.md: the endpoint without "sign-").
KINDS = {
    "sign-transfer": "transfer",
    "sign-ibc-transfer": "ibc-transfer",
    "sign-direct": "direct",
    "sign-amino": "amino",
    "sign-psbt": "psbt",
    "sign-raw-transaction": "raw-transaction",
    "sign-transaction": "transaction",
    "sign-message": "message",
}


class ConditionError(ValueError):
    """A `when` that cannot be used: the message says where and what was expected."""


@cache
def _pool() -> tuple[Any, dict[str, Any]]:
    """The declared message types (built once per process) and their Python classes."""
    fdp = descriptor_pb2.FileDescriptorProto(
        name="chainkeys_policy.proto", package=PACKAGE, syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        msg = fdp.message_type.add(name=name)
        for number, (field, kind, label, ref) in enumerate(fields, 1):
            optional = field.endswith("?")
            field = field.rstrip("?")
            f = msg.field.add(name=field, number=number, type=kind, label=label)
            if ref == "map":  # map<string, int64>
                entry = msg.nested_type.add(name=f"{field.title()}Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, type=_F.TYPE_STRING, label=1)
                entry.field.add(name="value", number=2, type=_F.TYPE_INT64, label=1)
                f.type_name = f".{PACKAGE}.{name}.{field.title()}Entry"
            elif ref:
                f.type_name = f".{PACKAGE}.{ref}"
            if optional:
                f.proto3_optional = True
                f.oneof_index = len(msg.oneof_decl)
                msg.oneof_decl.add(name=f"_{field}")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    classes = {
        n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{n}"))
        for n in _MESSAGES
    }
    return pool, classes


def _classes() -> dict[str, Any]:
    return _pool()[1]


@cache
def _env() -> Any:
    pool, _ = _pool()
    amounts = cel.Type.Map(cel.Type.STRING, cel.Type.INT)
    variables = {
        "tx": cel.Type(f"{PACKAGE}.Tx"),
        "account": cel.Type(f"{PACKAGE}.Account"),
        "token": cel.Type(f"{PACKAGE}.Token"),
        "spent": amounts,
        "now": cel.Type.TIMESTAMP,
    }
    return cel.NewEnv(descriptor_pool=pool, variables=variables)


@dataclass(frozen=True, slots=True)
class Condition:
    """A compiled `when` (a bool, checked) and its source."""

    source: str
    program: Any
    reads: frozenset[str]  # the parts of the variables it reads ("tx.outputs", "spent")
    cost: int  # its estimated cost on the largest request (analysis.py)


def compile_condition(source: str) -> Condition:
    """Type-check and compile; ConditionError saying where and what was wrong."""
    if not isinstance(source, str) or not source.strip():
        raise ConditionError("an empty expression")
    if len(source) > MAX_CHARS:
        raise ConditionError(f"longer than {MAX_CHARS} characters")
    try:
        program = _env().compile(source)
    except RuntimeError as exc:  # cel's INVALID_ARGUMENT: the position and what it expected
        raise ConditionError(_explain(str(exc))) from None
    kind = program.return_type().name()
    if kind != "BOOL":
        raise ConditionError(f"the expression is {kind.lower()}, not a bool")
    found = analyse(program.serialize())
    if found.cost > RULE_COST:
        raise ConditionError(
            f"it could cost about {found.cost:,} steps on a large request, over the "
            f"{RULE_COST:,} a condition may take (a comprehension inside another, `in` "
            "over a request's list inside a comprehension, map or filter over a request's "
            'list, a regular expression per item: docs/policies.md, "Cost")'
        )
    return Condition(source, program, found.reads, found.cost)


def _explain(message: str) -> str:
    """cel's "INVALID_ARGUMENT: ERROR: <input>:1:3: undefined field …\n | …" as
    "line 1, column 3: undefined field …" (every error, one per line)."""
    found = re.findall(r"ERROR: <input>:(\d+):(\d+): ([^\n]*)", message)
    if not found:
        return message.replace("INVALID_ARGUMENT: ", "").split("\n", 1)[0][:300]
    return "; ".join(f"line {ln}, column {col}: {what.strip()[:300]}" for ln, col, what in found)


@dataclass(frozen=True, slots=True)
class Facts:
    """Who asks and when, beside what the request does (`Summary`)."""

    token_id: str
    token_label: str
    token_scopes: tuple[str, ...]
    token_families: tuple[str, ...]
    account_name: str
    account_address: str
    wallet: str  # "" when the account was not derived from a wallet
    path: str
    index: int  # -1 when not derived
    now_ms: int
    spent: Mapping[str, int]  # the 24 h window already counted, per denom


class Bindings:
    """The variables of one request, built once and shared by every rule's `when`:
    repeated and map fields are filled in place, the token's and the account's
    messages are kept per value, and one Activation converts them for CEL once for
    every rule evaluated on them.

    `marked` names the parts (`tx.outputs`, `tx.ibc`, `tx.total`, `tx.fee`, `spent`)
    holding a number CEL's int cannot hold (bound as 0) or more than MAX_ITEMS entries:
    an expression that reads a marked part fails closed."""

    __slots__ = ("_activation", "data", "marked")

    def __init__(self, summary: Summary, facts: Facts) -> None:
        self.marked: dict[str, str] = {}  # part -> why it cannot be read
        self.data = self._data(summary, facts)
        self._activation: Any = None

    @property
    def activation(self) -> Any:
        if self._activation is None:
            self._activation = _env().Activation(data=self.data)
        return self._activation

    def _int(self, value: int, part: str) -> int:
        if value >= INT64:
            self.marked.setdefault(part, f"a number in {part} does not fit CEL's int (64 bits)")
            return 0
        return value

    def _data(self, summary: Summary, facts: Facts) -> dict[str, Any]:
        tx = _classes()["Tx"](
            family=summary.family,
            network=summary.network,
            kind=KINDS.get(summary.kind, summary.kind),
            fee_known=summary.fee is not None,
        )
        outputs, ibc, messages = tx.outputs, tx.ibc, tx.messages
        typed = not FAMILIES[summary.family].vocabulary.outputs  # outputs are no messages
        for item in summary.items:
            if typed:
                messages.append(item.type)
            if not item.change:
                recipient = item.recipient or ""  # canonical: the decoders' form
                for a in item.amounts:
                    outputs.add(
                        recipient=recipient, denom=a.denom, amount=self._int(a.amount, "tx.outputs")
                    )
            if item.ibc is not None:
                ibc.add(
                    channel=item.ibc.channel,
                    port=item.ibc.port,
                    receiver=item.recipient or "",
                    memo=item.memo or "",
                    timeout_height=item.ibc.timeout_height or "",
                    timeout_timestamp=self._int(item.ibc.timeout_timestamp or 0, "tx.ibc"),
                )
        for denom, amount in summary.spent().items():
            tx.total[denom] = self._int(amount, "tx.total")
        for a in summary.fee or ():
            tx.fee[a.denom] = self._int(a.amount, "tx.fee")
        for part, found in (
            ("tx.outputs", outputs),
            ("tx.ibc", ibc),
            ("tx.messages", messages),
            ("tx.total", tx.total),
            ("tx.fee", tx.fee),
        ):
            if len(found) > MAX_ITEMS:
                self.marked[part] = f"{part} holds more than {MAX_ITEMS} entries"
        if summary.chain_id is not None:
            tx.chain_id = summary.chain_id
        if summary.memo is not None:
            tx.memo = summary.memo
        if summary.message is not None:
            tx.message = summary.message
        spent = {k: self._int(v, "spent") for k, v in facts.spent.items()}
        now = dt.datetime.fromtimestamp(facts.now_ms / 1000, dt.UTC)
        return {
            "tx": tx,
            "account": _account(facts),
            "token": _token(facts),
            "spent": spent,
            "now": now,
        }


_KEPT = 4096  # token and account messages kept (per value: never stale, only bounded)
_kept: dict[tuple[Any, ...], Any] = {}


def _message(kind: str, **fields: Any) -> Any:
    """The `kind` message of these fields, built once per distinct value."""
    key = (kind, *fields.values())
    found = _kept.get(key)
    if found is None:
        if len(_kept) >= _KEPT:
            _kept.clear()
        found = _kept[key] = _classes()[kind](**fields)
    return found


def _token(facts: Facts) -> Any:
    return _message(
        "Token",
        id=facts.token_id,
        label=facts.token_label,
        scopes=facts.token_scopes,
        families=facts.token_families,
    )


def _account(facts: Facts) -> Any:
    return _message(
        "Account",
        name=facts.account_name,
        address=facts.account_address,
        wallet=facts.wallet,
        path=facts.path,
        index=facts.index,
    )


def evaluate(condition: Condition, bindings: Bindings) -> bool | str:
    """True or False, or why it could not be evaluated ("error: …": fail closed). Never
    raises: a runtime error (a missing key, an overflow, the iteration budget) is the
    rule's value, not the request's failure."""
    for part in sorted(condition.reads & bindings.marked.keys()):
        return f"error: {bindings.marked[part]}"
    try:
        value = condition.program.eval(bindings.activation).plain_value()
    except Exception as exc:  # cel raises RuntimeError ("Iteration budget exceeded"), …
        return f"error: {str(exc).replace('INTERNAL: ', '')[:200]}"
    if value is True or value is False:  # checked a bool: anything else is an error value
        return value
    return f"error: {str(value)[:200]}"
