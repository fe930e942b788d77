"""Start a mutant: the entry point of the tests' subprocess tier (the shipped commands know no mutants).

    python -m tests.mutants.launch host NAME [host-plugin arguments]     a v1, v2 or sketch mutant on stdio
    python -m tests.mutants.launch docker NAME [docker-plugin arguments] a Docker-plugin mutant on stdio
    python -m tests.mutants.launch rest NAME --port P --token-env ENV [--host H]   a REST-server mutant
    python -m tests.mutants.launch list                                  every mutant, with its kind

``-m`` needs the repository root on ``sys.path`` (the cwd or ``PYTHONPATH``). The suite's own tests
start the file instead — ``python /abs/path/tests/mutants/launch.py host NAME``, as
``tests.helpers.mutant_command`` builds it — which puts its repository root first on ``sys.path``, so
it works whatever the cwd and with the scrubbed environment a plugin gets (no ``PYTHONPATH``).

In-process, ``serve_host_mutant(argv, stdin, stdout, stderr, environ)`` and
``serve_docker_mutant(...)`` run a mutant on given streams, like
``conformance.reference.host_plugin.serve``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO, TextIO

REPO = Path(__file__).resolve().parents[2]

if __name__ == "__main__" and __spec__ is None:
    # Started as a file: its own folder (sys.path[0]) holds modules named like packages (docker, rest),
    # so the repository root replaces it; `tests` and this checkout's `conformance` then import.
    sys.path[0] = str(REPO)

PROG = "tests.mutants.launch"
USAGE = (f"usage: {PROG} host NAME [ARGS...] | docker NAME [ARGS...] | "
         f"rest NAME --port P --token-env ENV [--host H] | list\n")


def _lookup(kind: str, name: str, stderr: TextIO) -> type | None:
    """The registered mutant ``name`` of ``kind``, or None after saying why on ``stderr``."""
    from tests.mutants import REGISTRY

    cls = REGISTRY.get(name)
    if cls is None or _kind(cls) != kind:
        stderr.write(f"{PROG}: unknown {kind} mutant {name!r} (`{PROG} list` names them)\n")
        stderr.flush()
        return None
    return cls


def _kind(cls: type) -> str:
    from conformance.reference.docker_plugin import DockerPlugin
    from conformance.reference.rest_server import ForkdApp

    if issubclass(cls, DockerPlugin):
        return "docker"
    if issubclass(cls, ForkdApp):
        return "rest"
    return "host"


def serve_host_mutant(argv: list[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO,
                      environ: Mapping[str, str], exit_now: Any = None) -> int:
    """Serve the host-plugin mutant ``argv[0]`` (v1, v2 or sketch) on the given streams; its exit code.

    ``argv`` is ``[NAME, *plugin arguments]`` (the arguments of ``sandbox-conformance-host-plugin``;
    the mutant's class decides the dialect). ``stdin``/``stdout`` are binary, ``stderr`` is text,
    ``environ`` is the plugin's environment (copied; ``os.environ`` is neither read nor changed). An
    unknown name answers exit code 2. A crashing mutant calls its ``exit_now`` and does not return.
    """
    from conformance.reference import host_plugin

    if not argv:
        stderr.write(USAGE)
        return 2
    cls = _lookup("host", argv[0], stderr)
    if cls is None:
        return 2
    return host_plugin.serve(argv[1:], stdin, stdout, stderr, environ, plugin_class=cls, exit_now=exit_now)


def serve_docker_mutant(argv: list[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO,
                        environ: Mapping[str, str], exit_now: Any = None) -> int:
    """Serve the Docker-plugin mutant ``argv[0]``; ``argv[1:]`` are ``sandbox-conformance-docker-plugin``
    arguments. Streams and ``environ`` as for ``serve_host_mutant``."""
    from conformance.reference import docker_plugin

    if not argv:
        stderr.write(USAGE)
        return 2
    cls = _lookup("docker", argv[0], stderr)
    if cls is None:
        return 2
    return docker_plugin.serve(argv[1:], stdin, stdout, stderr, environ, plugin_class=cls, exit_now=exit_now)


def serve_rest_mutant(argv: list[str]) -> int:
    """Serve the REST-server mutant ``argv[0]`` in the foreground (this process's stdio and environment);
    ``argv[1:]`` are the REST server's ``--host``, ``--port`` and ``--token-env``."""
    from conformance.reference import rest_server

    if not argv:
        sys.stderr.write(USAGE)
        return 2
    cls = _lookup("rest", argv[0], sys.stderr)
    if cls is None:
        return 2
    args = rest_server.build_parser().parse_args(argv[1:])
    return rest_server.serve(args.host, args.port, args.token_env, app_class=cls)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    kind, rest = (argv[0], argv[1:]) if argv else ("", [])
    if kind == "host":
        return serve_host_mutant(rest, sys.stdin.buffer, sys.stdout.buffer, sys.stderr, os.environ)
    if kind == "docker":
        return serve_docker_mutant(rest, sys.stdin.buffer, sys.stdout.buffer, sys.stderr, os.environ)
    if kind == "rest":
        return serve_rest_mutant(rest)
    if kind == "list" and not rest:
        from tests.mutants import REGISTRY

        for name in sorted(REGISTRY):
            print(f"{_kind(REGISTRY[name])}\t{name}")
        return 0
    sys.stderr.write(USAGE)
    return 2


if __name__ == "__main__":
    sys.exit(main())
