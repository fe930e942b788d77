"""Broken variants of the v2 reference plugin for the wire, handshake, error and session rules that the
shared scenarios verify on v2 since they lost their v1 dialect tag (catalogue/v2-wire.yaml).

Most faults live in code ``HostPluginV2`` inherits (the JSON-RPC server, the handshake's capability
declaration, handles, error reports), so the v1 mutant that breaks the rule is composed onto the v2
reference (``on_v2``, as in v2_carried.py). The rest sit where v2 differs: its version, its notification
set (v1's output notifications are gone), its exec/stream answer and spec, and its timestamps.
"""

from __future__ import annotations

import base64
import datetime
import threading
from collections.abc import Callable
from typing import Any

from conformance.reference.host_backend import HostBackend, HostSandbox, invalid_spec
from conformance.reference.host_plugin import application_error
from conformance.reference.host_plugin_v2 import ExecSpecV2, HostBackendV2, HostPluginV2
from tests.mutants import mutant
from tests.mutants.v2_carried import on_v2

# Each fault lies in code the v2 reference inherits from the v1 one.
WIRE_V1_MUTANTS = (
    # the JSON-RPC connection: stdout, blank lines, envelopes, ids, batches, notifications, the end of input
    "stdout-log-line", "blank-lines-answered", "error-answers-without-jsonrpc", "ids-through-float",
    "batches-answered-with-array", "notifications-answered", "logs-through-host-log", "ignores-input-closed",
    # the capability declaration and handles
    "capabilities-change-on-reinitialize", "access-vpn-declared", "snapshot-kind-without-aggregate",
    "handle-without-capabilities", "camel-case-fields",
    # error reports and retired methods
    "error-report-without-retryable-and-causes", "unstable-error-kind", "unbounded-error-causes",
    "checkpoint-unsupported",
    # tolerant reading
    "unknown-fields-rejected", "fs-read-requires-range",
    # a control: v2 readers decode the RFC 3339 string v1 readers cannot
    "describe-timestamp-rfc3339",
)

for _name in WIRE_V1_MUTANTS:
    on_v2(_name)


# -- where v2 differs --------------------------------------------------------------------------------


@mutant("version-mismatch-unnamed-on-v2")
class VersionMismatchUnnamedOnV2(HostPluginV2):
    """Refuses a protocol version other than 2 without saying which versions are involved."""

    def m_initialize(self, params: dict[str, Any]) -> Any:
        if params.get("protocol_version") != 2:
            raise application_error("invalid_spec", "unsupported protocol version",
                                    {"field": "protocol_version", "reason": "unsupported"})
        return super().m_initialize(params)


@mutant("duration-ms-fractional-on-v2")
class DurationMsFractionalOnV2(HostPluginV2):
    """Reports an exec/stream result's duration_ms with a fractional part."""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stream(params)
        answer["result"]["duration_ms"] += 0.25
        return answer


@mutant("exec-spec-requires-timeout-on-v2")
class ExecSpecRequiresTimeoutOnV2(HostPluginV2):
    """Refuses an exec/stream spec without timeout_ms (absent means unbounded in v2), as a decoder whose
    field has no default would."""

    def exec_spec(self, method: str, spec: Any) -> ExecSpecV2:
        if method == "exec/stream" and isinstance(spec, dict) and "timeout_ms" not in spec:
            raise invalid_spec("timeout_ms", "missing field")
        return super().exec_spec(method, spec)


@mutant("created-at-with-local-offset-on-v2")
class CreatedAtWithLocalOffsetOnV2(HostPluginV2):
    """Describes a sandbox with its creation time as an RFC 3339 string at the UTC+02:00 offset: a valid
    RFC 3339 time, but not in UTC, which upstream's v2 reader cannot decode."""

    def m_sandbox_describe(self, params: dict[str, Any]) -> Any:
        answer = super().m_sandbox_describe(params)
        created = answer["status"]["created_at"]
        moment = created["secs_since_epoch"] + created["nanos_since_epoch"] / 1e9
        offset = datetime.timezone(datetime.timedelta(hours=2))
        answer["status"]["created_at"] = datetime.datetime.fromtimestamp(moment, offset).isoformat()
        return answer


# Commands' output: the backend hands each chunk to the plugin's frames as ``on_output(stream, chunk)``;
# these mutants also show it somewhere it must never travel.

Watch = Callable[[str, bytes], None]


class _OutputWatchingBackend(HostBackendV2):
    """Shows every chunk of a command's output to ``watcher(sandbox)`` (asked on the request's thread, when
    the command starts) before its frame goes out."""

    watcher: Callable[[HostSandbox], Watch]

    def run(self, sandbox: HostSandbox, *args: Any, on_output: Watch | None = None, **kwargs: Any) -> Any:
        if on_output is None:
            return super().run(sandbox, *args, **kwargs)
        watch = self.watcher(sandbox)

        def deliver(stream: str, chunk: bytes) -> None:
            watch(stream, chunk)
            on_output(stream, chunk)

        return super().run(sandbox, *args, on_output=deliver, **kwargs)


class _OutputWatchingPlugin(HostPluginV2):
    def make_backend(self) -> HostBackend:
        backend = _OutputWatchingBackend(environ=self.environ)
        backend.watcher = self.watcher
        return backend

    def watcher(self, sandbox: HostSandbox) -> Watch:
        raise NotImplementedError


class _ExecOfThisThread(threading.local):
    exec_id: str | None = None


@mutant("output-notifications-on-v2")
class OutputNotificationsOnV2(_OutputWatchingPlugin):
    """Sends a streamed command's output as v1's exec/output notifications too, beside its frames."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._exec = _ExecOfThisThread()  # exec/stream starts its command on the request's thread

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        self._exec.exec_id = params.get("exec_id")
        return super().m_exec_stream(params)

    def watcher(self, sandbox: HostSandbox) -> Watch:
        exec_id = self._exec.exec_id
        return lambda stream, chunk: self.notify("exec/output", {
            "exec_id": exec_id, "stream": stream, "data_b64": base64.b64encode(chunk).decode("ascii")})


@mutant("events-carry-command-output-on-v2")
class EventsCarryCommandOutputOnV2(_OutputWatchingPlugin):
    """Reports each chunk a command writes in a sandbox created with events as a notice on that sandbox's
    route, the output in its message."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.routes: dict[str, dict[str, Any]] = {}

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_create(params)
        if isinstance(params.get("events"), dict):
            self.routes[info["status"]["id"]] = params["events"]
        return info

    def watcher(self, sandbox: HostSandbox) -> Watch:
        route = self.routes.get(sandbox.id)
        subject = {"type": "sandbox", "id": sandbox.id}

        def notice(stream: str, chunk: bytes) -> None:
            if route is not None:
                operation = self.events.operation(None, "unknown", subject)
                self.events.emit(route, subject, operation.operation_id, {
                    "type": "notice", "code": "exec.output",
                    "message": f"{stream}: {chunk.decode('utf-8', errors='replace')}"})

        return notice
