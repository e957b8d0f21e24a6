"""Error answers become typed exceptions (real server), and retries happen only
where a repeat is safe (httpx.MockTransport, with a real retry loop)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import httpx
import pytest
from conftest import Server

from chainkeys_client import (
    ApprovalPending,
    BadRequest,
    ChainkeysError,
    Client,
    Conflict,
    Forbidden,
    NotFound,
    PolicyDenied,
    RateLimited,
    ServerError,
    ServiceUnavailable,
    TransportError,
    Unauthorized,
)

SECRET = "ck_this-token-must-never-be-shown"


# ---- against the server -----------------------------------------------------------------


def test_unknown_token_is_unauthorized(server: Server) -> None:
    with Client(server.url, SECRET) as ck:
        with pytest.raises(Unauthorized) as err:
            ck.accounts.list("cosmos")
    assert err.value.status == 401 and err.value.code
    assert err.value.request_id  # the server's X-Request-ID, for support
    for text in (str(err.value), repr(err.value), repr(ck), str(err.value.args)):
        assert SECRET not in text


def test_missing_scope_is_forbidden(client_for: Callable[..., Client]) -> None:
    reader = client_for(tenant="scopes", scopes="read")
    with pytest.raises(Forbidden) as err:
        reader.accounts.create("dogecoin")
    assert err.value.status == 403 and err.value.code == "forbidden"
    assert "create" in err.value.message  # names the missing scope
    assert not isinstance(err.value, PolicyDenied)
    assert reader.accounts.list("dogecoin").keys == []  # read is allowed
    no_export = client_for(tenant="scopes", scopes="read,create")
    made = no_export.accounts.create("dogecoin")
    with pytest.raises(Forbidden):
        no_export.accounts.export("dogecoin", made.name)
    with pytest.raises(Forbidden):
        no_export.signing.sign_message("dogecoin", made.name, "hi")


def test_not_found_and_other_tenants(client_for: Callable[..., Client]) -> None:
    mine = client_for(tenant="iso-a")
    theirs = client_for(tenant="iso-b")
    made = mine.accounts.create("litecoin")
    with pytest.raises(NotFound) as err:
        theirs.accounts.get("litecoin", made.name)  # another tenant's is a missing one
    assert err.value.status == 404
    with pytest.raises(NotFound):
        theirs.accounts.delete("litecoin", made.name)
    with pytest.raises(NotFound):
        mine.accounts.get("eos", "nosuchname11")


def test_bad_request_carries_the_code(ck: Client, vectors: dict[str, object]) -> None:
    with pytest.raises(BadRequest) as err:
        ck.accounts.create("dogecoin", private_key="not a key")
    assert err.value.status == 400 and err.value.code == "invalid_private_key"
    with pytest.raises(BadRequest) as net:
        ck.accounts.create("cosmos", network="nowhere")
    assert net.value.code and "cosmoshub" in net.value.message  # lists the accepted ones
    with pytest.raises(BadRequest) as limit:
        ck.accounts.list("cosmos", limit=0)
    assert limit.value.status == 400
    with pytest.raises(ValueError):
        ck.accounts.get("cosmos", "")
    with pytest.raises(ValueError):
        ck.accounts.list("../audit")


def test_names_cannot_reach_other_paths(ck: Client) -> None:
    with pytest.raises(BadRequest) as err:  # escaped into one segment, which the server refuses
        ck.accounts.get("cosmos", "../audit")
    assert err.value.code == "invalid_path"
    for name in (".", ".."):  # dot segments would be resolved away: refused before sending
        with pytest.raises(ValueError):
            ck.accounts.delete("cosmos", name)


def test_audit_log_lists_what_was_done(client_for: Callable[..., Client]) -> None:
    ck = client_for(tenant="audit")
    made = ck.accounts.create("dogecoin")
    ck.accounts.delete("dogecoin", made.name)
    page = ck.audit(limit=1)
    assert len(page.events) == 1 and page.next_cursor
    actions = [(e.action, e.account_name) for e in ck.iter_audit(page_size=1)]
    assert ("create", made.name) in actions and ("delete", made.name) in actions


# ---- retries and approvals (mock transport) ---------------------------------------------


def envelope(status: int, code: str, message: str = "m", **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"success": False, "message": message, "code": code},
                          headers=headers)  # fmt: skip


def mock(responses: list[httpx.Response | Exception]) -> tuple[Client, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        item = responses.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    client = Client("http://ck.test", SECRET, transport=httpx.MockTransport(handler),
                    retries=2, backoff=0.001)  # fmt: skip
    return client, seen


CREATED = httpx.Response(200, json={"success": True, "message": "account created",
                                    "address": "Dx", "data": {"address": "Dx", "public_key": "02",
                                                              "data": {"address": "Dx"}}})  # fmt: skip


def test_create_is_retried_with_the_same_idempotency_key() -> None:
    ck, seen = mock([httpx.ConnectError("refused"), envelope(503, "storage_unavailable"), CREATED])
    made = ck.accounts.create("dogecoin")
    assert made.address == "Dx" and len(seen) == 3
    keys = {r.headers["idempotency-key"] for r in seen}
    assert len(keys) == 1 and next(iter(keys))
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in seen)


def test_get_honours_retry_after_on_429() -> None:
    ok = httpx.Response(200, json={"success": True, "message": "accounts listed",
                                   "data": {"keys": ["Dx"], "data": {"keys": ["Dx"]}}})  # fmt: skip
    ck, seen = mock([envelope(429, "rate_limited", **{"Retry-After": "0"}), ok])
    assert ck.accounts.list("dogecoin").names == ["Dx"] and len(seen) == 2


def test_retries_give_up_with_the_last_error() -> None:
    ck, seen = mock([envelope(429, "rate_limited", **{"Retry-After": "0"})] * 3)
    with pytest.raises(RateLimited) as err:
        ck.accounts.get("dogecoin", "Dx")
    assert err.value.retry_after == 0 and len(seen) == 3
    ck, seen = mock([httpx.ConnectError("refused")] * 3)
    with pytest.raises(TransportError) as down:
        ck.networks()
    assert down.value.status is None and len(seen) == 3 and SECRET not in str(down.value)


@pytest.mark.parametrize("what", ["sign", "delete", "export"])
def test_unsafe_requests_are_never_retried(what: str) -> None:
    ck, seen = mock([envelope(503, "storage_unavailable"), CREATED])
    with pytest.raises(ServiceUnavailable):
        if what == "sign":
            ck.signing.sign_message("dogecoin", "Dx", "hi")
        elif what == "delete":
            ck.accounts.delete("dogecoin", "Dx")
        else:
            ck.accounts.export("dogecoin", "Dx")
    assert len(seen) == 1
    ck, seen = mock([httpx.ReadTimeout("slow"), CREATED])
    with pytest.raises(TransportError):
        ck.signing.sign_psbt("litecoin", "ltc1x", "cHNidP8=")
    assert len(seen) == 1


def test_status_families() -> None:
    cases = [(409, "account_exists", Conflict), (500, "internal", ServerError),
             (502, "http_502", ServerError), (403, "policy_denied", PolicyDenied),
             (413, "payload_too_large", ChainkeysError)]  # fmt: skip
    for status, code, cls in cases:
        ck, _ = mock([envelope(status, code)])
        with pytest.raises(cls) as err:
            ck.accounts.delete("dogecoin", "Dx")
        assert (err.value.status, err.value.code) == (status, code)
    ck, _ = mock([httpx.Response(502, text="<html>bad gateway</html>")])
    with pytest.raises(ServerError) as html:
        ck.accounts.delete("dogecoin", "Dx")
    assert html.value.code == "http_502"


def test_a_202_sign_answer_is_approval_pending() -> None:
    approval = {"id": "apr_123", "state": "pending", "family": "cosmos", "kind": "sign-transfer",
                "required": 2, "votes": [], "digest": "ab"}  # fmt: skip
    ck, _ = mock([httpx.Response(202, json={"success": True, "message": "approval required",
                                             "data": approval})])  # fmt: skip
    with pytest.raises(ApprovalPending) as pending:
        ck.signing.sign_message("cosmos", "cosmos1x", "hi")
    assert pending.value.id == "apr_123" and pending.value.approval.required == 2
    assert not isinstance(pending.value, ChainkeysError)


def test_the_token_never_reaches_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    ck, _ = mock([envelope(401, "unauthorized")])
    with pytest.raises(Unauthorized):
        ck.accounts.list("cosmos")
    assert SECRET not in caplog.text
