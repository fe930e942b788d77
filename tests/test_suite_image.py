"""The suite's own image (sandbox-conformance/suite) checks the reference REST image from another container,
as a CI job with Docker but no Python would: ``docker run --network host … sandbox-conformance run --rest``.

Needs a Docker engine (the ``docker_engine`` fixture skips visibly without one, or fails under
SANDBOX_CONFORMANCE_REQUIRE_DOCKER=1); the images are built locally by conformance.reference.images.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conformance.reference.images import REST_SERVER_PORT

STARTUP_TIMEOUT_S = 30.0
RUN_TIMEOUT_S = 120.0
SCENARIOS = ("delete-unknown", "delete-twice", "exec-separate-streams")


def _docker(*args: str, env: dict[str, str] | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([shutil.which("docker") or "docker", *args], check=False, capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture
def token() -> str:
    return f"tok-{secrets.token_hex(12)}"


@pytest.fixture
def rest_server(rest_server_image: str, token: str) -> Iterator[str]:
    """The reference REST image on a free loopback port of this host; yields its base URL."""
    name = f"sandbox-conformance-suite-image-test-{uuid.uuid4().hex[:8]}"
    # The token travels by environment (-e NAME without a value), never on a command line.
    started = _docker("run", "-d", "--rm", "--name", name, "-e", "FORKD_TOKEN", "-p", f"127.0.0.1::{REST_SERVER_PORT}",
                      rest_server_image, env={**os.environ, "FORKD_TOKEN": token})
    assert started.returncode == 0, started.stderr
    try:
        port = _docker("port", name, str(REST_SERVER_PORT)).stdout.split(":")[-1].strip()
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"the reference REST image did not answer within {STARTUP_TIMEOUT_S} s"
            time.sleep(0.2)
        yield url
    finally:
        _docker("rm", "-f", name)


def test_the_suite_image_checks_the_reference_rest_image(suite_image: str, rest_server: str, token: str,
                                                         tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    selection = [arg for scenario in SCENARIOS for arg in ("--scenario", scenario)]
    run = _docker("run", "--rm", "--network", "host", "--user", f"{os.getuid()}:{os.getgid()}",
                  "-e", "FORKD_TOKEN", "-v", f"{reports}:/reports", suite_image,
                  "sandbox-conformance", "run", "--rest", rest_server, *selection, "--report-dir", "/reports",
                  env={**os.environ, "FORKD_TOKEN": token}, timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = json.loads((reports / "results.json").read_text())
    assert results["provider"]["dialect"] == "rest"
    assert {s["id"]: s["outcome"] for s in results["scenarios"] if s["outcome"] != "disabled"} == dict.fromkeys(
        SCENARIOS, "passed")
    assert results["verdict"]["passed"] is True
    # Written as the invoking user, so the job can read, upload and delete it.
    for path in reports.iterdir():
        assert path.stat().st_uid == os.getuid(), f"{path.name} is owned by uid {path.stat().st_uid}"
    assert token not in "".join(p.read_text() for p in reports.iterdir() if p.is_file()) + run.stdout + run.stderr


def test_the_suite_image_says_in_one_line_when_the_provider_refuses_its_token(suite_image: str, rest_server: str,
                                                                             tmp_path: Path) -> None:
    """Control: the green run above is the provider's doing — the same image stops at a provider it cannot use."""
    wrong = f"wrong-{secrets.token_hex(8)}"
    run = _docker("run", "--rm", "--network", "host", "--user", f"{os.getuid()}:{os.getgid()}",
                  "-e", "FORKD_TOKEN", "-v", f"{tmp_path}:/reports", suite_image,
                  "sandbox-conformance", "run", "--rest", rest_server, "--scenario", "delete-unknown",
                  "--report-dir", "/reports", env={**os.environ, "FORKD_TOKEN": wrong}, timeout=RUN_TIMEOUT_S)
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    (line,) = run.stderr.strip().splitlines()
    assert "refused the token from $FORKD_TOKEN" in line
    assert wrong not in run.stdout + run.stderr


def test_the_suite_image_gets_exactly_the_declared_runtime_dependencies() -> None:
    """No Docker needed: what pip installs into the image is pyproject's [project] dependencies, no dev extras
    (stale installed metadata — pyproject changed without `make setup` — would show here)."""
    import tomllib

    from conformance.reference.images import suite_requirements

    declared = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
    def normalized(requirements: list[str]) -> set[str]:
        # metadata may spell a name in another case, and order a requirement's bounds otherwise (<10,>=8.1)
        from packaging.requirements import Requirement

        return {f"{parsed.name.lower()}{parsed.specifier}" for parsed in map(Requirement, requirements)}

    assert normalized(suite_requirements()) == normalized(declared["dependencies"])
    assert not {r for r in suite_requirements() if r.startswith(("ruff", "build", "check-jsonschema"))}
