"""Broken variants of the v1 host plugin: the wire (framing, envelopes, ids, notifications, concurrency),
the capability declaration, error answers, encodings, tolerant reading, health and the end of a session.

Each models a bug a real provider could ship: a debug print on stdout, a pretty-printer left on, a
read loop that drops lines, ids that pass through a double, a serde struct that denies unknown fields.
The controls at the end are honest doubles the reference cannot be: they prove that a scenario also
passes for a provider that takes the other permitted road (an unhealthy status, an error id of null).
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
import os
import time
from collections.abc import Iterator
from typing import Any

from conformance.reference.host_backend import BackendError, invalid_spec
from conformance.reference.host_plugin import HostPlugin, RpcFailure, application_error
from conformance.reference.stdio_server import INVALID_REQUEST
from tests.mutants import mutant

# -- stdout and framing ----------------------------------------------------------------------------


@mutant("stream-progress-on-stdout")
class StreamProgressOnStdout(HostPlugin):
    """Prints a progress line on stdout whenever a streamed command starts."""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        with self._write_lock:
            self.stdout.write(f"streaming {params.get('exec_id')}\n".encode())
            self.stdout.flush()
        return super().m_exec_stream(params)


@mutant("pretty-printed-output-notifications")
class PrettyPrintedOutputNotifications(HostPlugin):
    """Pretty-prints exec/output notifications, so each spans several lines."""

    def notify(self, method: str, params: Any) -> None:
        if method != "exec/output":
            return super().notify(method, params)
        text = json.dumps({"jsonrpc": "2.0", "method": method, "params": params}, indent=2)
        with self._write_lock:
            self.stdout.write(text.encode() + b"\n")
            self.stdout.flush()


@mutant("blank-lines-answered")
class BlankLinesAnswered(HostPlugin):
    """Feeds blank lines to the parser, which answers each with -32600."""

    def accept_line(self, raw: bytes) -> bool:
        return True


@mutant("first-line-per-read")
class FirstLinePerRead(HostPlugin):
    """Reads stdin in chunks and handles only the first line of each, losing requests sent together."""

    def lines(self) -> Iterator[bytes]:
        while chunk := os.read(self.stdin.fileno(), 65536):
            yield chunk.split(b"\n", 1)[0]


@mutant("serial-requests")
class SerialRequests(HostPlugin):
    """Handles every request on the reader thread, so a slow request blocks every later one."""

    class _Everything(frozenset):
        def __contains__(self, item: object) -> bool:
            return True

    inline_methods = _Everything()


# -- envelopes and ids -----------------------------------------------------------------------------


@mutant("error-answers-without-jsonrpc")
class ErrorAnswersWithoutJsonrpc(HostPlugin):
    """Writes error answers without the jsonrpc member."""

    def respond_error(self, request_id: Any, failure: RpcFailure) -> None:
        self.write_message({"id": request_id, "error": self.error_object(failure)})


@mutant("ids-through-float")
class IdsThroughFloat(HostPlugin):
    """Keeps request ids as doubles, so ids beyond 2**53 come back changed."""

    def _run(self, request_id: int, method: str, params: Any) -> bool:
        return super()._run(int(float(request_id)), method, params)


@mutant("batches-answered-with-array")
class BatchesAnsweredWithArray(HostPlugin):
    """Serves a batch element by element and answers with a JSON array."""

    def handle_line(self, raw: bytes) -> bool:
        try:
            batch = json.loads(raw)
        except ValueError:
            return super().handle_line(raw)
        if not isinstance(batch, list):
            return super().handle_line(raw)
        answers = []
        for request in batch:
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
            try:
                answer["result"] = self.dispatch(request["method"], request.get("params"))
            except RpcFailure as failure:
                answer["error"] = self.error_object(failure)
            answers.append(answer)
        with self._write_lock:
            self.stdout.write(json.dumps(answers).encode() + b"\n")
            self.stdout.flush()
        return True


@mutant("notifications-answered")
class NotificationsAnswered(HostPlugin):
    """Treats a message without an id as a request with id 0 and answers it."""

    def handle_line(self, raw: bytes) -> bool:
        try:
            message = json.loads(raw)
        except ValueError:
            return super().handle_line(raw)
        if isinstance(message, dict) and "method" in message and "id" not in message:
            return self._run(0, message["method"], message.get("params"))
        return super().handle_line(raw)


@mutant("progress-notifications")
class ProgressNotifications(HostPlugin):
    """Sends a $/progress notification when a streamed command starts."""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        self.notify("$/progress", {"token": params.get("exec_id"), "value": {"kind": "begin"}})
        return super().m_exec_stream(params)


@mutant("logs-through-host-log")
class LogsThroughHostLog(HostPlugin):
    """Sends its log lines to the host as host/log notifications instead of writing them to stderr."""

    def log(self, text: str) -> None:
        self.notify("host/log", {"level": "info", "message": text})


@mutant("camel-case-fields")
class CamelCaseFields(HostPlugin):
    """Adds camelCase copies of HandleInfo fields for JavaScript hosts."""

    def handle_info(self, sandbox: Any) -> dict[str, Any]:
        info = super().handle_info(sandbox)
        info["workingDirectory"] = info["working_directory"]
        return info


# -- the capability declaration --------------------------------------------------------------------


@mutant("capability-group-missing")
class CapabilityGroupMissing(HostPlugin):
    """Leaves the network group out of its declaration."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        del capabilities["network"]
        return capabilities


@mutant("capability-flags-missing")
class CapabilityFlagsMissing(HostPlugin):
    """Declares the exec group of an older release, without stdin_stream and environment."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        del capabilities["exec"]["stdin_stream"], capabilities["exec"]["environment"]
        return capabilities


@mutant("capabilities-change-on-reinitialize")
class CapabilitiesChangeOnReinitialize(HostPlugin):
    """Probes its features again on every initialize, and a flaky probe drops live streaming."""

    def m_initialize(self, params: dict[str, Any]) -> Any:
        answer = super().m_initialize(params)
        self._initialized = getattr(self, "_initialized", 0) + 1
        if self._initialized > 1:
            answer = copy.deepcopy(answer)
            answer["capabilities"]["exec"]["live_streaming"] = False
        return answer


@mutant("access-vpn-declared")
class AccessVpnDeclared(HostPlugin):
    """Declares the retired access.vpn flag as true."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["access"]["vpn"] = True
        return capabilities


@mutant("snapshot-kind-without-aggregate")
class SnapshotKindWithoutAggregate(HostPlugin):
    """Declares snapshots from container images without declaring snapshots from images at all."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["snapshots"] = {
            "from_image": False, "from_dockerfile": False,
            "from_image_kinds": {"container": True, "virtual_machine": False},
            "from_dockerfile_kinds": {"container": False, "virtual_machine": False},
            "filesystem_from_sandbox": True, "live_process_state_from_sandbox": False,
            "build_logs": False, "activation": False,
        }
        return capabilities


# -- error answers ---------------------------------------------------------------------------------


@mutant("invalid-params-as-application-error")
class InvalidParamsAsApplicationError(HostPlugin):
    """Answers params it cannot decode with an invalid_spec application error instead of -32600."""

    def dispatch(self, method: str, params: Any) -> Any:
        try:
            return super().dispatch(method, params)
        except RpcFailure as failure:
            if failure.code != INVALID_REQUEST:
                raise
            raise application_error("invalid_spec", f"invalid spec: params: {failure.message}",
                                    {"field": "params", "reason": failure.message}) from None


@mutant("lenient-envelope")
class LenientEnvelope(HostPlugin):
    """Serves any message that names a method, whatever its jsonrpc member and id look like."""

    def handle_line(self, raw: bytes) -> bool:
        try:
            message = json.loads(raw)
        except ValueError:
            return super().handle_line(raw)
        if isinstance(message, dict) and "method" in message and "id" in message:
            request_id = message["id"]
            well_formed = "jsonrpc" in message and type(request_id) is int and request_id >= 0
            if not well_formed:
                return self._run(request_id, message["method"], message.get("params"))
        return super().handle_line(raw)


@mutant("error-report-without-retryable-and-causes")
class ErrorReportWithoutRetryableAndCauses(HostPlugin):
    """Writes error reports with only kind and message."""

    def error_object(self, failure: RpcFailure) -> dict[str, Any]:
        error = super().error_object(failure)
        report = error.get("data", {}).get("report")
        if isinstance(report, dict):
            report.pop("retryable", None)
            report.pop("causes", None)
        return error


@mutant("error-message-differs-from-report")
class ErrorMessageDiffersFromReport(HostPlugin):
    """Puts a generic text in the error's message and the real one only in the report."""

    def backend_failure(self, method: str, error: BackendError) -> RpcFailure:
        failure = super().backend_failure(method, error)
        failure.message = f"{method} failed"
        return failure


@mutant("unstable-error-kind")
class UnstableErrorKind(HostPlugin):
    """Invents a kind of its own for a sandbox that does not exist."""

    def backend_failure(self, method: str, error: BackendError) -> RpcFailure:
        failure = super().backend_failure(method, error)
        if error.kind == "not_found":
            failure.data["report"]["kind"] = "sandbox_not_found"
        return failure


@mutant("unbounded-error-causes")
class UnboundedErrorCauses(HostPlugin):
    """Renders the whole chain of causes, a dozen long ones, into every error report."""

    def backend_failure(self, method: str, error: BackendError) -> RpcFailure:
        failure = super().backend_failure(method, error)
        chain = [f"frame {n}: " + "while looking the sandbox up " * 30 for n in range(12)]
        failure.data["report"]["causes"] = chain
        return failure


@mutant("not-found-without-resource")
class NotFoundWithoutResource(HostPlugin):
    """Reports not_found with the id but without the kind of resource."""

    def backend_failure(self, method: str, error: BackendError) -> RpcFailure:
        failure = super().backend_failure(method, error)
        if error.kind == "not_found":
            failure.data.get("detail", {}).pop("resource", None)
        return failure


@mutant("exec-errors-quote-output")
class ExecErrorsQuoteOutput(HostPlugin):
    """Turns a failed or timed-out command into an exec error whose message quotes the command's output."""

    def m_exec_run(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_run(params)
        if result["termination"] != "exited" or result["exit_code"] != 0:
            output = base64.b64decode(result["stdout_b64"]) + base64.b64decode(result["stderr_b64"])
            text = output.decode(errors="replace")
            message = f"command {result['termination']} (exit code {result['exit_code']}): {text}"
            raise application_error("exec", message, {"exec": {
                "label": "command", "termination": result["termination"], "exit_code": result["exit_code"],
                "stdout_b64": result["stdout_b64"], "stderr_b64": result["stderr_b64"]}})
        return result


# -- encodings and tolerant reading ----------------------------------------------------------------

# The fields this mutant's decoder knows, as a strict serde struct would.
KNOWN_FIELDS = {
    "sandbox/describe": {"sandbox_id"},
    "exec/run": {"sandbox_id", "spec"},
}
KNOWN_EXEC_SPEC_FIELDS = {"command", "env", "timeout_ms", "working_dir", "stdin_b64", "output_sanitization"}
KNOWN_SANDBOX_SPEC_FIELDS = {"name", "source", "resources", "sandbox_kind", "env", "labels", "user",
                             "working_directory", "workspace_ownership", "network", "volumes", "timers",
                             "ephemeral", "public", "region", "provider_config"}


@mutant("unknown-fields-rejected")
class UnknownFieldsRejected(HostPlugin):
    """Refuses requests and specs that carry fields it does not know."""

    def dispatch(self, method: str, params: Any) -> Any:
        if isinstance(params, dict):
            unknown = set(params) - KNOWN_FIELDS.get(method, set(params))
            spec = params.get("spec") if isinstance(params.get("spec"), dict) else {}
            if method == "exec/run":
                unknown |= set(spec) - KNOWN_EXEC_SPEC_FIELDS
            if method == "sandbox/create":
                for field in sorted(set(spec) - KNOWN_SANDBOX_SPEC_FIELDS):
                    raise application_error("invalid_spec", f"invalid spec: {field}: unknown field",
                                            {"field": field, "reason": "unknown field"})
            if unknown:
                raise RpcFailure(INVALID_REQUEST, f"invalid params for {method}: unknown field {min(unknown)}")
        return super().dispatch(method, params)


@mutant("exec-spec-requires-timeout")
class ExecSpecRequiresTimeout(HostPlugin):
    """Refuses a command spec without timeout_ms, a field the first release did not have."""

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        if "timeout_ms" not in spec:
            raise invalid_spec("timeout_ms", "missing field")
        return super().run_spec(sandbox_id, spec, **kwargs)


@mutant("fs-read-requires-range")
class FsReadRequiresRange(HostPlugin):
    """Decodes fs/read params as a struct whose offset and length are required."""

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        params["offset"], params["length"]
        return super().m_fs_read(params)


@mutant("duration-ms-fractional")
class DurationMsFractional(HostPlugin):
    """Reports duration_ms with a fractional part."""

    def exec_result(self, run: Any) -> dict[str, Any]:
        return {**super().exec_result(run), "duration_ms": run.duration_ms + 0.25}


@mutant("event-duration-as-seconds")
class EventDurationAsSeconds(HostPlugin):
    """Writes an event's duration as fractional seconds instead of secs and nanos."""

    def notify(self, method: str, params: Any) -> None:
        event = params.get("event") if method == "host/event" and isinstance(params, dict) else None
        if isinstance(event, dict) and isinstance(event.get("duration"), dict):
            duration = event["duration"]
            event["duration"] = duration["secs"] + duration["nanos"] / 1e9
        super().notify(method, params)


@mutant("describe-timestamp-as-float")
class DescribeTimestampAsFloat(HostPlugin):
    """Describes a sandbox with its creation time as fractional seconds since the epoch."""

    def m_sandbox_describe(self, params: dict[str, Any]) -> Any:
        answer = super().m_sandbox_describe(params)
        created = answer["status"]["created_at"]
        answer["status"]["created_at"] = created["secs_since_epoch"] + created["nanos_since_epoch"] / 1e9
        return answer


# -- health and the end of a session ---------------------------------------------------------------


@mutant("health-status-healthy")
class HealthStatusHealthy(HostPlugin):
    """Reports its health as "healthy", a status the protocol does not define."""

    def m_provider_health(self, params: dict[str, Any]) -> Any:
        return {"health": {"status": "healthy", "message": None, "missing_permissions": []}}


@mutant("health-error-when-unhealthy")
class HealthErrorWhenUnhealthy(HostPlugin):
    """Reports an unreachable backend as a failed health call instead of an unhealthy status."""

    def m_provider_health(self, params: dict[str, Any]) -> Any:
        raise application_error("transport", "the sandbox backend is unreachable",
                                {"transport_context": "health"}, retryable=True)


@mutant("shutdown-keeps-running")
class ShutdownKeepsRunning(HostPlugin):
    """Answers shutdown but keeps reading its input and serving."""

    def m_shutdown(self, params: dict[str, Any]) -> Any:
        return None


@mutant("shutdown-exits-without-answer")
class ShutdownExitsWithoutAnswer(HostPlugin):
    """Exits at once on shutdown, without answering it."""

    def m_shutdown(self, params: dict[str, Any]) -> Any:
        self.on_stop()
        self.exit_now(0)


@mutant("ignores-input-closed")
class IgnoresInputClosed(HostPlugin):
    """Keeps running after its input closes, waiting for a host that will never write again."""

    def lines(self) -> Iterator[bytes]:
        while True:
            raw = self.stdin.readline()
            if not raw:
                time.sleep(0.1)  # "more input may come"
                continue
            yield raw


# -- controls: honest doubles that take the other permitted road -----------------------------------


@mutant("control-health-unreachable")
class ControlHealthUnreachable(HostPlugin):
    """An unhealthy provider that says so the right way: a successful answer with status unreachable."""

    def m_provider_health(self, params: dict[str, Any]) -> Any:
        return {"health": {"status": "unreachable", "message": "the sandbox backend does not answer",
                           "missing_permissions": []}}


@mutant("describe-timestamp-rfc3339")
class DescribeTimestampRfc3339(HostPlugin):
    """Writes sandbox timestamps as RFC 3339 strings, the form of v2-era writers, which upstream's v1 host
    cannot decode (a v1 timestamp is {secs_since_epoch, nanos_since_epoch})."""

    def m_sandbox_describe(self, params: dict[str, Any]) -> Any:
        answer = super().m_sandbox_describe(params)
        created = answer["status"]["created_at"]
        moment = datetime.datetime.fromtimestamp(created["secs_since_epoch"] + created["nanos_since_epoch"] / 1e9,
                                                 datetime.UTC)
        answer["status"]["created_at"] = moment.isoformat(timespec="microseconds").replace("+00:00", "Z")
        return answer


@mutant("control-unreadable-id-null")
class ControlUnreadableIdNull(HostPlugin):
    """Answers a line whose id cannot be read with id null, as JSON-RPC 2.0 section 5 says (the reference
    answers id 0; both are accepted)."""

    def malformed(self, reason: str) -> None:
        self.respond_error(None, RpcFailure(INVALID_REQUEST, f"malformed message: {reason}"))
