"""Dialect ``sandbox-driver-v1``: the lithoscomputer sandbox-driver plugin protocol, version 1.

snake_case shapes, ``initialize {protocol_version: 1}``, application failures as ``-32000`` with
``data.report.kind`` and ``data.detail``, all bytes as padded base64 in ``*_b64`` fields.
"""

from __future__ import annotations

import base64
import copy
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from conformance import schemas
from conformance.adapter import (
    Capabilities,
    ExecOutcome,
    ExecRequest,
    OperationInfo,
    ProviderAdapter,
    ProviderIdentity,
    SandboxHandle,
    SandboxRequest,
    SandboxStatus,
)
from conformance.dialects.jsonrpc import JsonRpcConnection, JsonRpcRaw, Violation
from conformance.errors import (
    ApplicationErrorAnswer,
    ProtocolErrorAnswer,
    ProviderCallError,
    ProviderStartError,
    SchemaViolation,
)
from conformance.schemas import SchemaProblem

NAME = "sandbox-driver-v1"
PROTOCOL_VERSION = 1
FOLDER = "sandbox-driver-v1"
DEFAULT_BASE_SPEC: dict[str, Any] = {"source": "host_directory"}

NOTIFICATIONS = ("exec/output", "logs/output", "host/event", "host/log")

# Capability names whose wire field is spelled differently (protocol section 5.1).
_ALIASES = {
    "access.preview_urls.signed": "access.signed_preview_urls",
    "access.ssh.ttl": "access.ssh_ttl",
    "access.ssh.revoke": "access.ssh_revoke",
    "snapshots.filesystem": "snapshots.filesystem_from_sandbox",
    "snapshots.live_process_state": "snapshots.live_process_state_from_sandbox",
    "snapshots.from_image.container": "snapshots.from_image_kinds.container",
    "snapshots.from_image.virtual_machine": "snapshots.from_image_kinds.virtual_machine",
    "snapshots.from_dockerfile.container": "snapshots.from_dockerfile_kinds.container",
    "snapshots.from_dockerfile.virtual_machine": "snapshots.from_dockerfile_kinds.virtual_machine",
}
_NULLABLE_GROUPS = ("pty", "logs", "snapshots", "volumes")
_FACET_GROUPS = ("search", "git", "services")


def capability_flags(raw: Any) -> dict[str, bool]:
    """Canonical dotted names → declared, for a v1 capabilities object."""
    flags: dict[str, bool] = {}
    if not isinstance(raw, dict):
        return flags

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, bool):
            flags[prefix] = value
        elif isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else key, inner)

    walk("", raw)
    for group in _NULLABLE_GROUPS:
        flags[group] = isinstance(raw.get(group), dict)
    for group in _FACET_GROUPS:
        value = raw.get(group)
        # {"native": false} from older peers reads as supported; explicit supported:false is unavailable.
        flags[group] = isinstance(value, dict) and value.get("supported", True) is not False
    for name, wire in _ALIASES.items():
        flags[name] = flags.get(wire, False)
    flags["sessions"] = False  # reserved, never supported
    return flags


class V1Rules:
    """Schema checks and error normalization for v1 messages."""

    def __init__(self) -> None:
        self._envelope = schemas.schema_path(FOLDER, "envelope.json")

    def _method_ref(self, method: str, part: str) -> str | None:
        ref = schemas.schema_path(FOLDER, "methods", f"{method.replace('/', '.')}.json") + f"#/$defs/{part}"
        return ref if schemas.exists(ref) else None

    def envelope_problems(self, message: Any) -> list[SchemaProblem]:
        if isinstance(message, dict):
            if "method" in message and "id" not in message:
                form = "Notification"
            elif "error" in message:
                form = "Failure"
            elif "result" in message:
                form = "Success"
            else:
                form = "FromPlugin"
        else:
            form = "FromPlugin"
        return schemas.problems(f"{self._envelope}#/$defs/{form}", message)

    def params_problems(self, method: str, params: Any) -> list[SchemaProblem]:
        ref = self._method_ref(method, "params")
        return schemas.problems(ref, params) if ref else []

    def result_problems(self, method: str, result: Any) -> list[SchemaProblem]:
        ref = self._method_ref(method, "result")
        return schemas.problems(ref, result) if ref else []

    def notification_problems(self, method: str, params: Any) -> list[SchemaProblem]:
        if method not in NOTIFICATIONS:
            return []  # the envelope check already flags unknown notification methods
        ref = schemas.schema_path(FOLDER, "notifications", f"{method.replace('/', '.')}.json") + "#/$defs/params"
        return schemas.problems(ref, params)

    def notification_route(self, method: str, params: Any) -> tuple[str, str] | None:
        if not isinstance(params, dict):
            return None
        key = {"exec/output": "exec_id", "logs/output": "stream_id", "host/event": "route_id"}.get(method)
        if key is None or not isinstance(params.get(key), str):
            return None
        return (method, params[key])

    def error_answer(self, method: str, error: dict[str, Any]) -> ProviderCallError:
        code = error.get("code")
        message = str(error.get("message", ""))
        data = error.get("data")
        if code == -32000 and isinstance(data, dict) and isinstance(data.get("report"), dict):
            report = data["report"]
            detail = data.get("detail") if isinstance(data.get("detail"), dict) else {}
            return ApplicationErrorAnswer(
                method=method, code=code, message=message, data=data,
                kind=str(report.get("kind", "unknown")), detail=detail,
                retryable=bool(report.get("retryable", False)),
            )
        return ProtocolErrorAnswer(method=method, code=code if isinstance(code, int) else None, message=message, data=data)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: Any) -> bytes:
    return base64.b64decode(text) if isinstance(text, str) else b""


def _status(raw: Any) -> SandboxStatus:
    raw = raw if isinstance(raw, dict) else {}
    labels = raw.get("labels") if isinstance(raw.get("labels"), dict) else {}
    return SandboxStatus(id=str(raw.get("id", "")), state=str(raw.get("state", "unknown")),
                         name=raw.get("name"), labels=labels, raw=raw)


ParamsBuilder = Callable[["SandboxDriverV1Adapter", str | None], dict[str, Any]]


def _sid(adapter: SandboxDriverV1Adapter, sandbox_id: str | None) -> dict[str, Any]:
    return {"sandbox_id": sandbox_id}


# Optional operations by neutral name: (method, gating capability, params builder).
OPTIONAL_OPERATIONS: dict[str, tuple[str, str, ParamsBuilder]] = {
    "pause": ("sandbox/pause", "lifecycle.pause", _sid),
    "resume": ("sandbox/resume", "lifecycle.pause", _sid),
    "archive": ("sandbox/archive", "lifecycle.archive", _sid),
    "recover": ("sandbox/recover", "lifecycle.recover", _sid),
    "refresh activity": ("sandbox/refresh_activity", "lifecycle.refresh_activity", _sid),
    "undelete": ("sandbox/undelete", "lifecycle.undelete", _sid),
    "fork": ("sandbox/fork", "lifecycle.fork", lambda a, s: {"sandbox_id": s, "options": {"include_memory": True}}),
    "resize": ("sandbox/resize", "lifecycle.resize", lambda a, s: {"sandbox_id": s, "resources": {"cpu_cores": 1}}),
    "snapshot": ("sandbox/snapshot", "lifecycle.snapshot_sandbox",
                 lambda a, s: {"sandbox_id": s, "options": {"include_memory": False}}),
    "set timers": ("sandbox/set_timers", "lifecycle.timers", lambda a, s: {"sandbox_id": s, "timers": {}}),
    "set labels": ("sandbox/set_labels", "lifecycle.labels",
                   lambda a, s: {"sandbox_id": s, "labels": dict(a.run_labels)}),
    "update network": ("sandbox/update_network", "lifecycle.update_network",
                       lambda a, s: {"sandbox_id": s, "network": "allow_all"}),
    "run with stdin": ("exec/run", "exec.stdin", lambda a, s: {
        "sandbox_id": s,
        "spec": {"command": "cat", "env": {}, "timeout_ms": 10_000, "stdin_b64": _b64(b"conformance")}}),
    "open a stdio process": ("exec/stdio_open", "exec.stdio_process", lambda a, s: {
        "sandbox_id": s, "process_id": a.next_token("stdio"), "spec": {"command": "true", "env": {}}}),
    "open a terminal": ("pty/open", "pty", lambda a, s: {
        "sandbox_id": s, "pty_id": a.next_token("pty"), "options": {"size": {"rows": 24, "cols": 80}, "env": {}}}),
    "follow logs": ("logs/follow", "logs", lambda a, s: {
        "sandbox_id": s, "stream_id": a.next_token("logs"), "source": "provision"}),
    "set permissions": ("fs/set_permissions", "fs.permissions", lambda a, s: {
        "sandbox_id": s, "path": ".", "mode": 0o755}),
    "create a snapshot": ("snapshot/create", "snapshots", lambda a, s: {
        "spec": {"name": a.next_token("conformance-snapshot"), "source": {"image": {"reference": "conformance.invalid/none"}}}}),
    "list snapshots": ("snapshot/list", "snapshots", lambda a, s: {"filter": {}}),
    "get a snapshot": ("snapshot/get", "snapshots", lambda a, s: {"snapshot_id": "conformance-no-such-snapshot"}),
    "delete a snapshot": ("snapshot/delete", "snapshots", lambda a, s: {"snapshot_id": "conformance-no-such-snapshot"}),
    "activate a snapshot": ("snapshot/activate", "snapshots.activation",
                            lambda a, s: {"snapshot_id": "conformance-no-such-snapshot"}),
    "deactivate a snapshot": ("snapshot/deactivate", "snapshots.activation",
                              lambda a, s: {"snapshot_id": "conformance-no-such-snapshot"}),
    "create a volume": ("volume/create", "volumes", lambda a, s: {"spec": {"name": a.next_token("conformance-volume")}}),
    "list volumes": ("volume/list", "volumes", lambda a, s: {}),
    "get a volume": ("volume/get", "volumes", lambda a, s: {"volume_id": "conformance-no-such-volume"}),
    "delete a volume": ("volume/delete", "volumes", lambda a, s: {"volume_id": "conformance-no-such-volume"}),
    "get a preview url": ("access/preview_url", "access.preview_urls", lambda a, s: {"sandbox_id": s, "port": 8080}),
    "get a signed preview url": ("access/signed_preview_url", "access.preview_urls.signed",
                                 lambda a, s: {"sandbox_id": s, "port": 8080, "expires_in_ms": 60_000}),
    "create ssh access": ("access/ssh_create", "access.ssh", lambda a, s: {"sandbox_id": s, "ttl_ms": None}),
    "revoke ssh access": ("access/ssh_revoke", "access.ssh.revoke",
                          lambda a, s: {"sandbox_id": s, "token": "conformance-no-such-token"}),
    "open a web terminal": ("access/web_terminal", "access.web_terminal", _sid),
    "open a vnc connection": ("access/vnc", "access.vnc", _sid),
}
_PROVIDER_LEVEL = {"create a snapshot", "list snapshots", "get a snapshot", "delete a snapshot",
                   "activate a snapshot", "deactivate a snapshot", "create a volume", "list volumes",
                   "get a volume", "delete a volume"}


class SandboxDriverV1Adapter(ProviderAdapter):
    """A v1 plugin behind the shared adapter."""

    dialect = NAME

    def __init__(
        self,
        connection: JsonRpcConnection,
        command: str,
        base_spec: Mapping[str, Any] | None = None,
        run_labels: Mapping[str, str] | None = None,
        call_timeout_s: float = 30.0,
    ) -> None:
        super().__init__()
        self.connection = connection
        self.command = command
        self.base_spec = dict(base_spec if base_spec is not None else DEFAULT_BASE_SPEC)
        self.run_labels = dict(run_labels or {})
        self.call_timeout_s = call_timeout_s
        self._tokens = itertools.count(1)
        self._identity: ProviderIdentity | None = None
        self._capabilities: Capabilities | None = None
        self._raw: JsonRpcRaw | None = None
        connection.add_observer(self._observe)

    # -- handshake -------------------------------------------------------------------------------

    def handshake(self, protocol_version: Any = None, timeout_s: float | None = None, strict: bool = True) -> Any:
        """Send ``initialize``; remember identity and capabilities from the first successful answer.

        Not strict: schema problems in the answer are kept in ``handshake_problems`` for the handshake
        scenarios instead of being raised, so one bad field does not stop the whole run.
        """
        asked = PROTOCOL_VERSION if protocol_version is None else protocol_version
        call = self.connection.request("initialize", {"protocol_version": asked},
                                       timeout_s or self.call_timeout_s, check_result=strict)
        result = call.result()
        if not strict:
            self.handshake_problems = self.connection.rules.result_problems("initialize", result)
        if not isinstance(result, dict):
            raise ProviderStartError(f"initialize answered {result!r}, not an object")
        if self._identity is None:
            self.initialize_result = result
            provider = result.get("provider") if isinstance(result.get("provider"), dict) else {}
            self._identity = ProviderIdentity(
                kind=str(provider.get("kind", "")), version=str(provider.get("version", "")),
                protocol_version=result.get("protocol_version"), dialect=NAME, transport="stdio",
                command=self.command,
            )
            self._capabilities = Capabilities(result.get("capabilities"), capability_flags(result.get("capabilities")))
        return result

    @property
    def identity(self) -> ProviderIdentity:
        if self._identity is None:
            raise ProviderStartError("the provider has not completed its handshake")
        return self._identity

    @property
    def capabilities(self) -> Capabilities:
        if self._capabilities is None:
            raise ProviderStartError("the provider has not completed its handshake")
        return self._capabilities

    @property
    def operations(self) -> Mapping[str, OperationInfo]:
        return {
            name: OperationInfo(name, capability, needs_sandbox=name not in _PROVIDER_LEVEL)
            for name, (_method, capability, _build) in OPTIONAL_OPERATIONS.items()
        }

    def creation_spec_problems(self, spec: Any) -> list[SchemaProblem]:
        return schemas.problems(schemas.schema_path(FOLDER, "common.json") + "#/$defs/SandboxSpec", spec)

    def next_token(self, prefix: str) -> str:
        return f"{prefix}-{next(self._tokens)}"

    # -- core ------------------------------------------------------------------------------------

    def creation_spec(self, request: SandboxRequest) -> dict[str, Any]:
        spec = copy.deepcopy(self.base_spec)
        labels = {**spec.get("labels", {}), **self.run_labels, **request.labels}
        spec["labels"] = labels
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
        spec.update(copy.deepcopy(request.extra))
        return spec

    def create(self, request: SandboxRequest) -> SandboxHandle:
        result = self.connection.call("sandbox/create", {"spec": self.creation_spec(request)}, self.call_timeout_s)
        handle = self._handle(result)
        self.ledger.record_created(handle.id, self.owner)
        return handle

    def attach(self, sandbox_id: str) -> SandboxHandle:
        return self._handle(self.connection.call("sandbox/attach", {"sandbox_id": sandbox_id}, self.call_timeout_s))

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
        return _status(self.connection.call("sandbox/describe", {"sandbox_id": sandbox_id}, self.call_timeout_s)["status"])

    def list(self, labels: Mapping[str, str] | None = None) -> list[SandboxStatus]:
        params = {"filter": {"labels": dict(labels)} if labels else {}}
        result = self.connection.call("sandbox/list", params, self.call_timeout_s)
        return [_status(s) for s in result["sandboxes"]]

    def delete(self, sandbox_id: str) -> None:
        self.connection.call("sandbox/delete", {"sandbox_id": sandbox_id}, self.call_timeout_s)
        self.ledger.record_deleted(sandbox_id)

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
            result = self.connection.call("exec/run", params, request.timeout_s + self.call_timeout_s)
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

    def invoke(self, operation: str, sandbox_id: str | None) -> Any:
        method, _capability, build = OPTIONAL_OPERATIONS[operation]
        return self.connection.call(method, build(self, sandbox_id), self.call_timeout_s)

    # -- diagnostics and teardown ----------------------------------------------------------------

    @property
    def raw(self) -> JsonRpcRaw:
        if self._raw is None:
            self._raw = JsonRpcRaw(self.connection)
        return self._raw

    def stderr_tail(self, since: int | None = None) -> str:
        return self.connection.transport.stderr_tail(since)

    def stderr_position(self) -> int:
        return self.connection.transport.stderr_position()

    def take_violations(self) -> list[Violation]:
        return self.connection.take_violations()

    @property
    def alive(self) -> bool:
        return not self.connection.closed and self.connection.transport.alive

    def close(self) -> None:
        self.connection.close()


def looks_like(initialize_result: Any) -> bool:
    """Does an ``initialize`` answer come from a v1 plugin?"""
    return isinstance(initialize_result, dict) and "protocol_version" in initialize_result


__all__ = ["SandboxDriverV1Adapter", "V1Rules", "capability_flags", "looks_like", "SchemaViolation"]
