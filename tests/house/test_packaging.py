"""What an operator installs with: the container image, compose file, systemd unit, metadata."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[2]


def test_dockerfile_is_multi_stage_non_root_with_a_volume_and_a_health_check() -> None:
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines()]
    instructions = [
        ln.split()[0] for ln in lines if ln and not ln.startswith("#") and ln.split()[0].isupper()
    ]
    assert instructions.count("FROM") == 2
    assert any(ln.startswith("COPY --from=builder") for ln in lines)
    assert "USER root" not in lines  # the entrypoint drops to `chainkeys` (tested below)
    assert any(ln.startswith('ENTRYPOINT ["chainkeys-entrypoint"') for ln in lines)
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
    runtime = {
        ln.split("==")[0].lower().replace("_", "-")
        for ln in (ROOT / "requirements.lock").read_text().splitlines()
        if "==" in ln
    }
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in declared:
        assert dep.split("==")[0].split("[")[0].lower() in runtime, dep


def test_every_library_the_service_imports_is_a_declared_dependency() -> None:
    """What `pip install chainkeys` (or the runtime lock) gives is what src/ imports: a
    library imported by the service but pinned only for the tests (httpx, once) would
    make an installed server fail at start."""
    import ast
    import importlib.metadata

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {d.split("==")[0].split("[")[0].lower().replace("_", "-") for d in declared}
    owners = importlib.metadata.packages_distributions()
    missing = set()
    for path in (ROOT / "src" / "chainkeys").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top == "chainkeys" or top in sys.stdlib_module_names:
                    continue
                dists = {d.lower().replace("_", "-") for d in owners.get(top, [top])}
                if not dists & names:
                    missing.add(f"{top} ({path.relative_to(ROOT)})")
    assert not missing, sorted(missing)


def test_compose_runs_chainkeys_with_postgres_and_redis() -> None:
    doc = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = doc["services"]
    assert set(services) == {"chainkeys", "postgres", "redis"}
    env = services["chainkeys"]["environment"]
    assert env["CHAINKEYS_DATABASE_URL"].startswith("postgresql://")
    assert env["CHAINKEYS_REDIS_URL"].startswith("redis://")
    assert env["CHAINKEYS_MASTER_KEY_SECRET"].startswith("/run/secrets/")
    assert all("healthcheck" in services[s] for s in ("postgres", "redis"))


def test_systemd_unit_is_sandboxed_and_verifies(tmp_path: Path) -> None:
    unit = (ROOT / "deploy/chainkeys.service").read_text()
    for setting in (
        "ProtectSystem=strict",
        "NoNewPrivileges=true",
        "PrivateTmp=true",
        "ProtectHome=true",
        "CapabilityBoundingSet=",
    ):
        assert setting in unit
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    # the unit as installed, pointing at this checkout's chainkeys command
    local = tmp_path / "chainkeys.service"
    local.write_text(
        unit.replace("/opt/chainkeys/bin/chainkeys", str(ROOT / ".venv/bin/chainkeys"))
    )
    done = subprocess.run(
        ["systemd-analyze", "verify", str(local)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_project_metadata_is_complete() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and (ROOT / "LICENSE").is_file()
    assert project["authors"] and project["urls"]["Source"]
    assert (ROOT / "CHANGELOG.md").read_text().startswith("# Changelog")


ENTRYPOINT = ROOT / "deploy" / "docker-entrypoint.sh"
as_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="runs the entrypoint as root, as the image does (CI is root)"
)


@as_root
def test_the_entrypoint_hands_a_private_secret_to_an_unprivileged_process(tmp_path: Path) -> None:
    """Compose mounts the secret with the host's owner and mode (here root, 0600): the
    service user could not read it; through the entrypoint it gets the key, runs as
    that user, and the secret's path is not passed on."""
    secret = tmp_path / "secret"
    secret.write_text("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n")
    secret.chmod(0o600)
    probe = (
        "import os; print(os.getuid(), os.environ['CHAINKEYS_MASTER_KEY'][:6], "
        "'CHAINKEYS_MASTER_KEY_SECRET' in os.environ, open('/proc/self/status').read()"
        ".split('CapEff:')[1].split()[0])"
    )
    env = {
        "PATH": os.environ["PATH"],
        "CHAINKEYS_MASTER_KEY_SECRET": str(secret),
        "CHAINKEYS_RUN_AS": "nobody",
    }
    done = subprocess.run(
        [str(ENTRYPOINT), sys.executable, "-c", probe],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["65534", "MDEyMz", "False", "0000000000000000"]
    missing = subprocess.run(
        [str(ENTRYPOINT), "true"],
        env={**env, "CHAINKEYS_MASTER_KEY_SECRET": str(tmp_path / "none")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 2 and "is not there" in missing.stderr


@as_root
def test_rotating_a_read_only_key_file_is_one_clear_line(tmp_path: Path) -> None:
    """A key file on a read-only mount (a Kubernetes secret): rotation cannot write the
    next key beside it and says so, and what to do; nothing is changed."""
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed to mount a directory read-only")
    keys = tmp_path / "keys"
    env = {
        **os.environ,
        "CHAINKEYS_DATA_DIR": str(tmp_path / "data"),
        "CHAINKEYS_MASTER_KEY_FILE": str(keys / "master.key"),
    }
    env.pop("CHAINKEYS_MASTER_KEY", None)
    assert (
        subprocess.run(
            [sys.executable, "-m", "chainkeys.cli", "init"],
            env=env,
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    before = sorted(p.name for p in keys.iterdir())
    script = (
        f"mount --bind -o ro {keys} {keys} && "
        f"exec {sys.executable} -m chainkeys.cli key rotate --wait 0"
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "read-only" in line and "CHAINKEYS_MASTER_KEY" in line, line
    assert sorted(p.name for p in keys.iterdir()) == before
