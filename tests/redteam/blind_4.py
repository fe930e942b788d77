"""Fourth, independent set of blind red-team mutants (``b4_*``) of the reference v1 host plugin.

Written from the protocol digest (section 7 requirement numbers SDP1-NNN; sections 8/9 for the reference host
provider's behaviour, which v1 requires because a declared capability must work, SDP1-023), upstream's protocol
text and the reference provider's sources only, avoiding the faults of ``blind_1``/``blind_2``/``blind_3``. Each
class overrides the smallest piece of ``HostPlugin`` (or of its backend, sanitizer or event source) it can, so
exactly one behaviour differs from the honest plugin. Areas: handshake/capabilities, envelope/errors,
transport/concurrency, lifecycle/status, exec, sanitization, files, stdio/PTY/logs, events, shutdown/EOF.
"""

from __future__ import annotations

import base64
import copy
import fcntl
import json
import os
import platform
import shutil
import signal
import subprocess
import threading
import time
import traceback
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from conformance.reference.host_backend import (
    SAFE_ENVIRONMENT,
    BackendError,
    HostBackend,
    HostSandbox,
    _feed_stdin,
    _signal_group,
    invalid_spec,
    invalid_state,
)
from conformance.reference.host_events import EventSource, Operation
from conformance.reference.host_interactive import _EOF, STDERR_TAIL, _decode, _kill_group
from conformance.reference.host_plugin import (
    APPLICATION_ERROR,
    EVENT_ACTIONS,
    INVALID_PARAMS,
    HostPlugin,
    application_error,
    b64,
    unsupported,
)
from conformance.reference.sanitize import Sanitizer
from conformance.reference.stdio_server import METHOD_NOT_FOUND, RpcFailure
from tests.redteam import redteam
from tests.redteam.seams import BackendPlugin as _BackendPlugin, EventsPlugin as _EventsPlugin, sanitizing_backend as _sanitizing_backend


# ================================================================================================
# handshake / capabilities (7)
# ================================================================================================


@redteam("b4_isolation_host", "SDP1-022",
         "capabilities.isolation is 'host' (the provider's name for 'runs on the host') instead of one of the "
         "isolation values none/container/vm")
class IsolationHost(HostPlugin):
    def declared_capabilities(self) -> dict[str, Any]:
        caps = super().declared_capabilities()
        caps["isolation"] = "host"
        return caps


@redteam("b4_version_newer_downgraded", "SDP1-017",
         "a host asking for a newer protocol_version (2) is 'downgraded': initialize succeeds answering "
         "protocol_version 1 instead of failing with a mismatch naming both versions (older versions still fail)")
class VersionNewerDowngraded(HostPlugin):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        asked = params["protocol_version"]
        if isinstance(asked, int) and asked > 1:
            return super().m_initialize({**params, "protocol_version": 1})
        return super().m_initialize(params)


@redteam("b4_version_mismatch_decode_error", "SDP1-017 SDP1-042",
         "a protocol_version other than 1 is rejected by the params decoder (-32600 'invalid params for "
         "initialize: unknown protocol version') instead of the -32000 invalid_spec protocol_version failure")
class VersionMismatchDecodeError(HostPlugin):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        asked = params["protocol_version"]
        if asked != 1:
            raise RpcFailure(INVALID_PARAMS, f"invalid params for initialize: unknown protocol version {asked}, "
                             "expected 1")
        return super().m_initialize(params)


@redteam("b4_attach_caps_minimal", "SDP1-021 SDP1-023",
         "sandbox/attach is a cheap lookup that skips the feature probe: its HandleInfo carries a minimal "
         "capability set (lifecycle all false, pty/logs/snapshots null) although pause, pty and logs work on the "
         "attached sandbox; the per-sandbox set is authoritative")
class AttachCapsMinimal(HostPlugin):
    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_attach(params)
        caps = copy.deepcopy(info["capabilities"])
        caps["lifecycle"] = {key: False for key in caps["lifecycle"]}
        caps["pty"] = caps["logs"] = caps["snapshots"] = None
        return {**info, "capabilities": caps}


@redteam("b4_logs_entrypoint_unsupported", "SDP1-023",
         "logs.entrypoint is declared true, but logs/follow with source 'entrypoint' fails unsupported 'logs' "
         "(a host sandbox has no entrypoint); only the provision log works")
class LogsEntrypointUnsupported(HostPlugin):
    def m_logs_follow(self, params: dict[str, Any]) -> Any:
        self.backend.get(params["sandbox_id"])
        if params["source"] == "entrypoint":
            raise unsupported("logs")
        return super().m_logs_follow(params)


@redteam("b4_access_methods_not_found", "SDP1-030 SDP1-024",
         "the access/* group was never wired into the dispatcher: every access method answers -32601 unknown "
         "method instead of -32000 unsupported naming access.preview_urls / access.ssh / ...")
class AccessMethodsNotFound(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        if method.startswith("access/"):
            raise RpcFailure(METHOD_NOT_FOUND, f"unknown method {method}")
        return super().dispatch(method, params)


@redteam("b4_snapshot_create_from_sandbox_unsupported", "SDP1-023",
         "snapshots.filesystem_from_sandbox is declared and sandbox/snapshot works, but snapshot/create with a "
         "{sandbox:{id}} source fails unsupported snapshots.filesystem (only one of the two paths was implemented)")
class SnapshotCreateFromSandboxUnsupported(HostPlugin):
    def m_snapshot_create(self, params: dict[str, Any]) -> Any:
        source = params["spec"]["source"]
        if isinstance(source, dict) and "sandbox" in source:
            raise unsupported("snapshots.filesystem")
        return super().m_snapshot_create(params)


# ================================================================================================
# envelope / errors (9)
# ================================================================================================


@redteam("b4_bad_params_id_zero", "SDP1-009 SDP1-042",
         "params that do not decode are answered -32600 with id 0 (the malformed-line path is reused) instead of "
         "the request's own id")
class BadParamsIdZero(HostPlugin):
    def respond_error(self, request_id: Any, failure: RpcFailure) -> None:
        if failure.code == INVALID_PARAMS and failure.message.startswith("invalid params"):
            request_id = 0
        super().respond_error(request_id, failure)


@redteam("b4_error_message_generic", "SDP1-043",
         "application errors carry a generic top-level message ('application error') while the specific text is "
         "only in data.report.message; the error message must equal report.message")
class ErrorMessageGeneric(HostPlugin):
    def error_object(self, failure: RpcFailure) -> dict[str, Any]:
        error = super().error_object(failure)
        if failure.code == APPLICATION_ERROR:
            error["message"] = "application error"
        return error


@redteam("b4_missing_jsonrpc_served", "SDP1-042",
         "a request without the jsonrpc member is served like any other (lenient parser) instead of being "
         "answered -32600 malformed message")
class MissingJsonrpcServed(HostPlugin):
    def handle_line(self, raw: bytes) -> bool:
        try:
            message = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return super().handle_line(raw)
        if isinstance(message, dict) and "jsonrpc" not in message:
            message["jsonrpc"] = "2.0"
            raw = json.dumps(message).encode()
        return super().handle_line(raw)


@redteam("b4_float_id_accepted", "SDP1-009 SDP1-042",
         "an integral float id (\"id\": 5.0) is accepted and answered with id 5.0 instead of being rejected as "
         "malformed (ids are unsigned integers)")
class FloatIdAccepted(HostPlugin):
    def handle_line(self, raw: bytes) -> bool:
        try:
            message = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return super().handle_line(raw)
        request_id = message.get("id") if isinstance(message, dict) else None
        if isinstance(request_id, float) and request_id.is_integer() and request_id >= 0 \
                and isinstance(message.get("method"), str) and "jsonrpc" in message:
            thread = threading.Thread(target=self._run, args=(request_id, message["method"], message.get("params")),
                                      daemon=True)
            with self._inflight_lock:
                self._inflight.add(thread)
            thread.start()
            return True
        return super().handle_line(raw)


@redteam("b4_not_found_without_id", "SDP1-045",
         "not_found details carry only the resource ('the id is in the message'); detail.id is missing")
class NotFoundWithoutId(HostPlugin):
    def backend_failure(self, method: str, error: BackendError) -> RpcFailure:
        failure = super().backend_failure(method, error)
        if error.kind == "not_found":
            failure.data["detail"] = {"resource": error.detail.get("resource")}
        return failure


class _ExecActionBackend(HostBackend):
    def run(self, sandbox: HostSandbox, *args: Any, **kwargs: Any):
        if sandbox.state != "running":
            raise invalid_state(sandbox.state, "exec")
        return super().run(sandbox, *args, **kwargs)


@redteam("b4_invalid_state_action_exec", "SDP1-045",
         "an exec in a sandbox that is not running fails invalid_state with detail.action 'exec', which is not a "
         "member of the protocol's Action set (the reference uses 'unknown')")
class InvalidStateActionExec(_BackendPlugin):
    backend_class = _ExecActionBackend


class _TargetStateBackend(HostBackend):
    def pause(self, sandbox: HostSandbox) -> None:
        if sandbox.state not in ("running", "paused"):
            raise invalid_state("paused", "pause")
        super().pause(sandbox)

    def resume(self, sandbox: HostSandbox) -> None:
        if sandbox.state not in ("running", "paused"):
            raise invalid_state("running", "resume")
        super().resume(sandbox)


@redteam("b4_invalid_state_current_target", "SDP1-045",
         "invalid_state from sandbox/pause and sandbox/resume reports detail.current as the state the verb would "
         "have moved to ('paused') instead of the sandbox's actual state ('stopped')")
class InvalidStateCurrentTarget(_BackendPlugin):
    backend_class = _TargetStateBackend


@redteam("b4_causes_full_traceback", "SDP1-046",
         "internal (provider) errors put the whole Python traceback into report.causes, one line per entry and "
         "unbounded, instead of a rendered chain of at most 8 entries of at most 500 bytes")
class CausesFullTraceback(HostPlugin):
    def internal_error(self, method: str, exc: Exception) -> RpcFailure:
        failure = super().internal_error(method, exc)
        lines = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines()
        failure.data["report"]["causes"] = lines
        return failure


@redteam("b4_snapshot_not_found_resource_sandbox", "SDP1-045",
         "snapshot/get of an unknown snapshot fails not_found with detail.resource 'sandbox' (the lookup helper "
         "shared with sandboxes) instead of 'snapshot'")
class SnapshotNotFoundResourceSandbox(HostPlugin):
    def m_snapshot_get(self, params: dict[str, Any]) -> Any:
        try:
            return super().m_snapshot_get(params)
        except BackendError as error:
            if error.kind == "not_found":
                raise BackendError("not_found", error.message, resource="sandbox", id=params["snapshot_id"]) from None
            raise


# ================================================================================================
# transport / concurrency (2)
# ================================================================================================


@redteam("b4_worker_pool_four", "SDP1-005 SDP1-007",
         "requests are handled on a fixed pool of 4 worker threads: with four long calls outstanding (log follows "
         "or output long polls) every further request, even provider/health, waits for a free worker")
class WorkerPoolFour(HostPlugin):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pool = ThreadPoolExecutor(4)

    def handle_line(self, raw: bytes) -> bool:
        try:
            message = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return super().handle_line(raw)
        if not (isinstance(message, dict) and "jsonrpc" in message and isinstance(message.get("method"), str)
                and isinstance(message.get("id"), int) and not isinstance(message.get("id"), bool)
                and message["id"] >= 0) or message["method"] in self.inline_methods:
            return super().handle_line(raw)
        self._pool.submit(self._run, message["id"], message["method"], message.get("params"))
        return True


@redteam("b4_stdio_output_holds_table_lock", "SDP1-077",
         "exec/stdio_output waits for the next chunk while holding the plugin-wide stdio/PTY table lock: while one "
         "process's output poll is pending, exec/stdio_input (or any stdio/pty call) to another process blocks")
class StdioOutputHoldsTableLock(HostPlugin):
    def m_exec_stdio_output(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            process = self._processes.get(params["process_id"])
            if process is None:
                raise invalid_spec("process_id", "unknown stdio process id")
            chunk = process.output.get()
        if chunk is _EOF:
            process.output.put(_EOF)
            return {"data_b64": None}
        return {"data_b64": b64(chunk)}


# ================================================================================================
# lifecycle, status, identity (22)
# ================================================================================================


class _StartOnlyStoppedBackend(HostBackend):
    def start(self, sandbox: HostSandbox) -> None:
        if sandbox.state == "running":
            raise invalid_state("running", "start")
        super().start(sandbox)


@redteam("b4_start_running_invalid_state", "SDP1-023 (section 2.3: sandbox/start is a no-op when running)",
         "sandbox/start of a sandbox that is already running fails invalid_state instead of being a no-op")
class StartRunningInvalidState(_BackendPlugin):
    backend_class = _StartOnlyStoppedBackend


class _StopNoStateBackend(HostBackend):
    def stop(self, sandbox: HostSandbox) -> None:
        self._kill_processes(sandbox)
        self._save(sandbox)


@redteam("b4_stop_state_not_updated", "SDP1-023 SDP1-040 (section 9.2: stop -> stopped)",
         "sandbox/stop ends the sandbox's processes but never records the new state: describe and list still "
         "report 'running' after a successful stop")
class StopStateNotUpdated(_BackendPlugin):
    backend_class = _StopNoStateBackend


@redteam("b4_list_includes_deleted", "SDP1-023 (section 9.2: list excludes deleted sandboxes)",
         "sandbox/list returns tombstones too: a deleted sandbox is still listed (state 'deleted')")
class ListIncludesDeleted(HostPlugin):
    def m_sandbox_list(self, params: dict[str, Any]) -> Any:
        labels = (params["filter"] or {}).get("labels") or {}
        with self.backend._lock:
            sandboxes = list(self.backend._sandboxes.values())
        chosen = [s for s in sandboxes if all(s.labels.get(k) == v for k, v in labels.items())]
        return {"sandboxes": [self.status(s) for s in chosen]}


@redteam("b4_list_empty_filter_needs_labels", "SDP1-023 (section 2.2: label filter = sandbox carries all listed labels)",
         "a filter with an empty labels map ({\"labels\": {}}) matches only sandboxes that carry at least one "
         "label, so an unlabelled sandbox is missing from the list (an absent labels key lists everything)")
class ListEmptyFilterNeedsLabels(HostPlugin):
    def m_sandbox_list(self, params: dict[str, Any]) -> Any:
        result = super().m_sandbox_list(params)
        labels = (params["filter"] or {}).get("labels")
        if isinstance(labels, dict) and not labels:
            result["sandboxes"] = [s for s in result["sandboxes"] if s["labels"]]
        return result


@redteam("b4_list_filter_null_labels_rejected", "SDP1-126 SDP1-023",
         "sandbox/list with filter {\"labels\": null} (an optional member sent as null) is answered -32600 "
         "'invalid type: null, expected a map' instead of listing every sandbox")
class ListFilterNullLabelsRejected(HostPlugin):
    def m_sandbox_list(self, params: dict[str, Any]) -> Any:
        flt = params["filter"]
        if isinstance(flt, dict) and "labels" in flt and flt["labels"] is None:
            raise RpcFailure(INVALID_PARAMS, "invalid params for sandbox/list: filter.labels: invalid type: null, "
                             "expected a map")
        return super().m_sandbox_list(params)


@redteam("b4_set_labels_empty_ignored", "SDP1-023 (section 2.3: set_labels is a full replace)",
         "sandbox/set_labels with an empty map returns early ('nothing to set'): the old labels stay instead of "
         "being cleared")
class SetLabelsEmptyIgnored(HostPlugin):
    def m_sandbox_set_labels(self, params: dict[str, Any]) -> Any:
        if not params["labels"]:
            self.backend.get(params["sandbox_id"])
            return None
        return super().m_sandbox_set_labels(params)


@redteam("b4_name_truncated_dns_label", "SDP1-050 (section 10: the requested name is observed)",
         "the display name is cut to 63 characters (a DNS-label limit borrowed from another backend): a longer "
         "requested name is silently reported shortened")
class NameTruncatedDnsLabel(HostPlugin):
    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        if isinstance(spec.get("name"), str):
            spec = {**spec, "name": spec["name"][:63]}
        return super().m_sandbox_create({**params, "spec": spec})


@redteam("b4_create_ignores_ttl", "SDP1-051",
         "creation-spec timers are validated for the idle timers only: a ttl (or auto_delete_after_stop) is "
         "silently accepted and ignored instead of being rejected invalid_spec timers")
class CreateIgnoresTtl(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        timers = spec.get("timers") or {}
        kept = {k: v for k, v in timers.items() if k not in ("ttl", "auto_delete_after_stop")}
        super().validate_spec({**spec, "timers": kept})


@redteam("b4_create_ignores_gpus", "SDP1-051",
         "resource validation checks cpu_cores and memory_mb only: a requested disk_mb or gpus is silently "
         "ignored instead of rejected invalid_spec resources.*")
class CreateIgnoresGpus(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        resources = spec.get("resources") or {}
        kept = {k: v for k, v in resources.items() if k in ("cpu_cores", "memory_mb")}
        super().validate_spec({**spec, "resources": kept})


@redteam("b4_create_network_dict_accepted", "SDP1-051",
         "the network check compares against the string policies only ('allow_all', 'block'): an allow-list "
         "policy object ({cidr_allow_list: ...}) is silently accepted instead of rejected invalid_spec network")
class CreateNetworkDictAccepted(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        if isinstance(spec.get("network"), dict):
            spec = {k: v for k, v in spec.items() if k != "network"}
        super().validate_spec(spec)


@redteam("b4_snapshot_source_ignored", "SDP1-053 SDP1-051",
         "sandbox/create with source {snapshot:{name}} checks that the snapshot exists but provisions an empty "
         "workspace: the snapshot's files are not restored")
class SnapshotSourceIgnored(HostPlugin):
    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        source = spec.get("source")
        if isinstance(source, dict) and "snapshot" in source:
            self.validate_spec(spec)
            self.backend.find_snapshot(source["snapshot"]["name"])
            sandbox = self.backend.create(spec.get("name"), spec.get("labels") or {}, spec.get("env") or {})
            return self.handle_info(sandbox)
        return super().m_sandbox_create(params)


class _LiveReferenceSnapshotBackend(HostBackend):
    def create_snapshot(self, sandbox: HostSandbox, name: str | None) -> dict[str, Any]:
        record = super().create_snapshot(sandbox, name)
        files = self._snapshot_dir(record["id"]) / "files"
        shutil.rmtree(files)
        files.symlink_to(sandbox.workspace, target_is_directory=True)  # "copy on restore"
        return record


@redteam("b4_snapshot_live_reference", "SDP1-064 SDP1-023",
         "a filesystem snapshot is a reference to the live workspace ('copy on restore'): files written to the "
         "source sandbox after the snapshot show up in sandboxes created from it")
class SnapshotLiveReference(_BackendPlugin):
    backend_class = _LiveReferenceSnapshotBackend


class _UndeleteEmptyBackend(HostBackend):
    def _dispose(self, sandbox: HostSandbox) -> None:
        self._kill_processes(sandbox)
        shutil.rmtree(sandbox.workspace, ignore_errors=True)
        self._trash(sandbox).mkdir(parents=True, exist_ok=True)


@redteam("b4_undelete_empty_workspace", "SDP1-061",
         "delete removes the workspace's files and keeps only an empty placeholder, so sandbox/undelete (declared) "
         "restores the sandbox with an empty workspace: its files are lost")
class UndeleteEmptyWorkspace(_BackendPlugin):
    backend_class = _UndeleteEmptyBackend


class _DeleteInProgressBackend(HostBackend):
    def delete(self, sandbox_id: str) -> None:
        with self._lock:
            if sandbox_id in self._deleting:
                raise invalid_state("deleting", "delete")
        super().delete(sandbox_id)

    def _dispose(self, sandbox: HostSandbox) -> None:
        time.sleep(0.5)  # let the sandbox's processes exit on their own first
        super()._dispose(sandbox)


@redteam("b4_delete_while_deleting_invalid_state", "SDP1-059",
         "a sandbox/delete that arrives while an earlier delete of the same sandbox is still in progress fails "
         "invalid_state (current 'deleting') instead of succeeding")
class DeleteWhileDeletingInvalidState(_BackendPlugin):
    backend_class = _DeleteInProgressBackend


@redteam("b4_attach_deleted_tombstone", "SDP1-023 (section 9.2: attach of a deleted sandbox is not_found)",
         "sandbox/attach finds deleted sandboxes' tombstones: attaching a deleted id returns a HandleInfo with "
         "state 'deleted' instead of failing not_found")
class AttachDeletedTombstone(HostPlugin):
    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        return self.handle_info(self.backend.get(params["sandbox_id"], include_deleted=True))


@redteam("b4_platform_arch_goarch", "SDP1-023 (section 9.2: platform_info.arch is the target arch x86_64/aarch64)",
         "sandbox/platform_info reports arch in Go's naming ('amd64', 'arm64') instead of the target arch names "
         "('x86_64', 'aarch64')")
class PlatformArchGoarch(HostPlugin):
    def m_sandbox_platform_info(self, params: dict[str, Any]) -> Any:
        result = super().m_sandbox_platform_info(params)
        arch = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), platform.machine())
        result["platform"]["arch"] = arch
        return result


@redteam("b4_health_status_healthy", "SDP1-093",
         "provider/health reports status 'healthy' (a health-check library's word) instead of 'ok'")
class HealthStatusHealthy(HostPlugin):
    def m_provider_health(self, params: dict[str, Any]) -> Any:
        return {"health": {"status": "healthy", "message": None, "missing_permissions": []}}


class _SecondsIdBackend(HostBackend):
    def create(self, name: str | None, labels: Mapping[str, str], env: Mapping[str, str],
               from_snapshot: str | None = None) -> HostSandbox:
        sandbox_id = f"host-{int(time.time())}"
        workspace = self.root / sandbox_id / "workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        sandbox = HostSandbox(sandbox_id, name, dict(labels), dict(env), workspace.resolve())
        sandbox.provision_log = [f"created workspace {sandbox.workspace}", f"sandbox {sandbox_id} is running"]
        if from_snapshot is not None:
            source = self._snapshot_dir(self.find_snapshot(from_snapshot)["id"]) / "files"
            shutil.copytree(source, workspace, symlinks=True, dirs_exist_ok=True)
        with self._lock:
            self._sandboxes[sandbox_id] = sandbox
            self._save(sandbox)
        return sandbox


@redteam("b4_id_from_timestamp_seconds", "SDP1-038 SDP1-039",
         "sandbox ids are minted from the creation time in whole seconds ('host-<unix secs>'): two sandboxes "
         "created within the same second get the same id and share one workspace")
class IdFromTimestampSeconds(_BackendPlugin):
    backend_class = _SecondsIdBackend


@redteam("b4_working_directory_parent", "SDP1-050 SDP1-081",
         "HandleInfo.working_directory names the sandbox's record directory (the workspace's parent) while "
         "commands and relative paths use the workspace itself")
class WorkingDirectoryParent(HostPlugin):
    def handle_info(self, sandbox: HostSandbox) -> dict[str, Any]:
        info = super().handle_info(sandbox)
        return {**info, "working_directory": str(sandbox.workspace.parent)}


class _ArchiveRunningOnlyBackend(HostBackend):
    def archive(self, sandbox: HostSandbox) -> None:
        if sandbox.state not in ("running", "archived"):
            raise invalid_state(sandbox.state, "archive")
        super().archive(sandbox)


@redteam("b4_archive_stopped_invalid_state", "SDP1-023",
         "sandbox/archive (lifecycle.archive declared) accepts only running sandboxes: archiving a stopped "
         "sandbox, the usual path, fails invalid_state")
class ArchiveStoppedInvalidState(_BackendPlugin):
    backend_class = _ArchiveRunningOnlyBackend


@redteam("b4_list_first_page_only", "SDP1-023 (section 2.2: sandbox/list returns the sandboxes)",
         "sandbox/list returns only the first page (50) of the registry, with no way to ask for more: the 51st "
         "sandbox and later are never listed")
class ListFirstPageOnly(HostPlugin):
    def m_sandbox_list(self, params: dict[str, Any]) -> Any:
        result = super().m_sandbox_list(params)
        result["sandboxes"] = result["sandboxes"][:50]
        return result


@redteam("b4_shutdown_refused_when_busy", "SDP1-096",
         "shutdown while an exec is running is refused with invalid_state ('commands are still running') instead "
         "of being answered and the plugin stopping")
class ShutdownRefusedWhenBusy(HostPlugin):
    def m_shutdown(self, params: dict[str, Any]) -> Any:
        with self._execs_lock:
            busy = bool(self._execs)
        if busy:
            raise application_error("invalid_state", "cannot stop a provider with running commands",
                                    {"current": "running", "action": "stop"})
        return super().m_shutdown(params)


# ================================================================================================
# exec (13)
# ================================================================================================


class _SpecSecretsFilteredBackend(HostBackend):
    def environment(self, sandbox: HostSandbox, spec_env: Mapping[str, str]) -> dict[str, str]:
        env = super().environment(sandbox, spec_env)
        return {k: v for k, v in env.items()
                if k in SAFE_ENVIRONMENT or not k.lower().endswith(("_api_key", "_secret", "_token", "_password",
                                                                    "_credential"))}


@redteam("b4_spec_env_secrets_filtered", "SDP1-023 (section 9.2: exec env = filtered inherited env, then sandbox "
         "env, then spec.env)",
         "the secret-name filter is applied to the final environment, so a GITHUB_TOKEN the host sends explicitly "
         "in spec.env (or the create env, the designated secret channel) never reaches the command")
class SpecEnvSecretsFiltered(_BackendPlugin):
    backend_class = _SpecSecretsFilteredBackend


class _CaseSensitiveSecretsBackend(HostBackend):
    def environment(self, sandbox: HostSandbox, spec_env: Mapping[str, str]) -> dict[str, str]:
        env = {name: value for name, value in self.environ.items()
               if name in SAFE_ENVIRONMENT or not name.endswith(("_api_key", "_secret", "_token", "_password",
                                                                 "_credential"))}
        env.update(sandbox.env)
        env.update(spec_env)
        env.pop("BASH_ENV", None)
        env.pop("SANDBOX_CONFORMANCE_HOST_REGISTRY", None)
        return env


@redteam("b4_secret_filter_case_sensitive", "SDP1-023 (section 9.2: inherited names ending _api_key/_token/... are "
         "dropped, compared in lower case)",
         "the inherited-secret filter compares name suffixes case-sensitively: FOO_API_KEY in the plugin's "
         "environment (upper case, the usual spelling) leaks into every command")
class SecretFilterCaseSensitive(_BackendPlugin):
    backend_class = _CaseSensitiveSecretsBackend


class _CreateBashEnvBackend(HostBackend):
    def environment(self, sandbox: HostSandbox, spec_env: Mapping[str, str]) -> dict[str, str]:
        env = super().environment(sandbox, spec_env)
        if "BASH_ENV" in sandbox.env and "BASH_ENV" not in spec_env:
            env["BASH_ENV"] = sandbox.env["BASH_ENV"]
        return env


@redteam("b4_bash_env_from_create_env", "SDP1-067",
         "BASH_ENV is stripped from the inherited environment and from spec.env, but not from the sandbox's "
         "create-time env: a BASH_ENV given at create is sourced by every command")
class BashEnvFromCreateEnv(_BackendPlugin):
    backend_class = _CreateBashEnvBackend


class _UpperEnvBackend(HostBackend):
    def environment(self, sandbox: HostSandbox, spec_env: Mapping[str, str]) -> dict[str, str]:
        return super().environment(sandbox, {k.upper(): v for k, v in spec_env.items()})


@redteam("b4_env_names_uppercased", "SDP1-023 (section 9.2: the exec spec.env applies)",
         "spec.env names are upper-cased on the way in (a Windows-portability helper): a lower-case variable "
         "my_var=v arrives as MY_VAR and $my_var is empty")
class EnvNamesUppercased(_BackendPlugin):
    backend_class = _UpperEnvBackend


@redteam("b4_timeout_absent_zero", "SDP1-036 SDP1-074 (section 6.1: null/absent timeout_ms = 3600 s)",
         "an absent or null timeout_ms becomes 0 ms (unwrap_or_default) instead of the 3600 s default: every "
         "exec without an explicit timeout times out at once")
class TimeoutAbsentZero(HostPlugin):
    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        if spec.get("timeout_ms") is None:
            spec = {**spec, "timeout_ms": 0}
        return super().run_spec(sandbox_id, spec, **kwargs)


class _LeaderOnlyStopBackend(HostBackend):
    def stop_process(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes]) -> None:
        try:
            proc.terminate()
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            proc.kill()


@redteam("b4_timeout_kills_leader_only", "SDP1-074 SDP1-107 (section 9.2: timeout = the cancel ladder on the "
         "process group)",
         "a timed-out or cancelled command gets SIGTERM/SIGKILL on its bash process only, not its process group: "
         "a background child keeps running and holding the output pipe, so the drain is abandoned "
         "(truncated) and the child outlives the exec")
class TimeoutKillsLeaderOnly(_BackendPlugin):
    backend_class = _LeaderOnlyStopBackend


class _NoGraceBackend(HostBackend):
    def stop_process(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes]) -> None:
        _signal_group(proc, signal.SIGKILL)


@redteam("b4_cancel_sigkill_no_grace", "SDP1-074 (section 9.2: cancel = SIGTERM to the group, 2 s grace, SIGKILL)",
         "exec/cancel and timeouts SIGKILL the process group at once: a command's TERM trap (cleanup, final "
         "output) never runs")
class CancelSigkillNoGrace(_BackendPlugin):
    backend_class = _NoGraceBackend


@redteam("b4_cancel_whole_sandbox", "SDP1-110 SDP1-074",
         "exec/cancel cancels every exec running in the same sandbox as the named one (the token is looked up "
         "per sandbox): an unrelated exec/stream is cancelled too")
class CancelWholeSandbox(HostPlugin):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._exec_sandbox: dict[str, str] = {}

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        self._exec_sandbox[params["exec_id"]] = params["sandbox_id"]
        try:
            return super().m_exec_stream(params)
        finally:
            self._exec_sandbox.pop(params["exec_id"], None)

    def m_exec_cancel(self, params: dict[str, Any]) -> Any:
        sandbox_id = self._exec_sandbox.get(params["exec_id"])
        with self._execs_lock:
            targets = [c for e, c in self._execs.items() if self._exec_sandbox.get(e) == sandbox_id] \
                if sandbox_id is not None else []
        for cancel in targets:
            cancel.set()
        return None


class _SyncStdinBackend(HostBackend):
    _local = threading.local()

    def run(self, sandbox: HostSandbox, command: str, env: Mapping[str, str], working_dir: str | None = None,
            stdin: bytes | None = None, **kwargs: Any):
        self._local.stdin = stdin
        return super().run(sandbox, command, env, working_dir, stdin, **kwargs)

    def start_process(self, sandbox: HostSandbox, command: str, env: Mapping[str, str], working_dir: str | None,
                      stdin_piped: bool, argv: list[str] | None) -> subprocess.Popen[bytes]:
        proc = super().start_process(sandbox, command, env, working_dir, stdin_piped, argv)
        data = getattr(self._local, "stdin", None)
        if stdin_piped and data is not None:
            _feed_stdin(proc, data)  # written before the wait loop starts
        return proc

    def feed_stdin(self, proc: subprocess.Popen[bytes], data: bytes) -> None:
        return None  # already written


@redteam("b4_stdin_blocks_timeout", "SDP1-074 SDP1-075",
         "stdin_b64 is written synchronously before the timeout clock is watched: a command that does not read a "
         "stdin larger than the pipe buffer is never timed out (the call hangs until the command exits)")
class StdinBlocksTimeout(_BackendPlugin):
    backend_class = _SyncStdinBackend


@redteam("b4_run_stdout_nul_truncated", "SDP1-035 SDP1-068",
         "exec/run's stdout is treated as a C string: it is cut at the first NUL byte (exec/stream keeps every "
         "byte)")
class RunStdoutNulTruncated(HostPlugin):
    def m_exec_run(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_run(params)
        data = base64.b64decode(result["stdout_b64"])
        result["stdout_b64"] = b64(data.split(b"\0", 1)[0])
        return result


@redteam("b4_stream_output_lossy_utf8", "SDP1-035 SDP1-100",
         "exec/output chunks are decoded as UTF-8 (with replacement) and re-encoded before base64: bytes that are "
         "not valid UTF-8 arrive as U+FFFD in the notifications (the result's retained copy is raw)")
class StreamOutputLossyUtf8(HostPlugin):
    def notify(self, method: str, params: Any) -> None:
        if method == "exec/output":
            data = base64.b64decode(params["data_b64"]).decode("utf-8", errors="replace").encode("utf-8")
            params = {**params, "data_b64": b64(data)}
        super().notify(method, params)


@redteam("b4_null_limit_retains_nothing", "SDP1-105 (section 4: v1 null/absent retained_output_limit retains "
         "everything)",
         "an absent retained_output_limit retains nothing (v2's default) instead of everything: the exec/stream "
         "result's stdout_b64/stderr_b64 are empty and every byte is counted omitted")
class NullLimitRetainsNothing(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        if params.get("retained_output_limit") is None:
            params = {**params, "retained_output_limit": 0}
        return super().m_exec_stream(params)


@redteam("b4_capture_stats_swapped", "SDP1-106 SDP1-105",
         "the exec/stream result's stdout_capture and stderr_capture are swapped (zip over the wrong order): each "
         "stream's counts describe the other stream")
class CaptureStatsSwapped(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_stream(params)
        result["stdout_capture"], result["stderr_capture"] = result["stderr_capture"], result["stdout_capture"]
        return result


# ================================================================================================
# sanitization (6)
# ================================================================================================


class _DropCrSanitizer(Sanitizer):
    def _text_byte(self, byte: int, out: bytearray) -> None:
        if self.mode == "strip_all" and byte == 0x0D:
            return
        super()._text_byte(byte, out)


@redteam("b4_strip_all_drops_cr", "SDP1-069",
         "strip_all removes carriage returns along with the other C0 controls: CRLF output comes back as LF; TAB, "
         "LF and CR must be kept")
class StripAllDropsCr(_BackendPlugin):
    backend_class = _sanitizing_backend(_DropCrSanitizer)


class _AnsiDropsControlsSanitizer(Sanitizer):
    def _text_byte(self, byte: int, out: bytearray) -> None:
        if self.mode == "strip_ansi" and (byte < 0x20 or byte == 0x7F) and byte not in (0x09, 0x0A, 0x0D):
            return
        super()._text_byte(byte, out)


@redteam("b4_strip_ansi_drops_controls", "SDP1-069",
         "strip_ansi also removes standalone control characters (BEL, backspace, ...), behaving like strip_all; "
         "strip_ansi must keep them")
class StripAnsiDropsControls(_BackendPlugin):
    backend_class = _sanitizing_backend(_AnsiDropsControlsSanitizer)


class _PerChunkSanitizer(Sanitizer):
    def feed(self, data: bytes) -> bytes:
        fresh = Sanitizer(self.mode)
        return fresh.feed(data) + fresh.finish()


@redteam("b4_sanitizer_per_chunk", "SDP1-070",
         "output is sanitized chunk by chunk with a fresh sanitizer for every pipe read: an escape sequence split "
         "across two reads is not recognised and its tail ('31m') leaks into the output")
class SanitizerPerChunk(_BackendPlugin):
    backend_class = _sanitizing_backend(_PerChunkSanitizer)


class _SevenBitOnlySanitizer(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "text" and byte == 0xC2:
            self._text_byte(byte, out)
            return
        super()._step(byte, out)


@redteam("b4_sanitize_no_c1_forms", "SDP1-069",
         "strip_ansi/strip_all recognise only 7-bit ESC sequences: the UTF-8-encoded C1 forms (0xC2 0x9B CSI, "
         "0xC2 0x9D OSC) pass through")
class SanitizeNoC1Forms(_BackendPlugin):
    backend_class = _sanitizing_backend(_SevenBitOnlySanitizer)


class _BelOnlyOscSanitizer(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "osc-esc":
            self._state = "osc"
            return
        super()._step(byte, out)


@redteam("b4_osc_st_terminator_ignored", "SDP1-069",
         "an OSC sequence ends only at BEL: one terminated by ST (ESC \\, as OSC 8 hyperlinks are) swallows all "
         "following output up to the next BEL")
class OscStTerminatorIgnored(_BackendPlugin):
    backend_class = _sanitizing_backend(_BelOnlyOscSanitizer)


class _DigitsOnlyCsiSanitizer(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "csi" and 0x3C <= byte <= 0x3F:  # private parameter bytes < = > ?
            self._state = "text"
            self._text_byte(byte, out)
            return
        super()._step(byte, out)


@redteam("b4_csi_private_params_leak", "SDP1-069",
         "CSI parameters are matched as digits and ';' only: a private-mode sequence such as ESC[?25l (hide "
         "cursor) is cut at '?', and '?25l' leaks into the output")
class CsiPrivateParamsLeak(_BackendPlugin):
    backend_class = _sanitizing_backend(_DigitsOnlyCsiSanitizer)


# ================================================================================================
# files (6)
# ================================================================================================


@redteam("b4_read_offset_ignored_without_length", "SDP1-083 SDP1-085",
         "fs/read seeks to offset only when a length is given too: offset alone returns the file from byte 0")
class ReadOffsetIgnoredWithoutLength(HostPlugin):
    def m_fs_read(self, params: dict[str, Any]) -> Any:
        if params.get("length") is None:
            params = {k: v for k, v in params.items() if k != "offset"}
        return super().m_fs_read(params)


@redteam("b4_write_text_mode", "SDP1-035",
         "fs/write decodes the content as UTF-8 text (with replacement) before writing: binary content that is "
         "not valid UTF-8 is corrupted on disk")
class WriteTextMode(HostPlugin):
    def m_fs_write(self, params: dict[str, Any]) -> Any:
        try:
            data = base64.b64decode(params["content_b64"], validate=True)
        except Exception:  # noqa: BLE001
            return super().m_fs_write(params)
        text = data.decode("utf-8", errors="replace").encode("utf-8")
        return super().m_fs_write({**params, "content_b64": b64(text)})


@redteam("b4_delete_ignores_recursive_false", "SDP1-023 (section 2.6: fs/delete recursive)",
         "fs/delete removes a non-empty directory with all its contents even when recursive is false")
class DeleteIgnoresRecursiveFalse(HostPlugin):
    def m_fs_delete(self, params: dict[str, Any]) -> Any:
        return super().m_fs_delete({**params, "recursive": True})


@redteam("b4_list_dir_follows_symlinks", "SDP1-086",
         "fs/list_dir stats entries through symlinks: a symlink to a file is listed kind 'file' and a symlink to a "
         "directory 'directory' (and descended into) instead of kind 'symlink'")
class ListDirFollowsSymlinks(HostPlugin):
    def m_fs_list_dir(self, params: dict[str, Any]) -> Any:
        from conformance.reference.host_fs import _kind
        root = self._path(params)
        depth = params["depth"]
        if not root.is_dir():
            return super().m_fs_list_dir(params)
        entries: list[dict[str, Any]] = []

        def walk(directory: Path, level: int) -> None:
            for child in sorted(directory.iterdir()):
                info = child.stat() if child.exists() else child.lstat()
                kind = _kind(info.st_mode)
                entries.append({"path": str(child.relative_to(root)), "kind": kind,
                                "size": info.st_size if kind == "file" else None})
                if kind == "directory" and level < depth:
                    walk(child, level + 1)

        if depth > 0:
            walk(root, 1)
        return {"entries": entries}


@redteam("b4_list_dir_nested_basename", "SDP1-023 (section 2.6: entry paths are relative to the listed directory)",
         "fs/list_dir with depth > 1 names nested entries by their basename only: 'sub/file.txt' is listed as "
         "'file.txt'")
class ListDirNestedBasename(HostPlugin):
    def m_fs_list_dir(self, params: dict[str, Any]) -> Any:
        result = super().m_fs_list_dir(params)
        for entry in result["entries"]:
            entry["path"] = entry["path"].rsplit("/", 1)[-1]
        return result


@redteam("b4_list_dir_capped_1000", "SDP1-023 (section 2.6: fs/list_dir returns the entries)",
         "fs/list_dir stops after 1000 entries (a safety cap) without any indication: a directory with more "
         "files is listed incompletely")
class ListDirCapped1000(HostPlugin):
    def m_fs_list_dir(self, params: dict[str, Any]) -> Any:
        result = super().m_fs_list_dir(params)
        result["entries"] = result["entries"][:1000]
        return result


# ================================================================================================
# stdio / PTY (10)
# ================================================================================================


@redteam("b4_stderr_tail_boundary_ellipsis", "SDP1-023 (section 5.7: stderr_tail = newest 8 KiB, '…' only when "
         "bytes were dropped)",
         "exec/stdio_wait marks stderr_tail as cut ('…' + the newest 8 KiB minus one byte) as soon as stderr "
         "reaches 8 KiB (>= instead of >): exactly 8192 bytes of stderr lose their first byte")
class StderrTailBoundaryEllipsis(HostPlugin):
    def m_exec_stdio_wait(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_stdio_wait(params)
        process = self._process(params)
        tail = result["stderr_tail"]
        if process.stderr_size >= STDERR_TAIL and not tail.startswith("…"):
            result["stderr_tail"] = "…" + tail[1:]
        return result


@redteam("b4_stdio_env_ignored", "SDP1-023 (section 5.7: SpawnSpec env)",
         "exec/stdio_open ignores spec.env: the process gets the sandbox environment only")
class StdioEnvIgnored(HostPlugin):
    def m_exec_stdio_open(self, params: dict[str, Any]) -> Any:
        return super().m_exec_stdio_open({**params, "spec": {**params["spec"], "env": {}}})


@redteam("b4_stdio_failed_open_leaks_id", "SDP1-076",
         "a process_id whose exec/stdio_open failed (bad working_dir) stays reserved: a retry with the same id "
         "fails 'duplicate stdio process id' although no process has it")
class StdioFailedOpenLeaksId(HostPlugin):
    def m_exec_stdio_open(self, params: dict[str, Any]) -> Any:
        try:
            return super().m_exec_stdio_open(params)
        except BackendError as error:
            if error.detail.get("field") != "process_id":
                with self._interactive_lock:
                    self._processes.setdefault(params["process_id"], None)  # type: ignore[arg-type]
            raise

    def stop_interactive(self) -> None:
        with self._interactive_lock:
            for key in [k for k, v in self._processes.items() if v is None]:
                del self._processes[key]
        super().stop_interactive()


@redteam("b4_stdio_stderr_merged", "SDP1-023 (section 2.4: exec/stdio_output is stdout; stdio_wait has the "
         "stderr tail)",
         "a stdio process is spawned with stderr redirected into stdout: stderr bytes arrive in exec/stdio_output "
         "and stderr_tail is always empty")
class StdioStderrMerged(HostPlugin):
    def _spawn(self, sandbox: HostSandbox, command: str, env: dict[str, str], working_dir: str | None,
               **streams: Any) -> subprocess.Popen[bytes]:
        if streams.get("stderr") is subprocess.PIPE and streams.get("stdout") is subprocess.PIPE:
            command = f"exec 2>&1\n{command}"
        return super()._spawn(sandbox, command, env, working_dir, **streams)


@redteam("b4_stdio_input_partial_write", "SDP1-023 (section 2.4: exec/stdio_input writes the bytes to the process stdin)",
         "exec/stdio_input makes one non-blocking write ('never stall the RPC thread'): bytes beyond what the pipe "
         "takes at that moment (64 KiB) are silently dropped")
class StdioInputPartialWrite(HostPlugin):
    def m_exec_stdio_input(self, params: dict[str, Any]) -> Any:
        process = self._process(params)
        data = _decode(params)
        with process.stdin_lock:
            try:
                assert process.proc.stdin is not None
                process.proc.stdin.flush()
                fd = process.proc.stdin.fileno()
                flags = fcntl.fcntl(fd, fcntl.F_GETFL)
                fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
                os.write(fd, data)
            except (BlockingIOError, BrokenPipeError, ValueError, OSError):
                pass
        return None


@redteam("b4_stdio_terminate_kills_siblings", "SDP1-023 (section 2.4: exec/stdio_terminate ends that process)",
         "exec/stdio_terminate kills every stdio process of the same sandbox (it walks the sandbox's process "
         "set), not only the named one")
class StdioTerminateKillsSiblings(HostPlugin):
    def m_exec_stdio_terminate(self, params: dict[str, Any]) -> Any:
        target = self._process(params)
        with self.backend._lock:
            owners = [s for s in self.backend._sandboxes.values() if target.proc in s.processes]
        group = set().union(*(s.processes for s in owners)) if owners else {target.proc}
        with self._interactive_lock:
            processes = [p for p in self._processes.values() if p is not None and p.proc in group]
        for process in processes:
            process.terminated = True
            _kill_group(process.proc)
        return None


@redteam("b4_pty_term_overrides_env", "SDP1-023 (section 5.8: PtyOptions env)",
         "pty/open sets TERM=xterm-256color after applying options.env, so a TERM the host asks for (e.g. dumb) "
         "is overridden")
class PtyTermOverridesEnv(HostPlugin):
    def _spawn(self, sandbox: HostSandbox, command: str, env: dict[str, str], working_dir: str | None,
               **streams: Any) -> subprocess.Popen[bytes]:
        if command.startswith("exec bash --noprofile --norc -i"):
            env = {**env, "TERM": "xterm-256color"}
        return super()._spawn(sandbox, command, env, working_dir, **streams)


@redteam("b4_pty_input_unknown_ok", "SDP1-045 (section 2.4: unknown pty_id on input = invalid_spec pty_id)",
         "pty/input to an unknown or closed pty_id succeeds and drops the bytes instead of failing invalid_spec "
         "pty_id")
class PtyInputUnknownOk(HostPlugin):
    def m_pty_input(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            session = self._ptys.get(params["pty_id"])
        if session is None or session.closed:
            return None
        return super().m_pty_input(params)


@redteam("b4_pty_end_io_error", "SDP1-023 (section 2.4: pty/output data_b64 null = session ended)",
         "when the PTY's shell exits, pty/output fails with an io error (EIO from the master) instead of "
         "answering data_b64 null")
class PtyEndIoError(HostPlugin):
    def m_pty_output(self, params: dict[str, Any]) -> Any:
        result = super().m_pty_output(params)
        if result["data_b64"] is None:
            raise BackendError("io", "pty/output: Input/output error", io_context="pty_read")
        return result


@redteam("b4_stdio_wait_exit_code_after_signal", "SDP1-072 SDP1-073",
         "exec/stdio_wait of a process ended by a signal (not by stdio_terminate) reports termination 'exited' "
         "with exit_code 128+N (the shell convention) instead of exit_code null")
class StdioWaitExitCodeAfterSignal(HostPlugin):
    def m_exec_stdio_wait(self, params: dict[str, Any]) -> Any:
        process = self._process(params)
        result = super().m_exec_stdio_wait(params)
        code = process.proc.returncode
        if not process.terminated and code is not None and code < 0:
            result["exit_code"] = 128 - code
        return result


# ================================================================================================
# logs (1)
# ================================================================================================


@redteam("b4_logs_provision_reversed", "SDP1-079 SDP1-023 (section 2.4: logs/follow streams the log)",
         "logs/follow of the provision log sends the lines newest-first (the log is kept as a stack)")
class LogsProvisionReversed(HostPlugin):
    def m_logs_follow(self, params: dict[str, Any]) -> Any:
        if params.get("source") == "provision":
            sandbox = self.backend.get(params["sandbox_id"])
            saved = sandbox.provision_log
            sandbox.provision_log = list(reversed(saved))
            try:
                return super().m_logs_follow(params)
            finally:
                sandbox.provision_log = saved
        return super().m_logs_follow(params)


# ================================================================================================
# events (6)
# ================================================================================================


class _ProviderNameSource(EventSource):
    def __init__(self, provider_kind: str, notify: Any) -> None:
        super().__init__("sandbox-conformance-host-plugin", notify)


@redteam("b4_event_provider_not_kind", "SDP1-111 (section 5.13: event.provider is the provider kind)",
         "host/event events name the plugin executable ('sandbox-conformance-host-plugin') in provider instead of "
         "the provider kind announced in initialize ('host')")
class EventProviderNotKind(_EventsPlugin):
    event_source_class = _ProviderNameSource


@redteam("b4_per_call_events_ignored", "SDP1-111",
         "lifecycle verbs ignore their own events object and report only on the route of the handle's create/"
         "attach (early-v1 style): a stop or delete that carries events, on a handle created without events, "
         "emits nothing")
class PerCallEventsIgnored(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        if isinstance(params, dict) and method not in ("sandbox/create", "sandbox/attach", "sandbox/undelete") \
                and method in EVENT_ACTIONS and EVENT_ACTIONS[method][1] == "sandbox":
            params = {k: v for k, v in params.items() if k != "events"}
        return super().dispatch(method, params)


@redteam("b4_correlation_from_handle_route", "SDP1-057 SDP1-056",
         "a lifecycle verb with its own events object echoes its route_id but copies the correlation_id of the "
         "handle's create/attach route instead of its own")
class CorrelationFromHandleRoute(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        if isinstance(params, dict) and isinstance(params.get("events"), dict) \
                and method not in ("sandbox/create", "sandbox/attach"):
            handle = self._handle_routes.get(str(params.get("sandbox_id")))
            if handle is not None:
                events = {**params["events"]}
                if handle.get("correlation_id") is not None:
                    events["correlation_id"] = handle["correlation_id"]
                params = {**params, "events": events}
        return super().dispatch(method, params)


class _ResumeAsPauseSource(EventSource):
    def operation(self, route: dict[str, Any] | None, action: str, subject: dict[str, Any]) -> Operation:
        return super().operation(route, "pause" if action == "resume" else action, subject)


@redteam("b4_resume_event_action_pause", "SDP1-111 SDP1-114",
         "sandbox/resume's operation events carry action 'pause' (the action is derived from the gating "
         "capability lifecycle.pause) instead of 'resume'")
class ResumeEventActionPause(_EventsPlugin):
    event_source_class = _ResumeAsPauseSource


class _LateFailureOperation(Operation):
    def failed(self, report: dict[str, Any]) -> None:
        def later() -> None:
            time.sleep(0.2)  # the error hook runs once the error answer is on its way
            Operation.failed(self, report)
        threading.Thread(target=later, daemon=True).start()


class _LateFailureSource(EventSource):
    def operation(self, route: dict[str, Any] | None, action: str, subject: dict[str, Any]) -> Operation:
        return _LateFailureOperation(self, route, action, subject)


@redteam("b4_failed_event_after_error", "SDP1-115",
         "operation_failed events are emitted by an error hook that runs after the error response is written: a "
         "failed operation's terminal event reaches the wire after its answer (successes are ordered right)")
class FailedEventAfterError(_EventsPlugin):
    event_source_class = _LateFailureSource


@redteam("b4_snapshot_event_subject_sandbox", "SDP1-111 (section 5.13: subject names the resource operated on)",
         "snapshot/create's events name the source sandbox as their subject ({type: sandbox, id: <sandbox>}) "
         "instead of the snapshot ({type: snapshot, id: <snapshot id>})")
class SnapshotEventSubjectSandbox(HostPlugin):
    def event_subject(self, subject_type: str, params: dict[str, Any], result: Any = None) -> dict[str, Any]:
        if subject_type == "snapshot" and isinstance(params.get("spec"), dict):
            source = params["spec"].get("source")
            if isinstance(source, dict) and isinstance(source.get("sandbox"), dict):
                return {"type": "sandbox", "id": source["sandbox"].get("id")}
        return super().event_subject(subject_type, params, result)


# ================================================================================================
# shutdown / EOF (1)
# ================================================================================================


@redteam("b4_eof_exit_status_nonzero", "SDP1-097",
         "when stdin reaches EOF without a shutdown the plugin exits with status 1 ('host went away'); it must "
         "simply exit (status 0)")
class EofExitStatusNonzero(HostPlugin):
    def m_shutdown(self, params: dict[str, Any]) -> Any:
        self._shutdown_requested = True
        return super().m_shutdown(params)

    def serve(self) -> int:
        code = super().serve()
        return code if getattr(self, "_shutdown_requested", False) else 1
