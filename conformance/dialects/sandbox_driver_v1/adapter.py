"""A sandbox-driver v1 plugin behind the shared adapter."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from typing import Any

from conformance import schemas
from conformance.adapter import (
    Capabilities,
    EventRoute,
    ExecOutcome,
    ExecRequest,
    HealthInfo,
    PlatformInfo,
    ReceivedEvent,
    SandboxHandle,
    SandboxRequest,
    SandboxStatus,
)
from conformance.dialects.jsonrpc import Inbound, JsonRpcConnection
from conformance.dialects.jsonrpc_adapter import JsonRpcAdapter
from conformance.dialects.sandbox_driver_v1.facets import (
    V1Events,
    V1Files,
    V1Operations,
    V1Processes,
    V1Streams,
    V1Terminals,
    b64,
    unb64,
)
from conformance.dialects.sandbox_driver_v1.rules import (
    CAPABILITY_SPELLINGS,
    DEFAULT_BASE_SPEC,
    NAME,
    PROTOCOL_VERSION,
    VOCABULARY,
    capability_flags,
    common_ref,
    isolation_of,
    network_policy,
    read_network_policy,
)
from conformance.errors import ApplicationErrorAnswer, NotExpressible
from conformance.schemas import SchemaProblem


def _status(raw: Any) -> SandboxStatus:
    raw = raw if isinstance(raw, dict) else {}
    labels = raw.get("labels") if isinstance(raw.get("labels"), dict) else {}
    return SandboxStatus(id=str(raw.get("id", "")), state=str(raw.get("state", "unknown")),
                         name=raw.get("name"), labels=labels, raw=raw, network=read_network_policy(raw.get("network")))


class SandboxDriverV1Adapter(JsonRpcAdapter):
    """A v1 plugin behind the shared adapter."""

    dialect = NAME
    capability_flags = staticmethod(capability_flags)
    isolation_of = staticmethod(isolation_of)
    capability_spellings = CAPABILITY_SPELLINGS
    exec_reports = frozenset({"bytes", "signal", "duration"})
    handle_reports = frozenset({"working_directory", "runtime_directory"})  # HandleInfo (v1 section 8.1)
    core_capabilities = frozenset({"lifecycle.stop"})  # sandbox/stop and sandbox/start are core in v1
    snapshot_spec_fields = frozenset({"source"})  # spec.source = {snapshot: {name}}
    terminal_event_precedes_answer = True  # v1: the terminal event is written before the response
    vocabulary = VOCABULARY
    exit_on_input_closed_rule = "SDP1-097: the plugin exits when its stdin is closed"
    shutdown_rule = "SDP1-096: on shutdown the plugin replies, stops reading its input and exits soon after"

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
        self.files = V1Files(self)
        self.processes = V1Processes(self)
        self.terminals = V1Terminals(self)
        self.streams = V1Streams(self)
        self.operations = V1Operations(self)
        self.events = V1Events(self)
        # Early v1 (upstream's v1 host plugin) reports a handle's later operations on the route of its
        # create/attach; late v1 adds a per-call `events` object. Both are accepted: a delete that asks for
        # events also collects the delete's events that arrive on the routes its handle was given.
        self._handle_routes: dict[str, list[str]] = {}  # sandbox id -> route ids of its create/attach
        self._diverted: dict[str, dict[str, EventRoute]] = {}  # handle route id -> action -> the asking route

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
            received = ReceivedEvent(inbound.sequence, inbound.at, params.get("route_id"), event)
            target = self._diverted.get(route.route_id, {}).get(str(received.action))
            (target or route).received.append(received)

        self.connection.subscribe(("host/event", route.route_id), collect)
        request: dict[str, Any] = {"route_id": route.route_id}
        if route.correlation_id is not None:
            request["correlation_id"] = route.correlation_id
        return {"events": request}

    @staticmethod
    def _note_answer(route: EventRoute | None, operation: str, call: Any) -> None:
        if route is not None and call.answer_sequence is not None:
            route.answers.append((operation, call.answer_sequence))

    def _evented(self, method: str, params: dict[str, Any], route: EventRoute | None, operation: str,
                 check_params: bool = True) -> Any:
        call = self.connection.request(method, {**params, **self._events_param(route)}, self.call_timeout_s,
                                       check_params=check_params)
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
        if request.network is not None:
            spec["network"] = network_policy(request.network)
        spec.update(copy.deepcopy(request.extra))
        return spec

    def create(self, request: SandboxRequest) -> SandboxHandle:
        result = self._evented("sandbox/create", {"spec": self.creation_spec(request)}, request.events, "create",
                               check_params=not request.unchecked)
        handle = self._handle(result)
        self.ledger.record_created(handle.id, self.owner)
        self._remember_route(handle.id, request.events)
        return handle

    def attach(self, sandbox_id: str, events: EventRoute | None = None) -> SandboxHandle:
        handle = self._handle(self._evented("sandbox/attach", {"sandbox_id": sandbox_id}, events, "attach"))
        self._remember_route(handle.id, events)
        return handle

    def _remember_route(self, sandbox_id: str, route: EventRoute | None) -> None:
        if route is not None:
            self._handle_routes.setdefault(sandbox_id, []).append(route.route_id)

    def _handle(self, result: dict[str, Any]) -> SandboxHandle:
        caps = result.get("capabilities")
        return SandboxHandle(
            id=str(result["status"]["id"]),
            status=_status(result["status"]),
            working_directory=result.get("working_directory"),
            runtime_directory=result.get("runtime_directory"),
            # The dialect's own reading (v2 adds one_shot and the exec.stop alias), like the provider's set.
            capabilities=Capabilities(caps, type(self).capability_flags(caps), self.capability_spellings,
                                      isolation=type(self).isolation_of(caps)),
            raw=result,
        )

    def describe(self, sandbox_id: str) -> SandboxStatus:
        return _status(self._call("sandbox/describe", {"sandbox_id": sandbox_id})["status"])

    def list(self, labels: Mapping[str, str] | None = None) -> list[SandboxStatus]:
        result = self._call("sandbox/list", {"filter": {"labels": dict(labels)} if labels else {}})
        return [_status(s) for s in result["sandboxes"]]

    def list_params_as_given(self, labels: Mapping[str, str] | None) -> Any:
        return {"filter": {"labels": None if labels is None else dict(labels)}}

    def read_described(self, answer: Any) -> SandboxStatus:
        return _status(answer.get("status") if isinstance(answer, dict) else None)

    def read_listed(self, answer: Any) -> list[SandboxStatus]:
        statuses = answer.get("sandboxes") if isinstance(answer, dict) else None
        return [_status(s) for s in statuses if isinstance(s, dict)] if isinstance(statuses, list) else []

    def delete(self, sandbox_id: str, events: EventRoute | None = None) -> None:
        if events is not None:
            for route_id in self._handle_routes.get(sandbox_id, []):
                if route_id != events.route_id:
                    self._diverted.setdefault(route_id, {})["delete"] = events
        self._evented("sandbox/delete", {"sandbox_id": sandbox_id}, events, "delete")
        self._handle_routes.pop(sandbox_id, None)
        self.ledger.record_deleted(sandbox_id)

    def start(self, sandbox_id: str) -> None:
        self._call("sandbox/start", {"sandbox_id": sandbox_id})

    def stop(self, sandbox_id: str) -> None:
        self._call("sandbox/stop", {"sandbox_id": sandbox_id})

    def platform_info(self, sandbox_id: str) -> PlatformInfo:
        platform = self._call("sandbox/platform_info", {"sandbox_id": sandbox_id})["platform"]
        platform = platform if isinstance(platform, dict) else {}
        return PlatformInfo(platform.get("os"), platform.get("arch"), platform.get("version"), platform)

    def health(self) -> HealthInfo:
        health = self._call("provider/health", None)["health"]
        return HealthInfo(str(health.get("status")), health.get("message"), health)

    def shutdown(self) -> Any:
        return self._call("shutdown", None)

    # -- exec ------------------------------------------------------------------------------------

    def exec_spec(self, request: ExecRequest) -> dict[str, Any]:
        if request.argv is not None:
            raise NotExpressible(self.dialect, "an argument vector run without a shell")
        if request.stop_grace_s is not None:
            raise NotExpressible(self.dialect, "a stop grace for the provider's own stops")
        spec: dict[str, Any] = {"command": request.command}
        if not request.minimal_spec:  # the launch-era spec had only the command and its environment
            spec["timeout_ms"] = int(request.timeout_s * 1000)
        spec["env"] = dict(request.env)
        if request.working_dir is not None:
            spec["working_dir"] = request.working_dir
        if request.stdin is not None:
            spec["stdin_b64"] = b64(request.stdin)
        if request.sanitization is not None:
            spec["output_sanitization"] = request.sanitization
        spec.update(request.undefined_fields)
        return spec

    def exec(self, sandbox_id: str, request: ExecRequest) -> ExecOutcome:
        params = {"sandbox_id": sandbox_id, "spec": self.exec_spec(request), **request.undefined_fields}
        try:
            result = self.connection.request("exec/run", params, request.timeout_s + self.call_timeout_s,
                                             check_params=not request.unchecked).result()
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
            stdout=unb64(result.get("stdout_b64")),
            stderr=unb64(result.get("stderr_b64")),
            duration_s=duration / 1000 if isinstance(duration, int) else None,
            raw=result,
        )
