"""Transports move bytes; they know nothing of JSON-RPC or of any dialect.

``LineTransport`` is the seam for framed, line-oriented peers (a plugin's stdin/stdout). The HTTP
transport (REST providers) and side channels (protocol v2's per-operation Unix-socket data channels)
sit beside it, never above it.
"""

from conformance.transports.base import LineTransport, StderrTail
from conformance.transports.process import ProcessTransport

__all__ = ["LineTransport", "ProcessTransport", "StderrTail"]
