"""Hostile plugin: the reference v1 plugin that crashes (exit 1, nothing answered, nothing cleaned up)
on the first ``sandbox/delete`` it gets, holding every sandbox it made. The crash happens once per
marker file (the first argument): a restarted plugin then serves normally, and knows none of the
sandboxes its predecessor made."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from conformance.reference import host_plugin

MARKER = Path(sys.argv[1])


class CrashesOnDelete(host_plugin.HostPlugin):
    def m_sandbox_delete(self, params):
        if not MARKER.exists():
            MARKER.write_text(str(os.getpid()))
            self.exit_now(1)
        return super().m_sandbox_delete(params)


if __name__ == "__main__":
    sys.exit(host_plugin.serve(sys.argv[2:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr, os.environ,
                               plugin_class=CrashesOnDelete))
