"""A v1 plugin that exits with status 0 in the middle of its first exec/run (unanswered, nothing cleaned up),
holding the sandbox it made: a clean exit code, but no clean exit. It does so once per marker file (the
first argument): a restarted plugin serves normally, and knows none of its predecessor's sandboxes.

    python tests/hostile/exit0_mid_call.py MARKER [reference plugin arguments]
    in process: ProviderConfig(in_process=("tests.hostile.exit0_mid_call:serve", MARKER))
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from conformance.reference import host_plugin


class ExitsZeroMidCall(host_plugin.HostPlugin):
    marker: Path

    def m_exec_run(self, params: dict[str, Any]) -> Any:
        if not self.marker.exists():
            self.marker.write_text("exited")
            self.exit_now(0)
        return super().m_exec_run(params)


def serve(argv: list[str], stdin: Any, stdout: Any, stderr: Any, environ: Any, exit_now: Any = None) -> int:
    marker, *rest = argv
    plugin_class = type("ExitsZeroMidCall", (ExitsZeroMidCall,), {"marker": Path(marker)})
    return host_plugin.serve(rest, stdin, stdout, stderr, environ, plugin_class=plugin_class, exit_now=exit_now)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr, os.environ))
