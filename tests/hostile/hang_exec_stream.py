"""A v1 plugin whose exec/stream is never answered (every other request is): a provider that lost track of a
streamed command. Run as a process: ``python tests/hostile/hang_exec_stream.py``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Started as a file: the repository root replaces this folder on sys.path, so this checkout's
    # `conformance` imports whatever the cwd and with the scrubbed environment a plugin gets.
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from conformance.reference import host_plugin
from tests.mutants.cleanup import _Hangs


class HangsExecStream(_Hangs):
    """Answers everything but exec/stream (the hang of the cleanup mutants, on one method)."""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        self.hang(f"exec/stream {params.get('exec_id')!r}")


if __name__ == "__main__":
    sys.exit(host_plugin.serve(sys.argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr, os.environ,
                               plugin_class=HangsExecStream))
