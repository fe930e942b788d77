"""A plugin that, asked for its health, starts the answer and never ends the line: 64 MiB of one JSON
string with no newline, then it waits (a serializer stuck in a loop, a log dumped into a field).

    python tests/hostile/wire_long_line.py [--dialect ...]   (the reference plugin's arguments)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # a plugin gets a scrubbed environment

from conformance.reference.host_plugin import HostPlugin, serve  # noqa: E402

LINE_MIB = 64


class EndlessLine(HostPlugin):
    def m_provider_health(self, params: dict[str, Any]) -> Any:
        megabyte = b"x" * (1 << 20)
        with self._write_lock:
            try:
                self.stdout.write(b'{"jsonrpc":"2.0","id":0,"result":{"health":{"status":"ok","message":"')
                for _ in range(LINE_MIB):
                    self.stdout.write(megabyte)
                self.stdout.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass
        time.sleep(3600)  # the line is never ended


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr, os.environ, plugin_class=EndlessLine))
