"""A v1 plugin that sends a streamed command's output only after its exec/stream answer, after a pause
(``--late-after SECONDS``, default 1.0): longer than any fixed grace a harness might listen on for.

    python tests/hostile/late_output.py [--late-after 1.0]
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # started as a file: the repository root first, as tests/mutants/launch.py does
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from conformance.reference import host_plugin
from conformance.reference.host_plugin import HostPlugin


class LateOutput(HostPlugin):
    late_after_s = 1.0

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        forward = kwargs.get("on_output")
        if forward is None:
            return super().run_spec(sandbox_id, spec, **kwargs)
        held: list[tuple[str, bytes]] = []

        def send_later() -> None:
            time.sleep(self.late_after_s)
            for stream, chunk in held:
                forward(stream, chunk)

        run = super().run_spec(sandbox_id, spec, **{**kwargs, "on_output": lambda s, c: held.append((s, c))})
        threading.Thread(target=send_later, daemon=True).start()
        return run


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--late-after"]:
        LateOutput.late_after_s = float(argv[1])
        argv = argv[2:]
    return host_plugin.serve(argv, sys.stdin.buffer, sys.stdout.buffer, sys.stderr, os.environ,
                             plugin_class=LateOutput)


if __name__ == "__main__":
    sys.exit(main())
