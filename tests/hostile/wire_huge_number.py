"""A plugin that answers its first request with one JSON number of SIZE bytes (written a MiB at a time, so
the plugin holds no copy of it), and the measurement of what reading it costs the suite:

    python tests/hostile/wire_huge_number.py SIZE      prints what the call raised and the peak growth in MB

Run as its own interpreter, the peak resident set it reports is the suite's reading of this line alone.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parents[2])

MIB = 1 << 20


def serve(argv: list[str], stdin: Any, stdout: Any, stderr: Any, environ: Any, exit_now: Any = None) -> int:
    size = int(argv[0])
    stdin.readline()
    stdout.write(b'{"jsonrpc":"2.0","id":1,"result":')
    chunk = b"7" * MIB
    for _ in range(size // MIB):
        stdout.write(chunk)
    stdout.write(b"7" * (size % MIB) + b"}\n")
    stdout.flush()
    stdin.read()  # until the host closes our input
    return 0


def measure(size: int) -> None:
    from conformance.dialects.jsonrpc import JsonRpcConnection
    from conformance.dialects.sandbox_driver_v1 import V1Rules
    from conformance.transports.memory import InProcessTransport

    transport = InProcessTransport("tests.hostile.wire_huge_number:serve", [str(size)], {})
    connection = JsonRpcConnection(transport, V1Rules(), max_message_bytes=size + 8 * MIB)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    connection.start()
    try:
        connection.request("initialize", {}, 60, check_params=False, check_result=False).result()
        print("RAISED nothing")
    except Exception as exc:  # noqa: BLE001 - what was raised is the measurement's output
        print("RAISED", type(exc).__name__, exc)
    print("GROWN_MB", (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
    connection.close(grace_s=1.0)


if __name__ == "__main__":
    measure(int(sys.argv[1]))
