"""A v1 plugin that stops reading its input for good at the first request longer than 64 KiB (a reader that
deadlocks on a large message): the request, and whatever follows, backs up in its input pipe. It ends only
once the host closes that input (or after two minutes). With ``--full-marker PATH`` it writes its pid to
PATH once its input pipe is full, i.e. once the host's write of that request is blocked.

    python tests/hostile/stops_reading.py [--full-marker PATH] [reference plugin arguments]
    in process: ProviderConfig(in_process=("tests.hostile.stops_reading:serve",))
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from conformance.reference import host_plugin

STOP_AT = 64 * 1024
F_GETPIPE_SZ = 1032
GIVE_UP_S = 120.0


class StopsReading(host_plugin.HostPlugin):
    full_marker: str | None = None

    def lines(self) -> Iterator[bytes]:
        while line := self.stdin.readline(STOP_AT):
            if len(line) >= STOP_AT and not line.endswith(b"\n"):
                self.log("a large request: reading no more")
                self.wait_for_hangup()
                return
            yield line

    def wait_for_hangup(self) -> None:
        """Read nothing until the host closes our input; edge-triggered, so queued bytes do not wake us
        again and again, only more of them (to check whether the pipe is full) or the hang-up."""
        fd = self.stdin.fileno()
        capacity = fcntl.fcntl(fd, F_GETPIPE_SZ)
        poller = select.epoll()
        poller.register(fd, select.EPOLLIN | select.EPOLLHUP | select.EPOLLET)
        deadline = time.monotonic() + GIVE_UP_S
        try:
            while (left := deadline - time.monotonic()) > 0:
                events = poller.poll(left)
                if any(mask & select.EPOLLHUP for _, mask in events):
                    return
                queued = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
                if self.full_marker and queued >= capacity - 4096 and not os.path.exists(self.full_marker):
                    Path(self.full_marker).write_text(str(os.getpid()))
        finally:
            poller.close()


def serve(argv: list[str], stdin: Any, stdout: Any, stderr: Any, environ: Any, exit_now: Any = None) -> int:
    marker = None
    if argv[:1] == ["--full-marker"]:
        marker, argv = argv[1], argv[2:]
    plugin_class = type("StopsReading", (StopsReading,), {"full_marker": marker})
    return host_plugin.serve(argv, stdin, stdout, stderr, environ, plugin_class=plugin_class, exit_now=exit_now)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr, os.environ))
