"""The Docker-backed reference sandbox-driver v1 plugin: every sandbox is a container (isolation
``container``) whose memory and CPU sizes are the container's cgroup limits — GAP 2's positive path —
and whose network is Docker's default bridge (``allow_all``) or none at all (``block``), at create or
later (``sandbox/update_network``) — GAP 4's. Allow-lists are refused: Docker cannot filter by address.

Run it as ``sandbox-conformance-docker-plugin`` (or ``python -m conformance.reference.docker_plugin``)
and create sandboxes from a local image:

    sandbox-conformance run --plugin sandbox-conformance-docker-plugin \\
        --create-spec '{"source": {"image": {"reference": "sandbox-conformance/sandbox:bookworm"}}}'

``python -m conformance.reference.images sandbox`` builds that image; any local image with
``/bin/sh``, ``/bin/bash`` and ``sleep`` works. Nothing is ever pulled. ``source: host_directory`` is
refused: these sandboxes are containers, not directories of the host.

``--sweep`` removes every container this plugin manages (``--run-label`` narrows it to one run),
for the cleanup after a crash: containers outlive the plugin process that made them.
``serve(argv, stdin, stdout, stderr, environ)`` runs the plugin inside another process instead.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, NoReturn, TextIO

from conformance import __version__
from conformance.reference.docker_backend import (
    WORKSPACE,
    DockerBackend,
    DockerCli,
    DockerSandbox,
    cli_environment,
    default_state_root,
    sweep,
)
from conformance.reference.host_backend import BackendError, HostSandbox, invalid_spec
from conformance.reference.host_plugin import BASE_CAPABILITIES, PROTOCOL_VERSION, HostPlugin
from conformance.reference.images import SANDBOX_TAG
from conformance.reference.stdio_server import ArgumentsEnd, parse_arguments


def docker_capabilities() -> dict[str, Any]:
    """What a container sandbox honestly offers through the docker CLI."""
    capabilities = copy.deepcopy(BASE_CAPABILITIES)
    capabilities["isolation"] = "container"
    capabilities["lifecycle"].update(archive=False, undelete=False, snapshot_sandbox=False, update_network=True)
    capabilities["network"].update(allow_all=True, block_all=True)
    capabilities["exec"].update(stdio_process=False)
    capabilities["pty"] = None
    capabilities["logs"] = None
    capabilities["snapshots"] = None
    return capabilities


# Creation-spec fields this provider cannot honour, with the value that means "not asked for".
UNHONOURED_SPEC_FIELDS: dict[str, Any] = {
    "user": None, "region": None, "public": None, "provider_config": None,
    "ephemeral": False, "volumes": [], "workspace_ownership": None,
}


class DockerPlugin(HostPlugin):
    """sandbox-driver v1 over Docker containers; fs, events, exec accounting and the wire are the host plugin's.

    Seams: those of ``HostPlugin``; ``make_backend()`` builds the ``DockerBackend`` (reading
    ``self.environ``), ``create_container(spec, plan)`` starts the container a create asked for.
    """

    provider_kind = "docker"
    log_prefix = "docker-plugin"
    backend: DockerBackend

    def __init__(self, backend: DockerBackend | None = None, **kwargs: Any) -> None:
        super().__init__(backend=backend, **kwargs)

    def make_backend(self) -> DockerBackend:
        """A ``DockerBackend`` that reads the server's ``environ`` (state directory, docker CLI variables)."""
        return DockerBackend(environ=self.environ)

    def declared_capabilities(self) -> dict[str, Any]:
        return docker_capabilities()

    def on_start(self) -> None:
        self.log(f"{__version__} serving sandbox-driver protocol {PROTOCOL_VERSION}; sandboxes are Docker "
                 f"containers, records in {self.backend.root}")

    def m_provider_health(self, params: dict[str, Any]) -> Any:
        # An engine that does not answer is a successful answer saying so, never an error.
        return {"health": self.backend.health()}

    # -- creation specs --------------------------------------------------------------------------

    def validate_spec(self, spec: dict[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        """What to create, or invalid_spec naming the first field this provider cannot honour."""
        source = spec.get("source")
        if not (isinstance(source, dict) and set(source) == {"image"}):
            raise invalid_spec("source", "sandboxes of this provider are containers from a local image: "
                                         f'ask for {{"image": {{"reference": "{SANDBOX_TAG}"}}}}')
        reference = source["image"].get("reference")
        if not isinstance(reference, str) or not reference.strip():
            raise invalid_spec("source.image.reference", "an image reference is required")
        resources = spec.get("resources") or {}
        for key in ("disk_mb", "gpus"):
            if resources.get(key) is not None:
                raise invalid_spec(f"resources.{key}", "this provider sizes memory and CPUs only")
        memory_mb, cpu_cores = resources.get("memory_mb"), resources.get("cpu_cores")
        if memory_mb is not None and memory_mb < 6:
            raise invalid_spec("resources.memory_mb", "Docker needs at least 6 MiB")
        if cpu_cores is not None and cpu_cores < 1:
            raise invalid_spec("resources.cpu_cores", "at least one core")
        if spec.get("sandbox_kind") not in (None, "container"):
            raise invalid_spec("sandbox_kind", "sandboxes of this provider are containers")
        for key, unset in UNHONOURED_SPEC_FIELDS.items():
            if key in spec and spec[key] != unset:
                raise invalid_spec(key, "not supported by the Docker provider")
        network = network_policy(spec.get("network"))
        timers = spec.get("timers") or {}
        if any(value is not None for value in timers.values()):
            raise invalid_spec("timers", "the Docker provider has no lifecycle timers")
        if spec.get("working_directory") is not None:
            raise invalid_spec("working_directory", f"the working directory is always {WORKSPACE}")
        return {"image": reference, "memory_mb": memory_mb, "cpu_cores": cpu_cores, "network": network}

    def create_container(self, spec: dict[str, Any], plan: dict[str, Any]) -> DockerSandbox:
        return self.backend.create(spec.get("name"), spec.get("labels") or {}, spec.get("env") or {}, **plan)

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        return self.handle_info(self.create_container(spec, self.validate_spec(spec)))

    def m_sandbox_update_network(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        policy = network_policy(params.get("network"))
        assert isinstance(sandbox, DockerSandbox)
        self.backend.set_network(sandbox, policy or "allow_all")  # the default is the bridge
        return None

    # -- what a sandbox looks like ---------------------------------------------------------------

    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        status = super().status(sandbox)
        if isinstance(sandbox, DockerSandbox):
            sized = sandbox.memory_mb is not None or sandbox.cpu_cores is not None
            status.update(
                sandbox_kind="container", image=sandbox.image or None, network=sandbox.network,
                resources={"cpu_cores": sandbox.cpu_cores, "memory_mb": sandbox.memory_mb, "disk_mb": None,
                           "gpus": None} if sized else None,
            )
        return status

    def handle_info(self, sandbox: HostSandbox) -> dict[str, Any]:
        # the host backend's runtime directory is on the host, out of the container's reach: none is reported
        return {**super().handle_info(sandbox), "working_directory": WORKSPACE, "runtime_directory": None}


def network_policy(asked: Any) -> str | None:
    """The network a policy asks for: "allow_all" (Docker's default bridge), "block" (no network), or None
    for the provider's default (the bridge too); invalid_spec naming network for anything else."""
    if asked in (None, "provider_default"):
        return None
    if asked in ("allow_all", "block"):
        return str(asked)
    raise invalid_spec("network", "the Docker provider offers Docker's default bridge (allow_all) or no network "
                                  "(block); it cannot allow some addresses or names only")


def create_spec(image: str = SANDBOX_TAG) -> dict[str, Any]:
    """The creation spec a suite run against this plugin passes with --create-spec."""
    return {"source": {"image": {"reference": image}}}


def suite_arguments(*plugin_args: str, image: str = SANDBOX_TAG) -> list[str]:
    """``sandbox-conformance run`` arguments that test this plugin (run by this Python) on ``image``."""
    command = shlex.join([sys.executable, "-m", "conformance.reference.docker_plugin", *plugin_args])
    return ["--plugin", command, "--create-spec", json.dumps(create_spec(image), separators=(",", ":"))]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sandbox-conformance-docker-plugin", description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true",
                        help="remove every container this plugin manages, print their ids, and exit")
    parser.add_argument("--run-label", metavar="VALUE",
                        help="with --sweep: only the containers labelled sandbox-conformance.run=VALUE")
    return parser


def serve(argv: list[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO, environ: Mapping[str, str],
          *, plugin_class: type[DockerPlugin] | None = None,
          exit_now: Callable[[int], NoReturn] | None = None) -> int:
    """Run the plugin (or ``--sweep``) on the given streams; the exit code it would exit with.

    ``argv`` is the command line without the program name; ``stdin``/``stdout`` are binary, ``stderr``
    is text; ``environ`` is the plugin's environment (copied; ``os.environ`` is never read or changed).
    ``plugin_class`` (default ``DockerPlugin``) is the class served.
    """
    try:
        args = parse_arguments(build_parser(), argv, stdout, stderr)
    except ArgumentsEnd as end:
        return end.status
    if args.sweep:
        try:
            removed = sweep(args.run_label, cli=DockerCli(environment=cli_environment(environ)),
                            state_root=default_state_root(environ))
        except BackendError as error:
            stderr.write(f"sandbox-conformance-docker-plugin: {error.message}\n")
            return 2
        stdout.write("".join(f"{sandbox_id}\n" for sandbox_id in removed).encode("utf-8"))
        stdout.flush()
        return 0
    chosen = plugin_class or DockerPlugin
    return chosen(stdin=stdin, stdout=stdout, stderr=stderr, environ=environ, exit_now=exit_now).serve()


def main(argv: list[str] | None = None) -> int:
    return serve(sys.argv[1:] if argv is None else argv, sys.stdin.buffer, sys.stdout.buffer, sys.stderr,
                 os.environ)


if __name__ == "__main__":
    sys.exit(main())
