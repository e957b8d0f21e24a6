"""Per-token rate limits: in-process buckets, Redis-shared buckets, and the fallback between them."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from tests.conftest import TLS, Server, backend_settings, free_port

from chainkeys import clock
from chainkeys.api import ratelimit
from chainkeys.api.ratelimit import LocalBuckets, RedisBuckets, build_limiter
from chainkeys.config import Settings

REDIS_URL = os.environ.get("CHAINKEYS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
REQUIRE_REDIS = bool(os.environ.get("CHAINKEYS_TEST_REQUIRE_REDIS"))
# One token a minute: a test's few requests never see a refill, however slow the machine
# (time is moved through the clock seam where a test needs a refill).
RATE, BURST = 1 / 60, 3


def redis_or_skip() -> None:
    try:
        with redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1) as r:
            r.ping()
    except redis.RedisError as exc:
        why = (
            f"Redis not reachable at {REDIS_URL} ({type(exc).__name__}); set "
            "CHAINKEYS_TEST_REDIS_URL=redis://host:port/db to run these tests"
        )
        if REQUIRE_REDIS:
            pytest.fail(why)
        pytest.skip(why)


def limited_server(tmp_path: Path, **overrides: Any) -> Server:
    settings, _ = backend_settings(
        "sqlite", tmp_path, rate_limit_per_second=RATE, rate_limit_burst=BURST, **overrides
    )
    srv = Server(settings, "sqlite")
    srv.start()
    return srv


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = limited_server(tmp_path_factory.mktemp("limited"))
    yield srv
    srv.stop()


def assert_429(response: httpx.Response) -> int:
    assert response.status_code == 429, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {
        "success": False,
        "message": response.json()["message"],
        "code": "rate_limited",
    }
    retry_after = int(response.headers["retry-after"])
    assert retry_after >= 1
    return retry_after


# ---- the bucket ------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_bucket_allows_a_burst_then_refills_at_the_rate() -> None:
    clock = Clock()
    buckets = LocalBuckets(rate=2.0, burst=3, clock=clock)
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a") == pytest.approx(0.5)  # one token every 0.5 s
    assert buckets.take("b") == 0.0  # buckets are per key
    clock.now += 0.5
    assert buckets.take("a") == 0.0
    assert buckets.take("a") > 0
    clock.now += 60  # refills to the burst, never beyond it
    assert [buckets.take("a") for _ in range(4)][-1] > 0


def test_refilled_buckets_are_forgotten() -> None:
    clock = Clock()
    buckets = LocalBuckets(rate=1.0, burst=1, clock=clock)
    for i in range(1024):
        buckets.take(f"k{i}")
    clock.now += 2  # every bucket is full again
    buckets.take("new")
    assert len(buckets._buckets) == 1


def test_rate_limiting_is_off_by_default() -> None:
    assert Settings().rate_limit_per_second == 0
    assert build_limiter(Settings()) is None
    limiter = build_limiter(Settings(rate_limit_per_second=0.5))
    assert isinstance(limiter, LocalBuckets) and limiter.burst == 1  # at least one request


# ---- over HTTP -------------------------------------------------------------------------------


def test_a_token_over_its_rate_gets_429_with_retry_after(limited: Server) -> None:
    token = limited.new_token()
    with limited.client(token) as c:
        assert [c.get("/cosmos").status_code for _ in range(BURST)] == [200] * BURST
        response = c.post("/cosmos", json={})  # creates count too
        assert assert_429(response) == 60  # seconds until one request is allowed again
        assert (
            token not in response.text
            and hashlib.sha256(token.encode()).hexdigest() not in response.text
        )
        with clock.shift(61_000):  # the server runs in this process: move its clock
            assert c.get("/cosmos").status_code == 200


def test_limits_are_per_token(limited: Server) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    first, second = limited.new_token(tenant), limited.new_token(tenant)
    with limited.client(first) as a, limited.client(second) as b:
        for _ in range(BURST):
            a.get("/eos")
        assert_429(a.get("/eos"))
        assert b.get("/eos").status_code == 200


def test_unauthenticated_requests_spend_no_ones_budget(limited: Server) -> None:
    token = limited.new_token()
    with limited.client("ck_wrong") as bad, limited.client() as none:
        assert {bad.get("/cosmos").status_code for _ in range(10)} == {401}
        assert {none.get("/cosmos").status_code for _ in range(10)} == {401}
    with limited.client(token) as c:
        assert [c.get("/cosmos").status_code for _ in range(BURST)] == [200] * BURST
    with httpx.Client(
        verify=TLS, base_url=limited.base_url
    ) as c:  # public endpoints are not counted
        assert {c.get("/healthz").status_code for _ in range(10)} == {200}


# ---- Redis -----------------------------------------------------------------------------------


def test_redis_buckets_are_shared_between_instances() -> None:
    redis_or_skip()
    key = uuid.uuid4().hex

    async def run() -> tuple[list[float], int]:
        one = RedisBuckets.from_url(REDIS_URL, rate=10.0, burst=3)
        two = RedisBuckets.from_url(REDIS_URL, rate=10.0, burst=3)
        try:
            waits = [await (one if i % 2 else two).wait_for(key) for i in range(4)]
            await asyncio.sleep(0.12)
            waits.append(await one.wait_for(key))
            ttl = await one.redis.pttl(ratelimit.REDIS_PREFIX + key)
            await one.redis.delete(ratelimit.REDIS_PREFIX + key)
        finally:
            await one.aclose()
            await two.aclose()
        return waits, ttl

    waits, ttl = asyncio.run(run())
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert 0 < waits[3] <= 0.1  # the fourth, from either instance, waits for a refill
    assert waits[4] == 0.0
    assert 0 < ttl <= 1300  # an idle bucket expires once it would be full anyway


def test_replicas_share_one_budget_through_redis(tmp_path: Path) -> None:
    redis_or_skip()
    one = limited_server(tmp_path, redis_url=REDIS_URL)
    two = Server(one.settings, "sqlite")  # a second replica on the same store
    two.start()
    try:
        token = one.new_token()
        with one.client(token) as a, two.client(token) as b:
            codes = [(a if i % 2 else b).get("/dogecoin").status_code for i in range(BURST)]
            assert codes == [200] * BURST
            assert_429(a.get("/dogecoin"))
            assert_429(b.get("/dogecoin"))
        token_id = one.call(one.services.tokens.list())[-1].id  # type: ignore[union-attr]
        with redis.Redis.from_url(REDIS_URL) as r:
            keys = [k.decode() for k in r.keys(ratelimit.REDIS_PREFIX + "*")]
            assert ratelimit.REDIS_PREFIX + token_id in keys
            digest = hashlib.sha256(token.encode()).hexdigest()
            assert not any(token in k or digest in k for k in keys)  # keyed by token id only
    finally:
        one.stop()
        two.stop()


def test_unreachable_redis_falls_back_to_local_limits_and_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "chainkeys.ratelimit")
    srv = limited_server(tmp_path, redis_url=f"redis://:hunter2@127.0.0.1:{free_port()}/0")
    try:
        token = srv.new_token()
        with srv.client(token) as c:
            assert [c.get("/cosmos").status_code for _ in range(BURST)] == [200] * BURST
            assert_429(c.get("/cosmos"))  # still limited, by this process alone
    finally:
        srv.stop()
    warnings = [r for r in caplog.records if r.name == "chainkeys.ratelimit"]
    assert len(warnings) == 1
    assert "Redis unreachable" in warnings[0].getMessage()
    assert "hunter2" not in caplog.text  # the URL (and its password) is not logged


class FlakyScript:
    """Stands in for a registered script: fails while `down`, else allows."""

    def __init__(self) -> None:
        self.down = True
        self.calls = 0

    async def __call__(self, keys: list[str], args: list[Any]) -> list[int]:
        self.calls += 1
        if self.down:
            raise redis.ConnectionError("refused")
        return [1, 0]


class FakeRedis:
    def __init__(self) -> None:
        self.script = FlakyScript()

    def register_script(self, source: str) -> FlakyScript:
        return self.script

    async def aclose(self) -> None:
        return None


def test_redis_is_retried_after_a_pause_and_recovery_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "chainkeys.ratelimit")
    fake = FakeRedis()
    limiter = RedisBuckets(fake, 1.0, 1, LocalBuckets(1.0, 1))  # type: ignore[arg-type]

    async def run() -> list[float]:
        waits = [await limiter.wait_for("k") for _ in range(3)]
        assert fake.script.calls == 1  # not asked again during the pause
        monkeypatch.setattr(ratelimit, "REDIS_RETRY_SECONDS", 0.0)
        limiter._down_until = 0.0
        fake.script.down = False
        waits.append(await limiter.wait_for("k"))
        return waits

    waits = asyncio.run(run())
    assert waits[0] == 0.0 and waits[1] > 0  # local bucket while Redis is down
    assert waits[3] == 0.0  # Redis again
    messages = [r.getMessage() for r in caplog.records if r.name == "chainkeys.ratelimit"]
    assert len(messages) == 2
    assert "unreachable" in messages[0] and "answers again" in messages[1]
