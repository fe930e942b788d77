"""Fixtures for the suite's own tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import SuiteRun, run_cli

# Set by .ci/run: where the Docker paths must be exercised, a missing engine fails instead of skipping.
REQUIRE_DOCKER = "SANDBOX_CONFORMANCE_REQUIRE_DOCKER"
DOCKER_VERSION_TIMEOUT_S = 20.0


@pytest.fixture(autouse=True)
def _secrets_of_this_test_only() -> Iterator[None]:
    """Each test forgets the secrets it registered (every value handed to a provider is one): a worker runs
    thousands of runs, and every secret kept adds its forms to the search through every later text."""
    from conformance.transcript import REDACTOR

    before = REDACTOR.known()
    yield
    REDACTOR.keep_only(before)


@pytest.fixture(autouse=True)
def _no_job_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where these tests run in a GitHub Actions step, the hundreds of runs they make must not append
    their summaries to the job's page; a test that checks the append sets its own file."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def suite(tmp_path: Path):
    """Run ``sandbox-conformance run`` with the given arguments, reports in a private directory."""

    def run(*args: str, timeout: float = 300) -> SuiteRun:
        return run_cli("run", *args, report_dir=tmp_path / "reports", timeout=timeout)

    return run


def _without_docker(why: str) -> None:
    """Skip, visibly — or fail, where the environment requires Docker."""
    if os.environ.get(REQUIRE_DOCKER) == "1":
        pytest.fail(f"no Docker engine: {why} ({REQUIRE_DOCKER}=1 requires one)", pytrace=False)
    pytest.skip(f"no Docker engine: {why}")


@pytest.fixture(scope="session")
def docker_engine() -> str:
    """The version of the Docker engine that answers ``docker version``; skips (or fails) without one."""
    docker = shutil.which("docker")
    if docker is None:
        _without_docker("the docker CLI is not on PATH")
    try:
        completed = subprocess.run([docker, "version", "--format", "{{.Server.Version}}"], check=False,
                                   capture_output=True, text=True, timeout=DOCKER_VERSION_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _without_docker(f"docker version did not answer within {DOCKER_VERSION_TIMEOUT_S:.0f} s")
    version = completed.stdout.strip()
    if completed.returncode != 0 or not version:
        said = [line for line in completed.stderr.splitlines() if line.strip()]
        _without_docker(said[0] if said else f"docker version exited with {completed.returncode}")
    return version


def _image(build) -> str:
    from conformance.reference.images import ImageError

    try:
        return build()
    except ImageError as error:
        _without_docker(f"the local images cannot be built: {error}")
        raise  # not reached: _without_docker skips or fails


@pytest.fixture(scope="session")
def docker_sandbox_image(docker_engine: str) -> str:
    """The tag of the local image Docker-backed sandboxes run, built (base included) when missing."""
    from conformance.reference.images import ensure_sandbox_image

    return _image(ensure_sandbox_image)


@pytest.fixture(scope="session")
def rest_server_image(docker_engine: str) -> str:
    """The tag of the local image of the reference REST server, rebuilt when its source changed."""
    from conformance.reference.images import ensure_rest_server_image

    return _image(ensure_rest_server_image)


@pytest.fixture(scope="session")
def suite_image(docker_engine: str) -> str:
    """The tag of the local image of the suite itself, rebuilt when its source or dependencies changed."""
    from conformance.reference.images import ensure_suite_image

    return _image(ensure_suite_image)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that needs the Docker engine carries the ``docker`` marker (``-m 'not docker'``); the
    whole-suite runs (``slow``) go first: under xdist's load scheduling a long test collected last would
    start last and set the wall time alone (CI's budget is 15 minutes on two cores)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        entry = callspec.params.get("entry") if callspec is not None else None
        docker_entry = isinstance(entry, dict) and entry.get("provider") == "docker"  # a catalogued Docker mutant
        if docker_entry or "docker_engine" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.docker)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
