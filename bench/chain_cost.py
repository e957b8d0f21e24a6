"""What linking the audit chain costs per row, in instructions (callgrind), beside what
one signature costs (bench.icount's sign-dogecoin-message, which writes one row).

    python -m bench.chain_cost [--rows 3000] [--sync NORMAL|FULL]

Why instructions: the chaining round (audit/chain.py) runs in the background a minute
after rows are written, so a signature's latency never sees it; what it takes is CPU and
the writer's lock, shared with requests. Two processes under callgrind each write the
same `rows` audit rows into a new store (SQLite, at `--sync`); one then links them all,
the other links none (its clock is not moved past the settle window): the difference over
`rows` is one row's link (an HMAC over the row and its UPDATE, a batch of 500 per
transaction). Set beside a signature's ~1.5 M instructions (bench/README.md), that is the
share of a signing workload the chain adds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.icount import collected

CHILD = r"""
import asyncio, sys
from pathlib import Path
from chainkeys import clock
from chainkeys.audit.chain import chain_round
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.bootstrap import open_services
from chainkeys.config import Settings

rows, link, data, sync = int(sys.argv[1]), sys.argv[2] == "1", Path(sys.argv[3]), sys.argv[4]

async def main() -> None:
    svc = await open_services(Settings(data_dir=data, master_key=sys.argv[5],
                                       sqlite_synchronous=sync))
    try:
        for i in range(rows):
            await Audit.record(svc.db, audit_event(None, "sign", "ok", family="dogecoin",
                                                   account_name=f"D{i:033d}"))
        linked = await chain_round(svc.db, svc.barrier.integrity) if link else 0
        if link and linked < rows:
            raise SystemExit(f"linked {linked} of {rows} rows")
    finally:
        await svc.close()

asyncio.run(main())
"""


def count(rows: int, link: bool, sync: str) -> int:
    key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="  # a fixed test key: same work each run
    with tempfile.TemporaryDirectory(prefix="chainkeys-chain-cost-") as tmp:
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        env = {k: v for k, v in env.items() if not k.startswith("CHAINKEYS_")}
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                sys.executable,
                "-c",
                CHILD,
                str(rows),
                "1" if link else "0",
                str(Path(tmp) / "data"),
                sync,
                key,
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=3600,
        )
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-3000:])
        return collected(done.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--sync", default="NORMAL", choices=("NORMAL", "FULL"))
    args = parser.parse_args()
    without, with_links = count(args.rows, False, args.sync), count(args.rows, True, args.sync)
    per_row = (with_links - without) / args.rows
    print(
        json.dumps(
            {
                "rows": args.rows,
                "sync": args.sync,
                "unlinked": without,
                "linked": with_links,
                "instructions_per_row": round(per_row),
            }
        )
    )


if __name__ == "__main__":
    main()
