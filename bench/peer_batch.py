"""`bench.peer --batch 10,100`: batches against batches, on the servers bench.peer started.

chainkeys signs `size` Dogecoin messages per request (`POST /dogecoin/{address}/sign-batch`,
lua/sign_batch.lua: each item a unique message, each item decided, capped and audited as a
single request is, in one transaction); OpenBao's transit engine signs `size` inputs per
request (`POST /v1/transit/sign/bench` with `batch_input`, lua/transit_batch.lua) with its
file audit device. Both are measured in signatures/s (requests/s times `size`). Each kind of
target is checked once before it is measured (every item signed; OpenBao's first signature
verified against its key), and every answer under load is checked by its Lua script (an
answer holding a refused item is an error: bench/wrk.py).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

Post = Callable[..., dict[str, Any]]  # bench.peer.call(url, method, path, headers, body)


def chainkeys_batch(
    name: str, url: str, env: dict[str, str], size: int, post: Post
) -> dict[str, Any]:
    """The fields of a target signing `size` messages per request on the chainkeys server of
    a sign-message target (`name`, `url`, its wrk `env`); one batch checked first."""
    path = env["BENCH_PATH"].removesuffix("/sign-message") + "/sign-batch"
    auth = {"Authorization": f"Bearer {env['BENCH_TOKEN']}"}
    items = [{"kind": "sign-message", "message": f"check {n}"} for n in range(size)]
    results = post(url, "POST", path, auth, {"items": items})["data"]["results"]
    statuses = {r["status"] for r in results}
    if len(results) != size or statuses != {200}:
        raise RuntimeError(f"{name}: a batch of {size} answered {statuses}")
    return {
        "name": f"{name} batch {size}",
        "lua": "sign_batch",
        "env": {"BENCH_TOKEN": env["BENCH_TOKEN"], "BENCH_PATH": path, "BENCH_BATCH": str(size)},
        "per_request": size,
    }


def bao_batch(
    name: str,
    url: str,
    env: dict[str, str],
    size: int,
    post: Post,
    verify: Callable[[bytes, str], None],
) -> dict[str, Any]:
    """The fields of a target signing `size` inputs per request with `batch_input` on the
    OpenBao server of a transit target; one batch checked first (its first signature
    verified against the key)."""
    auth = {"X-Vault-Token": env["BENCH_TOKEN"]}
    inputs = [{"input": base64.b64encode(f"check {n}".encode()).decode()} for n in range(size)]
    results = post(url, "POST", env["BENCH_PATH"], auth, {"batch_input": inputs})["data"][
        "batch_results"
    ]
    if len(results) != size or any("error" in r or "signature" not in r for r in results):
        raise RuntimeError(f"{name}: a batch of {size} answered {results[:2]}")
    verify(b"check 0", results[0]["signature"])
    return {
        "name": f"{name} batch {size}",
        "lua": "transit_batch",
        "env": {**env, "BENCH_BATCH": str(size)},
        "per_request": size,
    }
