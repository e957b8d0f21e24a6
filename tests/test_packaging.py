"""What an operator installs with: the container image, compose file, systemd unit, metadata."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_dockerfile_is_multi_stage_non_root_with_a_volume_and_a_health_check() -> None:
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines()]
    instructions = [
        ln.split()[0] for ln in lines if ln and not ln.startswith("#") and ln.split()[0].isupper()
    ]
    assert instructions.count("FROM") == 2
    assert any(ln.startswith("COPY --from=builder") for ln in lines)
    assert "USER chainkeys" in lines and "USER root" not in lines
    assert any(ln.startswith("VOLUME") for ln in lines)
    assert any(ln.startswith("HEALTHCHECK") for ln in lines)
    assert any("/livez" in ln for ln in lines)  # a real endpoint of the service
    assert any("--require-hashes -r requirements.lock" in ln for ln in lines)  # hashed pins


def test_every_pin_has_a_hash_and_the_runtime_lock_covers_the_dependencies() -> None:
    pins: dict[str, list[str]] = {}
    for name in ("requirements.lock", "requirements-dev.lock"):
        current = ""
        for line in (ROOT / name).read_text().splitlines():
            if "==" in line:
                current = line.split("==")[0].lower().replace("_", "-")
                pins[current] = []
            elif "--hash=sha256:" in line:
                pins[current].append(line.split("sha256:")[1].rstrip(" \\"))
    assert pins and all(len(h) >= 1 and all(len(x) == 64 for x in h) for h in pins.values())
    runtime = {ln.split("==")[0].lower().replace("_", "-")
               for ln in (ROOT / "requirements.lock").read_text().splitlines() if "==" in ln}  # fmt: skip
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in declared:
        assert dep.split("==")[0].split("[")[0].lower() in runtime, dep


def test_compose_runs_chainkeys_with_postgres_and_redis() -> None:
    doc = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = doc["services"]
    assert set(services) == {"chainkeys", "postgres", "redis"}
    env = services["chainkeys"]["environment"]
    assert env["CHAINKEYS_DATABASE_URL"].startswith("postgresql://")
    assert env["CHAINKEYS_REDIS_URL"].startswith("redis://")
    assert env["CHAINKEYS_MASTER_KEY_FILE"].startswith("/run/secrets/")
    assert all("healthcheck" in services[s] for s in ("postgres", "redis"))


def test_systemd_unit_is_sandboxed_and_verifies(tmp_path: Path) -> None:
    unit = (ROOT / "deploy/chainkeys.service").read_text()
    for setting in ("ProtectSystem=strict", "NoNewPrivileges=true", "PrivateTmp=true",
                    "ProtectHome=true", "CapabilityBoundingSet="):  # fmt: skip
        assert setting in unit
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    # the unit as installed, pointing at this checkout's chainkeys command
    local = tmp_path / "chainkeys.service"
    local.write_text(
        unit.replace("/opt/chainkeys/bin/chainkeys", str(ROOT / ".venv/bin/chainkeys"))
    )
    done = subprocess.run(["systemd-analyze", "verify", str(local)], capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_project_metadata_is_complete() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and (ROOT / "LICENSE").is_file()
    assert project["authors"] and project["urls"]["Source"]
    assert (ROOT / "CHANGELOG.md").read_text().startswith("# Changelog")
