"""Serve one red-team mutant as a sandbox-driver v1 plugin.

``python -m tests.redteam.serve NAME [--dialect ...]`` speaks the protocol on the real stdio;
``python -m tests.redteam.serve --list`` prints the mutant names, one a line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import BinaryIO, NoReturn, TextIO

from conformance.reference import host_plugin
from tests.redteam import REGISTRY, load


def serve(argv: list[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO, environ: Mapping[str, str],
          exit_now: Callable[[int], NoReturn] | None = None) -> int:
    """Serve the mutant named ``argv[0]`` (the rest of ``argv`` goes to the plugin's own parser)."""
    load()
    if not argv or argv[0] not in REGISTRY:
        stderr.write(f"usage: serve NAME [plugin options]; NAME is one of: {', '.join(sorted(REGISTRY))}\n")
        stderr.flush()
        return 2
    return host_plugin.serve(list(argv[1:]), stdin, stdout, stderr, environ,
                             plugin_class=REGISTRY[argv[0]].cls, exit_now=exit_now)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--list"]:
        for name in sorted(load()):
            print(name)
        return 0
    return serve(args, sys.stdin.buffer, sys.stdout.buffer, sys.stderr, os.environ)


if __name__ == "__main__":
    sys.exit(main())
