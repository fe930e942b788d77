"""Dialect ``sandbox-driver-v2``: the lithoscomputer sandbox-driver plugin protocol, version 2.

v1's control messages over stdio (snake_case, ``-32000`` + ``data.report.kind``), with every byte stream
moved onto per-operation Unix-socket data channels the host listens for; ``initialize`` names the
socket (``data_transport``).
"""

from conformance.dialects.sandbox_driver_v2.adapter import SandboxDriverV2Adapter
from conformance.dialects.sandbox_driver_v2.rules import (
    NAME,
    PROTOCOL_VERSION,
    V2Rules,
    capability_flags,
    looks_like,
    refusal_names_version,
)

__all__ = ["NAME", "PROTOCOL_VERSION", "SandboxDriverV2Adapter", "V2Rules", "capability_flags", "looks_like",
           "refusal_names_version"]
