"""A sandbox-driver v2 plugin behind the shared adapter.

Built on the v1 adapter: sandboxes, lifecycle, events, health and the optional operations that move no
bytes are asked for exactly as in v1. What differs:

- ``initialize`` names version 2 and the connection's data transport (the socket of this adapter's
  ``ChannelServer``, the frame limit, ``open_ack`` — on unless the run says ``--open-ack off``);
- a Bash command runs as ``exec/stream`` of ``{"program": "bash", "args": ["-c", command]}`` with
  ``BASH_ENV`` set empty (v2 passes argv and env through unchanged, so a host that wants a clean shell
  says so itself, as upstream's host does); there is no buffered exec: output is the channel's frames,
  stdin is ``stdin: true`` plus stdin frames and the host's eof;
- files, stdio processes, terminals and log follows move their bytes over channels (``facets.py``);
- ``exec/stop`` replaces ``exec/cancel``;
- every channel problem becomes a wire violation of the connection (``take_violations``).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from conformance import schemas
from conformance.adapter import ExecOutcome, ExecRequest
from conformance.dialects.jsonrpc import JsonRpcConnection, Violation
from conformance.dialects.sandbox_driver_v1.adapter import SandboxDriverV1Adapter
from conformance.dialects.sandbox_driver_v2.channel_calls import LATE_CHANNEL_GRACE_S, V2DataChannels
from conformance.dialects.sandbox_driver_v2.facets import (
    V2Files,
    V2Operations,
    V2Processes,
    V2Streams,
    V2Terminals,
)
from conformance.dialects.sandbox_driver_v2.rules import (
    CAPABILITY_SPELLINGS,
    NAME,
    PROTOCOL_VERSION,
    VOCABULARY,
    capability_flags,
    common_ref,
    data_transport,
    initialize_params,
)
from conformance.errors import CallTimeout, HarnessError
from conformance.schemas import SchemaProblem
from conformance.transports.channels import ChannelServer

T = TypeVar("T")

_CHANNEL_TOKEN = re.compile(r'("token"\s*:\s*")[0-9a-f]{64}(")')
_NO_PROCESS = "conformance-no-such-process"
_NO_PTY = "conformance-no-such-pty"
_INPUT_B64 = base64.b64encode(b"conformance").decode("ascii")
# The version-1 requests of the methods v2 removed, with plausible v1 params (by the method's v1 schema).
REMOVED_METHODS: dict[str, Callable[[str], dict[str, Any]]] = {
    "exec/run": lambda sid: {"sandbox_id": sid, "spec": {"command": "true", "env": {}, "timeout_ms": 10_000}},
    "exec/cancel": lambda sid: {"exec_id": "conformance-no-such-exec"},
    "exec/stdio_input": lambda sid: {"process_id": _NO_PROCESS, "data_b64": _INPUT_B64},
    "exec/stdio_output": lambda sid: {"process_id": _NO_PROCESS},
    "exec/stdio_close_input": lambda sid: {"process_id": _NO_PROCESS},
    "pty/input": lambda sid: {"pty_id": _NO_PTY, "data_b64": _INPUT_B64},
    "pty/output": lambda sid: {"pty_id": _NO_PTY},
}

# Methods v2 kept but asks for differently, in their version-1 request shape (no channel; bytes as base64).
EARLIER_SHAPES: dict[str, Callable[[str, str], dict[str, Any]]] = {
    "fs/read": lambda sid, path: {"sandbox_id": sid, "path": path},
    "fs/write": lambda sid, path: {"sandbox_id": sid, "path": path, "content_b64": _INPUT_B64},
}


class SandboxDriverV2Adapter(SandboxDriverV1Adapter):
    """A v2 plugin behind the shared adapter; owns the data-channel listener of its connection."""

    dialect = NAME
    capability_flags = staticmethod(capability_flags)
    capability_spellings = CAPABILITY_SPELLINGS
    vocabulary = VOCABULARY
    exit_on_input_closed_rule = "SDP2-097 (carries SDP1-097): the plugin exits when its stdin is closed"
    shutdown_rule = "SDP2-096 (carries SDP1-096): on shutdown the plugin replies, stops reading its input and exits soon after"
    # v2 orders events among themselves, not against responses: upstream's writer may answer first.
    terminal_event_precedes_answer = False
    # How long an answered operation's channel may still take to open (upstream's host: 10 s); a class
    # attribute so tests can shorten it.
    late_channel_grace_s = LATE_CHANNEL_GRACE_S

    def __init__(
        self,
        connection: JsonRpcConnection,
        command: str,
        channel_server: ChannelServer,
        base_spec: Mapping[str, Any] | None = None,
        run_labels: Mapping[str, str] | None = None,
        call_timeout_s: float = 30.0,
        open_ack: bool = True,
    ) -> None:
        super().__init__(connection, command, base_spec=base_spec, run_labels=run_labels, call_timeout_s=call_timeout_s)
        self.channel_server = channel_server
        self.decoy_server: ChannelServer | None = None
        self._decoy_refused = 0
        self.data_channels = V2DataChannels(self, open_ack)
        self.channels = self.data_channels
        self.files = V2Files(self)
        self.processes = V2Processes(self)
        self.terminals = V2Terminals(self)
        self.streams = V2Streams(self)
        self.operations = V2Operations(self)
        self.refresh_vocabulary()

    # -- handshake -------------------------------------------------------------------------------

    def initialize_params(self, socket_path: str | None = None, version: Any = PROTOCOL_VERSION) -> dict[str, Any]:
        path = socket_path or self.channel_server.socket_path
        assert path is not None, "the channel server is started before its adapter exists"
        return initialize_params(path, self.data_channels.offer_open_ack, version)

    def refresh_vocabulary(self) -> None:
        """The wire vocabulary's initialize carries this connection's data transport as offered now."""
        transport = data_transport(str(self.channel_server.socket_path), self.data_channels.offer_open_ack)
        self.wire.vocabulary = replace(VOCABULARY, initialize_extra={"data_transport": transport})

    def handshake(self, protocol_version: Any = None, timeout_s: float | None = None, strict: bool = True) -> Any:
        asked = PROTOCOL_VERSION if protocol_version is None else protocol_version
        call = self.connection.request("initialize", self.initialize_params(version=asked),
                                       timeout_s or self.call_timeout_s, check_result=strict)
        result = call.result()
        self.adopt_initialize(result)
        return result

    def raw_initialize(self, params: dict[str, Any]) -> Any:
        """An ``initialize`` sent as given, its answer checked by no schema (the scenario judges it)."""
        return self.connection.request("initialize", params, self.call_timeout_s, check_params=False,
                                       check_result=False).result()

    def decoy(self) -> ChannelServer:
        """A second listener, in a private directory of its own, that no request ever names. It trusts no
        peer, so every connection it accepts is refused and kept as one violation: their count is the
        count of connections (``decoy_connections``)."""
        if self.decoy_server is None:
            self.decoy_server = ChannelServer(peer_pids=set).start()
        return self.decoy_server

    def decoy_connections(self) -> int:
        if self.decoy_server is not None:
            self._decoy_refused += len(self.decoy_server.take_violations())
        return self._decoy_refused

    def call_removed(self, name: str, sandbox_id: str) -> Any:
        build = REMOVED_METHODS.get(name)
        if build is None:
            raise HarnessError(f"the suite knows no removed method {name!r} (it knows {', '.join(REMOVED_METHODS)})")
        return self.connection.request(name, build(sandbox_id), self.call_timeout_s, check_params=False,
                                       check_result=False).result()

    def call_in_earlier_shape(self, name: str, sandbox_id: str, path: str) -> Any:
        build = EARLIER_SHAPES.get(name)
        if build is None:
            raise HarnessError(f"the suite knows no earlier shape of {name!r} (it knows {', '.join(EARLIER_SHAPES)})")
        return self.connection.request(name, build(sandbox_id, path), self.call_timeout_s, check_params=False,
                                       check_result=False).result()

    def creation_spec_problems(self, spec: Any) -> list[SchemaProblem]:
        return schemas.problems(common_ref("SandboxSpec"), spec)

    # -- exec ------------------------------------------------------------------------------------

    def exec_spec(self, request: ExecRequest) -> dict[str, Any]:
        """An ExecSpecV2; its stdin is not part of it (it rides the channel)."""
        spec = self.spawn_spec(request)
        if not request.minimal_spec:  # the minimal spec: the program, its arguments and its environment only
            spec["timeout_ms"] = int(request.timeout_s * 1000)
        if request.sanitization is not None:
            spec["output_sanitization"] = request.sanitization
        if request.stop_grace_s is not None:
            spec["stop_grace_ms"] = round(request.stop_grace_s * 1000)
        spec.update(request.undefined_fields)
        return spec

    @staticmethod
    def spawn_spec(request: ExecRequest) -> dict[str, Any]:
        """The program, arguments, environment and directory of a v2 command."""
        if request.argv is not None:
            if not request.argv:
                raise HarnessError("an argument vector needs at least the program")
            spec: dict[str, Any] = {"program": request.argv[0], "args": list(request.argv[1:]), "env": dict(request.env)}
        else:
            spec = {"program": "bash", "args": ["-c", request.command], "env": {"BASH_ENV": "", **request.env}}
        if request.working_dir is not None:
            spec["working_dir"] = request.working_dir
        return spec

    def exec(self, sandbox_id: str, request: ExecRequest) -> ExecOutcome:
        return self.streams.start_exec(sandbox_id, request).wait().result

    @staticmethod
    def exec_result(result: Any, stdout: bytes, stderr: bytes) -> ExecOutcome:
        """A v2 exec result (metadata only) with the output its channel carried."""
        result = result if isinstance(result, dict) else {}
        duration = result.get("duration_ms")
        return ExecOutcome(outcome="ran", termination=result.get("termination"), exit_code=result.get("exit_code"),
                           signal=result.get("signal"), stdout=stdout, stderr=stderr,
                           duration_s=duration / 1000 if isinstance(duration, int) else None, raw=result)

    @staticmethod
    def timed_read(read: Callable[[], T], what: str, timeout_s: float) -> T:
        """``read()``, a wait for the plugin's next frame; no frame in time is the provider's timeout."""
        try:
            return read()
        except TimeoutError:
            raise CallTimeout(f"no {what} arrived within {timeout_s:.1f}s") from None

    # -- diagnostics -----------------------------------------------------------------------------

    def note(self, channel: str, text: str) -> None:
        """A line of the active transcript about a data channel (what crossed it, never its bytes)."""
        self._observe(channel, "note", text)

    def _observe(self, channel: str, direction: str, text: str) -> None:
        # A channel token is a one-use secret: the transcript shows that a request carried one, never which.
        super()._observe(channel, direction, _CHANNEL_TOKEN.sub(r"\1[REDACTED]\2", text))

    def take_violations(self) -> list[Violation]:
        return self.connection.take_violations() + self.data_channels.take_violations()

    def close(self) -> None:
        super().close()
        self.channel_server.close()
        if self.decoy_server is not None:
            self.decoy_server.close()
