"""Sixth, independent set of blind red-team mutants (``b6_*``) of the reference v1 host plugin.

Written from the protocol digest (section 7 requirement numbers SDP1-NNN; sections 2/5/8/9 for behaviour v1
requires, SDP1-023 for a declared capability that must behave as described) and the reference provider's
sources only, avoiding the faults of ``blind_1`` .. ``blind_5``. Each class overrides the smallest piece of
``HostPlugin`` (or of its backend, sanitizer or event source, through ``tests.redteam.seams``) it can, so exactly
one behaviour differs from the honest plugin. Areas: handshake/capabilities, envelope/errors, transport,
lifecycle/status, spec validation, exec, sanitization, files, stdio/PTY, logs, events, snapshots.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from conformance.reference.host_backend import (
    SAFE_ENVIRONMENT,
    BackendError,
    HostBackend,
    HostSandbox,
    invalid_spec,
    invalid_state,
    not_found,
)
from conformance.reference.host_events import EventSource, Operation, _duration
from conformance.reference.host_interactive import LogStream, _encode
from conformance.reference.host_plugin import PROTOCOL_VERSION, HostPlugin, application_error
from conformance.reference.sanitize import Sanitizer
from conformance.reference.stdio_server import RpcFailure
from tests.redteam import redteam
from tests.redteam.seams import BackendPlugin, EventsPlugin, OperationSource, sanitizing_backend


def _sanitizing(sanitizer: type[Sanitizer]) -> type[HostPlugin]:
    return type(f"_Plugin_{sanitizer.__name__}", (BackendPlugin,), {"backend_class": sanitizing_backend(sanitizer)})


def _operations(operation: type[Operation]) -> type[HostPlugin]:
    source = type(f"_Source_{operation.__name__}", (OperationSource,), {"operation_class": operation})
    return type(f"_Plugin_{operation.__name__}", (EventsPlugin,), {"event_source_class": source})


# ================================================================================================
# handshake / capabilities / gates (7)
# ================================================================================================


@redteam("b6_reinitialize_skips_version_check", "SDP1-017 SDP1-020",
         "the protocol_version check runs only on the first handshake of the connection: a second initialize "
         "asking for version 2 is answered with the cached v1 result instead of failing with a version mismatch")
class ReinitializeSkipsVersionCheck(HostPlugin):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        cached = getattr(self, "_handshake", None)
        if cached is not None:
            return cached
        self._handshake = super().m_initialize(params)
        return self._handshake


@redteam("b6_caps_network_group_omitted", "SDP1-022",
         "the capabilities object leaves out the whole network group ('the host provider supports no network "
         "policy, every flag would be false') instead of sending every group")
class CapsNetworkGroupOmitted(HostPlugin):
    def declared_capabilities(self) -> dict[str, Any]:
        caps = super().declared_capabilities()
        caps.pop("network", None)
        return caps


@redteam("b6_resume_gate_typo", "SDP1-023 SDP1-060 (section 2.3: resume is gated by lifecycle.pause)",
         "the gate table lists sandbox/resume under 'lifecycle.resume' (a capability that does not exist), so "
         "resume always fails unsupported although lifecycle.pause is declared and pause works")
class ResumeGateTypo(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        if method == "sandbox/resume" and not self.declares("lifecycle.resume"):
            raise self.unsupported(method, "lifecycle.resume")
        return super().dispatch(method, params)


@redteam("b6_health_missing_permissions_null", "SDP1-093 (section 5.11: missing_permissions is a list)",
         "provider/health reports missing_permissions null when nothing is missing (an Option left unset) instead "
         "of an empty list")
class HealthMissingPermissionsNull(HostPlugin):
    def m_provider_health(self, params: dict[str, Any]) -> Any:
        return {"health": {"status": "ok", "message": None, "missing_permissions": None}}


@redteam("b6_unsupported_kind_not_supported", "SDP1-024 SDP1-044",
         "undeclared operations fail with report.kind 'not_supported' (the wording of another SDK) instead of the "
         "stable kind 'unsupported'; detail.capability is right")
class UnsupportedKindNotSupported(HostPlugin):
    def unsupported(self, method: str, capability: str) -> RpcFailure:
        return application_error("not_supported", f"capability {capability} is not supported by this provider",
                                 {"capability": capability})


@redteam("b6_initialize_version_defaulted", "SDP1-042 (section 2.1: initialize protocol_version is required)",
         "initialize without protocol_version defaults it to 1 (params.get with a default) and succeeds, instead "
         "of answering -32600 for the missing required key")
class InitializeVersionDefaulted(HostPlugin):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        return super().m_initialize({**params, "protocol_version": params.get("protocol_version", PROTOCOL_VERSION)})


@redteam("b6_volume_methods_not_found", "SDP1-028 SDP1-088 SDP1-024",
         "with volumes null the volume/* handlers are never registered, so every volume method answers -32601 "
         "unknown method instead of -32000 unsupported naming 'volumes'")
class VolumeMethodsNotFound(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        if method.startswith("volume/") and self.capabilities.get("volumes") is None:
            raise self.unknown_method(method)
        return super().dispatch(method, params)


# ================================================================================================
# envelope / errors / ids (6)
# ================================================================================================


@redteam("b6_malformed_json_dropped", "SDP1-042 (section 8: a line that is not JSON -> -32600, id 0)",
         "a line that is not valid JSON is logged to stderr and dropped without any answer, instead of being "
         "answered -32600 malformed message with id 0")
class MalformedJsonDropped(HostPlugin):
    def handle_line(self, raw: bytes) -> bool:
        try:
            json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self.log(f"dropping unparsable line: {exc}")
            return True
        return super().handle_line(raw)


@redteam("b6_numeric_string_id_served", "SDP1-009 SDP1-042 (section 1.2: ids are unsigned integers)",
         "a request id given as a numeric string ('7') is accepted (lenient id parsing) and the request is served "
         "and answered with id '7', instead of the message being rejected -32600 malformed with id 0")
class NumericStringIdServed(HostPlugin):
    def handle_line(self, raw: bytes) -> bool:
        try:
            message = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return super().handle_line(raw)
        if (isinstance(message, dict) and isinstance(message.get("id"), str) and message["id"].isdigit()
                and isinstance(message.get("method"), str) and "jsonrpc" in message):
            threading.Thread(target=self._run, args=(message["id"], message["method"], message.get("params")),
                             daemon=True).start()
            return True
        return super().handle_line(raw)


class _KeyErrorLookupBackend(HostBackend):
    def get(self, sandbox_id: str, include_deleted: bool = False) -> HostSandbox:
        with self._lock:
            sandbox = self._sandboxes[sandbox_id]  # an unknown id raises KeyError
        if sandbox.state == "deleted" and not include_deleted:
            raise not_found("sandbox", sandbox_id)
        return sandbox


@redteam("b6_unknown_sandbox_invalid_params", "SDP1-045 (section 8: unknown sandbox id -> not_found sandbox)",
         "the sandbox lookup indexes the registry dict directly; the KeyError for an id never seen is caught by "
         "the params decoder's handler, so describe/stop/exec of an unknown id answer -32600 'missing field' "
         "instead of -32000 not_found resource sandbox")
class UnknownSandboxInvalidParams(BackendPlugin):
    backend_class = _KeyErrorLookupBackend


@redteam("b6_not_found_code_32004", "SDP1-043 (section 1.3: application failures use -32000)",
         "not_found failures use a dedicated JSON-RPC code -32004 (one code per error kind) instead of the "
         "application-failure code -32000; the data.report is right")
class NotFoundCode32004(HostPlugin):
    def backend_failure(self, method: str, error: BackendError) -> RpcFailure:
        failure = super().backend_failure(method, error)
        if error.kind == "not_found":
            failure.code = -32004
        return failure


@redteam("b6_detail_inside_report", "SDP1-045 (section 5.12: data = {report, detail})",
         "backend failures put the kind-specific detail inside data.report.detail (next to kind/message) instead "
         "of data.detail; unsupported errors are right")
class DetailInsideReport(HostPlugin):
    def backend_failure(self, method: str, error: BackendError) -> RpcFailure:
        failure = super().backend_failure(method, error)
        detail = failure.data.pop("detail", None)
        if detail is not None:
            failure.data["report"]["detail"] = detail
        return failure


@redteam("b6_notification_null_id", "SDP1-011 SDP1-012 (section 1.2: a notification has no id)",
         "notifications (exec/output, logs/output, host/event) are built from the response template and carry "
         "\"id\": null, so they look like responses to a request with a null id")
class NotificationNullId(HostPlugin):
    def notify(self, method: str, params: Any) -> None:
        self.write_message({"jsonrpc": "2.0", "id": None, "method": method, "params": params})


# ================================================================================================
# transport / concurrency (3)
# ================================================================================================


@redteam("b6_reader_drops_partial_block", "SDP1-005 SDP1-002",
         "the reader reads stdin in 4 KiB blocks and splits them on newlines, discarding the unterminated tail "
         "of each block: pipelined requests that straddle a block boundary are silently lost")
class ReaderDropsPartialBlock(HostPlugin):
    def lines(self) -> Iterator[bytes]:
        while True:
            block = self.stdin.read1(4096)
            if not block:
                return
            *complete, _tail = block.split(b"\n")
            for line in complete:
                yield line + b"\n"


@redteam("b6_logs_follow_on_reader_thread", "SDP1-007 SDP1-077",
         "logs/follow runs on the reading thread ('so its logs/output stay in order'), so while a follow is open "
         "(the entrypoint log stays open until cancelled) no other request is read, not even stream/cancel")
class LogsFollowOnReaderThread(HostPlugin):
    inline_methods = frozenset({"shutdown", "logs/follow"})


@redteam("b6_response_id_shared_field", "SDP1-009 SDP1-006",
         "the id of 'the current request' is kept in one connection field, overwritten whenever a new request is "
         "read; a slow call answered after a later request was read carries the later request's id")
class ResponseIdSharedField(HostPlugin):
    def handle_line(self, raw: bytes) -> bool:
        try:
            message = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            message = None
        if isinstance(message, dict) and isinstance(message.get("id"), int) and message.get("method"):
            self._current_request_id = message["id"]
        return super().handle_line(raw)

    def respond(self, request_id: Any, result: Any) -> None:
        super().respond(getattr(self, "_current_request_id", request_id), result)

    def respond_error(self, request_id: Any, failure: RpcFailure) -> None:
        super().respond_error(getattr(self, "_current_request_id", request_id), failure)


# ================================================================================================
# lifecycle / status / states (10)
# ================================================================================================


class _PauseNoStopBackend(HostBackend):
    def pause(self, sandbox: HostSandbox) -> None:
        if sandbox.state not in ("running", "paused"):
            raise invalid_state(sandbox.state, "pause")
        self._set_state(sandbox, "paused")  # processes are never sent SIGSTOP


@redteam("b6_pause_no_sigstop", "SDP1-023 (lifecycle.pause declared: pause freezes the sandbox's processes)",
         "sandbox/pause records state 'paused' but never stops the sandbox's process groups: a running command "
         "keeps running and printing while the sandbox is reported paused")
class PauseNoSigstop(BackendPlugin):
    backend_class = _PauseNoStopBackend


@redteam("b6_describe_deleted_tombstone", "SDP1-023 (section 9.2: attach/describe of a deleted sandbox -> not_found)",
         "sandbox/describe looks sandboxes up including tombstones: describing a deleted sandbox answers a status "
         "with state 'deleted' instead of failing not_found")
class DescribeDeletedTombstone(HostPlugin):
    def m_sandbox_describe(self, params: dict[str, Any]) -> Any:
        return {"status": self.status(self.backend.get(params["sandbox_id"], include_deleted=True))}


@redteam("b6_list_stale_state", "SDP1-023 SDP1-040 (section 2.2: sandbox/list returns the sandboxes' status)",
         "sandbox/list answers from a status cache filled at create and never refreshed: after stop (or archive, "
         "pause) the list still reports the sandbox 'running' while describe is right")
class ListStaleState(HostPlugin):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._status_cache: dict[str, dict[str, Any]] = {}

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_create(params)
        self._status_cache[info["status"]["id"]] = info["status"]
        return info

    def m_sandbox_list(self, params: dict[str, Any]) -> Any:
        labels = (params["filter"] or {}).get("labels") or {}
        return {"sandboxes": [self._status_cache.get(s.id) or self.status(s) for s in self.backend.list(labels)]}


@redteam("b6_created_at_millis", "SDP1-037 (section 5.16: secs_since_epoch is seconds)",
         "status.created_at.secs_since_epoch carries epoch milliseconds (int(time() * 1000)) with nanos 0: the "
         "timestamp lies tens of thousands of years in the future")
class CreatedAtMillis(HostPlugin):
    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        status = super().status(sandbox)
        status["created_at"] = {"secs_since_epoch": int(sandbox.created_at * 1000), "nanos_since_epoch": 0}
        return status


@redteam("b6_labels_null_when_empty", "SDP1-050 (section 5.3: labels is an object string->string, default {})",
         "status.labels is null for a sandbox without labels (labels or None) instead of an empty object")
class LabelsNullWhenEmpty(HostPlugin):
    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        status = super().status(sandbox)
        status["labels"] = sandbox.labels or None
        return status


@redteam("b6_stop_unknown_ok", "SDP1-045 (section 8: unknown sandbox id -> not_found); only delete is idempotent",
         "sandbox/stop is made idempotent like delete: stopping an unknown sandbox id answers {} instead of "
         "failing not_found")
class StopUnknownOk(HostPlugin):
    def m_sandbox_stop(self, params: dict[str, Any]) -> Any:
        try:
            sandbox = self.backend.get(params["sandbox_id"])
        except BackendError as error:
            if error.kind == "not_found":
                return None
            raise
        self.backend.stop(sandbox)
        return None


class _CopyToTrashBackend(HostBackend):
    def _dispose(self, sandbox: HostSandbox) -> None:
        self._kill_processes(sandbox)
        trash = self._trash(sandbox)
        shutil.rmtree(trash, ignore_errors=True)
        shutil.copytree(sandbox.workspace, trash, symlinks=True)  # kept for undelete; the original is never removed


@redteam("b6_delete_leaves_workspace", "SDP1-023 (section 9.2: delete removes the managed workspace)",
         "sandbox/delete copies the managed workspace aside for undelete but never removes the original: the "
         "deleted sandbox's files stay on disk at its working_directory")
class DeleteLeavesWorkspace(BackendPlugin):
    backend_class = _CopyToTrashBackend


class _ArchiveStoppedBackend(HostBackend):
    def archive(self, sandbox: HostSandbox) -> None:
        if sandbox.state not in ("running", "stopped", "archived"):
            raise invalid_state(sandbox.state, "archive")
        self._kill_processes(sandbox)
        self._set_state(sandbox, "stopped")  # archive implemented as stop


@redteam("b6_archive_reports_stopped", "SDP1-023 SDP1-040 (lifecycle.archive declared; settled state 'archived')",
         "sandbox/archive is implemented as a stop and records state 'stopped', so describe never reports the "
         "archived state")
class ArchiveReportsStopped(BackendPlugin):
    backend_class = _ArchiveStoppedBackend


@redteam("b6_working_directory_relative", "SDP1-050 (section 9.2: working_directory is an absolute canonical path)",
         "HandleInfo.working_directory is the workspace path relative to the registry root "
         "('host-…/workspace') instead of its absolute path")
class WorkingDirectoryRelative(HostPlugin):
    def handle_info(self, sandbox: HostSandbox) -> dict[str, Any]:
        info = super().handle_info(sandbox)
        info["working_directory"] = os.path.relpath(sandbox.workspace, Path(self.backend.root).resolve())
        return info


class _CaseInsensitiveListBackend(HostBackend):
    def list(self, labels: Mapping[str, str] | None = None) -> list[HostSandbox]:
        with self._lock:
            sandboxes = [s for s in self._sandboxes.values() if s.state != "deleted"]
        wanted = {k.lower(): v.lower() for k, v in (labels or {}).items()}
        return [s for s in sandboxes
                if all({k.lower(): v.lower() for k, v in s.labels.items()}.get(k) == v for k, v in wanted.items())]


@redteam("b6_list_filter_case_insensitive", "SDP1-023 (section 2.2: label filter = sandbox carries all listed labels)",
         "the sandbox/list label filter compares keys and values case-insensitively: env=prod also lists a sandbox "
         "labelled env=Prod")
class ListFilterCaseInsensitive(BackendPlugin):
    backend_class = _CaseInsensitiveListBackend


# ================================================================================================
# creation-spec validation (6)
# ================================================================================================


@redteam("b6_create_ignores_user", "SDP1-051",
         "a requested user is silently ignored (commands run as the plugin's user anyway) instead of being rejected "
         "invalid_spec user")
class CreateIgnoresUser(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        super().validate_spec({k: v for k, v in spec.items() if k != "user"})


@redteam("b6_provider_config_ignored", "SDP1-051",
         "provider_config is treated as opaque and skipped ('plugin-defined, nothing to check'), so any object is "
         "silently accepted instead of rejected invalid_spec provider_config")
class ProviderConfigIgnored(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        super().validate_spec({k: v for k, v in spec.items() if k != "provider_config"})


@redteam("b6_create_ignores_ephemeral", "SDP1-051",
         "ephemeral: true is accepted and ignored (a managed workspace is 'ephemeral enough') instead of rejected "
         "invalid_spec ephemeral")
class CreateIgnoresEphemeral(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        super().validate_spec({k: v for k, v in spec.items() if k != "ephemeral"})


@redteam("b6_image_source_accepted", "SDP1-051",
         "an image source ({image: {reference}}) is accepted and the image ignored ('the host is the image'): an "
         "empty host-directory sandbox is created instead of invalid_spec source")
class ImageSourceAccepted(HostPlugin):
    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        if isinstance(spec, dict) and isinstance(spec.get("source"), dict) and "image" in spec["source"]:
            params = {**params, "spec": {**spec, "source": "host_directory"}}
        return super().m_sandbox_create(params)


@redteam("b6_invalid_spec_field_prefixed", "SDP1-051 SDP1-045 (section 5.4: invalid_spec names the spec field)",
         "creation-spec rejections name the field by its request path ('spec.region', 'spec.resources.gpus') "
         "instead of the spec field itself ('region')")
class InvalidSpecFieldPrefixed(HostPlugin):
    def backend_failure(self, method: str, error: BackendError) -> RpcFailure:
        failure = super().backend_failure(method, error)
        detail = failure.data.get("detail")
        if method == "sandbox/create" and error.kind == "invalid_spec" and isinstance(detail, dict):
            detail["field"] = f"spec.{detail['field']}"
        return failure


@redteam("b6_source_defaulted", "SDP1-042 SDP1-051 (section 5.4: source is required)",
         "a creation spec without source defaults to host_directory and the sandbox is created, instead of the "
         "spec being rejected for its missing required source")
class SourceDefaulted(HostPlugin):
    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        if isinstance(spec, dict) and "source" not in spec:
            params = {**params, "spec": {**spec, "source": "host_directory"}}
        return super().m_sandbox_create(params)


# ================================================================================================
# exec (11)
# ================================================================================================


class _DurationAtSpawnBackend(HostBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._local = threading.local()

    def start_process(self, *args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = super().start_process(*args, **kwargs)
        self._local.spawned = time.monotonic()
        return proc

    def run(self, *args: Any, **kwargs: Any):
        called = time.monotonic()
        result = super().run(*args, **kwargs)
        result.duration_ms = int((getattr(self._local, "spawned", called) - called) * 1000)
        return result


@redteam("b6_duration_at_spawn", "SDP1-036 (section 5.6: duration_ms is the command's duration)",
         "duration_ms is read when the process has been spawned (the stopwatch is stopped before the wait), so "
         "every command reports a duration of about 0 ms however long it ran")
class DurationAtSpawn(BackendPlugin):
    backend_class = _DurationAtSpawnBackend


class _SafelistOnlyBackend(HostBackend):
    def environment(self, sandbox: HostSandbox, spec_env: Mapping[str, str]) -> dict[str, str]:
        env = {name: value for name, value in self.environ.items() if name in SAFE_ENVIRONMENT}
        env.update(sandbox.env)
        env.update(spec_env)
        env.pop("BASH_ENV", None)
        env.pop("SANDBOX_CONFORMANCE_HOST_REGISTRY", None)
        return env


@redteam("b6_inherit_safelist_only", "SDP1-023 (section 9.2: exec env = inherited env minus secrets, then ...)",
         "the safelist (PATH HOME USER ...) is used as an allow-list: every other inherited variable that is not a "
         "secret (e.g. LC_ALL, JAVA_HOME, FOO_SETTING) is dropped from commands' environment")
class InheritSafelistOnly(BackendPlugin):
    backend_class = _SafelistOnlyBackend


@redteam("b6_stream_ignores_timeout", "SDP1-074 SDP1-068",
         "exec/stream never applies spec.timeout_ms (only exec/run does; streams 'are watched by the host'): a "
         "streamed command runs past its timeout and ends 'exited'")
class StreamIgnoresTimeout(HostPlugin):
    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        if kwargs.get("on_output") is not None:
            spec = {**spec, "timeout_ms": None}
        return super().run_spec(sandbox_id, spec, **kwargs)


@redteam("b6_output_stream_short_names", "SDP1-101",
         "exec/output notifications name their stream 'out' / 'err' (short names from the pump table) instead of "
         "'stdout' / 'stderr'")
class OutputStreamShortNames(HostPlugin):
    def notify(self, method: str, params: Any) -> None:
        if method == "exec/output" and isinstance(params, dict):
            params = {**params, "stream": {"stdout": "out", "stderr": "err"}.get(params["stream"], params["stream"])}
        super().notify(method, params)


class _ObservedFromRetainedBackend(HostBackend):
    def run(self, *args: Any, **kwargs: Any):
        result = super().run(*args, **kwargs)
        for capture in (result.stdout_capture, result.stderr_capture):
            capture["observed_bytes"] = capture["retained_bytes"]  # len(head) + len(tail)
            capture["omitted_bytes"] = capture["observed_bytes"] - capture["retained_bytes"]
        return result


@redteam("b6_observed_from_retained", "SDP1-106 SDP1-105",
         "capture observed_bytes is computed from the retained buffer (len(head) + len(tail)) instead of the "
         "running count, so with a retained_output_limit observed equals retained and omitted is always 0")
class ObservedFromRetained(BackendPlugin):
    backend_class = _ObservedFromRetainedBackend


@redteam("b6_absent_limit_retains_nothing", "SDP1-105 (section 4: v1 absent limit retains everything)",
         "an absent retained_output_limit retains nothing (v2's 'retained output is disabled by default' applied "
         "to v1): exec/stream results carry empty stdout_b64/stderr_b64 unless a limit is given")
class AbsentLimitRetainsNothing(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        if params.get("retained_output_limit") is None:
            params = {**params, "retained_output_limit": 0}
        return super().m_exec_stream(params)


class _HeadCeilBackend(HostBackend):
    def run(self, sandbox: HostSandbox, command: str, env: Mapping[str, str], *args: Any,
            on_output: Any = None, retain_limit: int | None = None, **kwargs: Any):
        seen = {"stdout": bytearray(), "stderr": bytearray()}

        def tee(stream: str, chunk: bytes) -> None:
            seen[stream].extend(chunk)
            on_output(stream, chunk)

        result = super().run(sandbox, command, env, *args, on_output=tee if on_output else None,
                             retain_limit=retain_limit, **kwargs)
        if retain_limit and retain_limit % 2:
            head = (retain_limit + 1) // 2  # rounded up: the tail gets one byte less
            for stream in ("stdout", "stderr"):
                data = bytes(seen[stream])
                if len(data) > retain_limit:
                    setattr(result, stream, data[:head] + data[len(data) - (retain_limit - head):])
        return result


@redteam("b6_odd_limit_head_rounds_up", "SDP1-105 (section 4: head = floor(limit/2), tail = limit - head)",
         "for an odd retained_output_limit the stable head keeps ceil(limit/2) bytes and the tail one byte less; "
         "the counts are right but the retained bytes are not the first floor(L/2) + last L - floor(L/2)")
class OddLimitHeadRoundsUp(BackendPlugin):
    backend_class = _HeadCeilBackend


class _FloatDurationBackend(HostBackend):
    def run(self, *args: Any, **kwargs: Any):
        started = time.monotonic()
        result = super().run(*args, **kwargs)
        result.duration_ms = (time.monotonic() - started) * 1000  # not rounded to an integer
        return result


@redteam("b6_duration_ms_fractional", "SDP1-036",
         "duration_ms is the elapsed time in milliseconds as a float (e.g. 503.27) instead of an integer number "
         "of milliseconds")
class DurationMsFractional(BackendPlugin):
    backend_class = _FloatDurationBackend


class _SignalZeroBackend(HostBackend):
    def exit_status(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes]) -> tuple[int | None, int | None]:
        code, sig = super().exit_status(sandbox, proc)
        return code, (sig if sig is not None else 0)


@redteam("b6_signal_zero_for_exit", "SDP1-072",
         "a command that exits normally reports signal 0 (the wait status's signal field) instead of signal "
         "null/absent")
class SignalZeroForExit(BackendPlugin):
    backend_class = _SignalZeroBackend


@redteam("b6_unknown_sanitization_raw", "SDP1-069 SDP1-042",
         "an output_sanitization value outside raw/strip_ansi/strip_all (e.g. 'strip_colour') falls back to raw "
         "and the command runs, instead of the spec being rejected")
class UnknownSanitizationRaw(HostPlugin):
    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        if spec.get("output_sanitization") not in (None, "raw", "strip_ansi", "strip_all"):
            spec = {**spec, "output_sanitization": "raw"}
        return super().run_spec(sandbox_id, spec, **kwargs)


@redteam("b6_run_streams_swapped", "SDP1-068 SDP1-023 (section 5.6: stdout_b64 / stderr_b64)",
         "exec/run unpacks the backend's (stdout, stderr) pair in the wrong order: stdout_b64 carries the "
         "command's stderr and stderr_b64 its stdout (exec/stream is right)")
class RunStreamsSwapped(HostPlugin):
    def m_exec_run(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_run(params)
        result["stdout_b64"], result["stderr_b64"] = result["stderr_b64"], result["stdout_b64"]
        return result


# ================================================================================================
# output sanitization (3)
# ================================================================================================


class _NoC1StringTerminator(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state in ("osc-c2", "string-c2"):
            self._state = self._state.split("-")[0]  # only ESC \ and BEL end a string
            return
        super()._step(byte, out)


@redteam("b6_c1_st_not_terminator", "SDP1-069 (section 5.5: UTF-8-encoded C1 forms)",
         "an OSC/DCS string ends only at ESC \\ (or BEL for OSC): the UTF-8-encoded C1 string terminator "
         "0xC2 0x9C is not recognised, so the text after such a string is swallowed by strip_ansi/strip_all")
class C1StNotTerminator(_sanitizing(_NoC1StringTerminator)):
    pass


class _StripAllKeepsC1(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if (self._state == "c2" and self.mode == "strip_all" and 0x80 <= byte <= 0x9F
                and byte not in (0x9B, 0x9D, 0x90, 0x98, 0x9E, 0x9F)):
            self._state = "text"
            out.extend((0xC2, byte))  # the C0 filter is applied, the C1 one was forgotten
            return
        super()._step(byte, out)


@redteam("b6_strip_all_keeps_c1_controls", "SDP1-069 (section 5.5: strip_all removes standalone C0 and C1 controls)",
         "strip_all removes standalone C0 controls but keeps standalone UTF-8-encoded C1 controls (NEL 0xC2 0x85, "
         "...), which it must remove too")
class StripAllKeepsC1Controls(_sanitizing(_StripAllKeepsC1)):
    pass


class _CsiLetterFinals(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "csi" and 0x40 <= byte <= 0x7E and not (chr(byte).isalpha() or byte == 0x40):
            self._state = "text"  # only letters (and @) end a CSI sequence
            self._text_byte(byte, out)
            return
        super()._step(byte, out)


@redteam("b6_csi_tilde_final_leaks", "SDP1-069",
         "CSI final bytes are matched as letters only: sequences ending in '~' (ESC[3~, ESC[200~ bracketed paste) "
         "or another non-letter final byte end without their final, which leaks into strip_ansi output")
class CsiTildeFinalLeaks(_sanitizing(_CsiLetterFinals)):
    pass


# ================================================================================================
# files (8)
# ================================================================================================


@redteam("b6_append_ignored", "SDP1-084",
         "fs/write ignores append: an appending write truncates the file and writes only the new chunk (so a "
         "host-composed upload keeps only its last chunk)")
class AppendIgnored(HostPlugin):
    def m_fs_write(self, params: dict[str, Any]) -> Any:
        return super().m_fs_write({k: v for k, v in params.items() if k != "append"})


@redteam("b6_write_no_truncate", "SDP1-084 SDP1-023 (section 2.6: fs/write replaces the content; first write truncates)",
         "fs/write of an existing file opens it for update (r+b) without truncating: writing a shorter content "
         "leaves the old file's tail after the new bytes")
class WriteNoTruncate(HostPlugin):
    def m_fs_write(self, params: dict[str, Any]) -> Any:
        path = self._path(params)
        if params.get("append") or not path.is_file():
            return super().m_fs_write(params)
        import base64
        with path.open("r+b") as handle:
            handle.write(base64.b64decode(params["content_b64"], validate=True))
        return None


@redteam("b6_rename_copies", "SDP1-023 (section 2.6: fs/rename moves from -> to)",
         "fs/rename copies the source to the target (copy2/copytree, 'safer across devices') and never removes "
         "the source: after a rename both paths exist")
class RenameCopies(HostPlugin):
    def m_fs_rename(self, params: dict[str, Any]) -> Any:
        source = self._path(params, "from")
        target = self._path(params, "to")
        if not os.path.lexists(source):
            raise not_found("file", params["from"])
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir() and not source.is_symlink():
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target, follow_symlinks=False)
        return None


@redteam("b6_metadata_size_allocated", "SDP1-086 SDP1-023 (section 5.9: FileMetadata size)",
         "fs/metadata reports the allocated size (st_blocks * 512, e.g. 4096 for a 10-byte file) instead of the "
         "file's length in bytes")
class MetadataSizeAllocated(HostPlugin):
    def m_fs_metadata(self, params: dict[str, Any]) -> Any:
        result = super().m_fs_metadata(params)
        result["metadata"]["size"] = self._path(params).lstat().st_blocks * 512
        return result


@redteam("b6_metadata_mode_type_bits", "SDP1-086 (mode is the numeric POSIX permission mode)",
         "fs/metadata reports the whole st_mode, file-type bits included (0o100640 = 33184 for a 0o640 file), "
         "instead of the permission bits")
class MetadataModeTypeBits(HostPlugin):
    def m_fs_metadata(self, params: dict[str, Any]) -> Any:
        result = super().m_fs_metadata(params)
        result["metadata"]["mode"] = self._path(params).lstat().st_mode
        return result


@redteam("b6_exists_files_only", "SDP1-023 (section 2.6: fs/exists)",
         "fs/exists tests os.path.isfile, so an existing directory is reported as not existing")
class ExistsFilesOnly(HostPlugin):
    def m_fs_exists(self, params: dict[str, Any]) -> Any:
        return {"exists": os.path.isfile(self._path(params))}


@redteam("b6_chmod_drops_exec_bits", "SDP1-023 SDP1-086 (fs.permissions declared: set_permissions sets the mode)",
         "fs/set_permissions masks the requested mode with 0o666 (a hardening rule 'files written through the API "
         "never become executable'), so 0o755 becomes 0o644 and scripts cannot be made executable")
class ChmodDropsExecBits(HostPlugin):
    def m_fs_set_permissions(self, params: dict[str, Any]) -> Any:
        return super().m_fs_set_permissions({**params, "mode": params["mode"] & 0o666})


@redteam("b6_read_missing_empty", "SDP1-045 SDP1-083 (section 2.6: fs/read of a missing file fails)",
         "fs/read of a file that does not exist answers empty content (like a fresh upload target) instead of "
         "failing")
class ReadMissingEmpty(HostPlugin):
    def m_fs_read(self, params: dict[str, Any]) -> Any:
        try:
            return super().m_fs_read(params)
        except BackendError as error:
            if error.kind == "not_found":
                return {"content_b64": ""}
            raise


# ================================================================================================
# stdio processes / PTYs (6)
# ================================================================================================


@redteam("b6_stdio_wait_zero_exit_null", "SDP1-023 (section 2.4: exec/stdio_wait exit_code)",
         "exec/stdio_wait reports exit_code with a truthiness test (code or None): a process that exits 0 is "
         "reported exit_code null")
class StdioWaitZeroExitNull(HostPlugin):
    def m_exec_stdio_wait(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_stdio_wait(params)
        result["exit_code"] = result["exit_code"] or None
        return result


@redteam("b6_stderr_tail_no_ellipsis", "SDP1-023 (section 5.7: stderr_tail prefixed with '…' when bytes were dropped)",
         "exec/stdio_wait's stderr_tail keeps the newest 8 KiB but never marks that earlier bytes were dropped: "
         "the '…' prefix is missing")
class StderrTailNoEllipsis(HostPlugin):
    def m_exec_stdio_wait(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_stdio_wait(params)
        result["stderr_tail"] = result["stderr_tail"].removeprefix("…")
        return result


@redteam("b6_stdio_terminate_unknown_ok", "SDP1-045 (section 2.4: unknown process_id -> invalid_spec process_id)",
         "exec/stdio_terminate of an unknown process_id answers {} ('already gone') instead of failing "
         "invalid_spec process_id")
class StdioTerminateUnknownOk(HostPlugin):
    def m_exec_stdio_terminate(self, params: dict[str, Any]) -> Any:
        try:
            return super().m_exec_stdio_terminate(params)
        except BackendError as error:
            if error.kind == "invalid_spec":
                return None
            raise


@redteam("b6_pty_eio_retried", "SDP1-023 (section 2.4: pty/output data_b64 null = session ended)",
         "EIO from the PTY master is treated as transient and the read is retried: when the shell exits, "
         "pty/output never answers null, it keeps polling until the session is closed")
class PtyEioRetried(HostPlugin):
    def m_pty_output(self, params: dict[str, Any]) -> Any:
        session = self._pty(params)
        while not session.closed:
            data = session.read()
            if data:
                return {"data_b64": _encode(data)}
            if data is None:
                time.sleep(0.05)
        return {"data_b64": None}


@redteam("b6_pty_resize_unknown_ok", "SDP1-045 (section 2.4: unknown pty_id on resize -> invalid_spec pty_id)",
         "pty/resize of an unknown pty_id answers {} (resizing nothing is harmless) instead of failing "
         "invalid_spec pty_id")
class PtyResizeUnknownOk(HostPlugin):
    def m_pty_resize(self, params: dict[str, Any]) -> Any:
        try:
            return super().m_pty_resize(params)
        except BackendError as error:
            if error.kind == "invalid_spec":
                return None
            raise


@redteam("b6_pty_env_ignored", "SDP1-023 (section 5.8: PtyOptions env)",
         "pty/open ignores options.env: the shell gets only TERM and the sandbox environment, so variables the "
         "host asks for (PS1, LANG, ...) are missing")
class PtyEnvIgnored(HostPlugin):
    def m_pty_open(self, params: dict[str, Any]) -> Any:
        options = params.get("options")
        if isinstance(options, dict):
            params = {**params, "options": {**options, "env": {}}}
        return super().m_pty_open(params)


# ================================================================================================
# logs (2)
# ================================================================================================


@redteam("b6_logs_lines_unterminated", "SDP1-079 SDP1-023 (section 2.4: logs/follow streams the log's bytes)",
         "logs/output carries each provision log line without its newline, so the followed log's bytes run the "
         "lines together")
class LogsLinesUnterminated(HostPlugin):
    def notify(self, method: str, params: Any) -> None:
        if method == "logs/output" and isinstance(params, dict):
            import base64
            data = base64.b64decode(params["data_b64"]).rstrip(b"\n")
            params = {**params, "data_b64": base64.b64encode(data).decode("ascii")}
        super().notify(method, params)


@redteam("b6_logs_follow_outlives_delete", "SDP1-079 (section 2.4: logs/follow answers after the stream ends)",
         "an entrypoint log follow ends only on stream/cancel: deleting (or stopping) the sandbox does not end "
         "the stream, so its logs/follow never answers")
class LogsFollowOutlivesDelete(HostPlugin):
    def m_logs_follow(self, params: dict[str, Any]) -> Any:
        if params.get("source") == "provision":
            return super().m_logs_follow(params)
        self.backend.get(params["sandbox_id"])
        stream_id = params["stream_id"]
        with self._interactive_lock:
            stream = self._streams.get(stream_id)
            if stream is not None and stream.following:
                raise invalid_spec("stream_id", "duplicate stream id")
            if stream is None:
                stream = self._streams[stream_id] = LogStream()
            stream.following = True
        try:
            stream.cancelled.wait()
        finally:
            with self._interactive_lock:
                self._streams.pop(stream_id, None)
        return None


# ================================================================================================
# events (5)
# ================================================================================================


@redteam("b6_events_default_route", "SDP1-111 (section 3: host/event only for operations that requested events)",
         "every control-plane operation reports events: one whose request carried no events object (and whose "
         "handle has no route) reports on a default route with route_id ''")
class EventsDefaultRoute(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        from conformance.reference.host_plugin import EVENT_ACTIONS
        if (method in EVENT_ACTIONS and isinstance(params, dict) and not isinstance(params.get("events"), dict)
                and str(params.get("sandbox_id")) not in self._handle_routes):
            params = {**params, "events": {"route_id": ""}}
        return super().dispatch(method, params)


class _FailedAsCompleted(Operation):
    def failed(self, report: dict[str, Any]) -> None:
        self.completed()  # the terminal event is 'the operation is over'


@redteam("b6_failure_reported_completed", "SDP1-114",
         "a failed operation's terminal event is operation_completed (the one 'operation is over' event), never "
         "operation_failed, so a failure is reported as a success on the event feed")
class FailureReportedCompleted(_operations(_FailedAsCompleted)):
    pass


class _MonotonicClockSource(EventSource):
    def emit(self, route: dict[str, Any], subject: dict[str, Any], operation_id: str, body: dict[str, Any]) -> None:
        with self._lock:
            self._sequence += 1
            now = time.monotonic_ns()  # the operation stopwatch's clock, not the wall clock
            event: dict[str, Any] = {
                "id": {"source_id": self.source_id, "sequence": self._sequence},
                "occurred_at": {"secs_since_epoch": now // 1_000_000_000, "nanos_since_epoch": now % 1_000_000_000},
                "provider": self.provider_kind, "subject": subject, "operation_id": operation_id, **body,
            }
            if route.get("correlation_id") is not None:
                event["correlation_id"] = route["correlation_id"]
            self._notify("host/event", {"route_id": route["route_id"], "event": event})


@redteam("b6_event_time_monotonic", "SDP1-037 (section 5.16: Timestamp = time since the Unix epoch)",
         "event occurred_at is read from the monotonic clock (time since boot) instead of the wall clock, so "
         "events are dated a few days after 1970")
class EventTimeMonotonic(EventsPlugin):
    event_source_class = _MonotonicClockSource


class _CorrelationFallbackSource(EventSource):
    def emit(self, route: dict[str, Any], subject: dict[str, Any], operation_id: str, body: dict[str, Any]) -> None:
        if route.get("correlation_id") is None:
            route = {**route, "correlation_id": route["route_id"]}
        super().emit(route, subject, operation_id, body)


@redteam("b6_correlation_defaults_to_route", "SDP1-056 SDP1-057",
         "a route without correlation_id gets the route_id copied into every event's correlation_id (a "
         "'helpful' default), so the plugin invents a correlation the host never sent")
class CorrelationDefaultsToRoute(EventsPlugin):
    event_source_class = _CorrelationFallbackSource


class _TerminalWithoutAction(Operation):
    def completed(self, subject: dict[str, Any] | None = None) -> None:
        if subject is not None:
            self.subject = subject
        self._emit({"type": "operation_completed", "duration": _duration(time.monotonic() - self.started)})


@redteam("b6_completed_without_action", "SDP1-114 (section 5.13: operation_completed{action, duration})",
         "operation_completed events carry no action (the body is built from the duration alone); started and "
         "failed events are right")
class CompletedWithoutAction(_operations(_TerminalWithoutAction)):
    pass


# ================================================================================================
# snapshots (3)
# ================================================================================================


class _SnapshotCopyBackend(HostBackend):
    copy_options: ClassVar[dict[str, Any]] = {}

    def create_snapshot(self, sandbox: HostSandbox, name: str | None) -> dict[str, Any]:
        snapshot_id = f"snap-{uuid.uuid4().hex[:20]}"
        directory = self._snapshot_dir(snapshot_id)
        shutil.copytree(sandbox.workspace, directory / "files", **self.copy_options)
        size = sum(p.stat().st_size for p in (directory / "files").rglob("*") if p.is_file() and not p.is_symlink())
        record = {"id": snapshot_id, "name": name or snapshot_id, "state": "active", "source": sandbox.id,
                  "size_bytes": size, "created_at": time.time()}
        (directory / "record.json").write_text(json.dumps(record))
        return record


class _SnapshotDerefBackend(_SnapshotCopyBackend):
    copy_options: ClassVar[dict[str, Any]] = {"symlinks": False}


@redteam("b6_snapshot_dereferences_symlinks", "SDP1-064 SDP1-053 (filesystem snapshot preserves the filesystem)",
         "a filesystem snapshot is copied with copytree's default (symlinks followed): a symlink in the workspace "
         "comes back as a regular file in sandboxes created from the snapshot")
class SnapshotDereferencesSymlinks(BackendPlugin):
    backend_class = _SnapshotDerefBackend


class _SnapshotNoDotfilesBackend(_SnapshotCopyBackend):
    copy_options: ClassVar[dict[str, Any]] = {"symlinks": True, "ignore": shutil.ignore_patterns(".*")}


@redteam("b6_snapshot_skips_dotfiles", "SDP1-064 SDP1-053",
         "a filesystem snapshot skips hidden entries (an ignore pattern '.*' meant for .git caches): dotfiles of "
         "the source sandbox are missing from sandboxes created from the snapshot")
class SnapshotSkipsDotfiles(BackendPlugin):
    backend_class = _SnapshotNoDotfilesBackend


@redteam("b6_snapshot_filter_prefix", "SDP1-023 SDP1-088 (section 2.8: snapshot/list filter.name)",
         "snapshot/list's name filter matches by prefix (startswith), so filtering on 'nightly' also lists "
         "'nightly-2'")
class SnapshotFilterPrefix(HostPlugin):
    def m_snapshot_list(self, params: dict[str, Any]) -> Any:
        wanted = (params["filter"] or {}).get("name")
        return {"snapshots": [self.snapshot_status(r) for r in self.backend.snapshots()
                              if wanted is None or str(r["name"]).startswith(wanted)]}
