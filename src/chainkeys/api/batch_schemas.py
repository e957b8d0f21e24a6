"""The body of `POST /{family}/{accountName}/sign-batch` and its answer (msgspec Structs;
see schemas.py), and how a body becomes its items.

An item is the body of one of the account's sign endpoints plus `kind`, that
endpoint's last path segment: the item's type is the endpoint's own request type
with `kind` as its tag (one per family and kind, so the document names each), and an
item is decoded with the same decoder, the same rules between fields and the same
messages as the endpoint's body. The batch is read in two steps so that a malformed
item is answered in its place, as alone, while the rest are signed: the body's shape
and each item's `kind` first (a refusal there refuses the whole batch: nothing
could be told apart), then each item as its kind's request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Final, Union

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from chainkeys.api.body import decode
from chainkeys.api.errors import PayloadTooLarge
from chainkeys.api.schemas import sign_request
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.tx.base import SignKind
from chainkeys.errors import BadRequest, ChainkeysError
from chainkeys.signing.batch import MAX_ITEMS, Item

BATCH_CODE: Final = "invalid_batch"


def _title(path: str) -> str:
    return "".join(part.capitalize() for part in path.split("-"))


class _Kinds:
    """One family's sign kinds as items: kind path -> (kind, item type, request type)."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.by_path: dict[str, tuple[SignKind, type[Struct], type[Struct]]] = {}
        for kind in FAMILIES[family].signers:
            request = sign_request(kind.request)
            item = msgspec.defstruct(
                f"{family.capitalize()}{_title(kind.path)}Item",
                (),
                bases=(request,),
                tag_field="kind",
                tag=kind.path,
                namespace={
                    "__doc__": f"The body of POST /{family}/{{accountName}}/{kind.path}, "
                    f'with "kind": "{kind.path}".'
                },
            )
            self.by_path[kind.path] = (kind, item, request)

    @property
    def paths(self) -> str:
        return ", ".join(self.by_path)


_KINDS = {family: _Kinds(family) for family in FAMILIES}


def batch_request(family: str) -> type[Struct]:
    """The family's batch body as the document states it (`DogecoinSignBatch`)."""
    members = tuple(item for _, item, _ in _KINDS[family].by_path.values())
    items = Annotated[
        list[Union[members]],  # type: ignore[valid-type]  # noqa: UP007 - built at run time
        Meta(
            min_length=1,
            max_length=MAX_ITEMS,
            description=f"1 to {MAX_ITEMS:,} sign requests, answered in this order",
        ),
    ]
    return msgspec.defstruct(
        f"{family.capitalize()}SignBatch",
        (("items", items),),
        kw_only=True,
        forbid_unknown_fields=True,
        namespace={"__doc__": "Sign requests on one account, in one transaction."},
    )


class BatchBody(Struct, kw_only=True, forbid_unknown_fields=True):
    """The body as first read: its items, each still JSON (see the module docstring)."""

    items: list[msgspec.Raw]


class _Kinded(Struct):
    """An item's `kind` (its other fields are its kind's)."""

    kind: str


def read_items(family: str, raws: Sequence[msgspec.Raw], item_cap: int) -> list[Item]:
    """Each item as its kind's request, or the refusal its endpoint would have answered
    (`item_cap`: the server's body limit, which each item's JSON must fit as the
    endpoint's body must). BadRequest (`invalid_batch`) for a batch none of which can
    be signed: no item or too many, an item that is not an object with a `kind`, or a
    kind this family's accounts do not sign with."""
    if not 1 <= len(raws) <= MAX_ITEMS:
        raise BadRequest(
            f"a batch holds 1 to {MAX_ITEMS:,} items; this one has {len(raws):,}",
            code=BATCH_CODE,
        )
    kinds = _KINDS[family]
    items = []
    for index, raw in enumerate(raws):
        try:
            path = msgspec.json.decode(raw, type=_Kinded).kind
        except msgspec.DecodeError:  # (a ValidationError is one)
            raise BadRequest(
                f"items[{index}] is not a sign request: an object with its kind "
                f"({kinds.paths}) and that endpoint's fields",
                code=BATCH_CODE,
            ) from None
        found = kinds.by_path.get(path)
        if found is None:
            raise BadRequest(
                f"items[{index}]: {family} accounts have no {path[:40]!r} signer; "
                f"kind is one of {kinds.paths}",
                code=BATCH_CODE,
            )
        items.append(_item(found, bytes(raw), item_cap))
    return items


def _item(found: tuple[SignKind, type[Struct], type[Struct]], raw: bytes, cap: int) -> Item:
    kind, item_type, request_type = found
    if len(raw) > cap:  # as the endpoint's body over the server's limit
        return Item(kind, refusal=PayloadTooLarge(f"request body is larger than {cap} bytes"))
    try:
        value = decode(raw, item_type)
    except ChainkeysError as exc:
        return Item(kind, refusal=exc)
    # the endpoint's own type (an approval stores and compares the request's JSON)
    fields = {name: getattr(value, name) for name in request_type.__struct_fields__}
    return Item(kind, request_type(**fields))


# ---- the answer --------------------------------------------------------------------


class BatchResult(Struct, kw_only=True, omit_defaults=True):
    """One item's answer, as its sign endpoint alone would have answered it."""

    status: Annotated[
        int,
        Meta(
            description="the endpoint's HTTP status: 200 signed, 202 waits for approval "
            "(nothing signed yet), 4xx/5xx refused"
        ),
    ]
    data: (
        Annotated[
            Any,
            Meta(
                description="200: the endpoint's `data` for this item's kind; 202: the "
                "approval request (as GET /approvals/{id} answers it)"
            ),
        ]
        | UnsetType
    ) = UNSET
    code: Annotated[str, Meta(description="a refusal's machine code")] | UnsetType = UNSET
    message: Annotated[str, Meta(description="a refusal's message")] | UnsetType = UNSET


class BatchResults(Struct, kw_only=True):
    results: Annotated[list[BatchResult], Meta(description="one per item, in its order")]
