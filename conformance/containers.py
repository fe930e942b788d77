"""``--image``: a REST provider packaged as a container image, started for one run and always removed.

The container gets a fresh random token in the environment variable the profile names (the suite reads
it from there too, and the redactor knows it), a label ``sandbox-conformance.run=<run id>``, and its
profile's port published on a free host port. The run waits for the profile's health endpoint, with a
deadline. Whatever happens — a failure, Ctrl-C, SIGTERM — the container is stopped and removed, and
anything else carrying the run's label is removed as well. The testcontainers reaper (Ryuk) is never
started: it needs an image from a registry, and cleanup by label does its job here.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

# Before testcontainers is imported: its configuration reads the environment once, at import.
os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"

import httpx  # after the Ryuk switch above, like every import below it

from conformance import interrupts
from conformance.dialects.rest import Profile
from conformance.errors import ProviderStartError, UsageError
from conformance.options import IMAGE_EXTRA_HINT
from conformance.transcript import REDACTOR

RUN_LABEL = "sandbox-conformance.run"
HEALTH_POLL_S = 0.25
STOP_TIMEOUT_S = 10


@dataclass(frozen=True)
class RunningProvider:
    """A started container: where the suite reaches it, and what it is."""

    url: str
    container_id: str
    image: str


def require_image_extra() -> None:
    """testcontainers and the docker client are the ``image`` extra, installed only for ``--image``: without
    them, a UsageError saying how to install them (before anything is started)."""
    try:
        import docker.errors  # noqa: F401
        import testcontainers.core.container  # noqa: F401
    except ImportError:
        raise UsageError(IMAGE_EXTRA_HINT) from None


@contextmanager
def running(image: str, profile: Profile, run_id: str,
            environ: dict[str, str] | os._Environ[str] | None = None) -> Iterator[RunningProvider]:
    """Start ``image`` as the REST provider ``profile`` describes; yield it healthy; always remove it.

    The token is put in ``environ`` (default: this process's environment, which pytest workers inherit)
    under the profile's variable, so the suite authenticates with it.
    """
    environ = os.environ if environ is None else environ
    require_image_extra()
    port = profile.port()
    if port is None:
        raise UsageError(f"{profile.source} names no port for --image: give base_url or container.port")
    container = _container(image)
    token = None
    if profile.auth_scheme != "none":
        token = secrets.token_urlsafe(32)
        REDACTOR.add(token)
        container.with_env(str(profile.token_env), token)
    container.with_exposed_ports(port)
    container.with_kwargs(labels={RUN_LABEL: run_id})
    previous_token = environ.get(str(profile.token_env)) if token is not None else None
    # SIGTERM ends the run like Ctrl-C, so the ``finally`` that removes the container runs.
    with interrupts.trapped():
        try:
            _start(container, image)
            url = f"http://{_host(container)}:{container.get_exposed_port(port)}"
            _wait_healthy(container, url, profile)
            if token is not None:
                environ[str(profile.token_env)] = token
            yield RunningProvider(url, container.get_container_id(), image)
        finally:
            if token is not None:
                if previous_token is None:
                    environ.pop(str(profile.token_env), None)
                else:
                    environ[str(profile.token_env)] = previous_token
            _remove(container, run_id)


def _container(image: str) -> Any:
    from docker.errors import DockerException
    from testcontainers.core.container import DockerContainer

    try:
        return DockerContainer(image)
    except DockerException as exc:
        raise ProviderStartError(f"--image {image}: no Docker engine answers: {_one_line(exc)}") from None


def _start(container: Any, image: str) -> None:
    from docker.errors import DockerException, ImageNotFound, NotFound

    try:
        container.start()
    except (ImageNotFound, NotFound) as exc:
        raise ProviderStartError(f"--image {image}: the image is not available locally and could not be pulled: "
                                 f"{_one_line(exc)}") from None
    except DockerException as exc:
        raise ProviderStartError(f"--image {image}: the container could not be started: {_one_line(exc)}") from None


def _host(container: Any) -> str:
    host = container.get_container_host_ip()
    return "127.0.0.1" if host in ("localhost", "0.0.0.0", "") else host


def _wait_healthy(container: Any, url: str, profile: Profile) -> None:
    """Poll the health endpoint until it answers an expected status; fail with the container's last words."""
    health = profile.health
    deadline = time.monotonic() + profile.startup_timeout_s
    last = "no answer yet"
    with httpx.Client(timeout=httpx.Timeout(5.0)) as client:
        while True:
            container.reload()
            status = container.status
            if status in ("exited", "dead"):
                raise ProviderStartError(f"--image {container.image}: the container {status} before its health "
                                         f"endpoint answered{_last_log_line(container)}")
            try:
                answer = client.request(health.method, url + health.path)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            else:
                if answer.status_code in health.success:
                    return
                last = f"HTTP {answer.status_code}"
            if time.monotonic() >= deadline:
                raise ProviderStartError(
                    f"--image {container.image}: {health.method} {health.path} did not answer "
                    f"{' or '.join(map(str, health.success))} within {profile.startup_timeout_s:g} s "
                    f"(last: {last}){_last_log_line(container)}")
            time.sleep(HEALTH_POLL_S)


def _last_log_line(container: Any) -> str:
    try:
        stdout, stderr = container.get_logs()
    except Exception:  # noqa: BLE001 - the logs only decorate an error already being reported
        return ""
    lines = [line for line in (stderr + stdout).decode("utf-8", errors="replace").splitlines() if line.strip()]
    return f"; its last log line: {REDACTOR.text(lines[-1].strip())}" if lines else ""


def _remove(container: Any, run_id: str) -> None:
    """Stop and remove the container, then anything else left with the run's label. Never raises:
    it runs in a ``finally`` and must not mask the error that got there."""
    from docker.errors import DockerException

    try:
        wrapped = container._container
        if wrapped is not None:
            try:
                wrapped.stop(timeout=STOP_TIMEOUT_S)
            except DockerException:
                pass  # already stopped, or gone: the removal below settles it
        container.stop(force=True, delete_volume=True)
    except DockerException:
        pass
    remove_labelled(run_id)


def remove_labelled(run_id: str) -> list[str]:
    """Remove every container labelled with ``run_id`` (the sweep Ryuk would otherwise do); their ids."""
    try:
        import docker
        from docker.errors import DockerException
    except ImportError:  # no image extra: no container of ours can exist
        return []
    removed: list[str] = []
    try:
        client = docker.from_env()
    except DockerException:
        return removed
    try:
        # sparse: no inspect per container, which a container removed meanwhile would answer 404
        for leftover in client.containers.list(all=True, sparse=True, filters={"label": f"{RUN_LABEL}={run_id}"}):
            try:
                leftover.remove(force=True, v=True)
                removed.append(leftover.id)
            except DockerException:
                pass
    except DockerException:
        pass
    finally:
        client.close()
    return removed


def labelled(run_id: str) -> list[str]:
    """The ids of containers (running or not) that carry the run's label."""
    import docker

    client = docker.from_env()
    try:
        # sparse: listing only; inspecting each would fail on one that is being removed at this moment
        return [c.id for c in client.containers.list(all=True, sparse=True,
                                                     filters={"label": f"{RUN_LABEL}={run_id}"})]
    finally:
        client.close()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] + ("…" if len(text) > 300 else "")
