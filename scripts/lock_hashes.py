"""Write requirements.lock (what `pip install .` needs) and requirements-dev.lock (the
test and dev extras' remainder), each pin with the sha256 of its artifact.

Usage (in a venv where chainkeys is installed with its extras):
    python scripts/lock_hashes.py PINS DOWNLOADS
PINS: `pip freeze` output; DOWNLOADS: a directory filled by
`pip download --no-deps -r PINS`. Each file is matched to its pin by its
normalised project name (PEP 503) and version.
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

HEADER = """\
# {what}, pinned with each artifact's sha256.
# Install: pip install --require-hashes -r {name}{extra}
# Regenerate both lock files: ./scripts/lock (fresh venv, install, freeze, download, hash).
"""


def runtime_closure() -> set[str]:
    """chainkeys' runtime dependencies, transitively (extras left out)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: set[tuple[str, frozenset[str]]] = set()
    todo: list[tuple[str, frozenset[str]]] = [("chainkeys", frozenset())]
    while todo:
        name, extras = todo.pop()
        for text in metadata.distribution(name).requires or []:
            req = Requirement(text)
            wanted = {"", *extras}
            if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in wanted):
                continue
            item = (norm(req.name), frozenset(req.extras))
            if item not in seen:
                seen.add(item)
                todo.append((req.name, item[1]))
    return {name for name, _ in seen}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main() -> None:
    pins_path, downloads = Path(sys.argv[1]), Path(sys.argv[2])
    pins = {}
    for line in pins_path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[norm(name)] = (name, version)
    hashes: dict[str, list[str]] = {}
    for file in sorted(downloads.iterdir()):
        stem = file.name.removesuffix(".tar.gz").removesuffix(".zip").removesuffix(".whl")
        parts = stem.split("-")
        key = norm(parts[0]) if file.name.endswith(".whl") else norm("-".join(parts[:-1]))
        version = parts[1] if file.name.endswith(".whl") else parts[-1]
        if key not in pins or pins[key][1] != version:
            raise SystemExit(f"{file.name}: no pin {key}=={version}")
        digest = hashlib.sha256(file.read_bytes()).hexdigest()
        hashes.setdefault(key, []).append(digest)
    missing = sorted(set(pins) - set(hashes))
    if missing:
        raise SystemExit(f"not downloaded: {', '.join(missing)}")
    runtime = runtime_closure()
    files = {
        "requirements.lock": ("What chainkeys needs to run", "", sorted(k for k in pins if k in runtime)),
        "requirements-dev.lock": ("What the tests and checks add", " -r requirements.lock",
                                  sorted(k for k in pins if k not in runtime)),
    }  # fmt: skip
    for file_name, (what, extra, keys) in files.items():
        out = [HEADER.format(what=what, name=file_name, extra=extra)]
        for key in keys:
            name, version = pins[key]
            lines = [f"{name}=={version}"] + [f"    --hash=sha256:{h}" for h in sorted(hashes[key])]
            out.append(" \\\n".join(lines) + "\n")
        Path(file_name).write_text("".join(out))
        print(f"{file_name}: {len(keys)} pins with hashes")


if __name__ == "__main__":
    main()
