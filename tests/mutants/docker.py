"""Broken variants (and a control) of the Docker-backed v1 plugin (conformance/reference/docker_plugin.py).

Catalogued with ``provider: docker`` in ``catalogue/docker.yaml``: the suite's own tests start them as
``python -m tests.mutants.launch docker NAME`` and skip them, visibly, where no Docker engine runs.
"""

from __future__ import annotations

import subprocess
import tempfile
from typing import Any

from conformance.reference.docker_backend import DockerBackend, DockerCli, DockerSandbox, cli_environment
from conformance.reference.docker_plugin import DockerPlugin
from conformance.reference.host_backend import HostSandbox, invalid_spec
from tests.mutants import mutant


@mutant("docker-resources-accepted-and-ignored")
class DockerResourcesAcceptedAndIgnored(DockerPlugin):
    """Accepts memory and CPU sizes and reports them in the sandbox's status, but starts the container
    without any limit — forkd's 512 MiB guest, the other way round."""

    def create_container(self, spec: dict[str, Any], plan: dict[str, Any]) -> DockerSandbox:
        sandbox = super().create_container(spec, {**plan, "memory_mb": None, "cpu_cores": None})
        sandbox.memory_mb, sandbox.cpu_cores = plan["memory_mb"], plan["cpu_cores"]
        return sandbox


class _SignalsAsExitCodes(DockerBackend):
    """Passes docker exec's exit code through, so 128+N is never read as "ended by signal N"."""

    def exit_status(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes]) -> tuple[int | None, int | None]:
        code = proc.returncode
        return (code, None) if code >= 0 else (None, -code)


@mutant("docker-signal-as-exit-code")
class DockerSignalAsExitCode(DockerPlugin):
    """Reports a command a signal ended as an exit code (143 for SIGTERM), as `docker exec` says it."""

    def make_backend(self) -> DockerBackend:
        return _SignalsAsExitCodes(environ=self.environ)


@mutant("docker-control-engine-unreachable")
class DockerControlEngineUnreachable(DockerPlugin):
    """Control: a Docker engine nobody listens for; health must still be a successful answer, saying so."""

    def make_backend(self) -> DockerBackend:
        cli = DockerCli(environment=cli_environment(self.environ))
        cli.environment["DOCKER_HOST"] = f"unix://{tempfile.gettempdir()}/sandbox-conformance-no-engine.sock"
        return DockerBackend(cli=cli, environ=self.environ)


@mutant("docker-network-block-ignored")
class DockerNetworkBlockIgnored(DockerPlugin):
    """Accepts a blocked network and reports it in the status, but starts the container on Docker's bridge."""

    def create_container(self, spec: dict[str, Any], plan: dict[str, Any]) -> DockerSandbox:
        sandbox = super().create_container(spec, {**plan, "network": None})
        sandbox.network = plan["network"]
        return sandbox


@mutant("docker-network-update-ignored")
class DockerNetworkUpdateIgnored(DockerPlugin):
    """Declares lifecycle.update_network and answers every change with {}, changing nothing."""

    def m_sandbox_update_network(self, params: dict[str, Any]) -> Any:
        self.backend.get(params["sandbox_id"])
        return None


@mutant("docker-network-declared-block-refused")
class DockerNetworkDeclaredBlockRefused(DockerPlugin):
    """Declares network.block_all, then refuses a blocked network as invalid_spec naming network."""

    def validate_spec(self, spec: dict[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        if spec.get("network") == "block":
            raise invalid_spec("network", "this provider keeps Docker's default network")
        return super().validate_spec(spec)


@mutant("docker-network-allow-all-unusable")
class DockerNetworkAllowAllUnusable(DockerPlugin):
    """Declares network.allow_all, and starts an allow-all sandbox with no network at all."""

    def create_container(self, spec: dict[str, Any], plan: dict[str, Any]) -> DockerSandbox:
        if plan["network"] != "allow_all":
            return super().create_container(spec, plan)
        sandbox = super().create_container(spec, {**plan, "network": "block"})
        sandbox.network = "allow_all"
        return sandbox


@mutant("docker-network-reported-as-default")
class DockerNetworkReportedAsDefault(DockerPlugin):
    """Honours every network policy, and its status reports each as provider_default: no contradiction for an
    allow-all sandbox whose network is open (the default may be just that), one for a blocked sandbox."""

    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        status = super().status(sandbox)
        if status.get("network") is not None:
            status["network"] = "provider_default"
        return status
