"""A fabro-sketch plugin behind the shared adapter.

Plugins of this dialect may own exactly one sandbox per process (the forkd plugin does). In that
mode every create starts a fresh plugin process, and every later call about that sandbox goes to
its process; calls about ids nobody here created go to the control process.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from conformance.adapter import (
    Done,
    EventRoute,
    ExecOutcome,
    ExecRequest,
    OperationInfo,
    OperationResult,
    Operations,
    PreviewUrl,
    SandboxHandle,
    SandboxRequest,
    SandboxStatus,
)
from conformance.dialects.commands import bash_argv
from conformance.dialects.fabro_sketch.rules import (
    NAME,
    PROTOCOL_VERSION,
    VOCABULARY,
    capability_flags,
    network_modes,
)
from conformance.dialects.jsonrpc import JsonRpcConnection, Violation
from conformance.dialects.jsonrpc_adapter import JsonRpcAdapter
from conformance.errors import ApplicationErrorAnswer, NotExpressible

Connect = Callable[[str], JsonRpcConnection]
CREATE_FIELDS = frozenset({"snapshot_tag"})  # everything the sketch's sandbox/create accepts
PROBE_MARKER = ".sandbox-conformance-probe"  # written into the probe's first sandbox, relative to its cwd

# Optional operations of the sketch by neutral name: (method, capability, params builder). Only methods
# the sketch defines: it has no exec/cancel (the forkd plugin declares `exec.cancel: false` and answers
# any method it lacks as a protocol error), so "cancel a command" is not expressible here.
OPERATIONS: dict[str, tuple[str, str, Callable[[str | None], dict[str, Any]]]] = {
    "stream a command's output": ("exec/stream", "exec.streaming", lambda s: {"id": s, "args": ["true"]}),
    "read a file natively": ("fs/readFile", "fs.native", lambda s: {"id": s, "path": "conformance.txt"}),
    "write a file natively": ("fs/writeFile", "fs.native", lambda s: {"id": s, "path": "conformance.txt", "content": ""}),
    "list a directory natively": ("fs/listDirectory", "fs.native", lambda s: {"id": s, "path": "."}),
    "grep files": ("fs/grep", "grep", lambda s: {"id": s, "pattern": "conformance", "path": "."}),
    "glob for files": ("fs/glob", "glob", lambda s: {"id": s, "pattern": "*"}),
    "get a preview url": ("net/previewUrl", "access.preview_urls", lambda s: {"id": s, "port": 8080}),
    "stop the sandbox": ("sandbox/stop", "lifecycle.stop", lambda s: {"id": s}),
    "set auto-stop": ("sandbox/setAutostop", "lifecycle.autoStop", lambda s: {"id": s, "minutes": 30}),
}


def _typed(operation: str, result: Any) -> OperationResult:
    if operation == "get a preview url":
        url = result.get("url") if isinstance(result, dict) else None
        return PreviewUrl(result, url=url if isinstance(url, str) else None)
    return Done(result)


class SketchOperations(Operations):
    """The sketch's optional operations; each goes to the process that owns the sandbox."""

    refusal_names_capability = False  # the sketch's unsupported answer is a fixed sentence

    def __init__(self, adapter: FabroSketchAdapter) -> None:
        self._adapter = adapter

    @property
    def catalogue(self) -> Mapping[str, OperationInfo]:
        return {name: OperationInfo(name, capability) for name, (_m, capability, _b) in OPERATIONS.items()}

    def invoke(self, operation: str, sandbox_id: str | None, events: EventRoute | None = None,
               **arguments: Any) -> OperationResult:
        if operation not in OPERATIONS or events is not None:
            raise NotExpressible(NAME, operation if events is None else "control-plane events")
        method, _capability, build = OPERATIONS[operation]
        adapter = self._adapter
        return _typed(operation, adapter._call(adapter._route(sandbox_id), method, {**build(sandbox_id), **arguments}))


class FabroSketchAdapter(JsonRpcAdapter):
    """A sketch plugin, possibly one process per sandbox."""

    dialect = NAME
    version_key = "protocolVersion"
    capability_flags = staticmethod(capability_flags)
    vocabulary = VOCABULARY
    exec_reports = frozenset({"stage", "outcome_kind"})  # stdout and stderr are JSON strings: text only
    # The sketch has these methods, but this adapter offers no streams or files facet for them: a
    # plugin declaring the capability false skips as "capability ... not declared".
    # The sketch has no not-found code: a create whose params name nothing real is -32602, its answer for
    # bad params (the forkd plugin's InvalidState), which rules.py reads as kind invalid_state.
    missing_reference_kinds = frozenset({"invalid_state"})
    snapshot_spec_fields = frozenset({"snapshot_tag"})
    capabilities_without_method = {"exec.cancel": "cancel a command"}  # declared (false), but no exec/cancel
    wire_methods_without_facet = {
        "streaming exec": ("exec/stream", "exec.streaming"),
        "read a file": ("fs/readFile", "fs.native"),
        "write a file": ("fs/writeFile", "fs.native"),
        "list a directory": ("fs/listDirectory", "fs.native"),
    }

    def __init__(self, control: JsonRpcConnection, connect: Connect, command: str,
                 base_spec: Mapping[str, Any] | None = None, call_timeout_s: float = 30.0,
                 sandboxes_per_process: str = "auto") -> None:
        super().__init__(control, command, call_timeout_s)
        self.control = control  # the connection calls about no particular sandbox go to
        self._connect = connect
        self.base_spec = dict(base_spec or {})
        self.sandboxes_per_process = sandboxes_per_process
        self._lock = threading.Lock()
        self._owners: dict[str, JsonRpcConnection] = {}  # sandbox id → the process that owns it
        self._strays: JsonRpcConnection | None = None  # where calls naming an unknown id go (alongside)
        self._by_scenario: dict[str, list[JsonRpcConnection]] = {}
        self._spawned = 0
        self.operations = SketchOperations(self)

    # -- connections -----------------------------------------------------------------------------

    def _route(self, sandbox_id: str | None) -> JsonRpcConnection:
        with self._lock:
            return self._owners.get(sandbox_id or "", self._strays or self.control)

    @contextmanager
    def alongside(self, sandbox_id: str) -> Iterator[None]:
        with self._lock:
            self._strays = self._owners.get(sandbox_id)
        try:
            yield
        finally:
            with self._lock:
                self._strays = None

    def _call(self, connection: JsonRpcConnection, method: str, params: Any, timeout_s: float | None = None) -> Any:
        return connection.call(method, params, timeout_s or self.call_timeout_s)

    def _sandbox_process(self) -> JsonRpcConnection:
        with self._lock:
            self._spawned += 1
            channel = f"sandbox#{self._spawned}"
        connection = self._connect(channel)
        connection.add_observer(self._observe)
        connection.call("initialize", {"protocolVersion": PROTOCOL_VERSION}, self.call_timeout_s)
        with self._lock:
            self._by_scenario.setdefault(self.owner, []).append(connection)
        return connection

    def settle(self) -> None:
        self.detect_sandboxes_per_process()

    def settled(self) -> dict[str, Any]:
        return {"sandboxes_per_process": self.sandboxes_per_process}

    def detect_sandboxes_per_process(self) -> str:
        """Ask a throwaway process for two sandboxes. Refusing the second means one per process; so does
        accepting it by silently replacing the first (the forkd plugin keeps one id and overwrites it):
        after the second create the first must still be served — described under its own id, not gone,
        and still holding a marker file written into it before the second create."""
        if self.sandboxes_per_process != "auto":
            return self.sandboxes_per_process
        probe = self._connect("probe")
        try:
            probe.call("initialize", {"protocolVersion": PROTOCOL_VERSION}, self.call_timeout_s)
            first = str(probe.call("sandbox/create", dict(self.base_spec), self.call_timeout_s)["id"])
            marked = self._probe_exec(probe, first, f"printf %s {first} > {PROBE_MARKER}") is not None
            try:
                second = probe.call("sandbox/create", dict(self.base_spec), self.call_timeout_s)
            except ApplicationErrorAnswer:
                self.sandboxes_per_process = "one"
            else:
                kept = self._still_served(probe, first, marked)
                self.sandboxes_per_process = "many" if kept else "one"
                self._probe_delete(probe, str(second["id"]))
            self._probe_delete(probe, first)
        finally:
            probe.close(grace_s=1.0)
        return self.sandboxes_per_process

    def _probe_exec(self, probe: JsonRpcConnection, sandbox_id: str, script: str) -> str | None:
        """stdout of a probe command that exited 0, else None."""
        try:
            result = probe.call("exec", {"id": sandbox_id, "args": ["sh", "-c", script], "timeout_secs": 10},
                                self.call_timeout_s + 10)
        except ApplicationErrorAnswer:
            return None
        if not isinstance(result, dict) or result.get("exit_code") != 0 or result.get("outcome_kind") == "infra":
            return None
        return str(result.get("stdout", ""))

    def _still_served(self, probe: JsonRpcConnection, first: str, marked: bool) -> bool:
        try:
            status = probe.call("sandbox/describe", {"id": first}, self.call_timeout_s)
        except ApplicationErrorAnswer:
            return False
        if not isinstance(status, dict) or str(status.get("id")) != first or status.get("state") in ("deleted", "deleting"):
            return False
        # A describe may be a static answer (the forkd plugin's is): the marker says whose files these are.
        return not marked or self._probe_exec(probe, first, f"cat {PROBE_MARKER}") == first

    def _probe_delete(self, probe: JsonRpcConnection, sandbox_id: str) -> None:
        try:
            probe.call("sandbox/delete", {"id": sandbox_id}, self.call_timeout_s)
        except ApplicationErrorAnswer:
            pass  # the probe process is closed next; an overwritten id may be gone already

    def release(self, owner: str) -> None:
        """Close the processes of sandboxes a scenario created (their deletes have run)."""
        with self._lock:
            connections = self._by_scenario.pop(owner, [])
            self._owners = {sid: c for sid, c in self._owners.items() if c not in connections}
        for connection in connections:
            connection.close(grace_s=1.0)

    # -- handshake -------------------------------------------------------------------------------

    def handshake(self, protocol_version: Any = None, timeout_s: float | None = None, strict: bool = True) -> Any:
        asked = PROTOCOL_VERSION if protocol_version is None else protocol_version
        call = self.control.request("initialize", {"protocolVersion": asked}, timeout_s or self.call_timeout_s,
                                    check_result=strict)
        result = call.result()
        self.adopt_initialize(result)
        return result

    # -- sandboxes -------------------------------------------------------------------------------

    def create(self, request: SandboxRequest) -> SandboxHandle:
        if request.events is not None:
            raise NotExpressible(NAME, "control-plane events")
        if request.network is not None:
            # The sketch declares network modes, but its create takes no network policy: a mode it lists
            # cannot be asked for (forkd lists three and can apply none).
            modes = network_modes(self.capabilities.raw)
            declared = f" (the plugin declares network modes {', '.join(modes)})" if modes else ""
            raise NotExpressible(NAME, f"creating a sandbox with a network policy{declared}")
        if request.labels or request.env or request.name or request.memory_mb or request.cpu_cores:
            # The sketch's create takes a snapshot tag and nothing else: labels, env, names and sizes
            # cannot be asked for (forkd's GAP 2 is the sizing part of this).
            wanted = [k for k in ("labels", "env", "name", "memory_mb", "cpu_cores") if getattr(request, k)]
            raise NotExpressible(NAME, f"creating a sandbox with {', '.join(wanted)}")
        unknown = sorted(set(request.extra) - CREATE_FIELDS)
        if unknown:
            raise NotExpressible(NAME, f"creating a sandbox with {', '.join(unknown)}")
        params = {**self.base_spec, **request.extra}
        if request.from_snapshot is not None:
            params["snapshot_tag"] = request.from_snapshot
        connection = self._sandbox_process() if self.sandboxes_per_process == "one" else self.control
        result = self._call(connection, "sandbox/create", params)
        handle = SandboxHandle(id=str(result["id"]), status=SandboxStatus(str(result["id"]), str(result["state"]), raw=result),
                               working_directory=None, runtime_directory=None, capabilities=None, raw=result)
        with self._lock:
            self._owners[handle.id] = connection
        self.ledger.record_created(handle.id, self.owner)
        return handle

    def describe(self, sandbox_id: str) -> SandboxStatus:
        result = self._call(self._route(sandbox_id), "sandbox/describe", {"id": sandbox_id})
        return SandboxStatus(str(result["id"]), str(result["state"]), raw=result)

    def list(self, labels: Mapping[str, str] | None = None) -> list[SandboxStatus]:
        raise NotExpressible(NAME, "listing sandboxes")

    def delete(self, sandbox_id: str, events: EventRoute | None = None) -> None:
        if events is not None:
            raise NotExpressible(NAME, "control-plane events")
        self._call(self._route(sandbox_id), "sandbox/delete", {"id": sandbox_id})
        self.ledger.record_deleted(sandbox_id)

    def start(self, sandbox_id: str) -> None:
        self._call(self._route(sandbox_id), "sandbox/start", {"id": sandbox_id})

    def stop(self, sandbox_id: str) -> None:
        self._call(self._route(sandbox_id), "sandbox/stop", {"id": sandbox_id})

    def shutdown(self) -> Any:
        return self._call(self.control, "shutdown", {})

    # -- exec ------------------------------------------------------------------------------------

    @staticmethod
    def argv(request: ExecRequest) -> list[str]:
        """The sketch runs an argument vector: Bash source becomes ``bash -c``; the working directory
        and the environment are folded in, as hosts of this dialect do."""
        return bash_argv(request, NAME)

    def exec(self, sandbox_id: str, request: ExecRequest) -> ExecOutcome:
        params = {"id": sandbox_id, "args": self.argv(request), "timeout_secs": max(1, math.ceil(request.timeout_s))}
        try:
            result = self._call(self._route(sandbox_id), "exec", params, request.timeout_s + self.call_timeout_s)
        except ApplicationErrorAnswer as error:
            return ExecOutcome("infra", None, None, None, b"", b"", None, error=error)
        outcome = result.get("outcome_kind", "ran")
        return ExecOutcome(
            outcome="infra" if outcome == "infra" else "ran",
            termination=result.get("termination"),
            exit_code=result.get("exit_code"),
            signal=None,
            stdout=str(result.get("stdout", "")).encode("utf-8"),
            stderr=str(result.get("stderr", "")).encode("utf-8"),
            duration_s=None,
            stage=result.get("stage"),
            raw=result,
        )

    # -- diagnostics and teardown ----------------------------------------------------------------

    def _connections(self) -> list[JsonRpcConnection]:
        with self._lock:
            return [self.control, *{id(c): c for c in self._owners.values()}.values()]

    def take_violations(self) -> list[Violation]:
        found: list[Violation] = []
        for connection in self._connections():
            found.extend(connection.take_violations())
        return found

    def close(self) -> None:
        for connection in self._connections():
            connection.close(grace_s=1.0)
