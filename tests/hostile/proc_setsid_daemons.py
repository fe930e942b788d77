"""Hostile plugin: the reference v1 plugin, but at start it leaves COUNT processes in sessions of their own
(``setsid``), out of reach of its process group: half daemonized (stdio on /dev/null, so nothing ties them
to the plugin's pipes), half holding its stderr, and one more that ignores SIGTERM. Each appends its pid to
PID_FILE. Arguments: PID_FILE COUNT SECONDS, then the reference plugin's own."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _leave(pid_file: str, seconds: str, daemon: bool, ignore_term: bool) -> None:
    if os.fork() != 0:
        return
    try:
        os.setsid()  # out of the plugin's process group: killing the group does not reach it
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)  # never the plugin's stdout: the suite would see its output end late
        if daemon:
            os.dup2(null, 2)
        if ignore_term:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited through exec
        with open(pid_file, "a") as handle:
            handle.write(f"{os.getpid()}\n")
        os.execvp("sleep", ["sleep", seconds])
    finally:
        os._exit(127)


def main() -> int:
    pid_file, count, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    for number in range(count):
        _leave(pid_file, seconds, daemon=number % 2 == 0, ignore_term=False)
    _leave(pid_file, seconds, daemon=True, ignore_term=True)
    from conformance.reference import host_plugin

    return host_plugin.main(sys.argv[4:]) or 0


if __name__ == "__main__":
    sys.exit(main())
