"""A plugin whose health answer is not UTF-8: its message is Latin-1 text ("café" with é as the byte
0xE9), as a plugin that formats an OS error message in the locale's encoding writes it.

    python tests/hostile/wire_bad_utf8.py [--dialect ...]   (the reference plugin's arguments)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # a plugin gets a scrubbed environment

from conformance.reference.host_plugin import HostPlugin, serve  # noqa: E402


class Latin1Health(HostPlugin):
    def handle_line(self, raw: bytes) -> bool:
        try:
            message = json.loads(raw)
        except ValueError:
            message = None
        if isinstance(message, dict) and message.get("method") == "provider/health":
            answer = ('{"jsonrpc":"2.0","id":%d,"result":{"health":{"status":"degraded","message":"caf'
                      % message["id"]).encode() + b'\xe9"}}}\n'
            with self._write_lock:
                self.stdout.write(answer)
                self.stdout.flush()
            return True
        return super().handle_line(raw)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr, os.environ, plugin_class=Latin1Health))
