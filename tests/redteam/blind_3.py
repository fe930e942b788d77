"""Third, independent set of blind red-team mutants (``b3_*``) of the reference v1 host plugin.

Written from the protocol digest (section 7 requirement numbers SDP1-NNN), upstream's protocol text and
the reference provider's sources only, avoiding the faults of ``blind_1``/``blind_2``. Each class overrides
the smallest piece of ``HostPlugin`` (or of its backend) it can, so exactly one behaviour differs from the
honest plugin. Areas: handshake/capabilities, envelope/errors, transport/concurrency, lifecycle, exec/run,
exec/stream, files, stdio/PTY, logs, events, shutdown/EOF.
"""

from __future__ import annotations

import base64
import copy
import datetime
import os
import platform
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from conformance.reference.host_backend import (
    BackendError,
    Capture,
    HostBackend,
    HostSandbox,
    invalid_spec,
    not_found,
)
from conformance.reference.host_events import EventSource, Operation, _duration, _now
from conformance.reference.host_fs import _kind
from conformance.reference.host_interactive import (
    STDERR_TAIL,
    LogStream,
    StdioProcess,
)
from conformance.reference.host_plugin import (
    INVALID_PARAMS,
    HostPlugin,
    application_error,
    b64,
    unsupported,
)
from conformance.reference.sanitize import Sanitizer
from conformance.reference.stdio_server import METHOD_NOT_FOUND, RpcFailure
from tests.redteam import redteam
from tests.redteam.seams import BackendPlugin as _BackendPlugin, EventsPlugin as _EventsPlugin, OperationSource as _OperationSource


class _StreamSeams(HostPlugin):
    """The honest exec/stream with two seams: how output is forwarded (``stream_forward``) and a last look
    at the result with every sanitized byte each stream produced (``stream_result``)."""

    def stream_forward(self, exec_id: str, send: Any) -> tuple[Any, Any]:
        return send, (lambda: None)

    def stream_result(self, params: dict[str, Any], result: dict[str, Any],
                      seen: dict[str, bytearray]) -> dict[str, Any]:
        return result

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        exec_id = params["exec_id"]
        cancel = threading.Event()
        with self._execs_lock:
            self._execs[exec_id] = cancel
        seen = {"stdout": bytearray(), "stderr": bytearray()}

        def send(stream: str, chunk: bytes) -> None:
            self.notify("exec/output", {"exec_id": exec_id, "stream": stream, "data_b64": b64(chunk)})

        forward, finish = self.stream_forward(exec_id, send)

        def observe(stream: str, chunk: bytes) -> None:
            seen[stream].extend(chunk)
            forward(stream, chunk)

        try:
            run = self.run_spec(params["sandbox_id"], params["spec"], on_output=observe, cancel=cancel,
                                retain_limit=params.get("retained_output_limit"))
        finally:
            with self._execs_lock:
                self._execs.pop(exec_id, None)
        finish()
        result = {
            "result": self.exec_result(run),
            "streams_separated": True,
            "live_streaming": True,
            "stdout_capture": run.stdout_capture,
            "stderr_capture": run.stderr_capture,
        }
        return self.stream_result(params, result, seen)


def _answer_directly(plugin: HostPlugin, method: str, fn: Any, params: Any) -> Any:
    """Run ``fn(params)`` as a handler outside the gate, with the usual error encoding."""
    params = params if isinstance(params, dict) else {}
    try:
        return fn(params)
    except BackendError as error:
        raise plugin.backend_failure(method, error) from None
    except KeyError as missing:
        raise RpcFailure(INVALID_PARAMS, f"invalid params for {method}: missing field {missing}") from None


# ================================================================================================
# handshake / capabilities (7)
# ================================================================================================


@redteam("b3_handle_caps_claim_fork", "SDP1-021 SDP1-023",
         "the per-sandbox capability set in every HandleInfo is copied from the provider's feature table, which "
         "lists lifecycle.fork true: wider than initialize's upper bound, and sandbox/fork still fails unsupported")
class HandleCapsClaimFork(HostPlugin):
    def handle_info(self, sandbox: HostSandbox) -> dict[str, Any]:
        info = super().handle_info(sandbox)
        caps = copy.deepcopy(info["capabilities"])
        caps["lifecycle"]["fork"] = True
        return {**info, "capabilities": caps}


@redteam("b3_caps_omit_masked_fields", "SDP1-022",
         "initialize leaves out exec.stdin_stream, exec.environment and access.shell_command ('the v1 host masks "
         "them to false anyway'), so the capabilities object is missing fields")
class CapsOmitMaskedFields(HostPlugin):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        result = super().m_initialize(params)
        caps = copy.deepcopy(result["capabilities"])
        caps["exec"].pop("stdin_stream", None)
        caps["exec"].pop("environment", None)
        caps["access"].pop("shell_command", None)
        return {**result, "capabilities": caps}


@redteam("b3_preview_url_ungated", "SDP1-030 SDP1-024",
         "access/preview_url is implemented (http://127.0.0.1:<port>) but access.preview_urls stays false: an "
         "undeclared operation answers instead of failing unsupported")
class PreviewUrlUngated(HostPlugin):
    def _preview(self, params: dict[str, Any]) -> Any:
        self.backend.get(params["sandbox_id"])
        return {"preview": {"url": f"http://127.0.0.1:{int(params['port'])}", "headers": {}, "expires_at": None}}

    def dispatch(self, method: str, params: Any) -> Any:
        if method == "access/preview_url":
            return _answer_directly(self, method, self._preview, params)
        return super().dispatch(method, params)


@redteam("b3_volume_list_ungated", "SDP1-028 SDP1-088",
         "volume/list answers {\"volumes\": []} although volumes is null (a list method 'cannot hurt'); the other "
         "volume methods are correctly unsupported")
class VolumeListUngated(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        if method == "volume/list":
            return {"volumes": []}
        return super().dispatch(method, params)


@redteam("b3_snapshot_live_silently_fs", "SDP1-064 SDP1-024",
         "a snapshot asked with include_memory:true (live_process_state_from_sandbox false) is silently taken as a "
         "filesystem snapshot instead of failing unsupported snapshots.live_process_state")
class SnapshotLiveSilentlyFs(HostPlugin):
    def snapshot_of(self, sandbox_id: str, options: dict[str, Any]) -> dict[str, Any]:
        return super().snapshot_of(sandbox_id, {**options, "include_memory": False})


@redteam("b3_snapshot_image_cap_name", "SDP1-024",
         "snapshot/create from an image fails unsupported naming 'snapshots.from_image' (the capability field) "
         "instead of a dotted Capability name such as snapshots.from_image.container")
class SnapshotImageCapName(HostPlugin):
    def m_snapshot_create(self, params: dict[str, Any]) -> Any:
        source = params["spec"]["source"]
        if isinstance(source, dict) and "image" in source:
            raise unsupported("snapshots.from_image")
        return super().m_snapshot_create(params)


@redteam("b3_stream_ignores_stdin", "SDP1-075 SDP1-068 SDP1-023",
         "exec.stdin is declared and exec/run honours stdin_b64, but exec/stream drops it: the streamed command "
         "reads /dev/null")
class StreamIgnoresStdin(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        spec = {k: v for k, v in params["spec"].items() if k != "stdin_b64"}
        return super().m_exec_stream({**params, "spec": spec})


# ================================================================================================
# envelope / errors (8)
# ================================================================================================


@redteam("b3_malformed_id_null", "SDP1-009 SDP1-042",
         "a line that cannot be parsed is answered -32600 with \"id\": null (generic JSON-RPC style) instead of "
         "the protocol's unsigned id 0")
class MalformedIdNull(HostPlugin):
    def malformed(self, reason: str) -> None:
        self.respond_error(None, RpcFailure(INVALID_PARAMS, f"malformed message: {reason}"))


@redteam("b3_batch_ignored", "SDP1-042 SDP1-010",
         "a JSON array (a batch) is silently dropped instead of being answered -32600 malformed message")
class BatchIgnored(HostPlugin):
    def handle_line(self, raw: bytes) -> bool:
        if raw.lstrip().startswith(b"["):
            return True
        return super().handle_line(raw)


@redteam("b3_negative_id_answered", "SDP1-009 SDP1-042",
         "ids are checked to be integers but not unsigned: a request with id -1 is served and answered with "
         "id -1 instead of being rejected as malformed")
class NegativeIdAnswered(HostPlugin):
    def handle_line(self, raw: bytes) -> bool:
        import json
        try:
            message = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return super().handle_line(raw)
        request_id = message.get("id") if isinstance(message, dict) else None
        if isinstance(request_id, int) and not isinstance(request_id, bool) and request_id < 0 \
                and isinstance(message.get("method"), str) and "jsonrpc" in message:
            thread = threading.Thread(target=self._run, args=(request_id, message["method"], message.get("params")),
                                      daemon=True)
            with self._inflight_lock:
                self._inflight.add(thread)
            thread.start()
            return True
        return super().handle_line(raw)


@redteam("b3_params_null_rejected", "SDP1-126 SDP1-093",
         "params are decoded strictly as an object: \"params\": null (what the reference host sends for "
         "shutdown and provider/health) is answered -32600 invalid params")
class ParamsNullRejected(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        if params is None:
            raise RpcFailure(INVALID_PARAMS, f"invalid params for {method}: invalid type: null, expected a map")
        return super().dispatch(method, params)


@redteam("b3_unknown_method_with_data", "SDP1-014",
         "-32601 for an unknown method carries a data.report of kind unsupported (the application-error "
         "encoder is reused); the envelope error must have no data")
class UnknownMethodWithData(HostPlugin):
    def unknown_method(self, method: str) -> RpcFailure:
        message = f"unknown method {method}"
        return RpcFailure(METHOD_NOT_FOUND, message,
                          {"report": {"kind": "unsupported", "message": message, "retryable": False, "causes": []}})


@redteam("b3_not_found_resource_capitalized", "SDP1-045",
         "not_found details name the resource in display casing ('Sandbox', as in the message) instead of the "
         "snake_case resource value 'sandbox'")
class NotFoundResourceCapitalized(HostPlugin):
    def backend_failure(self, method: str, error: BackendError) -> RpcFailure:
        detail = dict(error.detail)
        if error.kind == "not_found" and isinstance(detail.get("resource"), str):
            detail["resource"] = detail["resource"].capitalize()
        return application_error(error.kind, error.message, detail)


@redteam("b3_invalid_spec_no_reason", "SDP1-045 SDP1-051",
         "creation-spec rejections carry detail {field} only; the reason lives in the message but "
         "detail.reason is missing")
class InvalidSpecNoReason(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        try:
            super().validate_spec(spec)
        except BackendError as error:
            if error.kind != "invalid_spec":
                raise
            raise BackendError("invalid_spec", error.message, field=error.detail["field"]) from None


@redteam("b3_causes_null", "SDP1-043",
         "application errors from the backend carry report.causes null when there is no source chain, instead "
         "of an empty list")
class CausesNull(HostPlugin):
    def backend_failure(self, method: str, error: BackendError) -> RpcFailure:
        failure = super().backend_failure(method, error)
        failure.data["report"]["causes"] = None
        return failure


# ================================================================================================
# transport / concurrency (5)
# ================================================================================================


@redteam("b3_reader_64k_line_limit", "SDP1-002 SDP1-005",
         "the request reader uses a bounded readline(65536): a request line longer than 64 KiB (a large "
         "fs/write) is cut into pieces, each answered as malformed, and the request is never served")
class ReaderLineLimit(HostPlugin):
    def lines(self):
        return iter(lambda: self.stdin.readline(65536), b"")


@redteam("b3_writer_unlocked_pieces", "SDP1-002 SDP1-003",
         "the writer sends each message in 4 KiB pieces and takes the stdout lock per piece, not per message: "
         "large concurrent messages (two busy exec/streams) interleave mid-line")
class WriterUnlockedPieces(HostPlugin):
    def write_message(self, message: dict[str, Any]) -> None:
        import json
        line = json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n"
        for start in range(0, len(line), 4096):
            with self._write_lock:
                try:
                    self.stdout.write(line[start:start + 4096])
                    self.stdout.flush()
                except (BrokenPipeError, ValueError, OSError):
                    return
            time.sleep(0)


@redteam("b3_extra_exec_exit_notification", "SDP1-012",
         "exec/stream sends an extra 'exec/exit' notification {exec_id, exit_code} before its response; v1 plugins "
         "may only send exec/output, logs/output, host/event and host/log")
class ExtraExecExitNotification(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_stream(params)
        self.notify("exec/exit", {"exec_id": params["exec_id"], "exit_code": result["result"]["exit_code"]})
        return result


@redteam("b3_sandbox_lock_during_exec", "SDP1-007 SDP1-109",
         "every request naming a sandbox takes that sandbox's mutex for its whole duration: a sandbox/describe "
         "or fs call on a sandbox with a running exec/stream waits until the command ends")
class SandboxLockDuringExec(HostPlugin):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sandbox_locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def dispatch(self, method: str, params: Any) -> Any:
        sandbox_id = params.get("sandbox_id") if isinstance(params, dict) else None
        if not isinstance(sandbox_id, str):
            return super().dispatch(method, params)
        with self._locks_lock:
            lock = self._sandbox_locks.setdefault(sandbox_id, threading.Lock())
        with lock:
            return super().dispatch(method, params)


@redteam("b3_exec_output_wrong_exec_id", "SDP1-100",
         "exec/output notifications take their exec_id from the plugin's 'current exec' field, overwritten by each "
         "new exec/stream: with two streams running, the first one's later chunks are labelled with the second id")
class ExecOutputWrongExecId(_StreamSeams):
    _current_exec = ""

    def stream_forward(self, exec_id: str, send: Any) -> tuple[Any, Any]:
        self._current_exec = exec_id

        def forward(stream: str, chunk: bytes) -> None:
            self.notify("exec/output", {"exec_id": self._current_exec, "stream": stream, "data_b64": b64(chunk)})

        return forward, (lambda: None)


# ================================================================================================
# lifecycle, status, identity (14)
# ================================================================================================


class _StopKeepsBackend(HostBackend):
    def stop(self, sandbox: HostSandbox) -> None:
        self._set_state(sandbox, "stopped")


@redteam("b3_stop_keeps_processes", "SDP1-023",
         "sandbox/stop marks the sandbox stopped but does not end its process groups: a running exec/stream "
         "keeps running until its own timeout")
class StopKeepsProcesses(_BackendPlugin):
    backend_class = _StopKeepsBackend


class _StartNotFromArchived(HostBackend):
    def start(self, sandbox: HostSandbox) -> None:
        if sandbox.state not in ("running", "stopped"):
            raise BackendError("invalid_state", f"cannot start a sandbox in state {sandbox.state}",
                               current=sandbox.state, action="start")
        self._set_state(sandbox, "running")


@redteam("b3_start_from_archived_invalid_state", "SDP1-023 SDP1-060",
         "sandbox/start accepts only stopped sandboxes: an archived one (lifecycle.archive declared) fails "
         "invalid_state, so an archive can never be brought back")
class StartFromArchivedInvalidState(_BackendPlugin):
    backend_class = _StartNotFromArchived


class _ResumeNoContinue(HostBackend):
    def resume(self, sandbox: HostSandbox) -> None:
        if sandbox.state not in ("running", "paused"):
            raise BackendError("invalid_state", f"cannot resume a sandbox in state {sandbox.state}",
                               current=sandbox.state, action="resume")
        self._set_state(sandbox, "running")


@redteam("b3_resume_no_sigcont", "SDP1-023",
         "sandbox/resume reports running but never sends SIGCONT: processes frozen by pause stay frozen (a "
         "command running across pause/resume never finishes)")
class ResumeNoSigcont(_BackendPlugin):
    backend_class = _ResumeNoContinue


class _AnyLabelBackend(HostBackend):
    def list(self, labels: Mapping[str, str] | None = None) -> list[HostSandbox]:
        everything = super().list({})
        wanted = dict(labels or {})
        if not wanted:
            return everything
        return [s for s in everything if any(s.labels.get(k) == v for k, v in wanted.items())]


@redteam("b3_list_filter_any_label", "SDP1-023 (section 2.2: label filter = sandbox carries all listed labels)",
         "the sandbox/list label filter matches sandboxes carrying ANY of the listed labels instead of all of them")
class ListFilterAnyLabel(_BackendPlugin):
    backend_class = _AnyLabelBackend


@redteam("b3_attach_drops_name", "SDP1-050 SDP1-039",
         "sandbox/attach builds its HandleInfo from the id alone: status.name is null although the sandbox has a "
         "name (describe and create report it)")
class AttachDropsName(HostPlugin):
    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_attach(params)
        return {**info, "status": {**info["status"], "name": None}}


class _NameKeyedBackend(HostBackend):
    def create(self, name: str | None, labels: Mapping[str, str], env: Mapping[str, str],
               from_snapshot: str | None = None) -> HostSandbox:
        if name:
            with self._lock:
                for sandbox in self._sandboxes.values():
                    if sandbox.name == name and sandbox.state != "deleted":
                        return sandbox
        return super().create(name, labels, env, from_snapshot)


@redteam("b3_create_same_name_same_id", "SDP1-038 SDP1-050",
         "create is made 'idempotent by name': a second sandbox/create with the display name of a live sandbox "
         "returns that sandbox (same id, same files) instead of a new one")
class CreateSameNameSameId(_BackendPlugin):
    backend_class = _NameKeyedBackend


@redteam("b3_status_created_at_rfc3339", "SDP1-037",
         "status.created_at is written as an RFC 3339 string (the newer core's encoding); a v1 plugin must use "
         "the structural {secs_since_epoch, nanos_since_epoch} form")
class StatusCreatedAtRfc3339(HostPlugin):
    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        status = super().status(sandbox)
        stamp = datetime.datetime.fromtimestamp(sandbox.created_at, tz=datetime.timezone.utc)
        status["created_at"] = stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return status


@redteam("b3_refresh_activity_unknown_ok", "SDP1-045 SDP1-060",
         "sandbox/refresh_activity (declared) answers {} for any sandbox id, even one that does not exist, "
         "instead of not_found")
class RefreshActivityUnknownOk(HostPlugin):
    def m_sandbox_refresh_activity(self, params: dict[str, Any]) -> Any:
        params["sandbox_id"]
        return None


@redteam("b3_platform_os_capitalized", "SDP1-050 (section 10: platform_info.os is lowercase)",
         "sandbox/platform_info reports os from platform.system() ('Linux', 'Darwin') instead of the lowercase "
         "target OS ('linux', 'macos')")
class PlatformOsCapitalized(HostPlugin):
    def m_sandbox_platform_info(self, params: dict[str, Any]) -> Any:
        result = super().m_sandbox_platform_info(params)
        result["platform"]["os"] = platform.system()
        return result


@redteam("b3_health_unwrapped", "SDP1-093",
         "provider/health answers the ProviderHealth object itself ({status, message, ...}) instead of "
         "{health: {...}}")
class HealthUnwrapped(HostPlugin):
    def m_provider_health(self, params: dict[str, Any]) -> Any:
        return super().m_provider_health(params)["health"]


@redteam("b3_labels_unicode_mojibake", "SDP1-002 SDP1-050",
         "label values are re-decoded as Latin-1 when the status is serialized: non-ASCII labels come back as "
         "mojibake ('cafÃ©'), ASCII labels are fine")
class LabelsUnicodeMojibake(HostPlugin):
    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        status = super().status(sandbox)
        status["labels"] = {k: v.encode("utf-8").decode("latin-1") for k, v in status["labels"].items()}
        return status


@redteam("b3_snapshot_delete_unknown_not_found", "SDP1-089",
         "snapshot/delete of an unknown or already-deleted snapshot fails not_found instead of succeeding")
class SnapshotDeleteUnknownNotFound(HostPlugin):
    def m_snapshot_delete(self, params: dict[str, Any]) -> Any:
        snapshot_id = params["snapshot_id"]
        if not any(r["id"] == snapshot_id for r in self.backend.snapshots()):
            raise not_found("snapshot", snapshot_id)
        return super().m_snapshot_delete(params)


@redteam("b3_snapshot_list_ignores_name", "SDP1-023 SDP1-088",
         "snapshot/list ignores filter.name and returns every snapshot")
class SnapshotListIgnoresName(HostPlugin):
    def m_snapshot_list(self, params: dict[str, Any]) -> Any:
        return super().m_snapshot_list({**params, "filter": {}})


@redteam("b3_create_snapshot_by_display_name_only", "SDP1-053",
         "a create from source.snapshot.name looks the snapshot up by its display name only: the snapshot id "
         "(what the host sends in source.snapshot.name) is not_found unless the snapshot is unnamed")
class CreateSnapshotByDisplayNameOnly(HostPlugin):
    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        source = params["spec"].get("source")
        if isinstance(source, dict) and isinstance(source.get("snapshot"), dict):
            key = source["snapshot"].get("name")
            if not any(r["name"] == key for r in self.backend.snapshots()):
                raise not_found("snapshot", str(key))
        return super().m_sandbox_create(params)


# ================================================================================================
# exec/run (11)
# ================================================================================================


class _NegativeSignalBackend(HostBackend):
    def exit_status(self, sandbox: HostSandbox, proc: Any) -> tuple[int | None, int | None]:
        code = proc.returncode
        return (code, None) if code >= 0 else (None, code)


@redteam("b3_signal_negative", "SDP1-072",
         "a command ended by a signal reports the Popen return code as the signal: signal -15 instead of 15")
class SignalNegative(_BackendPlugin):
    backend_class = _NegativeSignalBackend


class _RebasedWorkdirBackend(HostBackend):
    def start_process(self, sandbox: HostSandbox, command: str, env: Mapping[str, str], working_dir: str | None,
                      stdin_piped: bool, argv: list[str] | None) -> Any:
        if working_dir:
            working_dir = working_dir.lstrip("/")  # "keep commands inside the sandbox"
        return super().start_process(sandbox, command, env, working_dir, stdin_piped, argv)


@redteam("b3_absolute_working_dir_rebased", "SDP1-081",
         "an absolute exec working_dir is re-rooted under the workspace (leading '/' stripped): working_dir set "
         "to the sandbox's own absolute working directory fails invalid_spec working_dir")
class AbsoluteWorkingDirRebased(_BackendPlugin):
    backend_class = _RebasedWorkdirBackend


class _SandboxEnvWinsBackend(HostBackend):
    def environment(self, sandbox: HostSandbox, spec_env: Mapping[str, str]) -> dict[str, str]:
        env = super().environment(sandbox, spec_env)
        env.update({k: v for k, v in sandbox.env.items() if k != "BASH_ENV"})
        return env


@redteam("b3_env_sandbox_overrides_spec", "SDP1-023 (section 9.2: exec env = inherited, then sandbox env, then "
         "exec spec env)",
         "the sandbox's create-time env is merged after the exec's spec.env, so a variable set in both has the "
         "sandbox value instead of the exec's")
class EnvSandboxOverridesSpec(_BackendPlugin):
    backend_class = _SandboxEnvWinsBackend


class _EmptyEnvDroppedBackend(HostBackend):
    def environment(self, sandbox: HostSandbox, spec_env: Mapping[str, str]) -> dict[str, str]:
        return super().environment(sandbox, {k: v for k, v in spec_env.items() if v})


@redteam("b3_env_empty_value_dropped", "SDP1-023 (section 9.2: the exec spec.env applies)",
         "spec.env entries with an empty value are dropped (truthiness filter): X=\"\" leaves X unset in the "
         "command instead of set-but-empty")
class EnvEmptyValueDropped(_BackendPlugin):
    backend_class = _EmptyEnvDroppedBackend


@redteam("b3_timeout_floor_seconds", "SDP1-036 SDP1-074",
         "timeout_ms is converted with integer division to whole seconds: 900 ms becomes 0 s and the command "
         "times out at once; 1500 ms becomes 1 s")
class TimeoutFloorSeconds(HostPlugin):
    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        timeout_ms = spec.get("timeout_ms")
        if timeout_ms is not None:
            spec = {**spec, "timeout_ms": (timeout_ms // 1000) * 1000}
        return super().run_spec(sandbox_id, spec, **kwargs)


@redteam("b3_stdin_trailing_newline", "SDP1-075",
         "stdin_b64 that does not end in a newline gets one appended ('line-oriented programs need it'): the "
         "command reads one byte more than was sent")
class StdinTrailingNewline(HostPlugin):
    def decode_stdin(self, spec: dict[str, Any]) -> bytes | None:
        data = super().decode_stdin(spec)
        if data is not None and not data.endswith(b"\n"):
            data += b"\n"
        return data


class _BrokenPipeBackend(HostBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._feeds: dict[int, threading.Event] = {}
        self._broken: set[int] = set()
        self._local = threading.local()

    def start_process(self, *args: Any, **kwargs: Any) -> Any:
        proc = super().start_process(*args, **kwargs)
        self._local.proc = proc
        self._feeds[proc.pid] = threading.Event()
        return proc

    def feed_stdin(self, proc: Any, data: bytes) -> None:
        try:
            proc.stdin.write(data)
            proc.stdin.close()
        except BrokenPipeError:
            self._broken.add(proc.pid)
        except (OSError, ValueError):
            pass
        finally:
            self._feeds[proc.pid].set()

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self._local.proc = None
        result = super().run(*args, **kwargs)
        proc = self._local.proc
        if proc is not None and kwargs.get("stdin") is not None:
            self._feeds[proc.pid].wait(timeout=2)
            if proc.pid in self._broken:
                raise BackendError("io", "write stdin: Broken pipe (os error 32)", io_context="stdin")
        return result


@redteam("b3_stdin_broken_pipe_error", "SDP1-075",
         "a command that exits without reading all of stdin_b64 makes the exec fail with an io error (broken "
         "pipe) instead of resolving normally")
class StdinBrokenPipeError(_BackendPlugin):
    backend_class = _BrokenPipeBackend


@redteam("b3_run_trailing_newline_trimmed", "SDP1-068 SDP1-035",
         "exec/run strips trailing newlines from stdout (a 'tidy output' helper); exec/stream keeps them")
class RunTrailingNewlineTrimmed(HostPlugin):
    def m_exec_run(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_run(params)
        result["stdout_b64"] = b64(base64.b64decode(result["stdout_b64"]).rstrip(b"\n"))
        return result


@redteam("b3_run_stdout_64k", "SDP1-068",
         "exec/run returns at most the first 65536 bytes of stdout (one pipe-buffer's worth); exec/stream "
         "delivers everything")
class RunStdout64k(HostPlugin):
    def m_exec_run(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_run(params)
        result["stdout_b64"] = b64(base64.b64decode(result["stdout_b64"])[:65536])
        return result


class _LoginShellBackend(HostBackend):
    def start_process(self, sandbox: HostSandbox, command: str, env: Mapping[str, str], working_dir: str | None,
                      stdin_piped: bool, argv: list[str] | None) -> Any:
        if argv is None:
            argv = [self.bash, "-l", "-c", command]
        return super().start_process(sandbox, command, env, working_dir, stdin_piped, argv)


@redteam("b3_run_login_shell", "SDP1-066",
         "commands run as bash -l -c (a login shell, 'so profile PATH additions apply'); the protocol requires "
         "a non-login bash")
class RunLoginShell(_BackendPlugin):
    backend_class = _LoginShellBackend


@redteam("b3_run_stderr_into_stdout", "SDP1-068 SDP1-103",
         "exec/run folds stderr into stdout (2>&1) so 'the buffered answer keeps the interleaving'; stderr_b64 "
         "is always empty, exec/stream keeps them apart")
class RunStderrIntoStdout(HostPlugin):
    def m_exec_run(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        return super().m_exec_run({**params, "spec": {**spec, "command": "exec 2>&1\n" + spec["command"]}})


# ================================================================================================
# exec/stream (8)
# ================================================================================================


@redteam("b3_capture_head_only", "SDP1-105",
         "with retained_output_limit L the retained copy is the first L bytes of each stream (no rolling tail); "
         "the counts are consistent, the kept bytes are not the head+tail the protocol defines")
class CaptureHeadOnly(_StreamSeams):
    def stream_result(self, params: dict[str, Any], result: dict[str, Any],
                      seen: dict[str, bytearray]) -> dict[str, Any]:
        limit = params.get("retained_output_limit")
        if limit is None:
            return result
        for stream in ("stdout", "stderr"):
            kept = bytes(seen[stream][:limit])
            result["result"][f"{stream}_b64"] = b64(kept)
            stats = result[f"{stream}_capture"]
            stats["retained_bytes"] = len(kept)
            stats["omitted_bytes"] = stats["observed_bytes"] - len(kept)
        return result


class _CountingSanitizer(Sanitizer):
    local = threading.local()

    def __init__(self, mode: str) -> None:
        super().__init__(mode)
        self.raw_bytes = 0
        made = getattr(self.local, "made", None)
        if made is not None:
            made.append(self)

    def feed(self, data: bytes) -> bytes:
        self.raw_bytes += len(data)
        return super().feed(data)


class _CountingBackend(HostBackend):
    sanitizer_class = _CountingSanitizer


@redteam("b3_capture_observed_raw", "SDP1-070 SDP1-106",
         "capture observed_bytes counts the raw bytes read from the pipe, before sanitization (omitted = "
         "observed - retained); notifications and the retained copy are sanitized, so the counts disagree with "
         "the stream")
class CaptureObservedRaw(_BackendPlugin):
    backend_class = _CountingBackend

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        _CountingSanitizer.local.made = []
        try:
            result = super().m_exec_stream(params)
            made = list(_CountingSanitizer.local.made)
        finally:
            _CountingSanitizer.local.made = None
        if len(made) >= 2:
            for stream, sanitizer in zip(("stdout", "stderr"), made[-2:]):
                stats = result[f"{stream}_capture"]
                stats["observed_bytes"] = sanitizer.raw_bytes
                stats["omitted_bytes"] = max(0, sanitizer.raw_bytes - stats["retained_bytes"])
        return result


@redteam("b3_limit_shared_between_streams", "SDP1-106 SDP1-105",
         "retained_output_limit is one budget for the whole exec: stdout is retained first and stderr gets only "
         "what is left, instead of each stream having its own limit")
class LimitSharedBetweenStreams(_StreamSeams):
    def stream_result(self, params: dict[str, Any], result: dict[str, Any],
                      seen: dict[str, bytearray]) -> dict[str, Any]:
        limit = params.get("retained_output_limit")
        if limit is None:
            return result
        budget = max(0, limit - result["stdout_capture"]["retained_bytes"])
        capture = Capture(budget)
        capture.add(bytes(seen["stderr"]))
        result["result"]["stderr_b64"] = b64(capture.retained)
        result["stderr_capture"] = capture.stats(result["stderr_capture"]["truncated"])
        return result


@redteam("b3_stderr_notifications_deferred", "SDP1-100 SDP1-102",
         "stderr exec/output chunks are buffered and flushed when the command ends (still before the response), "
         "so stderr is neither live nor in observed order relative to stdout")
class StderrNotificationsDeferred(_StreamSeams):
    def stream_forward(self, exec_id: str, send: Any) -> tuple[Any, Any]:
        held: list[bytes] = []

        def forward(stream: str, chunk: bytes) -> None:
            if stream == "stderr":
                held.append(chunk)
            else:
                send(stream, chunk)

        def finish() -> None:
            for chunk in held:
                send("stderr", chunk)

        return forward, finish


@redteam("b3_cancel_termination_exited", "SDP1-074 SDP1-073",
         "a cancelled exec/stream reports termination 'exited' (derived from the wait status) with signal 15; "
         "it must be 'cancelled'")
class CancelTerminationExited(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_stream(params)
        if result["result"]["termination"] == "cancelled":
            result["result"]["termination"] = "exited"
        return result


@redteam("b3_cancel_prefix_match", "SDP1-110",
         "exec/cancel matches running execs by prefix: cancelling a finished 'x1' also cancels a running 'x10'")
class CancelPrefixMatch(HostPlugin):
    def m_exec_cancel(self, params: dict[str, Any]) -> Any:
        wanted = params["exec_id"]
        with self._execs_lock:
            matches = [cancel for exec_id, cancel in self._execs.items() if exec_id.startswith(wanted)]
        for cancel in matches:
            cancel.set()
        return None


@redteam("b3_output_b64_unpadded", "SDP1-035",
         "exec/output data_b64 is written without '=' padding (a URL-token encoder); results and files are "
         "padded")
class OutputB64Unpadded(HostPlugin):
    def notify(self, method: str, params: Any) -> None:
        if method == "exec/output" and isinstance(params, dict):
            params = {**params, "data_b64": params["data_b64"].rstrip("=")}
        super().notify(method, params)


@redteam("b3_exec_audit_notice", "SDP1-112",
         "an exec on a handle whose create asked for events emits an audit 'notice' host/event whose message "
         "quotes the command's stdout tail: exec output leaks into the event feed")
class ExecAuditNotice(HostPlugin):
    def m_exec_run(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_run(params)
        route = self._handle_routes.get(str(params.get("sandbox_id")))
        if route is not None:
            tail = base64.b64decode(result["stdout_b64"])[-200:].decode("utf-8", "replace")
            self.events.emit(route, {"type": "sandbox", "id": params["sandbox_id"]}, uuid.uuid4().hex,
                             {"type": "notice", "code": "exec.finished",
                              "message": f"command exited {result['exit_code']}: {tail}"})
        return result


# ================================================================================================
# files (10)
# ================================================================================================


@redteam("b3_read_length_as_end", "SDP1-083",
         "fs/read treats length as an end offset (bytes offset..length): with offset 0 it is right, with an "
         "offset it returns length-offset bytes")
class ReadLengthAsEnd(HostPlugin):
    def m_fs_read(self, params: dict[str, Any]) -> Any:
        offset, length = params.get("offset") or 0, params.get("length")
        if length is not None and offset:
            params = {**params, "length": max(0, length - offset)}
        return super().m_fs_read(params)


@redteam("b3_append_key_presence", "SDP1-084 SDP1-085",
         "fs/write appends whenever the append key is present, even \"append\": false; only an absent key "
         "truncates")
class AppendKeyPresence(HostPlugin):
    def m_fs_write(self, params: dict[str, Any]) -> Any:
        if "append" in params:
            params = {**params, "append": True}
        return super().m_fs_write(params)


@redteam("b3_write_empty_no_truncate", "SDP1-084",
         "fs/write with empty content_b64 returns early ('nothing to write'): an existing file is not truncated "
         "and a missing one is not created")
class WriteEmptyNoTruncate(HostPlugin):
    def m_fs_write(self, params: dict[str, Any]) -> Any:
        if params.get("content_b64") == "":
            self._path(params)
            return None
        return super().m_fs_write(params)


@redteam("b3_list_dir_depth_plus_one", "SDP1-023 (section 2.6: depth 1 = immediate children)",
         "fs/list_dir counts depth from 0: depth 1 also lists grandchildren")
class ListDirDepthPlusOne(HostPlugin):
    def m_fs_list_dir(self, params: dict[str, Any]) -> Any:
        depth = params["depth"]
        return super().m_fs_list_dir({**params, "depth": depth + 1 if depth > 0 else depth})


@redteam("b3_list_dir_absolute_paths", "SDP1-023 (section 2.6: entry paths relative to the listed directory)",
         "fs/list_dir returns absolute entry paths instead of paths relative to the listed directory")
class ListDirAbsolutePaths(HostPlugin):
    def m_fs_list_dir(self, params: dict[str, Any]) -> Any:
        result = super().m_fs_list_dir(params)
        root = self._path(params)
        for entry in result["entries"]:
            entry["path"] = str(root / entry["path"])
        return result


@redteam("b3_metadata_follows_symlink", "SDP1-086",
         "fs/metadata stats through symlinks: a symlink to a file is reported kind 'file' (with the target's "
         "size) instead of 'symlink'")
class MetadataFollowsSymlink(HostPlugin):
    def m_fs_metadata(self, params: dict[str, Any]) -> Any:
        path = self._path(params)
        try:
            info = path.stat()
        except FileNotFoundError:
            return super().m_fs_metadata(params)
        modified_ns = info.st_mtime_ns
        return {"metadata": {
            "kind": _kind(info.st_mode), "size": info.st_size, "mode": info.st_mode & 0o7777,
            "modified_at": {"secs_since_epoch": modified_ns // 1_000_000_000,
                            "nanos_since_epoch": modified_ns % 1_000_000_000},
        }}


@redteam("b3_read_urlsafe_b64", "SDP1-035",
         "fs/read encodes content with the URL-safe base64 alphabet ('-' and '_' for '+' and '/')")
class ReadUrlsafeB64(HostPlugin):
    def m_fs_read(self, params: dict[str, Any]) -> Any:
        result = super().m_fs_read(params)
        result["content_b64"] = result["content_b64"].replace("+", "-").replace("/", "_")
        return result


@redteam("b3_read_default_cap_1mib", "SDP1-083",
         "fs/read without length reads at most 1 MiB ('a sane default chunk') instead of to end of file")
class ReadDefaultCap1MiB(HostPlugin):
    def m_fs_read(self, params: dict[str, Any]) -> Any:
        if params.get("length") is None:
            params = {**params, "length": 1 << 20}
        return super().m_fs_read(params)


@redteam("b3_metadata_nanos_overflow", "SDP1-037",
         "fs/metadata modified_at.nanos_since_epoch carries the whole st_mtime_ns instead of the sub-second "
         "part (out of range for the u32 nanos field)")
class MetadataNanosOverflow(HostPlugin):
    def m_fs_metadata(self, params: dict[str, Any]) -> Any:
        result = super().m_fs_metadata(params)
        modified = result["metadata"]["modified_at"]
        modified["nanos_since_epoch"] = modified["secs_since_epoch"] * 1_000_000_000 + modified["nanos_since_epoch"]
        return result


@redteam("b3_resolve_cached_workspace", "SDP1-081",
         "resolved file paths are memoised by the path string alone: once 'f.txt' was resolved for one sandbox, "
         "the same relative path in another sandbox goes to the first sandbox's workspace")
class ResolveCachedWorkspace(HostPlugin):
    def _path(self, params: dict[str, Any], key: str = "path") -> Any:
        cache = self.__dict__.setdefault("_resolved", {})
        resolved = super()._path(params, key)
        return cache.setdefault(params[key], resolved)


# ================================================================================================
# stdio processes and PTY (9)
# ================================================================================================


class _OldestTailProcess(StdioProcess):
    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for chunk in iter(lambda: self.proc.stderr.read1(4096), b""):
            room = STDERR_TAIL - self.stderr_size
            if room < len(chunk):
                self.stderr_dropped = True
            if room > 0:
                self.stderr_tail.append(chunk[:room])
                self.stderr_size += min(room, len(chunk))


@redteam("b3_stderr_tail_oldest", "SDP1-023 (section 5.7: stderr_tail = the newest 8 KiB)",
         "exec/stdio_wait's stderr_tail keeps the first 8 KiB of stderr (appending stops when full) instead of "
         "the newest 8 KiB")
class StderrTailOldest(HostPlugin):
    def m_exec_stdio_open(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        process_id = params["process_id"]
        spec = params["spec"]
        with self._interactive_lock:
            if process_id in self._processes:
                raise invalid_spec("process_id", "duplicate stdio process id")
            self._processes[process_id] = None  # type: ignore[assignment]
        try:
            proc = self._spawn(sandbox, spec["command"], spec["env"], spec.get("working_dir"),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except BaseException:
            with self._interactive_lock:
                self._processes.pop(process_id, None)
            raise
        with self._interactive_lock:
            self._processes[process_id] = _OldestTailProcess(proc)
        return None


@redteam("b3_stdio_output_exit_drops", "SDP1-023 SDP1-108",
         "exec/stdio_output answers null (EOF) as soon as the process has exited, even when stdout bytes are "
         "still queued: output of a short-lived process is lost if the host polls after it ended")
class StdioOutputExitDrops(HostPlugin):
    def m_exec_stdio_output(self, params: dict[str, Any]) -> Any:
        process = self._process(params)
        if process.proc.poll() is not None:
            return {"data_b64": None}
        return super().m_exec_stdio_output(params)


@redteam("b3_stdio_terminate_pid_only", "SDP1-023 (section 2.4: exec/stdio_terminate kills the process group)",
         "exec/stdio_terminate kills only the bash process, not its process group: a child holding stdout keeps "
         "running and exec/stdio_output never reaches EOF")
class StdioTerminatePidOnly(HostPlugin):
    def m_exec_stdio_terminate(self, params: dict[str, Any]) -> Any:
        process = self._process(params)
        process.terminated = True
        try:
            os.kill(process.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return None


@redteam("b3_stdio_unknown_not_found", "SDP1-045 (section 2.4: unknown process_id = invalid_spec process_id)",
         "an unknown process_id fails not_found with resource 'process' (not a v1 resource) instead of "
         "invalid_spec field process_id")
class StdioUnknownNotFound(HostPlugin):
    def _process(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            process = self._processes.get(params["process_id"])
        if process is None:
            raise not_found("process", params["process_id"])
        return process


@redteam("b3_stdio_output_holds_stdin_lock", "SDP1-077",
         "exec/stdio_output waits for output while holding the process's stdin lock: with a poll outstanding, "
         "exec/stdio_input to the same process blocks (an interactive cat deadlocks)")
class StdioOutputHoldsStdinLock(HostPlugin):
    def m_exec_stdio_output(self, params: dict[str, Any]) -> Any:
        process = self._process(params)
        with process.stdin_lock:
            return super().m_exec_stdio_output(params)


@redteam("b3_pty_working_dir_ignored", "SDP1-081 SDP1-023",
         "pty/open ignores options.working_dir: the shell always starts in the workspace root")
class PtyWorkingDirIgnored(HostPlugin):
    def m_pty_open(self, params: dict[str, Any]) -> Any:
        options = {k: v for k, v in params["options"].items() if k != "working_dir"}
        return super().m_pty_open({**params, "options": options})


@redteam("b3_pty_close_unknown_fails", "SDP1-023 (section 2.4: pty/close of an unknown id succeeds)",
         "pty/close of an unknown or already-closed pty_id fails invalid_spec pty_id instead of succeeding")
class PtyCloseUnknownFails(HostPlugin):
    def m_pty_close(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            known = params["pty_id"] in self._ptys
        if not known:
            raise invalid_spec("pty_id", "unknown PTY id")
        return super().m_pty_close(params)


@redteam("b3_pty_duplicate_replaces", "SDP1-076",
         "pty/open with a pty_id already in use closes the old session and opens a new one under the id instead "
         "of rejecting the duplicate")
class PtyDuplicateReplaces(HostPlugin):
    def m_pty_open(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            known = params["pty_id"] in self._ptys
        if known:
            self.m_pty_close({"pty_id": params["pty_id"]})
        return super().m_pty_open(params)


@redteam("b3_pty_initial_size_ignored", "SDP1-023",
         "pty/open always starts the terminal at 24x80, ignoring options.size (pty/resize works)")
class PtyInitialSizeIgnored(HostPlugin):
    def m_pty_open(self, params: dict[str, Any]) -> Any:
        options = {**params["options"], "size": {"rows": 24, "cols": 80}}
        return super().m_pty_open({**params, "options": options})


# ================================================================================================
# logs (3)
# ================================================================================================


@redteam("b3_logs_stream_id_is_sandbox", "SDP1-079",
         "logs/output notifications carry the sandbox id in stream_id instead of the follow's stream_id")
class LogsStreamIdIsSandbox(HostPlugin):
    _local = threading.local()

    def m_logs_follow(self, params: dict[str, Any]) -> Any:
        self._local.sandbox = params.get("sandbox_id")
        try:
            return super().m_logs_follow(params)
        finally:
            self._local.sandbox = None

    def notify(self, method: str, params: Any) -> None:
        sandbox = getattr(self._local, "sandbox", None)
        if method == "logs/output" and sandbox is not None:
            params = {**params, "stream_id": sandbox}
        super().notify(method, params)


@redteam("b3_stream_cancel_unknown_fails", "SDP1-080",
         "stream/cancel for a stream_id that is not (or no longer) being followed fails invalid_spec stream_id "
         "instead of succeeding")
class StreamCancelUnknownFails(HostPlugin):
    def m_stream_cancel(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            stream = self._streams.get(params["stream_id"])
        if stream is None or not stream.following:
            raise invalid_spec("stream_id", "unknown stream id")
        return super().m_stream_cancel(params)


@redteam("b3_logs_precancel_ignored", "SDP1-080",
         "logs/follow discards a placeholder left by an earlier stream/cancel of its id ('stale'), so a follow "
         "cancelled before it arrived runs (the entrypoint log never ends)")
class LogsPrecancelIgnored(HostPlugin):
    def m_logs_follow(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            stream = self._streams.get(params["stream_id"])
            if isinstance(stream, LogStream) and not stream.following:
                del self._streams[params["stream_id"]]
        return super().m_logs_follow(params)


# ================================================================================================
# events (8)
# ================================================================================================


@redteam("b3_undelete_no_events", "SDP1-111 SDP1-114",
         "sandbox/undelete ignores its events object: restoring a sandbox emits no operation events although the "
         "request asked for them")
class UndeleteNoEvents(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        if method == "sandbox/undelete" and isinstance(params, dict):
            params = {k: v for k, v in params.items() if k != "events"}
        return super().dispatch(method, params)


@redteam("b3_attach_no_events", "SDP1-111",
         "sandbox/attach ignores its events object: no operation events, and the handle's later operations get "
         "no route either")
class AttachNoEvents(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        if method == "sandbox/attach" and isinstance(params, dict):
            params = {k: v for k, v in params.items() if k != "events"}
        return super().dispatch(method, params)


class _ArchiveAsStopSource(EventSource):
    def operation(self, route: dict[str, Any] | None, action: str, subject: dict[str, Any]) -> Operation:
        return super().operation(route, "stop" if action == "archive" else action, subject)


@redteam("b3_archive_event_action_stop", "SDP1-111 SDP1-114",
         "sandbox/archive (implemented on top of stop) reports its operation events with action 'stop' instead "
         "of 'archive'")
class ArchiveEventActionStop(_EventsPlugin):
    event_source_class = _ArchiveAsStopSource


class _FailedErrorString(Operation):
    def failed(self, report: dict[str, Any]) -> None:
        self._emit({"type": "operation_failed", "action": self.action,
                    "duration": _duration(time.monotonic() - self.started), "error": report["message"]})


class _FailedErrorStringSource(_OperationSource):
    operation_class = _FailedErrorString


@redteam("b3_event_failed_error_string", "SDP1-114 SDP1-045",
         "operation_failed events carry error as the message string instead of an ErrorReport object "
         "{kind, message, retryable, causes}")
class EventFailedErrorString(_EventsPlugin):
    event_source_class = _FailedErrorStringSource


class _PerRouteSequence(EventSource):
    def emit(self, route: dict[str, Any], subject: dict[str, Any], operation_id: str, body: dict[str, Any]) -> None:
        with self._lock:
            counters = self.__dict__.setdefault("_per_route", {})
            counters[route["route_id"]] = counters.get(route["route_id"], 0) + 1
            event: dict[str, Any] = {
                "id": {"source_id": self.source_id, "sequence": counters[route["route_id"]]},
                "occurred_at": _now(), "provider": self.provider_kind, "subject": subject,
                "operation_id": operation_id, **body,
            }
            if route.get("correlation_id") is not None:
                event["correlation_id"] = route["correlation_id"]
            self._notify("host/event", {"route_id": route["route_id"], "event": event})


@redteam("b3_event_sequence_per_route", "SDP1-113",
         "event sequence numbers are counted per route_id under one source_id: two routes both start at 1, so "
         "(source_id, sequence) repeats and does not increase by 1 per source")
class EventSequencePerRoute(_EventsPlugin):
    event_source_class = _PerRouteSequence


class _FreshOperationId(Operation):
    def _emit(self, body: dict[str, Any]) -> None:
        self.operation_id = uuid.uuid4().hex
        super()._emit(body)


class _FreshOperationIdSource(_OperationSource):
    operation_class = _FreshOperationId


@redteam("b3_event_operation_id_per_event", "SDP1-114",
         "every event gets a fresh operation_id, so an operation's started and terminal events do not share one")
class EventOperationIdPerEvent(_EventsPlugin):
    event_source_class = _FreshOperationIdSource


class _PlainMsDuration(Operation):
    def completed(self, subject: dict[str, Any] | None = None) -> None:
        if subject is not None:
            self.subject = subject
        self._emit({"type": "operation_completed", "action": self.action,
                    "duration": int((time.monotonic() - self.started) * 1000)})


class _PlainMsDurationSource(_OperationSource):
    operation_class = _PlainMsDuration


@redteam("b3_event_duration_plain_ms", "SDP1-036",
         "operation_completed.duration is an integer of milliseconds instead of the embedded {secs, nanos} "
         "duration (operation_failed is right)")
class EventDurationPlainMs(_EventsPlugin):
    event_source_class = _PlainMsDurationSource


class _FloatTimestampSource(EventSource):
    def emit(self, route: dict[str, Any], subject: dict[str, Any], operation_id: str, body: dict[str, Any]) -> None:
        with self._lock:
            self._sequence += 1
            event: dict[str, Any] = {
                "id": {"source_id": self.source_id, "sequence": self._sequence},
                "occurred_at": time.time(), "provider": self.provider_kind, "subject": subject,
                "operation_id": operation_id, **body,
            }
            if route.get("correlation_id") is not None:
                event["correlation_id"] = route["correlation_id"]
            self._notify("host/event", {"route_id": route["route_id"], "event": event})


@redteam("b3_event_occurred_at_float", "SDP1-037",
         "event occurred_at is a float of epoch seconds instead of a Timestamp")
class EventOccurredAtFloat(_EventsPlugin):
    event_source_class = _FloatTimestampSource


# ================================================================================================
# sandbox isolation (1)
# ================================================================================================


class _SharedEnvBackend(HostBackend):
    _env: dict[str, str] = {}

    def create(self, name: str | None, labels: Mapping[str, str], env: Mapping[str, str],
               from_snapshot: str | None = None) -> HostSandbox:
        sandbox = super().create(name, labels, env, from_snapshot)
        self._env.update(env)
        sandbox.env = self._env  # one dict for every sandbox (a mutable default)
        return sandbox


@redteam("b3_cross_sandbox_env_leak", "SDP1-051 SDP1-023",
         "every sandbox's create-time env is the same shared dict: a sandbox created without env sees the env "
         "(secrets included) of an earlier sandbox")
class CrossSandboxEnvLeak(_BackendPlugin):
    backend_class = _SharedEnvBackend


# ================================================================================================
# shutdown / EOF (3)
# ================================================================================================


@redteam("b3_eof_drops_inflight_replies", "SDP1-097 (section 8: in-flight requests still finish and reply)",
         "at stdin EOF (or shutdown) the plugin cleans up and exits without waiting for in-flight requests: a "
         "request still running when input ended is never answered")
class EofDropsInflightReplies(HostPlugin):
    def _wait_inflight(self, timeout_s: float) -> None:
        return None


class _NoKillBackend(HostBackend):
    def close(self) -> None:
        if not self.persistent:
            shutil.rmtree(self.root, ignore_errors=True)


@redteam("b3_shutdown_orphans_processes", "SDP1-096 SDP1-097",
         "on shutdown/EOF the plugin only removes its temporary directory: running stdio processes, PTY shells and "
         "commands are left behind as orphans after it exits")
class ShutdownOrphansProcesses(_BackendPlugin):
    backend_class = _NoKillBackend

    def on_stop(self) -> None:
        self.backend.close()


@redteam("b3_shutdown_exit_status_1", "SDP1-096",
         "after answering shutdown the plugin exits with status 1 (the 'stopped' path returns an error code); "
         "EOF exits 0")
class ShutdownExitStatus1(HostPlugin):
    _stopped_by_shutdown = False

    def m_shutdown(self, params: dict[str, Any]) -> Any:
        self._stopped_by_shutdown = True
        return super().m_shutdown(params)

    def serve(self) -> int:
        code = super().serve()
        return 1 if self._stopped_by_shutdown else code
