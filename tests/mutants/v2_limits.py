"""Broken variants of the v2 reference plugin's answers to the methods v2 removed, and of its
control-message limits."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from conformance.reference.host_plugin_v2 import REMOVED_METHODS, HostPluginV2
from conformance.reference.stdio_server import StdioJsonRpcServer
from tests.mutants import mutant

# -- removed methods ---------------------------------------------------------------------------------------


@mutant("removed-methods-unsupported")
class RemovedMethodsUnsupported(HostPluginV2):
    """Answers the methods v2 removed as unsupported operations, as if they merely lacked a capability."""

    def dispatch(self, method: str, params: Any) -> Any:
        if method in REMOVED_METHODS:
            raise self.unsupported(method, "exec.stdio_process")
        return super().dispatch(method, params)


# -- control messages --------------------------------------------------------------------------------------


@mutant("lines-unbounded")
class ControlLinesUnbounded(HostPluginV2):
    """Reads control lines of any length."""

    def lines(self):
        return StdioJsonRpcServer.lines(self)


@mutant("line-limit-off-by-one")
class ControlLineLimitOffByOne(HostPluginV2):
    """Counts the control message limit without the newline, so a line of exactly 1 MiB ends the connection."""

    limits = replace(HostPluginV2.limits, control_message_bytes=HostPluginV2.limits.control_message_bytes - 1)


@mutant("oversized-answers-sent")
class OversizedAnswersSent(HostPluginV2):
    """Sends an answer however long it is."""

    def write_message(self, message: dict[str, Any]) -> None:
        StdioJsonRpcServer.write_message(self, message)
