"""Rate limits: one token bucket per API token (keyed by the token's id, never
the token or its hash), refilled at `rate_limit_per_second` up to
`rate_limit_burst`. In-process by default; with `redis_url` the bucket lives in
Redis (one atomic Lua script per request), so replicas share it. If Redis does
not answer, each process limits on its own (a token may then get up to
replicas x rate) and says so once in the log; it tries Redis again after
`REDIS_RETRY_SECONDS`. Failing open to a local limit, rather than refusing every
request, keeps a custody API available when only the limiter's store is down.

"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from chainkeys.clock import monotonic
from chainkeys.config import Settings
from chainkeys.errors import RateLimited

if TYPE_CHECKING:  # redis is imported only when CHAINKEYS_REDIS_URL is set (~0.1 s)
    from redis.asyncio import Redis

log = logging.getLogger("chainkeys.ratelimit")

REDIS_PREFIX = "chainkeys:rl:"
REDIS_TIMEOUT_SECONDS = 0.25  # a healthy Redis answers in well under a millisecond
REDIS_RETRY_SECONDS = 5.0

# KEYS[1] bucket; ARGV rate (per second), burst. Redis' own clock, so replicas
# with skewed clocks agree. Times in ms: Lua numbers print with 14 digits.
# Returns {1, 0} when allowed, else {0, ms until one request is}.
BUCKET_LUA = """
local rate = tonumber(ARGV[1]) / 1000
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate)
local allowed, wait = 0, 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = math.ceil((1 - tokens) / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate) + 1000)
return {allowed, wait}
"""


class Limiter(Protocol):
    async def wait_for(self, key: str) -> float:
        """0.0 when a request with `key` may go now, else seconds until one may."""
        ...

    async def aclose(self) -> None: ...


class LocalBuckets:
    """In-process token buckets: a dict lookup and a little arithmetic (~1 µs)."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = monotonic) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.clock = clock
        self._buckets: dict[str, list[float]] = {}  # key -> [tokens, last refill time]
        self._sweep_at = 1024

    def take(self, key: str) -> float:
        now = self.clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self._sweep_at:
                self._sweep(now)
            self._buckets[key] = [self.burst - 1.0, now]
            return 0.0
        tokens = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
        bucket[1] = now
        if tokens >= 1.0:
            bucket[0] = tokens - 1.0
            return 0.0
        bucket[0] = tokens
        return (1.0 - tokens) / self.rate

    def _sweep(self, now: float) -> None:
        """Forget buckets that have refilled: a new bucket starts full anyway."""
        full = self.burst / self.rate
        for key in [k for k, (_, ts) in self._buckets.items() if now - ts >= full]:
            del self._buckets[key]
        self._sweep_at = max(1024, 2 * len(self._buckets))

    async def wait_for(self, key: str) -> float:
        return self.take(key)

    async def aclose(self) -> None:
        return None


class RedisBuckets:
    """Token buckets in Redis, shared by every replica; local buckets while it is down."""

    def __init__(self, redis: Redis, rate: float, burst: int, fallback: LocalBuckets) -> None:
        from redis.exceptions import RedisError

        self._errors = (RedisError, OSError)  # Redis is down or unreachable
        self.redis = redis
        self.rate = rate
        self.burst = burst
        self.fallback = fallback
        self._script = redis.register_script(BUCKET_LUA)
        self._down_until = 0.0
        self._down = False

    @classmethod
    def from_url(cls, url: str, rate: float, burst: int) -> RedisBuckets:
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        client = Redis.from_url(
            url,
            socket_timeout=REDIS_TIMEOUT_SECONDS,
            socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
            retry=Retry(NoBackoff(), 0),  # a retry would only stretch the request
        )
        return cls(client, rate, burst, LocalBuckets(rate, burst))

    async def wait_for(self, key: str) -> float:
        if self._down and time.monotonic() < self._down_until:
            return self.fallback.take(key)
        try:
            allowed, wait_ms = await self._script(
                keys=[REDIS_PREFIX + key], args=[self.rate, self.burst]
            )
        except self._errors as exc:
            self._went_down(exc)
            return self.fallback.take(key)
        if self._down:
            self._down = False
            log.warning("rate limiter: Redis answers again; limits are shared across replicas")
        return 0.0 if allowed else int(wait_ms) / 1000

    def _went_down(self, exc: BaseException) -> None:
        self._down_until = time.monotonic() + REDIS_RETRY_SECONDS
        if not self._down:
            self._down = True
            # The class name only: a connection error's text may carry the URL.
            log.warning(
                "rate limiter: Redis unreachable (%s); limiting in this process only "
                "until it answers (retrying every %.0fs)",
                type(exc).__name__,
                REDIS_RETRY_SECONDS,
            )

    async def aclose(self) -> None:
        await self.redis.aclose()


def build_limiter(settings: Settings) -> Limiter | None:
    """The limiter the settings ask for; None when rate limiting is off."""
    rate = settings.rate_limit_per_second
    if rate <= 0:
        return None
    burst = settings.rate_limit_burst or max(1, math.ceil(rate))
    if settings.redis_url is not None:
        return RedisBuckets.from_url(settings.redis_url.get_secret_value(), rate, burst)
    return LocalBuckets(rate, burst)


async def enforce(limiter: Limiter | None, key: str) -> None:
    """Count one request against `key` (an authenticated token's id); 429 when over."""
    if limiter is None:
        return
    wait = await limiter.wait_for(key)
    if wait > 0:
        seconds = max(1, math.ceil(wait))
        raise RateLimited(
            f"too many requests for this token; retry after {seconds}s", retry_after=seconds
        )
