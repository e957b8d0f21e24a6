"""Operator endpoints: liveness, readiness, version, Prometheus metrics."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from tests.conftest import TLS

from chainkeys import __version__


def scrape(server: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = httpx.get(f"{server.base_url}/metrics", verify=TLS)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_liveness_readiness_and_version(server: Any) -> None:
    assert httpx.get(f"{server.base_url}/livez", verify=TLS).json() == {
        "success": True,
        "message": "alive",
    }
    assert httpx.get(f"{server.base_url}/readyz", verify=TLS).json() == {
        "success": True,
        "message": "ready",
    }
    version = httpx.get(f"{server.base_url}/version", verify=TLS).json()
    assert version["data"]["version"] == __version__


def test_metrics_move_with_requests(server: Any, client: httpx.Client) -> None:
    before = scrape(server)
    for _ in range(3):
        assert client.post("/dogecoin", json={}).status_code == 200
    assert client.get("/dogecoin/nosuch").status_code == 400
    after = scrape(server)
    created = ("chainkeys_accounts_created_total", {"family": "dogecoin", "source": "generate"})
    assert value(after, created[0], **created[1]) - value(before, created[0], **created[1]) == 3
    ok = {"route": "/dogecoin", "method": "POST", "status": "200"}
    assert (
        value(after, "chainkeys_requests_total", **ok)
        - value(before, "chainkeys_requests_total", **ok)
        == 3
    )
    count = {"route": "/dogecoin", "method": "POST"}
    assert value(after, "chainkeys_request_duration_seconds_count", **count) >= 3
    assert value(after, "chainkeys_build_info", version=__version__) == 1
    # no token, token id or account name ever becomes a label
    text = httpx.get(f"{server.base_url}/metrics", verify=TLS).text
    assert "nosuch" not in text and "Authorization" not in text


def test_commit_latency_pool_and_signature_metrics(server: Any, client: httpx.Client) -> None:
    before = scrape(server)
    made = client.post("/dogecoin", json={}, headers={"Idempotency-Key": "metrics-1"})
    address = made.json()["address"]
    assert (
        client.post(f"/dogecoin/{address}/sign-message", json={"message": "hi"}).status_code == 200
    )
    refused = client.post(f"/dogecoin/{address}/sign-raw-transaction", json={"hex": "00"})
    assert refused.status_code == 400
    after = scrape(server)
    assert value(after, "chainkeys_db_commit_seconds_count") > value(
        before, "chainkeys_db_commit_seconds_count"
    )  # the create and the signature's audit row were committed and timed
    signed = {"family": "dogecoin", "kind": "sign-message"}
    assert (
        value(after, "chainkeys_signatures_total", **signed)
        == value(before, "chainkeys_signatures_total", **signed) + 1
    )
    code = refused.json()["code"]
    labels = {"family": "dogecoin", "kind": "sign-raw-transaction", "code": code}
    assert value(after, "chainkeys_sign_refusals_total", **labels) >= 1
    if server.backend == "postgresql":
        assert value(after, "chainkeys_db_pool_size") == server.settings.db_pool_size
        assert value(after, "chainkeys_db_pool_in_use") == 0  # every connection given back
