# mypy: disable-error-code="import-untyped"
"""What a condition reads and what it may cost, from CEL's own checked tree.

A policy's `when` is decided on values a tenant does not control (the request's size,
its amounts) by a runtime that cannot be interrupted, on the server's event loop. So
two things are known of each expression before it is ever evaluated, read from the
checked AST that the CEL compiler itself produced (`Expression.serialize()`, a
`cel.expr.CheckedExpr`), never from the expression's text (a comment or a string
literal would fool a regex):

- `reads`: which parts of the variables it can see (`tx.outputs`, `tx.ibc`, `spent`,
  ...). A value that CEL's 64-bit int cannot hold is held as 0 and its part marked
  (`conditions.Bindings`); an expression that reads a marked part fails closed.
- `cost`: an upper bound of its work on the largest request the service binds (every
  list of `tx` at most MAX_ITEMS long, strings at most their field's length), in units
  of about one node visited. Comprehensions multiply their body's cost by their range's
  size; `in` over a list and equality of lists cost the list's size; a list built up
  by `map` or `filter` costs the square of its size (the runtime copies its
  accumulator each step, measured); string functions cost with the string's length.
  `policy set` refuses a rule over RULE_COST, and rules that one request can evaluate
  together over SCOPE_COST (`document.py`), so no request's decision holds the event
  loop for more than a few milliseconds (docs/policies.md has the measurements).

The schema below is the part of cel-spec's `syntax.proto` and `checked.proto` this
reads (field numbers as there); the rest of the message is skipped by protobuf.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory

MAX_ITEMS = 1000  # the longest list (and largest map) of a request bound to `tx`
MAX_TEXT = 65536  # the longest text or bytes a request can carry (memo, message)
RULE_COST = 60_000  # units one rule's condition may cost (about 2 ms, measured)
SCOPE_COST = 150_000  # units the conditions one request can meet may cost together

_F = descriptor_pb2.FieldDescriptorProto
_PKG = "chainkeys.celast"
# message -> (name, number, type, label, message type); label 3: repeated
_SCHEMA: dict[str, list[tuple[str, int, int, int, str]]] = {
    "Expr": [
        ("id", 2, _F.TYPE_INT64, 1, ""),
        ("const_expr", 3, _F.TYPE_MESSAGE, 1, "Constant"),
        ("ident_expr", 4, _F.TYPE_MESSAGE, 1, "Ident"),
        ("select_expr", 5, _F.TYPE_MESSAGE, 1, "Select"),
        ("call_expr", 6, _F.TYPE_MESSAGE, 1, "Call"),
        ("list_expr", 7, _F.TYPE_MESSAGE, 1, "CreateList"),
        ("struct_expr", 8, _F.TYPE_MESSAGE, 1, "CreateStruct"),
        ("comprehension_expr", 9, _F.TYPE_MESSAGE, 1, "Comprehension"),
    ],
    "Constant": [
        ("string_value", 6, _F.TYPE_STRING, 1, ""),
        ("bytes_value", 7, _F.TYPE_BYTES, 1, ""),
    ],
    "Ident": [("name", 1, _F.TYPE_STRING, 1, "")],
    "Select": [
        ("operand", 1, _F.TYPE_MESSAGE, 1, "Expr"),
        ("field", 2, _F.TYPE_STRING, 1, ""),
        ("test_only", 3, _F.TYPE_BOOL, 1, ""),
    ],
    "Call": [
        ("target", 1, _F.TYPE_MESSAGE, 1, "Expr"),
        ("function", 2, _F.TYPE_STRING, 1, ""),
        ("args", 3, _F.TYPE_MESSAGE, 3, "Expr"),
    ],
    "CreateList": [("elements", 1, _F.TYPE_MESSAGE, 3, "Expr")],
    "CreateStruct": [("entries", 2, _F.TYPE_MESSAGE, 3, "Entry")],
    "Entry": [("map_key", 3, _F.TYPE_MESSAGE, 1, "Expr"), ("value", 4, _F.TYPE_MESSAGE, 1, "Expr")],
    "Comprehension": [
        ("iter_var", 1, _F.TYPE_STRING, 1, ""),
        ("iter_range", 2, _F.TYPE_MESSAGE, 1, "Expr"),
        ("accu_var", 3, _F.TYPE_STRING, 1, ""),
        ("accu_init", 4, _F.TYPE_MESSAGE, 1, "Expr"),
        ("loop_condition", 5, _F.TYPE_MESSAGE, 1, "Expr"),
        ("loop_step", 6, _F.TYPE_MESSAGE, 1, "Expr"),
        ("result", 7, _F.TYPE_MESSAGE, 1, "Expr"),
        ("iter_var2", 8, _F.TYPE_STRING, 1, ""),
    ],
    "Type": [
        ("primitive", 3, _F.TYPE_INT32, 1, ""),  # an enum: 5 string, 6 bytes
        ("list_type", 6, _F.TYPE_MESSAGE, 1, "ListType"),
        ("map_type", 7, _F.TYPE_MESSAGE, 1, "MapType"),
        ("message_type", 9, _F.TYPE_STRING, 1, ""),
    ],
    "ListType": [("elem_type", 1, _F.TYPE_MESSAGE, 1, "Type")],
    "MapType": [
        ("key_type", 1, _F.TYPE_MESSAGE, 1, "Type"),
        ("value_type", 2, _F.TYPE_MESSAGE, 1, "Type"),
    ],
    "TypeEntry": [("key", 1, _F.TYPE_INT64, 1, ""), ("value", 2, _F.TYPE_MESSAGE, 1, "Type")],
    "CheckedExpr": [
        ("type_map", 3, _F.TYPE_MESSAGE, 3, "TypeEntry"),
        ("expr", 4, _F.TYPE_MESSAGE, 1, "Expr"),
    ],
}

# The parts of the variables a condition can read, each with its largest size: list
# and map entries, or characters (a path absent here is a scalar). A path's elements'
# size (a list of strings) is under its name with "[]".
SIZES = {
    "tx.outputs": MAX_ITEMS,
    "tx.ibc": MAX_ITEMS,
    "tx.messages": MAX_ITEMS,
    "tx.messages[]": 256,
    "tx.total": MAX_ITEMS,
    "tx.fee": MAX_ITEMS,
    "spent": MAX_ITEMS,
    "tx.memo": MAX_TEXT,
    "tx.message": MAX_TEXT,
    "tx.ibc.memo": MAX_TEXT,
    "token.scopes": 16,
    "token.families": 16,
    "token.scopes[]": 16,
    "token.families[]": 64,
}
MESSAGE_EQ = 100  # comparing two messages (an output, an IBC packet): measured ~70x an int's
TEXT = 256  # any other text field (addresses, names, denoms, ids)
VARIABLES = ("tx", "account", "token", "spent", "now")
_TX_FIELDS = (
    "family",
    "network",
    "chain_id",
    "kind",
    "outputs",
    "total",
    "fee",
    "fee_known",
    "messages",
    "memo",
    "ibc",
    "message",
)


@cache
def _classes() -> dict[str, Any]:
    fdp = descriptor_pb2.FileDescriptorProto(
        name="chainkeys_celast.proto", package=_PKG, syntax="proto3"
    )
    for name, fields in _SCHEMA.items():
        msg = fdp.message_type.add(name=name)
        for field, number, kind, label, ref in fields:
            f = msg.field.add(name=field, number=number, type=kind, label=label)
            if ref:
                f.type_name = f".{_PKG}.{ref}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {
        n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PKG}.{n}"))
        for n in _SCHEMA
    }


@dataclass(frozen=True, slots=True)
class Analysis:
    reads: frozenset[str]  # "tx.outputs", "spent", "token", ...
    cost: int


def analyse(serialized: bytes) -> Analysis:
    """What the checked expression (`Expression.serialize()`) reads and may cost."""
    wrapper = any_pb2.Any()
    wrapper.ParseFromString(serialized)
    checked = _classes()["CheckedExpr"]()
    checked.ParseFromString(wrapper.value)
    types = {entry.key: entry.value for entry in checked.type_map}
    walk = _Walk(types)
    cost, _ = walk.cost(checked.expr, {})
    return Analysis(frozenset(walk.reads), int(cost))


_KINDS = (
    "const_expr",
    "ident_expr",
    "select_expr",
    "call_expr",
    "list_expr",
    "struct_expr",
    "comprehension_expr",
)  # the oneof `expr_kind` of cel.expr.Expr


def _which(e: Any) -> str | None:
    return next((k for k in _KINDS if e.HasField(k)), None)


Scope = dict[str, tuple[str | None, float]]  # a comprehension's variables: (path, size)


class _Walk:
    def __init__(self, types: dict[int, Any]) -> None:
        self.types = types
        self.reads: set[str] = set()

    def kind(self, e: Any) -> str:
        """list, map, text or other: what the checker says the node's value is."""
        t = self.types.get(e.id)
        if t is None:
            return "other"
        if t.HasField("list_type"):
            return "list"
        if t.HasField("map_type"):
            return "map"
        if t.message_type:
            return "message"
        return "text" if t.primitive in (5, 6) else "other"

    def path(self, e: Any, scope: Scope) -> str | None:
        """`tx.outputs[].amount` for `o.amount` in `tx.outputs.exists(o, …)`: the
        variable and fields a chain of selections names, or None (not a variable's)."""
        which = _which(e)
        if which == "ident_expr":
            name = e.ident_expr.name.lstrip(".")
            if name in scope:
                return scope[name][0]
            return name if name in VARIABLES else None
        if which == "select_expr":
            inner = self.path(e.select_expr.operand, scope)
            return None if inner is None else f"{inner}.{e.select_expr.field}"
        return None

    def note(self, path: str) -> None:
        """Record the part of a variable that `path` reads (`tx.outputs`, `spent`)."""
        names = path.replace("[]", "").split(".")
        if names[0] != "tx":
            self.reads.add(names[0])
        elif len(names) == 1:  # the whole message: every part of it
            self.reads.update(f"tx.{f}" for f in _TX_FIELDS)
        else:
            self.reads.add(f"tx.{names[1]}")

    def size(self, e: Any, path: str | None, scope: Scope) -> float:
        which = _which(e)
        if which == "ident_expr" and e.ident_expr.name.lstrip(".") in scope:
            return scope[e.ident_expr.name.lstrip(".")][1]
        if path is not None:
            for key in (path, path.replace("[]", "")):
                if key in SIZES:
                    return SIZES[key]
        kind = self.kind(e)
        if kind == "text":
            return TEXT
        return MAX_ITEMS if kind in ("list", "map") else 1

    def cost(self, e: Any, scope: Scope) -> tuple[float, float]:
        """(cost, size) of `e`: size is a list's or map's entries or a text's length."""
        which = _which(e)
        if which == "const_expr":
            c = e.const_expr
            return 0, max(len(c.string_value), len(c.bytes_value), 1)
        if which in ("ident_expr", "select_expr"):
            path = self.path(e, scope)
            if path is not None:  # a chain of selections from a variable: noted once
                self.note(path)
                return path.count(".") + 1, self.size(e, path, scope)
            operand = 0.0
            if which == "select_expr":
                operand, _ = self.cost(e.select_expr.operand, scope)
            return operand + 1, self.size(e, None, scope)
        if which == "list_expr":
            parts = [self.cost(x, scope)[0] for x in e.list_expr.elements]
            return 10 + sum(parts), max(len(parts), 1)
        if which == "struct_expr":
            total = 30.0
            for entry in e.struct_expr.entries:
                total += self.cost(entry.value, scope)[0]
                if entry.HasField("map_key"):
                    total += self.cost(entry.map_key, scope)[0]
            return total, max(len(e.struct_expr.entries), 1)
        if which == "call_expr":
            return self.call(e, scope)
        if which == "comprehension_expr":
            return self.comprehension(e.comprehension_expr, scope)
        return 1, 1

    def call(self, e: Any, scope: Scope) -> tuple[float, float]:
        call = e.call_expr
        operands = ([call.target] if call.HasField("target") else []) + list(call.args)
        costs = [self.cost(x, scope) for x in operands]
        total = 1 + sum(c for c, _ in costs)
        sizes = [s for _, s in costs]
        kinds = [self.kind(x) for x in operands]
        fn = call.function
        if fn == "@in" and len(sizes) == 2:  # each entry compared: messages cost most
            return total + (MESSAGE_EQ if kinds[0] == "message" else 4) * sizes[1], 1
        if fn in ("_==_", "_!=_") and len(sizes) == 2:
            if "list" in kinds or "map" in kinds:
                return total + MESSAGE_EQ * max(sizes), 1
            if "message" in kinds:
                return total + MESSAGE_EQ, 1
            if "text" in kinds:
                return total + max(sizes) / 100, 1
            return total + 3, 1
        if fn == "_+_" and len(sizes) == 2 and kinds[0] in ("list", "text"):
            grown = sizes[0] + sizes[1]  # a new list (or text) of both: copied
            return total + (10 * grown if kinds[0] == "list" else grown / 100), grown
        if fn == "matches":  # the runtime compiles the pattern at each call (measured)
            return total + 1000 + sum(sizes), 1
        if fn in ("contains", "startsWith", "endsWith", "string", "bytes"):
            return total + sum(sizes) / 100, max(sizes, default=1)
        if fn == "_[_]" and len(operands) == 2:
            kind = self.kind(e)
            if kind == "text":
                return total, SIZES.get(f"{self.path(operands[0], scope)}[]", TEXT)
            return total, MAX_ITEMS if kind in ("list", "map") else 1
        if self.kind(e) in ("list", "map", "text"):
            return total + sum(sizes) / 100, max(sizes, default=1)
        return total, 1

    def comprehension(self, c: Any, scope: Scope) -> tuple[float, float]:
        range_cost, n = self.cost(c.iter_range, scope)
        range_path = self.path(c.iter_range, scope)
        element = f"{range_path}[]" if range_path is not None else None
        element_size = SIZES.get(element, TEXT) if element is not None else TEXT
        init_cost, init_size = self.cost(c.accu_init, scope)
        grows = self.kind(c.accu_init) in ("list", "map")
        inner: Scope = dict(scope)
        inner[c.iter_var] = (element, element_size)
        if c.iter_var2:
            inner[c.iter_var2] = (None, TEXT)
        inner[c.accu_var] = (None, init_size + n if grows else 1)
        step = self.cost(c.loop_condition, inner)[0] + self.cost(c.loop_step, inner)[0]
        result_cost, result_size = self.cost(c.result, inner)
        return range_cost + init_cost + n * max(step, 1) + result_cost, result_size
