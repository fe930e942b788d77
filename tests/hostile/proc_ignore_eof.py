"""Hostile plugin: the reference v1 plugin that ignores both ways of being told to go. ``shutdown`` is
answered but the plugin keeps serving, its input ending does not end it, and it ignores SIGTERM: only
SIGKILL ends it. Its pid is written to the file named by the first argument."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from conformance.reference import host_plugin


class IgnoresShutdown(host_plugin.HostPlugin):
    def m_shutdown(self, params):  # answers, and goes on serving
        return None


def main() -> int:
    import os

    Path(sys.argv[1]).write_text(str(os.getpid()))
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    host_plugin.serve(sys.argv[2:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr, os.environ,
                      plugin_class=IgnoresShutdown)
    while True:  # its input ended: it stays anyway
        time.sleep(60)


if __name__ == "__main__":
    sys.exit(main())
