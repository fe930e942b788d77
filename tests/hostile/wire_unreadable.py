"""A v1 plugin whose exec/run answers are well-formed JSON the suite cannot read: the exit code an integer of
5000 digits (``long-int``), or nested 3000 arrays deep (``deep``, a 6 KB line). Everything else is the
reference plugin's, so the sandbox it made is still deleted through it.

    python tests/hostile/wire_unreadable.py deep|long-int [reference plugin arguments]
    in process: ProviderConfig(in_process=("tests.hostile.wire_unreadable:serve", "deep"))
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # started as a file: the repository root first, as tests/mutants/launch.py does
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from conformance.reference import host_plugin

DIGITS = 5000
DEPTH = 3000
PLACEHOLDER = "@@unreadable@@"


class UnreadableExitCode(host_plugin.HostPlugin):
    mode = "deep"

    def write_message(self, message: dict[str, Any]) -> None:
        result = message.get("result")
        if not (isinstance(result, dict) and "exit_code" in result):
            return super().write_message(message)
        unreadable = "9" * DIGITS if self.mode == "long-int" else "[" * DEPTH + "]" * DEPTH
        text = json.dumps({**message, "result": {**result, "exit_code": PLACEHOLDER}}, separators=(",", ":"))
        line = text.replace(json.dumps(PLACEHOLDER), unreadable).encode() + b"\n"
        with self._write_lock:
            try:
                self.stdout.write(line)
                self.stdout.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass


def serve(argv: list[str], stdin: Any, stdout: Any, stderr: Any, environ: Any, exit_now: Any = None) -> int:
    mode, *rest = argv
    plugin_class = type("UnreadableExitCode", (UnreadableExitCode,), {"mode": mode})
    return host_plugin.serve(rest, stdin, stdout, stderr, environ, plugin_class=plugin_class, exit_now=exit_now)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr, os.environ))
