"""The optional facets of a v1 plugin: files, stdio processes, terminals, streams, optional operations
and control-plane events. Each speaks through the adapter's control connection."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from conformance.adapter import (
    ChunkObserver,
    DirEntryInfo,
    EventRoute,
    Events,
    ExecRequest,
    FileInfo,
    Files,
    OperationInfo,
    OperationResult,
    Operations,
    Processes,
    ProcessExit,
    ReceivedEvent,
    SandboxHandle,
    Streams,
    Terminals,
)
from conformance.dialects.jsonrpc import Inbound
from conformance.dialects.sandbox_driver_v1.operations import OPERATIONS, V1Operation
from conformance.dialects.sandbox_driver_v1.rules import NAME
from conformance.dialects.sandbox_driver_v1.streams import LIVE_INPUT, V1RunningExec, V1RunningFollow
from conformance.errors import NotExpressible

if TYPE_CHECKING:
    from conformance.dialects.sandbox_driver_v1.adapter import SandboxDriverV1Adapter


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: Any) -> bytes:
    return base64.b64decode(text) if isinstance(text, str) else b""


class V1Files(Files):
    def __init__(self, adapter: SandboxDriverV1Adapter) -> None:
        self._call = adapter._call

    def read(self, sandbox_id: str, path: str, offset: int | None = None, length: int | None = None) -> bytes:
        params: dict[str, Any] = {"sandbox_id": sandbox_id, "path": path}
        if offset is not None:
            params["offset"] = offset
        if length is not None:
            params["length"] = length
        return unb64(self._call("fs/read", params)["content_b64"])

    def write(self, sandbox_id: str, path: str, data: bytes, append: bool | None = None) -> None:
        params: dict[str, Any] = {"sandbox_id": sandbox_id, "path": path, "content_b64": b64(data)}
        if append is not None:
            params["append"] = append
        self._call("fs/write", params)

    def exists(self, sandbox_id: str, path: str) -> bool:
        return bool(self._call("fs/exists", {"sandbox_id": sandbox_id, "path": path})["exists"])

    def metadata(self, sandbox_id: str, path: str) -> FileInfo:
        meta = self._call("fs/metadata", {"sandbox_id": sandbox_id, "path": path})["metadata"]
        return FileInfo(str(meta.get("kind")), meta.get("size"), meta.get("mode"), meta)

    def list_dir(self, sandbox_id: str, path: str, depth: int) -> list[DirEntryInfo]:
        entries = self._call("fs/list_dir", {"sandbox_id": sandbox_id, "path": path, "depth": depth})["entries"]
        return [DirEntryInfo(str(e.get("path")), str(e.get("kind")), e.get("size")) for e in entries]

    def mkdir(self, sandbox_id: str, path: str) -> None:
        self._call("fs/create_dir", {"sandbox_id": sandbox_id, "path": path})

    def rename(self, sandbox_id: str, source: str, target: str) -> None:
        self._call("fs/rename", {"sandbox_id": sandbox_id, "from": source, "to": target})

    def delete_path(self, sandbox_id: str, path: str, recursive: bool) -> None:
        self._call("fs/delete", {"sandbox_id": sandbox_id, "path": path, "recursive": recursive})


class V1Processes(Processes):
    def __init__(self, adapter: SandboxDriverV1Adapter) -> None:
        self._adapter = adapter
        self._call = adapter._call

    def open(self, sandbox_id: str, command: str, env: Mapping[str, str] | None = None,
             working_dir: str | None = None, process_id: str | None = None) -> str:
        process_id = process_id or self._adapter.next_token("stdio")
        spec: dict[str, Any] = {"command": command, "env": dict(env or {})}
        if working_dir is not None:
            spec["working_dir"] = working_dir
        self._call("exec/stdio_open", {"sandbox_id": sandbox_id, "process_id": process_id, "spec": spec})
        return process_id

    def write(self, process_id: str, data: bytes) -> None:
        self._call("exec/stdio_input", {"process_id": process_id, "data_b64": b64(data)})

    def close_input(self, process_id: str) -> None:
        self._call("exec/stdio_close_input", {"process_id": process_id})

    def read(self, process_id: str, timeout_s: float = 10.0) -> bytes | None:
        data = self._call("exec/stdio_output", {"process_id": process_id}, timeout_s)["data_b64"]
        return None if data is None else unb64(data)

    def terminate(self, process_id: str) -> None:
        self._call("exec/stdio_terminate", {"process_id": process_id})

    def wait(self, process_id: str, timeout_s: float = 30.0) -> ProcessExit:
        result = self._call("exec/stdio_wait", {"process_id": process_id}, timeout_s)
        return ProcessExit(result.get("termination"), result.get("exit_code"), str(result.get("stderr_tail", "")))


class V1Terminals(Terminals):
    def __init__(self, adapter: SandboxDriverV1Adapter) -> None:
        self._adapter = adapter
        self._call = adapter._call

    def open(self, sandbox_id: str, rows: int = 24, cols: int = 80, env: Mapping[str, str] | None = None,
             working_dir: str | None = None, pty_id: str | None = None) -> str:
        pty_id = pty_id or self._adapter.next_token("pty")
        options: dict[str, Any] = {"size": {"rows": rows, "cols": cols}, "env": dict(env or {})}
        if working_dir is not None:
            options["working_dir"] = working_dir
        self._call("pty/open", {"sandbox_id": sandbox_id, "pty_id": pty_id, "options": options})
        return pty_id

    def write(self, pty_id: str, data: bytes) -> None:
        self._call("pty/input", {"pty_id": pty_id, "data_b64": b64(data)})

    def read(self, pty_id: str, timeout_s: float = 10.0) -> bytes | None:
        data = self._call("pty/output", {"pty_id": pty_id}, timeout_s)["data_b64"]
        return None if data is None else unb64(data)

    def resize(self, pty_id: str, rows: int, cols: int) -> None:
        self._call("pty/resize", {"pty_id": pty_id, "size": {"rows": rows, "cols": cols}})

    def close(self, pty_id: str) -> None:
        self._call("pty/close", {"pty_id": pty_id})


class V1Streams(Streams):
    dialect = NAME

    def __init__(self, adapter: SandboxDriverV1Adapter) -> None:
        self._adapter = adapter
        self._call = adapter._call

    def start_exec(self, sandbox_id: str, request: ExecRequest, retained_limit: int | None = None,
                   exec_id: str | None = None, observers: tuple[ChunkObserver, ...] = ()) -> V1RunningExec:
        if request.live_stdin:
            raise NotExpressible(NAME, LIVE_INPUT)
        adapter = self._adapter
        exec_id = exec_id or adapter.next_token(f"x{sandbox_id}")
        params: dict[str, Any] = {"sandbox_id": sandbox_id, "exec_id": exec_id, "spec": adapter.exec_spec(request),
                                  **request.undefined_fields}
        if retained_limit is not None:
            params["retained_output_limit"] = retained_limit
        return V1RunningExec(adapter.connection, exec_id, params, request.timeout_s + adapter.call_timeout_s,
                             adapter.exec_outcome, check_params=not request.unchecked, observers=observers)

    def cancel_exec(self, exec_id: str) -> None:
        self._call("exec/cancel", {"exec_id": exec_id})

    def start_log_follow(self, sandbox_id: str, source: str, stream_id: str | None = None) -> V1RunningFollow:
        adapter = self._adapter
        stream_id = stream_id or adapter.next_token("logs")
        params = {"sandbox_id": sandbox_id, "stream_id": stream_id, "source": source}
        return V1RunningFollow(adapter.connection, stream_id, params, adapter.call_timeout_s)

    def cancel_stream(self, stream_id: str) -> None:
        self._call("stream/cancel", {"stream_id": stream_id})


class V1Operations(Operations):
    refusal_names_capability = True
    # The sketch gates these; in v1 they are core methods, or another row's operation.
    core_here = {
        "read a file natively": "fs/read is a core method, checked by the file scenarios",
        "write a file natively": "fs/write is a core method, checked by the file scenarios",
        "list a directory natively": "fs/list_dir is a core method, checked by the file scenarios",
        "stop the sandbox": "sandbox/stop is a core method, checked by stop-start-cycle",
        "stream a command's output": "exec/stream is a core method, checked by the streaming scenarios",
        "set auto-stop": "auto-stop is sandbox/set_timers' auto_stop_after_idle, the `set timers` row",
    }

    # The dialect's operations by neutral name (a later dialect replaces the ones it asks for differently).
    table: Mapping[str, V1Operation] = OPERATIONS

    def __init__(self, adapter: SandboxDriverV1Adapter) -> None:
        self._adapter = adapter

    @property
    def catalogue(self) -> Mapping[str, OperationInfo]:
        return {name: OperationInfo(name, op.capability, needs_sandbox=not op.provider_level,
                                    served_through=op.served_through)
                for name, op in self.table.items()}

    def invoke(self, operation: str, sandbox_id: str | None, events: EventRoute | None = None,
               **arguments: Any) -> OperationResult | SandboxHandle:
        adapter = self._adapter
        op = self.table.get(operation)
        if op is None:
            raise NotExpressible(adapter.dialect, operation)
        if events is not None and not op.takes_events:
            raise NotExpressible(adapter.dialect, f"events for {operation}")
        result = adapter._evented(op.method, op.build(adapter, sandbox_id, arguments), events, operation)
        if op.method in ("sandbox/fork", "sandbox/undelete") and isinstance(result, dict) and "status" in result:
            handle = adapter._handle(result)
            if op.method == "sandbox/fork":
                adapter.ledger.record_created(handle.id, adapter.owner)
            else:
                adapter.ledger.record_restored(handle.id, adapter.owner)  # back in the cleanup registry
            return handle
        return op.read(result)


class V1Events(Events):
    def __init__(self, adapter: SandboxDriverV1Adapter) -> None:
        self._connection = adapter.connection

    def watch(self) -> list[ReceivedEvent]:
        seen: list[ReceivedEvent] = []

        def collect(inbound: Inbound) -> None:
            params = inbound.message.get("params") or {}
            event = params.get("event") if isinstance(params.get("event"), dict) else {}
            seen.append(ReceivedEvent(inbound.sequence, inbound.at, params.get("route_id"), event))

        self._connection.listen_all("host/event", collect)
        return seen
