"""A sandbox-driver v1 plugin behind the shared adapter."""

from __future__ import annotations

import base64
import copy
import itertools
from collections.abc import Mapping
from typing import Any

from conformance import schemas
from conformance.adapter import (
    Capabilities,
    DirEntryInfo,
    EventRoute,
    ExecOutcome,
    ExecRequest,
    FileInfo,
    HealthInfo,
    OperationInfo,
    ProcessExit,
    ReceivedEvent,
    SandboxHandle,
    SandboxRequest,
    SandboxStatus,
)
from conformance.dialects.common import JsonRpcAdapter
from conformance.dialects.jsonrpc import Inbound, JsonRpcConnection
from conformance.dialects.sandbox_driver_v1.operations import OPERATIONS
from conformance.dialects.sandbox_driver_v1.rules import (
    DEFAULT_BASE_SPEC,
    NAME,
    PROTOCOL_VERSION,
    capability_flags,
    common_ref,
)
from conformance.dialects.sandbox_driver_v1.streams import V1RunningExec, V1RunningFollow
from conformance.errors import ApplicationErrorAnswer, NotExpressible
from conformance.schemas import SchemaProblem


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: Any) -> bytes:
    return base64.b64decode(text) if isinstance(text, str) else b""


def _status(raw: Any) -> SandboxStatus:
    raw = raw if isinstance(raw, dict) else {}
    labels = raw.get("labels") if isinstance(raw.get("labels"), dict) else {}
    return SandboxStatus(id=str(raw.get("id", "")), state=str(raw.get("state", "unknown")),
                         name=raw.get("name"), labels=labels, raw=raw)


class SandboxDriverV1Adapter(JsonRpcAdapter):
    """A v1 plugin behind the shared adapter."""

    dialect = NAME
    capability_flags = staticmethod(capability_flags)
    exec_reports = frozenset({"bytes", "signal", "duration"})

    def __init__(
        self,
        connection: JsonRpcConnection,
        command: str,
        base_spec: Mapping[str, Any] | None = None,
        run_labels: Mapping[str, str] | None = None,
        call_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(connection, command, call_timeout_s)
        self.base_spec = dict(base_spec if base_spec is not None else DEFAULT_BASE_SPEC)
        self.run_labels = dict(run_labels or {})
        self._tokens = itertools.count(1)

    def _call(self, method: str, params: Any, timeout_s: float | None = None) -> Any:
        return self.connection.call(method, params, timeout_s or self.call_timeout_s)

    # -- handshake -------------------------------------------------------------------------------

    def handshake(self, protocol_version: Any = None, timeout_s: float | None = None, strict: bool = True) -> Any:
        asked = PROTOCOL_VERSION if protocol_version is None else protocol_version
        call = self.connection.request("initialize", {"protocol_version": asked},
                                       timeout_s or self.call_timeout_s, check_result=strict)
        result = call.result()
        self.adopt_initialize(result)
        return result

    @property
    def operations(self) -> Mapping[str, OperationInfo]:
        return {name: OperationInfo(name, op.capability, needs_sandbox=not op.provider_level)
                for name, op in OPERATIONS.items()}

    def creation_spec_problems(self, spec: Any) -> list[SchemaProblem]:
        return schemas.problems(common_ref("SandboxSpec"), spec)

    def next_token(self, prefix: str) -> str:
        return f"{prefix}-{next(self._tokens)}"

    # -- events ----------------------------------------------------------------------------------

    def _events_param(self, route: EventRoute | None) -> dict[str, Any]:
        if route is None:
            return {}

        def collect(inbound: Inbound) -> None:
            params = inbound.message.get("params") or {}
            event = params.get("event") if isinstance(params.get("event"), dict) else {}
            route.received.append(ReceivedEvent(inbound.sequence, inbound.at, params.get("route_id"), event))

        self.connection.subscribe(("host/event", route.route_id), collect)
        request: dict[str, Any] = {"route_id": route.route_id}
        if route.correlation_id is not None:
            request["correlation_id"] = route.correlation_id
        return {"events": request}

    @staticmethod
    def _note_answer(route: EventRoute | None, operation: str, call: Any) -> None:
        if route is not None and call.answer_sequence is not None:
            route.answers.append((operation, call.answer_sequence))

    def _evented(self, method: str, params: dict[str, Any], route: EventRoute | None, operation: str) -> Any:
        call = self.connection.request(method, {**params, **self._events_param(route)}, self.call_timeout_s)
        try:
            return call.result()
        finally:
            self._note_answer(route, operation, call)

    # -- sandboxes -------------------------------------------------------------------------------

    def creation_spec(self, request: SandboxRequest) -> dict[str, Any]:
        spec = copy.deepcopy(self.base_spec)
        spec["labels"] = {**spec.get("labels", {}), **self.run_labels, **request.labels}
        if request.env:
            spec["env"] = {**spec.get("env", {}), **request.env}
        if request.name is not None:
            spec["name"] = request.name
        if request.memory_mb is not None or request.cpu_cores is not None:
            resources = dict(spec.get("resources") or {})
            if request.memory_mb is not None:
                resources["memory_mb"] = request.memory_mb
            if request.cpu_cores is not None:
                resources["cpu_cores"] = request.cpu_cores
            spec["resources"] = resources
        if request.from_snapshot is not None:
            spec["source"] = {"snapshot": {"name": request.from_snapshot}}
        spec.update(copy.deepcopy(request.extra))
        return spec

    def create(self, request: SandboxRequest) -> SandboxHandle:
        result = self._evented("sandbox/create", {"spec": self.creation_spec(request)}, request.events, "create")
        handle = self._handle(result)
        self.ledger.record_created(handle.id, self.owner)
        return handle

    def attach(self, sandbox_id: str, events: EventRoute | None = None) -> SandboxHandle:
        return self._handle(self._evented("sandbox/attach", {"sandbox_id": sandbox_id}, events, "attach"))

    def _handle(self, result: dict[str, Any]) -> SandboxHandle:
        caps = result.get("capabilities")
        return SandboxHandle(
            id=str(result["status"]["id"]),
            status=_status(result["status"]),
            working_directory=result.get("working_directory"),
            runtime_directory=result.get("runtime_directory"),
            capabilities=Capabilities(caps, capability_flags(caps)),
            raw=result,
        )

    def describe(self, sandbox_id: str) -> SandboxStatus:
        return _status(self._call("sandbox/describe", {"sandbox_id": sandbox_id})["status"])

    def list(self, labels: Mapping[str, str] | None = None) -> list[SandboxStatus]:
        result = self._call("sandbox/list", {"filter": {"labels": dict(labels)} if labels else {}})
        return [_status(s) for s in result["sandboxes"]]

    def delete(self, sandbox_id: str, events: EventRoute | None = None) -> None:
        self._evented("sandbox/delete", {"sandbox_id": sandbox_id}, events, "delete")
        self.ledger.record_deleted(sandbox_id)

    def start(self, sandbox_id: str) -> None:
        self._call("sandbox/start", {"sandbox_id": sandbox_id})

    def stop(self, sandbox_id: str) -> None:
        self._call("sandbox/stop", {"sandbox_id": sandbox_id})

    def platform_info(self, sandbox_id: str) -> dict[str, Any]:
        return self._call("sandbox/platform_info", {"sandbox_id": sandbox_id})["platform"]

    def health(self) -> HealthInfo:
        health = self._call("provider/health", None)["health"]
        return HealthInfo(str(health.get("status")), health.get("message"), health)

    def shutdown(self) -> Any:
        return self._call("shutdown", None)

    def invoke(self, operation: str, sandbox_id: str | None, events: EventRoute | None = None,
               **arguments: Any) -> Any:
        op = OPERATIONS.get(operation)
        if op is None:
            raise NotExpressible(NAME, operation)
        if events is not None and not op.takes_events:
            raise NotExpressible(NAME, f"events for {operation}")
        result = self._evented(op.method, op.build(self, sandbox_id, arguments), events, operation)
        if op.method in ("sandbox/fork", "sandbox/undelete") and isinstance(result, dict) and "status" in result:
            handle = self._handle(result)
            if op.method == "sandbox/fork":
                self.ledger.record_created(handle.id, self.owner)
            else:
                self.ledger.record_restored(handle.id, self.owner)  # back in the cleanup registry
            return handle
        return result

    def watch_events(self) -> list[ReceivedEvent]:
        """Every control-plane event from now on, whatever its route (the list fills as they arrive)."""
        seen: list[ReceivedEvent] = []

        def collect(inbound: Inbound) -> None:
            params = inbound.message.get("params") or {}
            event = params.get("event") if isinstance(params.get("event"), dict) else {}
            seen.append(ReceivedEvent(inbound.sequence, inbound.at, params.get("route_id"), event))

        self.connection.listen_all("host/event", collect)
        return seen

    # -- exec ------------------------------------------------------------------------------------

    def exec_spec(self, request: ExecRequest) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "command": request.command,
            "timeout_ms": int(request.timeout_s * 1000),
            "env": dict(request.env),
        }
        if request.working_dir is not None:
            spec["working_dir"] = request.working_dir
        if request.stdin is not None:
            spec["stdin_b64"] = _b64(request.stdin)
        if request.sanitization is not None:
            spec["output_sanitization"] = request.sanitization
        return spec

    def exec(self, sandbox_id: str, request: ExecRequest) -> ExecOutcome:
        params = {"sandbox_id": sandbox_id, "spec": self.exec_spec(request)}
        try:
            result = self._call("exec/run", params, request.timeout_s + self.call_timeout_s)
        except ApplicationErrorAnswer as error:
            return ExecOutcome("infra", None, None, None, b"", b"", None, error=error)
        return self.exec_outcome(result)

    @staticmethod
    def exec_outcome(result: dict[str, Any]) -> ExecOutcome:
        duration = result.get("duration_ms")
        return ExecOutcome(
            outcome="ran",
            termination=result.get("termination"),
            exit_code=result.get("exit_code"),
            signal=result.get("signal"),
            stdout=_unb64(result.get("stdout_b64")),
            stderr=_unb64(result.get("stderr_b64")),
            duration_s=duration / 1000 if isinstance(duration, int) else None,
            raw=result,
        )

    def start_exec_stream(self, sandbox_id: str, request: ExecRequest, retained_limit: int | None = None,
                          exec_id: str | None = None) -> V1RunningExec:
        exec_id = exec_id or self.next_token(f"x{sandbox_id}")
        params: dict[str, Any] = {"sandbox_id": sandbox_id, "exec_id": exec_id, "spec": self.exec_spec(request)}
        if retained_limit is not None:
            params["retained_output_limit"] = retained_limit
        return V1RunningExec(self.connection, exec_id, params, request.timeout_s + self.call_timeout_s,
                             self.exec_outcome)

    def cancel_exec(self, exec_id: str) -> None:
        self._call("exec/cancel", {"exec_id": exec_id})

    # -- filesystem ------------------------------------------------------------------------------

    def read_file(self, sandbox_id: str, path: str, offset: int | None = None, length: int | None = None) -> bytes:
        params: dict[str, Any] = {"sandbox_id": sandbox_id, "path": path}
        if offset is not None:
            params["offset"] = offset
        if length is not None:
            params["length"] = length
        return _unb64(self._call("fs/read", params)["content_b64"])

    def write_file(self, sandbox_id: str, path: str, data: bytes, append: bool | None = None) -> None:
        params: dict[str, Any] = {"sandbox_id": sandbox_id, "path": path, "content_b64": _b64(data)}
        if append is not None:
            params["append"] = append
        self._call("fs/write", params)

    def path_exists(self, sandbox_id: str, path: str) -> bool:
        return bool(self._call("fs/exists", {"sandbox_id": sandbox_id, "path": path})["exists"])

    def metadata(self, sandbox_id: str, path: str) -> FileInfo:
        meta = self._call("fs/metadata", {"sandbox_id": sandbox_id, "path": path})["metadata"]
        return FileInfo(str(meta.get("kind")), meta.get("size"), meta.get("mode"), meta)

    def list_dir(self, sandbox_id: str, path: str, depth: int) -> list[DirEntryInfo]:
        entries = self._call("fs/list_dir", {"sandbox_id": sandbox_id, "path": path, "depth": depth})["entries"]
        return [DirEntryInfo(str(e.get("path")), str(e.get("kind")), e.get("size")) for e in entries]

    def create_dir(self, sandbox_id: str, path: str) -> None:
        self._call("fs/create_dir", {"sandbox_id": sandbox_id, "path": path})

    def rename(self, sandbox_id: str, source: str, target: str) -> None:
        self._call("fs/rename", {"sandbox_id": sandbox_id, "from": source, "to": target})

    def delete_path(self, sandbox_id: str, path: str, recursive: bool) -> None:
        self._call("fs/delete", {"sandbox_id": sandbox_id, "path": path, "recursive": recursive})

    # -- interactive processes, terminals, logs --------------------------------------------------

    def stdio_open(self, sandbox_id: str, command: str, env: Mapping[str, str] | None = None,
                   working_dir: str | None = None, process_id: str | None = None) -> str:
        process_id = process_id or self.next_token("stdio")
        spec: dict[str, Any] = {"command": command, "env": dict(env or {})}
        if working_dir is not None:
            spec["working_dir"] = working_dir
        self._call("exec/stdio_open", {"sandbox_id": sandbox_id, "process_id": process_id, "spec": spec})
        return process_id

    def stdio_write(self, process_id: str, data: bytes) -> None:
        self._call("exec/stdio_input", {"process_id": process_id, "data_b64": _b64(data)})

    def stdio_close_input(self, process_id: str) -> None:
        self._call("exec/stdio_close_input", {"process_id": process_id})

    def stdio_read(self, process_id: str, timeout_s: float = 10.0) -> bytes | None:
        data = self._call("exec/stdio_output", {"process_id": process_id}, timeout_s)["data_b64"]
        return None if data is None else _unb64(data)

    def stdio_terminate(self, process_id: str) -> None:
        self._call("exec/stdio_terminate", {"process_id": process_id})

    def stdio_wait(self, process_id: str, timeout_s: float = 30.0) -> ProcessExit:
        result = self._call("exec/stdio_wait", {"process_id": process_id}, timeout_s)
        return ProcessExit(result.get("termination"), result.get("exit_code"), str(result.get("stderr_tail", "")))

    def pty_open(self, sandbox_id: str, rows: int = 24, cols: int = 80, env: Mapping[str, str] | None = None,
                 working_dir: str | None = None, pty_id: str | None = None) -> str:
        pty_id = pty_id or self.next_token("pty")
        options: dict[str, Any] = {"size": {"rows": rows, "cols": cols}, "env": dict(env or {})}
        if working_dir is not None:
            options["working_dir"] = working_dir
        self._call("pty/open", {"sandbox_id": sandbox_id, "pty_id": pty_id, "options": options})
        return pty_id

    def pty_write(self, pty_id: str, data: bytes) -> None:
        self._call("pty/input", {"pty_id": pty_id, "data_b64": _b64(data)})

    def pty_read(self, pty_id: str, timeout_s: float = 10.0) -> bytes | None:
        data = self._call("pty/output", {"pty_id": pty_id}, timeout_s)["data_b64"]
        return None if data is None else _unb64(data)

    def pty_resize(self, pty_id: str, rows: int, cols: int) -> None:
        self._call("pty/resize", {"pty_id": pty_id, "size": {"rows": rows, "cols": cols}})

    def pty_close(self, pty_id: str) -> None:
        self._call("pty/close", {"pty_id": pty_id})

    def start_log_follow(self, sandbox_id: str, source: str, stream_id: str | None = None) -> V1RunningFollow:
        stream_id = stream_id or self.next_token("logs")
        params = {"sandbox_id": sandbox_id, "stream_id": stream_id, "source": source}
        return V1RunningFollow(self.connection, stream_id, params, self.call_timeout_s)

    def cancel_stream(self, stream_id: str) -> None:
        self._call("stream/cancel", {"stream_id": stream_id})
