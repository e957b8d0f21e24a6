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
its comprehensions (`exists`, `all`, `map`, `filter`, `exists_one`) nest at most one
deep, and every list a request puts in `tx` holds at most MAX_ITEMS entries (a request
with more is an error for any expression, which fails closed). So an evaluation costs
at most about MAX_CHARS x MAX_ITEMS steps, in C++, on the request's own thread.
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

from chainkeys.chains.tx.base import Summary

MAX_CHARS = 4096
MAX_ITEMS = 1000
MAX_NESTING = 1
INT64 = 2**63
PACKAGE = "chainkeys.policy"
_F = descriptor_pb2.FieldDescriptorProto
# message -> fields: (name, type, label, message type); "?" marks a proto3 optional field
_MESSAGES: dict[str, list[tuple[str, int, int, str]]] = {
    "Output": [("recipient", _F.TYPE_STRING, 1, ""), ("denom", _F.TYPE_STRING, 1, ""),
               ("amount", _F.TYPE_INT64, 1, "")],
    "Ibc": [("channel", _F.TYPE_STRING, 1, ""), ("port", _F.TYPE_STRING, 1, ""),
            ("receiver", _F.TYPE_STRING, 1, ""), ("memo", _F.TYPE_STRING, 1, ""),
            ("timeout_height", _F.TYPE_STRING, 1, ""),
            ("timeout_timestamp", _F.TYPE_INT64, 1, "")],
    "Tx": [("family", _F.TYPE_STRING, 1, ""), ("network", _F.TYPE_STRING, 1, ""),
           ("chain_id?", _F.TYPE_STRING, 1, ""), ("kind", _F.TYPE_STRING, 1, ""),
           ("outputs", _F.TYPE_MESSAGE, 3, "Output"), ("total", _F.TYPE_MESSAGE, 3, "map"),
           ("fee", _F.TYPE_MESSAGE, 3, "map"), ("fee_known", _F.TYPE_BOOL, 1, ""),
           ("messages", _F.TYPE_STRING, 3, ""), ("memo?", _F.TYPE_STRING, 1, ""),
           ("ibc", _F.TYPE_MESSAGE, 3, "Ibc"), ("message?", _F.TYPE_BYTES, 1, "")],
    "Account": [("name", _F.TYPE_STRING, 1, ""), ("address", _F.TYPE_STRING, 1, ""),
                ("wallet", _F.TYPE_STRING, 1, ""), ("path", _F.TYPE_STRING, 1, ""),
                ("index", _F.TYPE_INT64, 1, "")],
    "Token": [("id", _F.TYPE_STRING, 1, ""), ("label", _F.TYPE_STRING, 1, ""),
              ("scopes", _F.TYPE_STRING, 3, ""), ("families", _F.TYPE_STRING, 3, "")],
}  # fmt: skip
# What `tx.kind` says for each sign endpoint (DESIGN.md: the endpoint without "sign-").
KINDS = {"sign-transfer": "transfer", "sign-ibc-transfer": "ibc-transfer",
         "sign-direct": "direct", "sign-amino": "amino", "sign-psbt": "psbt",
         "sign-raw-transaction": "raw-transaction", "sign-transaction": "transaction",
         "sign-message": "message"}  # fmt: skip
AMOUNT_FIELDS = re.compile(r"\b(outputs|total|fee|spent)\b")  # reads amounts (int64)
_STRINGS = re.compile(  # CEL's string and bytes literals: raw, triple-quoted, escaped
    r"""[rRbB]{0,2}('''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*")""",
    re.S,
)
_MACRO = re.compile(r"\.\s*(exists|all|exists_one|map|filter)\s*\(")


class ConditionError(ValueError):
    """A `when` that cannot be used: the message says where and what was expected."""


@cache
def _pool() -> tuple[Any, dict[str, Any]]:
    """The declared message types (built once per process) and their Python classes."""
    fdp = descriptor_pb2.FileDescriptorProto(name="chainkeys_policy.proto", package=PACKAGE,
                                             syntax="proto3")  # fmt: skip
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
    classes = {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{n}"))
               for n in _MESSAGES}  # fmt: skip
    return pool, classes


def _classes() -> dict[str, Any]:
    return _pool()[1]


@cache
def _env() -> Any:
    pool, _ = _pool()
    amounts = cel.Type.Map(cel.Type.STRING, cel.Type.INT)
    variables = {"tx": cel.Type(f"{PACKAGE}.Tx"), "account": cel.Type(f"{PACKAGE}.Account"),
                 "token": cel.Type(f"{PACKAGE}.Token"), "spent": amounts,
                 "now": cel.Type.TIMESTAMP}  # fmt: skip
    return cel.NewEnv(descriptor_pool=pool, variables=variables)


@dataclass(frozen=True, slots=True)
class Condition:
    """A compiled `when` (a bool, checked) and its source."""

    source: str
    program: Any
    reads_amounts: bool


def compile_condition(source: str) -> Condition:
    """Type-check and compile; ConditionError saying where and what was wrong."""
    if not isinstance(source, str) or not source.strip():
        raise ConditionError("an empty expression")
    if len(source) > MAX_CHARS:
        raise ConditionError(f"longer than {MAX_CHARS} characters")
    if _nesting(source) > MAX_NESTING:
        raise ConditionError(
            "comprehensions (exists, all, map, filter, exists_one) nest more than "
            f"{MAX_NESTING} deep: its cost could grow with the square of a request's size"
        )
    try:
        program = _env().compile(source)
    except RuntimeError as exc:  # cel's INVALID_ARGUMENT: the position and what it expected
        raise ConditionError(_explain(str(exc))) from None
    kind = program.return_type().name()
    if kind != "BOOL":
        raise ConditionError(f"the expression is {kind.lower()}, not a bool")
    return Condition(source, program, AMOUNT_FIELDS.search(_strip(source)) is not None)


def _strip(source: str) -> str:
    return _STRINGS.sub('""', source)


def _nesting(source: str) -> int:
    """How deep comprehensions nest (string literals left out of the count)."""
    text = _strip(source)
    depth, deepest, stack = 0, 0, []
    i = 0
    while i < len(text):
        m = _MACRO.match(text, i)
        if m is not None:
            depth += 1
            deepest = max(deepest, depth)
            stack.append(True)
            i = m.end()
            continue
        if text[i] == "(":
            stack.append(False)
        elif text[i] == ")" and stack and stack.pop():
            depth -= 1
        i += 1
    return deepest


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
    """The variables of one request, built once and shared by every rule's `when`.

    Built for speed (a sign request under conditions pays for it, docs/policies.md):
    repeated and map fields are filled in place (a message built from keyword lists and
    dicts costs about three times as much), the token's and the account's messages are
    kept per value (they are the same on every request of a token and an account), and
    the variables go to CEL as a mapping, not an Activation, unless one is evaluated
    after another (then one Activation converts them once for all)."""

    __slots__ = ("_activation", "data", "overflow", "too_many")

    def __init__(self, summary: Summary, facts: Facts) -> None:
        self.overflow = False  # an amount CEL's int cannot hold: amount readers fail closed
        self.too_many = False  # a list of the request longer than MAX_ITEMS
        self.data = self._data(summary, facts)
        self._activation: Any = None

    @property
    def activation(self) -> Any:
        if self._activation is None:
            self._activation = _env().Activation(data=self.data)
        return self._activation

    def _int(self, value: int) -> int:
        if value >= INT64:
            self.overflow = True
            return 0
        return value

    def _data(self, summary: Summary, facts: Facts) -> dict[str, Any]:
        tx = _classes()["Tx"](family=summary.family, network=summary.network,
                              kind=KINDS.get(summary.kind, summary.kind),
                              fee_known=summary.fee is not None)  # fmt: skip
        utxo = summary.family in ("dogecoin", "litecoin")
        outputs, ibc, messages = tx.outputs, tx.ibc, tx.messages
        for item in summary.items:
            if not utxo:
                messages.append(item.type)
            if not item.change:
                for a in item.amounts:
                    outputs.add(recipient=item.recipient or "", denom=a.denom,
                                amount=self._int(a.amount))  # fmt: skip
            if item.ibc is not None:
                ibc.add(channel=item.ibc.channel, port=item.ibc.port,
                        receiver=item.recipient or "", memo=item.memo or "",
                        timeout_height=item.ibc.timeout_height or "",
                        timeout_timestamp=self._int(item.ibc.timeout_timestamp or 0))  # fmt: skip
        if max(len(outputs), len(ibc), len(messages)) > MAX_ITEMS:
            self.too_many = True  # every expression fails closed: the lists are not read
        for denom, amount in summary.spent().items():
            tx.total[denom] = self._int(amount)
        for a in summary.fee or ():
            tx.fee[a.denom] = self._int(a.amount)
        if summary.chain_id is not None:
            tx.chain_id = summary.chain_id
        if summary.memo is not None:
            tx.memo = summary.memo
        if summary.message is not None:
            tx.message = summary.message
        spent = {k: self._int(v) for k, v in facts.spent.items()}
        now = dt.datetime.fromtimestamp(facts.now_ms / 1000, dt.UTC)
        return {"tx": tx, "account": _account(facts), "token": _token(facts), "spent": spent,
                "now": now}  # fmt: skip


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
    return _message("Token", id=facts.token_id, label=facts.token_label,
                    scopes=facts.token_scopes, families=facts.token_families)  # fmt: skip


def _account(facts: Facts) -> Any:
    return _message("Account", name=facts.account_name, address=facts.account_address,
                    wallet=facts.wallet, path=facts.path, index=facts.index)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Batch:
    """The conditions of every rule that covers one family and network, compiled as one
    list expression: a request evaluates them in one call into CEL instead of one each
    (the per-call cost was most of a condition's cost)."""

    conditions: tuple[Condition, ...]
    indexes: tuple[int, ...]  # the rule of each condition
    program: Any
    reads_amounts: bool


def compile_batch(conditions: tuple[Condition, ...], indexes: tuple[int, ...]) -> Batch | None:
    """None when they do not compile together (then each is evaluated on its own)."""
    # each on lines of its own: a `//` comment at the end of one must not hide the rest
    source = "[" + ",".join(f"(\n{c.source}\n)" for c in conditions) + "]"
    try:
        program = _env().compile(source)
    except RuntimeError:
        return None
    return Batch(conditions, indexes, program, any(c.reads_amounts for c in conditions))


def evaluate_batch(batch: Batch, bindings: Bindings) -> list[bool] | None:
    """Every condition's value, or None when any is not a bool (an error, or a bound
    the request passes): then each is evaluated on its own to say which and why."""
    if bindings.too_many or (batch.reads_amounts and bindings.overflow):
        return None
    values = batch.program.eval(data=bindings.data).plain_value()
    if not isinstance(values, list) or len(values) != len(batch.conditions):
        return None
    if not all(v is True or v is False for v in values):
        return None
    return values


def evaluate(condition: Condition, bindings: Bindings) -> bool | str:
    """True or False, or why it could not be evaluated (a run-time error: fail closed)."""
    if bindings.too_many:
        return f"error: a list of the request holds more than {MAX_ITEMS} items"
    if condition.reads_amounts and bindings.overflow:
        return "error: an amount does not fit CEL's int (64 bits)"
    value = condition.program.eval(bindings.activation).plain_value()
    if value is True or value is False:  # checked a bool: anything else is an error value
        return value
    return f"error: {str(value)[:200]}"
