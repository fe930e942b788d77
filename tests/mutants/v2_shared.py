"""Broken variants of the v2 reference plugin for shared scenarios that run on v2 too and had no v2 mutant:
output-not-in-error-text (SDP2-047) and snapshot-inherits (SDP2-090)."""

from __future__ import annotations

import base64
import threading
from typing import Any

from conformance.reference.data_channel import STDERR, STDOUT, PluginChannel
from conformance.reference.host_plugin import application_error
from conformance.reference.host_plugin_v2 import HostPluginV2
from tests.mutants import mutant
from tests.mutants.v2_carried import on_v2

# The snapshot request's kind and resources are dropped in code v2 inherits from the v1 reference.
on_v2("snapshot-spec-overrides-ignored")


class _OutputKeepingChannel(PluginChannel):
    """A channel that also keeps what the plugin sent on it, by stream."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent = {STDOUT: bytearray(), STDERR: bytearray()}

    def send(self, kind: int, data: bytes) -> None:
        super().send(kind, data)
        if kind in self.sent:
            self.sent[kind].extend(data)


class KeepsExecOutput(HostPluginV2):
    """Keeps a copy of what each exec sent on its channel, for mutants that put it where it must not go:
    ``exec_output()`` is (stdout, stderr) of the exec the calling thread serves, once it has run."""

    channel_class = _OutputKeepingChannel

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._opened = threading.local()  # the channel the operation this thread serves opened

    def open_channel(self, request: tuple[int, str], accepts_input: bool) -> PluginChannel:
        self._opened.channel = super().open_channel(request, accepts_input)
        return self._opened.channel

    def exec_output(self) -> tuple[bytes, bytes]:
        sent = self._opened.channel.sent
        return bytes(sent[STDOUT]), bytes(sent[STDERR])


@mutant("exec-errors-quote-output-on-v2")
class ExecErrorsQuoteOutputOnV2(KeepsExecOutput):
    """Turns a command that failed or timed out into an exec error whose message quotes what it printed."""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stream(params)
        result = answer["result"]
        if result["termination"] == "exited" and result["exit_code"] == 0:
            return answer
        stdout, stderr = self.exec_output()
        text = (stdout + stderr).decode(errors="replace")
        raise application_error("exec", f"command {result['termination']} (exit code {result['exit_code']}): {text}",
                                {"exec": {"label": "command", "termination": result["termination"],
                                          "exit_code": result["exit_code"],
                                          "stdout_b64": base64.b64encode(stdout).decode(),
                                          "stderr_b64": base64.b64encode(stderr).decode()}})
