"""Hostile plugin: the reference v1 plugin, but at start it leaves a grandchild in a session of its own
that inherited the plugin's stdout and stderr and never closes them (``sleep`` for as long as the
first argument says). Closing the plugin then never sees its output end."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    seconds = sys.argv[1] if len(sys.argv) > 1 else "60"
    if os.fork() == 0:
        os.setsid()  # out of the plugin's process group: killing the group does not reach it
        os.execvp("sleep", ["sleep", seconds])  # stdout and stderr inherited, held open until it ends
    from conformance.reference import host_plugin

    return host_plugin.main(sys.argv[2:]) or 0


if __name__ == "__main__":
    sys.exit(main())
