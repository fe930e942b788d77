"""A v1 plugin that puts every ``CANARY*`` value of its environment wherever a plugin can put text, in
every common encoding: its refusal of the v2 probe (the negotiation line), its stderr, its error
messages, the output of every command (``stdout_b64``/``stderr_b64``, at each base64 alignment) and its
sandbox ids (``host-…-<the CANARY_ID value>``, the suffix taken off again on the way in).

    python tests/hostile/secret_spraying.py
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import urllib.parse
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # started as a file: the repository root first, as tests/mutants/launch.py does
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from conformance.reference import host_plugin
from conformance.reference.host_backend import BackendError
from conformance.reference.host_plugin import HostPlugin, application_error

MINTED_ID = re.compile(r"host-[0-9a-f]{20}")


def forms(secret: str) -> list[str]:
    """The secret raw, base64 (standard padded, URL-safe unpadded), percent-encoded, JSON-escaped, hex."""
    data = secret.encode("utf-8")
    return [secret, base64.b64encode(data).decode(), base64.urlsafe_b64encode(data).decode().rstrip("="),
            urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret), json.dumps(secret)[1:-1],
            data.hex()]


class SecretSpraying(HostPlugin):
    def canaries(self) -> list[str]:
        return [value for name, value in sorted(self.environ.items()) if name.startswith("CANARY") and value]

    def sprayed(self) -> str:
        return " ".join(form for secret in self.canaries() for form in forms(secret))

    def on_start(self) -> None:
        super().on_start()
        self.log(f"debug: my environment: {self.sprayed()}")

    def m_initialize(self, params: dict[str, Any]) -> Any:
        if params.get("protocol_version") != 1:  # the v2 probe: refused, naming version 1, with the env in it
            raise application_error("invalid_spec", f"invalid spec: protocol_version: plugin speaks protocol "
                                    f"version 1 (env: {self.sprayed()})", {"field": "protocol_version"})
        return super().m_initialize(params)

    def _id_suffix(self) -> str:
        return f"-{self.environ.get('CANARY_ID', '')}" if self.environ.get("CANARY_ID") else ""

    def dispatch(self, method: str, params: Any) -> Any:
        suffix = self._id_suffix()
        if suffix:
            params = json.loads(json.dumps(params).replace(suffix, ""))
        result = super().dispatch(method, params)
        if suffix:
            result = json.loads(MINTED_ID.sub(lambda m: m.group(0) + suffix, json.dumps(result)))
        return result

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        try:
            self.backend.get(params["sandbox_id"], include_deleted=True)
        except BackendError:
            self.log(f"debug: unknown sandbox; authenticating with {self.sprayed()}")
            raise BackendError("not_found", f"no sandbox for credentials {self.sprayed()}",
                               resource="sandbox", id=params["sandbox_id"]) from None
        return super().m_sandbox_delete(params)

    def exec_result(self, run: Any) -> dict[str, Any]:
        """The command's own output, then every secret at each of the three byte alignments base64 gives it."""
        result = super().exec_result(run)
        extra = b"".join(b"\n" + b"x" * k + secret.encode("utf-8") for k in range(3) for secret in self.canaries())
        for key, raw in (("stdout_b64", run.stdout), ("stderr_b64", run.stderr)):
            result[key] = base64.b64encode(raw + extra).decode()
        return result


def serve(argv: list[str], stdin: Any, stdout: Any, stderr: Any, environ: Any, exit_now: Any = None) -> int:
    return host_plugin.serve(argv, stdin, stdout, stderr, environ, plugin_class=SecretSpraying, exit_now=exit_now)


def main() -> int:
    return serve(sys.argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr, os.environ)


if __name__ == "__main__":
    sys.exit(main())
