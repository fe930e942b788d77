"""Fifth, independent set of blind red-team mutants (``b5_*``) of the reference v1 host plugin.

Written from the protocol digest (section 7 requirement numbers SDP1-NNN; sections 2/5/8/9 for behaviour v1
requires of a declared capability, SDP1-023), upstream's protocol text and the reference provider's sources only,
avoiding the faults of ``blind_1`` .. ``blind_4``. Each class overrides the smallest piece of ``HostPlugin`` (or
of its backend, sanitizer or event source) it can, so exactly one behaviour differs from the honest plugin.
Areas: handshake/capabilities, envelope/errors, transport/concurrency, lifecycle/status/spec validation, exec,
sanitization, files, stdio/PTY/logs, events, snapshots.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from conformance.reference.host_backend import (
    SNAPSHOT_ID,
    BackendError,
    Capture,
    HostBackend,
    HostSandbox,
    _signal_group,
    not_found,
)
from conformance.reference.host_events import EventSource, Operation
from conformance.reference.host_interactive import _set_size
from conformance.reference.host_plugin import (
    EVENT_ACTIONS,
    HANDLE_METHODS,
    INVALID_PARAMS,
    HostPlugin,
    application_error,
    b64,
)
from conformance.reference.sanitize import ESC, Sanitizer
from conformance.reference.stdio_server import METHOD_NOT_FOUND, NoAnswer, RpcFailure
from tests.redteam import redteam
from tests.redteam.seams import BackendPlugin as _BackendPlugin, EventsPlugin as _EventsPlugin


def _sanitizing(sanitizer: type[Sanitizer]) -> type[HostPlugin]:
    backend = type(f"_Backend_{sanitizer.__name__}", (HostBackend,), {"sanitizer_class": sanitizer})
    return type(f"_Plugin_{sanitizer.__name__}", (_BackendPlugin,), {"backend_class": backend})


# ================================================================================================
# handshake / capabilities / gates (8)
# ================================================================================================


@redteam("b5_kind_underscore", "SDP1-018",
         "provider.kind is 'host_directory' (the source's name, with an underscore) instead of a kind made of "
         "lowercase letters, digits and interior hyphens")
class KindUnderscore(HostPlugin):
    provider_kind = "host_directory"


@redteam("b5_provider_version_empty", "SDP1-016",
         "provider.version is the empty string (the build reads a version file that is missing from the "
         "installed package) instead of the plugin build version")
class ProviderVersionEmpty(HostPlugin):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        result = super().m_initialize(params)
        return {**result, "provider": {**result["provider"], "version": ""}}


@redteam("b5_activate_names_snapshots", "SDP1-029 SDP1-024",
         "snapshot/activate and snapshot/deactivate (snapshots.activation undeclared) fail unsupported naming the "
         "group 'snapshots' (which IS declared) instead of 'snapshots.activation'")
class ActivateNamesSnapshots(HostPlugin):
    def unsupported(self, method: str, capability: str) -> RpcFailure:
        if method in ("snapshot/activate", "snapshot/deactivate"):
            capability = "snapshots"
        return super().unsupported(method, capability)


@redteam("b5_ssh_revoke_names_ssh", "SDP1-024 SDP1-092",
         "access/ssh_revoke fails unsupported naming 'access.ssh' (the gate table shares one entry for every ssh "
         "method) instead of access.ssh.revoke")
class SshRevokeNamesSsh(HostPlugin):
    def unsupported(self, method: str, capability: str) -> RpcFailure:
        if method == "access/ssh_revoke":
            capability = "access.ssh"
        return super().unsupported(method, capability)


@redteam("b5_update_network_names_network", "SDP1-024 SDP1-060",
         "sandbox/update_network fails unsupported naming the capability group 'network' instead of the dotted "
         "capability lifecycle.update_network")
class UpdateNetworkNamesNetwork(HostPlugin):
    def unsupported(self, method: str, capability: str) -> RpcFailure:
        if method == "sandbox/update_network":
            capability = "network"
        return super().unsupported(method, capability)


@redteam("b5_set_timers_null_noop", "SDP1-060 SDP1-024",
         "sandbox/set_timers (lifecycle.timers undeclared) with every timer null is short-circuited as 'nothing "
         "to change' and succeeds, instead of failing unsupported lifecycle.timers")
class SetTimersNullNoop(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        timers = params.get("timers") if isinstance(params, dict) else None
        if method == "sandbox/set_timers" and isinstance(timers, dict) and all(v is None for v in timers.values()):
            try:
                self.backend.get(params["sandbox_id"])
            except BackendError as error:
                raise self.backend_failure(method, error) from None
            return None
        return super().dispatch(method, params)


@redteam("b5_fork_check_inverted", "SDP1-062 SDP1-024",
         "the fork include_memory check is inverted: include_memory:true fails invalid_spec include_memory (and "
         "false falls through to unsupported lifecycle.fork) instead of false -> invalid_spec, true -> unsupported")
class ForkCheckInverted(HostPlugin):
    def check_fork_options(self, options: dict[str, Any]) -> None:
        if options.get("include_memory", False):
            raise application_error("invalid_spec", "invalid spec: include_memory: fork must preserve memory and "
                                    "running processes", {"field": "include_memory",
                                                          "reason": "fork must preserve memory and running processes"})


@redteam("b5_unsupported_retryable", "SDP1-043",
         "unsupported failures carry report.retryable:true ('the capability may appear later') although an "
         "unsupported operation is not transient; retryable is true only for timeout/rate_limited/transport")
class UnsupportedRetryable(HostPlugin):
    def unsupported(self, method: str, capability: str) -> RpcFailure:
        failure = super().unsupported(method, capability)
        failure.data["report"]["retryable"] = True
        return failure


# ================================================================================================
# envelope / params (5)
# ================================================================================================


@redteam("b5_unknown_method_id_zero", "SDP1-009 SDP1-014",
         "an unknown method is answered -32601 with id 0 (the error path reuses the malformed-line responder) "
         "instead of the request's id")
class UnknownMethodIdZero(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        try:
            return super().dispatch(method, params)
        except RpcFailure as failure:
            if failure.code != METHOD_NOT_FOUND:
                raise
            self.respond_error(0, failure)
            raise NoAnswer() from None


_EXEC_SPEC_FIELDS = {"command", "timeout_ms", "working_dir", "env", "stdin_b64", "output_sanitization"}


@redteam("b5_exec_spec_denies_unknown_fields", "SDP1-034 SDP1-126",
         "the exec spec decoder denies unknown fields: an ExecSpec with an extra member (e.g. a later additive "
         "field) is answered -32600 instead of the unknown field being ignored")
class ExecSpecDeniesUnknownFields(HostPlugin):
    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        extra = sorted(set(spec) - _EXEC_SPEC_FIELDS)
        if extra:
            raise RpcFailure(INVALID_PARAMS, f"invalid params for exec: unknown field `{extra[0]}`")
        return super().run_spec(sandbox_id, spec, **kwargs)


@redteam("b5_exec_env_optional", "SDP1-042",
         "ExecSpec.env (a required key in v1) defaults to {} when omitted, so a spec without env runs instead of "
         "being answered -32600 invalid params")
class ExecEnvOptional(HostPlugin):
    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        return super().run_spec(sandbox_id, {"env": {}, **spec}, **kwargs)


@redteam("b5_health_rejects_empty_params", "SDP1-126 SDP1-034",
         "parameterless methods (provider/health, shutdown, volume/list) decode params as a unit value: "
         "'params': {} is answered -32600 'expected unit' although {} and null are both valid")
class HealthRejectsEmptyParams(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        if method in ("provider/health", "shutdown", "volume/list") and params is not None:
            raise RpcFailure(INVALID_PARAMS, f"invalid params for {method}: invalid type: map, expected unit")
        return super().dispatch(method, params)


@redteam("b5_crlf_line_endings", "SDP1-002",
         "every message is terminated by CRLF (the writer uses the platform's text line ending) instead of a "
         "single LF")
class CrlfLineEndings(HostPlugin):
    def write_message(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\r\n"
        with self._write_lock:
            try:
                self.stdout.write(line)
                self.stdout.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass


# ================================================================================================
# transport / concurrency (3)
# ================================================================================================


@redteam("b5_pty_output_blocks_resize", "SDP1-077",
         "a per-PTY lock is held across the pty/output long poll and taken by pty/resize, so a resize waits until "
         "the terminal next prints (input is unaffected)")
class PtyOutputBlocksResize(HostPlugin):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pty_locks: dict[str, threading.Lock] = {}
        self._pty_locks_guard = threading.Lock()

    def _pty_lock(self, pty_id: str) -> threading.Lock:
        with self._pty_locks_guard:
            return self._pty_locks.setdefault(pty_id, threading.Lock())

    def m_pty_output(self, params: dict[str, Any]) -> Any:
        with self._pty_lock(params["pty_id"]):
            return super().m_pty_output(params)

    def m_pty_resize(self, params: dict[str, Any]) -> Any:
        with self._pty_lock(params["pty_id"]):
            return super().m_pty_resize(params)


@redteam("b5_stdio_terminate_waits_output", "SDP1-077",
         "a per-process lock is held across the exec/stdio_output long poll and taken by exec/stdio_terminate, so "
         "terminating a silent process hangs until it prints")
class StdioTerminateWaitsOutput(HostPlugin):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._proc_locks: dict[str, threading.Lock] = {}
        self._proc_locks_guard = threading.Lock()

    def _proc_lock(self, process_id: str) -> threading.Lock:
        with self._proc_locks_guard:
            return self._proc_locks.setdefault(process_id, threading.Lock())

    def m_exec_stdio_output(self, params: dict[str, Any]) -> Any:
        with self._proc_lock(params["process_id"]):
            return super().m_exec_stdio_output(params)

    def m_exec_stdio_terminate(self, params: dict[str, Any]) -> Any:
        with self._proc_lock(params["process_id"]):
            return super().m_exec_stdio_terminate(params)


class _StopAllBackend(HostBackend):
    def stop(self, sandbox: HostSandbox) -> None:
        with self._lock:
            everyone = list(self._sandboxes.values())
        for other in everyone:  # one process table for the whole provider
            self._kill_processes(other)
        self._set_state(sandbox, "stopped")


@redteam("b5_stop_kills_other_sandbox", "SDP1-023 (section 9.2: stop ends the sandbox's process groups)",
         "sandbox/stop kills the processes of every sandbox of the provider (one shared process table), so a "
         "command running in another sandbox dies with SIGKILL")
class StopKillsOtherSandbox(_BackendPlugin):
    backend_class = _StopAllBackend


# ================================================================================================
# lifecycle / status / creation spec (13)
# ================================================================================================


class _StartingBackend(HostBackend):
    def start(self, sandbox: HostSandbox) -> None:
        if sandbox.state in ("stopped", "archived"):
            self._set_state(sandbox, "starting")  # 'becomes running when ready' -- nothing ever moves it on
            return
        super().start(sandbox)


@redteam("b5_start_leaves_starting", "SDP1-023 (section 9.2: start -> running)",
         "sandbox/start of a stopped sandbox leaves it in 'starting' (the ready transition is never made), so "
         "describe says starting and every exec fails invalid_state")
class StartLeavesStarting(_BackendPlugin):
    backend_class = _StartingBackend


class _UndeleteLabelsBackend(HostBackend):
    def undelete(self, sandbox_id: str) -> HostSandbox:
        sandbox = super().undelete(sandbox_id)
        with self._lock:
            sandbox.labels = {}  # rebuilt from the trashed workspace, which has no labels
            self._save(sandbox)
        return sandbox


@redteam("b5_undelete_drops_labels", "SDP1-061",
         "sandbox/undelete restores the files and state but the restored sandbox has lost its labels")
class UndeleteDropsLabels(_BackendPlugin):
    backend_class = _UndeleteLabelsBackend


class _UndeleteNewIdBackend(HostBackend):
    def undelete(self, sandbox_id: str) -> HostSandbox:
        old = super().undelete(sandbox_id)
        new_id = f"host-{uuid.uuid4().hex[:20]}"
        workspace = self.root / new_id / "workspace"
        workspace.parent.mkdir(parents=True)
        old.workspace.rename(workspace)
        restored = HostSandbox(new_id, old.name, dict(old.labels), dict(old.env), workspace.resolve())
        with self._lock:
            old.state = "deleted"
            self._save(old)
            self._sandboxes[new_id] = restored
            self._save(restored)
        return restored


@redteam("b5_undelete_new_id", "SDP1-061 SDP1-039",
         "sandbox/undelete restores the files into a new sandbox with a fresh id (the deleted id stays deleted) "
         "instead of restoring the deleted sandbox itself")
class UndeleteNewId(_BackendPlugin):
    backend_class = _UndeleteNewIdBackend


@redteam("b5_labels_empty_value_dropped", "SDP1-023 SDP1-050 (section 5.4: labels string->string)",
         "labels with an empty value are dropped at create ('empty tags are not stored'), so status.labels lacks "
         "them and a filter on them misses the sandbox")
class LabelsEmptyValueDropped(HostPlugin):
    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        if isinstance(spec, dict) and isinstance(spec.get("labels"), dict):
            spec = {**spec, "labels": {k: v for k, v in spec["labels"].items() if v}}
        return super().m_sandbox_create({**params, "spec": spec})


class _ListMissingAsEmptyBackend(HostBackend):
    def list(self, labels: Mapping[str, str] | None = None) -> list[HostSandbox]:
        with self._lock:
            sandboxes = [s for s in self._sandboxes.values() if s.state != "deleted"]
        wanted = dict(labels or {})
        return [s for s in sandboxes if all(s.labels.get(k, "") == v for k, v in wanted.items())]


@redteam("b5_list_filter_missing_as_empty", "SDP1-023 (section 2.2: label filter = sandbox carries all listed labels)",
         "the label filter reads a missing label as '', so filtering on label=<empty value> also lists sandboxes "
         "that do not carry the label at all")
class ListFilterMissingAsEmpty(_BackendPlugin):
    backend_class = _ListMissingAsEmptyBackend


@redteam("b5_platform_info_unknown_ok", "SDP1-045 SDP1-023 (section 8: unknown sandbox id -> not_found sandbox)",
         "sandbox/platform_info answers the host's platform for any sandbox id (it never looks the sandbox up), "
         "so an unknown id succeeds instead of failing not_found")
class PlatformInfoUnknownOk(HostPlugin):
    def m_sandbox_platform_info(self, params: dict[str, Any]) -> Any:
        import platform
        import sys
        return {"platform": {"os": sys.platform.replace("darwin", "macos"), "arch": platform.machine(),
                             "version": platform.release()}}


@redteam("b5_spec_empty_strings_accepted", "SDP1-051",
         "spec validation tests region/user/sandbox_kind for truthiness, so region:'' (which must be rejected, "
         "'must not be empty') is silently accepted")
class SpecEmptyStringsAccepted(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        super().validate_spec({k: v for k, v in spec.items()
                               if not (k in ("region", "user", "sandbox_kind") and v == "")})


@redteam("b5_create_ignores_volumes", "SDP1-051",
         "sandbox/create silently ignores a non-empty volumes list (mounts are 'best effort') instead of "
         "rejecting it invalid_spec volumes")
class CreateIgnoresVolumes(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        super().validate_spec({k: v for k, v in spec.items() if k != "volumes"})


@redteam("b5_network_allow_all_accepted", "SDP1-051 SDP1-024",
         "network:'allow_all' is accepted as equivalent to the host's unrestricted default although "
         "network.allow_all is declared false, instead of invalid_spec network")
class NetworkAllowAllAccepted(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        if spec.get("network") == "allow_all":
            spec = {**spec, "network": "provider_default"}
        super().validate_spec(spec)


@redteam("b5_working_directory_ignored", "SDP1-051",
         "a requested working_directory is silently ignored (the sandbox gets a managed workspace elsewhere) "
         "instead of invalid_spec working_directory")
class WorkingDirectoryIgnored(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        super().validate_spec({k: v for k, v in spec.items() if k != "working_directory"})


class _LabelsUnsavedBackend(HostBackend):
    def set_labels(self, sandbox: HostSandbox, labels: Mapping[str, str]) -> None:
        with self._lock:
            sandbox.labels = dict(labels)  # the record on disk is not rewritten


@redteam("b5_labels_not_persisted", "SDP1-039 SDP1-023",
         "sandbox/set_labels changes the in-memory labels only; the durable registry keeps the old ones, so a "
         "later plugin process attaching by id sees the labels from before the call")
class LabelsNotPersisted(_BackendPlugin):
    backend_class = _LabelsUnsavedBackend


@redteam("b5_empty_name_null", "SDP1-050 (section 10: the requested name is observed)",
         "a requested name of '' is stored as null (name or None), so status.name is null instead of ''")
class EmptyNameNull(HostPlugin):
    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        if isinstance(spec, dict) and spec.get("name") == "":
            spec = {**spec, "name": None}
        return super().m_sandbox_create({**params, "spec": spec})


# ================================================================================================
# exec (11)
# ================================================================================================


class _ErrexitBackend(HostBackend):
    def start_process(self, sandbox, command, env, working_dir, stdin_piped, argv):
        return super().start_process(sandbox, "set -e\n" + command, env, working_dir, stdin_piped, argv)


@redteam("b5_exec_errexit", "SDP1-066",
         "commands run with errexit ('set -e' prepended for safety), so a failing command in the middle ends "
         "the script")
class ExecErrexit(_BackendPlugin):
    backend_class = _ErrexitBackend


class _PosixBackend(HostBackend):
    def start_process(self, sandbox, command, env, working_dir, stdin_piped, argv):
        if argv is None:
            argv = [self.bash, "--posix", "-c", command]
        return super().start_process(sandbox, command, env, working_dir, stdin_piped, argv)


@redteam("b5_exec_posix_mode", "SDP1-066",
         "commands run as 'bash --posix -c' (for portability) instead of plain bash -c: POSIX mode is on")
class ExecPosixMode(_BackendPlugin):
    backend_class = _PosixBackend


@redteam("b5_stream_via_sh", "SDP1-068 SDP1-066",
         "exec/stream runs its command with /bin/sh -c (exec/run still uses bash), so streamed commands get a "
         "different interpreter")
class StreamViaSh(HostPlugin):
    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        if kwargs.get("on_output") is not None:
            kwargs["argv"] = ["/bin/sh", "-c", spec["command"]]
        return super().run_spec(sandbox_id, spec, **kwargs)


class _ExportEnvBackend(HostBackend):
    def start_process(self, sandbox, command, env, working_dir, stdin_piped, argv):
        prefix = "".join(f'export {name}="{value}"; ' for name, value in env.items() if name != "BASH_ENV")
        return super().start_process(sandbox, prefix + command, {}, working_dir, stdin_piped, argv)


@redteam("b5_env_export_unquoted", "SDP1-023 (section 9.2: the exec spec.env applies)",
         "the exec spec env is applied by prefixing 'export NAME=\"value\";' to the command without escaping, so "
         "values containing quotes or $ arrive altered")
class EnvExportUnquoted(_BackendPlugin):
    backend_class = _ExportEnvBackend


class _TimeoutKilledBackend(HostBackend):
    def run(self, *args: Any, **kwargs: Any):
        result = super().run(*args, **kwargs)
        if result.termination == "timed_out":
            result.termination = "killed"
        return result


@redteam("b5_timeout_reports_killed", "SDP1-074 SDP1-073",
         "a command that hits its timeout is reported termination 'killed' (the ladder ended it with SIGKILL) "
         "instead of 'timed_out'")
class TimeoutReportsKilled(_BackendPlugin):
    backend_class = _TimeoutKilledBackend


class _TimeoutKillBackend(HostBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._local = threading.local()

    def run(self, *args: Any, cancel: threading.Event | None = None, **kwargs: Any):
        self._local.cancel = cancel
        return super().run(*args, cancel=cancel, **kwargs)

    def stop_process(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes]) -> None:
        cancel = getattr(self._local, "cancel", None)
        if cancel is None or not cancel.is_set():  # a timeout: no grace
            _signal_group(proc, signal.SIGKILL)
            return
        super().stop_process(sandbox, proc)


@redteam("b5_timeout_sigkill_no_term", "SDP1-074 (section 9.2: timeout = the cancel ladder SIGTERM, 2 s, SIGKILL)",
         "a timeout SIGKILLs the process group at once (cancel still uses the SIGTERM ladder), so a command gets "
         "no chance to clean up on timeout")
class TimeoutSigkillNoTerm(_BackendPlugin):
    backend_class = _TimeoutKillBackend


class _SigintBackend(HostBackend):
    def stop_process(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes]) -> None:
        _signal_group(proc, signal.SIGINT)
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
        _signal_group(proc, signal.SIGKILL)


@redteam("b5_cancel_sigint", "SDP1-074 (section 9.2: cancel = SIGTERM to the group, 2 s grace, SIGKILL)",
         "the stop ladder (cancel and timeout) starts with SIGINT ('like Ctrl-C') instead of SIGTERM, so a "
         "command's TERM handler never runs")
class CancelSigint(_BackendPlugin):
    backend_class = _SigintBackend


def _stream_result(run: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"result": result, "streams_separated": True, "live_streaming": True,
            "stdout_capture": run.stdout_capture, "stderr_capture": run.stderr_capture}


@redteam("b5_cancel_registered_on_first_output", "SDP1-023 SDP1-074 (exec.cancel declared)",
         "an exec is entered in the cancel table only when its first output chunk arrives, so exec/cancel of a "
         "stream that has printed nothing yet is a silent no-op and the command runs to completion")
class CancelRegisteredOnFirstOutput(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        exec_id = params["exec_id"]
        cancel = threading.Event()
        registered: list[bool] = []

        def forward(stream: str, chunk: bytes) -> None:
            if not registered:
                with self._execs_lock:
                    self._execs[exec_id] = cancel
                registered.append(True)
            self.notify("exec/output", {"exec_id": exec_id, "stream": stream, "data_b64": b64(chunk)})

        try:
            run = self.run_spec(params["sandbox_id"], params["spec"], on_output=forward, cancel=cancel,
                                retain_limit=params.get("retained_output_limit"))
        finally:
            with self._execs_lock:
                self._execs.pop(exec_id, None)
        return _stream_result(run, self.exec_result(run))


class _EmptyStdinBackend(HostBackend):
    def feed_stdin(self, proc: subprocess.Popen[bytes], data: bytes) -> None:
        if not data:
            return  # nothing to write -- and the pipe is never closed
        super().feed_stdin(proc, data)


@redteam("b5_empty_stdin_not_closed", "SDP1-075",
         "an empty stdin_b64 ('') opens a stdin pipe but writes nothing and never closes it, so a command "
         "reading stdin waits for EOF until its timeout")
class EmptyStdinNotClosed(_BackendPlugin):
    backend_class = _EmptyStdinBackend


class _TailCapture(Capture):
    def add(self, chunk: bytes) -> None:
        self.observed += len(chunk)
        self.head.extend(chunk)
        if self.limit is not None and len(self.head) > self.limit:
            del self.head[: len(self.head) - self.limit]


@redteam("b5_capture_tail_only", "SDP1-105 (section 4: retained copy = stable head of limit/2 + rolling tail)",
         "the retained copy of an exec/stream keeps only the last retained_output_limit bytes (a rolling tail) "
         "instead of a stable head of limit/2 plus a tail")
class CaptureTailOnly(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        exec_id = params["exec_id"]
        cancel = threading.Event()
        limit = params.get("retained_output_limit")
        captures = {"stdout": _TailCapture(limit), "stderr": _TailCapture(limit)}
        with self._execs_lock:
            self._execs[exec_id] = cancel

        def forward(stream: str, chunk: bytes) -> None:
            captures[stream].add(chunk)
            self.notify("exec/output", {"exec_id": exec_id, "stream": stream, "data_b64": b64(chunk)})

        try:
            run = self.run_spec(params["sandbox_id"], params["spec"], on_output=forward, cancel=cancel,
                                retain_limit=limit)
        finally:
            with self._execs_lock:
                self._execs.pop(exec_id, None)
        run.stdout, run.stderr = captures["stdout"].retained, captures["stderr"].retained
        run.stdout_capture = captures["stdout"].stats(run.stdout_capture.get("truncated", False))
        run.stderr_capture = captures["stderr"].stats(run.stderr_capture.get("truncated", False))
        return _stream_result(run, self.exec_result(run))


@redteam("b5_interactive_ignores_sandbox_env", "SDP1-023 (section 9.2: commands get the sandbox's create-time env)",
         "stdio processes and PTY shells are started without the sandbox's create-time env (only exec/run and "
         "exec/stream apply it)")
class InteractiveIgnoresSandboxEnv(HostPlugin):
    def _spawn(self, sandbox: HostSandbox, command: str, env: dict[str, str], working_dir: str | None,
               **streams: Any) -> subprocess.Popen[bytes]:
        cwd = self.backend.resolve(sandbox, working_dir)
        if not cwd.is_dir():
            from conformance.reference.host_backend import invalid_spec
            raise invalid_spec("working_dir", f"{working_dir} is not a directory in the sandbox")
        bare = dataclasses.replace(sandbox, env={}, processes=set())
        proc = subprocess.Popen([self.backend.bash, "-c", command], cwd=cwd,
                                env=self.backend.environment(bare, env), start_new_session=True, **streams)
        sandbox.processes.add(proc)
        return proc


@redteam("b5_default_sanitization_strip_ansi", "SDP1-069",
         "an omitted output_sanitization defaults to strip_ansi ('clean output by default') instead of raw")
class DefaultSanitizationStripAnsi(HostPlugin):
    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        if isinstance(spec, dict) and spec.get("output_sanitization") is None:
            spec = {**spec, "output_sanitization": "strip_ansi"}
        return super().run_spec(sandbox_id, spec, **kwargs)


# ================================================================================================
# sanitization (6)
# ================================================================================================


class _KeepVtFf(Sanitizer):
    def _text_byte(self, byte: int, out: bytearray) -> None:
        if self.mode == "strip_all" and byte in (0x0B, 0x0C):  # 'whitespace' per bytes.isspace()
            out.append(byte)
            return
        super()._text_byte(byte, out)


@redteam("b5_strip_all_keeps_vt_ff", "SDP1-069",
         "strip_all keeps every whitespace control (VT 0x0B and FF 0x0C too, as bytes.isspace() does) instead of "
         "only TAB, LF and CR")
class StripAllKeepsVtFf(_sanitizing(_KeepVtFf)):
    pass


class _KeepKeypad(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "esc" and byte in (0x3D, 0x3E):  # ESC = / ESC >
            self._state = "text"
            out.extend((ESC, byte))
            return
        super()._step(byte, out)


@redteam("b5_esc_keypad_kept", "SDP1-069",
         "the two-byte keypad escapes ESC = and ESC > survive strip_ansi/strip_all (only CSI/OSC/string "
         "introducers are recognised after ESC)")
class EscKeypadKept(_sanitizing(_KeepKeypad)):
    pass


class _KeepCharset(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "esc" and 0x20 <= byte <= 0x2F:
            self._state = "text"
            out.extend((ESC, byte))
            return
        super()._step(byte, out)


@redteam("b5_charset_designation_kept", "SDP1-069",
         "escape sequences with intermediate bytes (nF, e.g. the charset designation ESC ( B that tput sgr0 "
         "emits) are not removed: ESC ( B passes through strip_ansi")
class CharsetDesignationKept(_sanitizing(_KeepCharset)):
    pass


class _CsiIntermediateLeak(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "csi" and 0x20 <= byte <= 0x2F:  # only parameter bytes 0x30-0x3F are expected
            self._state = "text"
            self._text_byte(byte, out)
            return
        super()._step(byte, out)


@redteam("b5_csi_intermediate_leak", "SDP1-069",
         "a CSI sequence with an intermediate byte (e.g. ESC [ 2 SP q, cursor style) ends at the intermediate, "
         "so ' q' leaks into strip_ansi output")
class CsiIntermediateLeak(_sanitizing(_CsiIntermediateLeak)):
    pass


class _DcsAsTwoByte(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "esc" and byte in (ord("P"), ord("X"), ord("^"), ord("_")):
            self._state = "text"  # treated as a two-byte escape: the string body stays
            return
        super()._step(byte, out)


@redteam("b5_dcs_string_kept", "SDP1-069",
         "7-bit DCS/SOS/PM/APC strings (ESC P ... ESC \\) are treated as two-byte escapes: the introducer is "
         "removed but the string body leaks into strip_ansi output")
class DcsStringKept(_sanitizing(_DcsAsTwoByte)):
    pass


class _C2Swallowed(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "c2" and not 0x80 <= byte <= 0x9F:
            self._state = "text"  # the 0xC2 lead byte is dropped as if it introduced a C1 control
            self._step(byte, out)
            return
        super()._step(byte, out)


@redteam("b5_c2_text_corrupted", "SDP1-069",
         "strip_ansi drops the UTF-8 lead byte 0xC2 of ordinary text characters (degree sign, NBSP, copyright, "
         "...) as if it always introduced a C1 control, corrupting the UTF-8")
class C2TextCorrupted(_sanitizing(_C2Swallowed)):
    pass


# ================================================================================================
# files (6)
# ================================================================================================


@redteam("b5_write_truncated_1mib", "SDP1-023 (section 2.6: fs/write writes the content; fs.upload declared)",
         "fs/write keeps only the first 1 MiB of content_b64 (a fixed write buffer) and answers success, so "
         "chunks above 1 MiB (the host composes 4 MiB chunks) are silently truncated")
class WriteTruncated1Mib(HostPlugin):
    def m_fs_write(self, params: dict[str, Any]) -> Any:
        try:
            data = base64.b64decode(params["content_b64"], validate=True)
        except (binascii.Error, TypeError, KeyError):
            return super().m_fs_write(params)
        return super().m_fs_write({**params, "content_b64": b64(data[: 1 << 20])})


@redteam("b5_delete_follows_symlink", "SDP1-023 (section 2.6: fs/delete deletes the path)",
         "a recursive fs/delete of a symlink to a directory deletes the directory it points to (rm -rf path/) "
         "and then the link, instead of only the link")
class DeleteFollowsSymlink(HostPlugin):
    def m_fs_delete(self, params: dict[str, Any]) -> Any:
        path = self._path(params)
        if params.get("recursive") and path.is_symlink() and path.is_dir():
            shutil.rmtree(path.resolve(), ignore_errors=True)
            path.unlink()
            return None
        return super().m_fs_delete(params)


@redteam("b5_exists_broken_symlink_false", "SDP1-023 (section 2.6: fs/exists)",
         "fs/exists follows symlinks (path.exists()), so a dangling symlink -- which fs/list_dir and fs/metadata "
         "report -- is said not to exist")
class ExistsBrokenSymlinkFalse(HostPlugin):
    def m_fs_exists(self, params: dict[str, Any]) -> Any:
        return {"exists": self._path(params).exists()}


@redteam("b5_list_dir_skips_dotfiles", "SDP1-023 (section 2.6: fs/list_dir returns the directory's entries)",
         "fs/list_dir omits hidden entries (names starting with '.', as a shell glob does)")
class ListDirSkipsDotfiles(HostPlugin):
    def m_fs_list_dir(self, params: dict[str, Any]) -> Any:
        result = super().m_fs_list_dir(params)
        return {"entries": [e for e in result["entries"]
                            if not any(part.startswith(".") for part in e["path"].split("/"))]}


@redteam("b5_chmod_umask_applied", "SDP1-086 SDP1-023 (fs.permissions declared)",
         "fs/set_permissions applies the process umask to the requested mode (mode & ~0o022), so 0o777 becomes "
         "0o755")
class ChmodUmaskApplied(HostPlugin):
    def m_fs_set_permissions(self, params: dict[str, Any]) -> Any:
        mode = params["mode"]
        if isinstance(mode, int):
            params = {**params, "mode": mode & ~0o022}
        return super().m_fs_set_permissions(params)


@redteam("b5_fs_absolute_rebased", "SDP1-081",
         "file paths are always joined onto the workspace (a leading '/' is stripped), so an absolute path -- "
         "even the workspace's own absolute path -- names a different file than it does for exec")
class FsAbsoluteRebased(HostPlugin):
    def _path(self, params: dict[str, Any], key: str = "path"):
        sandbox = self.backend.get(params["sandbox_id"])
        raw = params[key]
        return self.backend.resolve(sandbox, raw.lstrip("/") if isinstance(raw, str) else raw)


# ================================================================================================
# stdio / PTY / logs (6)
# ================================================================================================


@redteam("b5_stdio_empty_input_closes", "SDP1-023 (section 2.4: exec/stdio_input writes bytes; close_input is EOF)",
         "exec/stdio_input with empty data closes the process's stdin (an empty write is taken as EOF), so "
         "later input is lost")
class StdioEmptyInputCloses(HostPlugin):
    def m_exec_stdio_input(self, params: dict[str, Any]) -> Any:
        if params.get("data_b64") == "":
            return self.m_exec_stdio_close_input(params)
        return super().m_exec_stdio_input(params)


@redteam("b5_stderr_tail_stripped", "SDP1-023 (section 5.7: stderr_tail = the newest stderr bytes)",
         "exec/stdio_wait strips whitespace from stderr_tail (trailing newline and leading spaces removed)")
class StderrTailStripped(HostPlugin):
    def m_exec_stdio_wait(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_stdio_wait(params)
        return {**result, "stderr_tail": result["stderr_tail"].strip()}


@redteam("b5_stdio_working_dir_ignored", "SDP1-081 SDP1-023 (section 5.7: SpawnSpec working_dir)",
         "exec/stdio_open ignores spec.working_dir: the process always starts in the workspace root")
class StdioWorkingDirIgnored(HostPlugin):
    def m_exec_stdio_open(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        if isinstance(spec, dict):
            spec = {k: v for k, v in spec.items() if k != "working_dir"}
        return super().m_exec_stdio_open({**params, "spec": spec})


@redteam("b5_pty_size_u8", "SDP1-023 (section 5.8: size rows/cols are u16)",
         "PTY sizes are packed as bytes: rows and cols above 255 wrap modulo 256 (cols 300 becomes 44), at open "
         "and on resize")
class PtySizeU8(HostPlugin):
    def m_pty_open(self, params: dict[str, Any]) -> Any:
        result = super().m_pty_open(params)
        size = params["options"]["size"]
        with self._interactive_lock:
            session = self._ptys.get(params["pty_id"])
        if session is not None and session.master >= 0:
            _set_size(session.master, size["rows"] % 256, size["cols"] % 256)
        return result

    def m_pty_resize(self, params: dict[str, Any]) -> Any:
        size = params["size"]
        return super().m_pty_resize({**params, "size": {"rows": size["rows"] % 256, "cols": size["cols"] % 256}})


@redteam("b5_logs_unknown_sandbox_ok", "SDP1-045 SDP1-079",
         "logs/follow of an unknown sandbox id ends at once with {} (an empty log) instead of failing not_found")
class LogsUnknownSandboxOk(HostPlugin):
    def m_logs_follow(self, params: dict[str, Any]) -> Any:
        try:
            self.backend.get(params["sandbox_id"])
        except BackendError:
            return None
        return super().m_logs_follow(params)


@redteam("b5_stream_cancel_cancels_all", "SDP1-080",
         "stream/cancel ends every active log follow of the connection, not just the one with that stream_id")
class StreamCancelCancelsAll(HostPlugin):
    def m_stream_cancel(self, params: dict[str, Any]) -> Any:
        result = super().m_stream_cancel(params)
        with self._interactive_lock:
            for stream in self._streams.values():
                if stream.following:
                    stream.cancelled.set()
        return result


# ================================================================================================
# events (4)
# ================================================================================================


class _QuietSource(EventSource):
    quiet: frozenset[tuple[str, str]] = frozenset()

    def operation(self, route: dict[str, Any] | None, action: str, subject: dict[str, Any]) -> Operation:
        if (action, subject.get("type")) in self.quiet:
            route = None
        return super().operation(route, action, subject)


class _NoSetLabelsEvents(_QuietSource):
    quiet = frozenset({("set_labels", "sandbox")})


@redteam("b5_set_labels_no_events", "SDP1-111 SDP1-114",
         "sandbox/set_labels never emits operation events, even when the request carries events (labels are "
         "treated as metadata, not an operation)")
class SetLabelsNoEvents(_EventsPlugin):
    event_source_class = _NoSetLabelsEvents


class _NoSnapshotDeleteEvents(_QuietSource):
    quiet = frozenset({("delete", "snapshot")})


@redteam("b5_snapshot_delete_no_events", "SDP1-111 SDP1-114",
         "snapshot/delete with events emits nothing (only sandbox deletes are evented)")
class SnapshotDeleteNoEvents(_EventsPlugin):
    event_source_class = _NoSnapshotDeleteEvents


@redteam("b5_sequence_gaps_unrouted", "SDP1-113",
         "event sequence numbers are reserved for every evented operation (started + terminal) whether or not it "
         "asked for events, so the routed feed has gaps")
class SequenceGapsUnrouted(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        action, subject_type = EVENT_ACTIONS.get(method, (None, "sandbox"))
        if action and isinstance(params, dict):
            route = params.get("events") if isinstance(params.get("events"), dict) else None
            if route is None and subject_type == "sandbox" and method not in HANDLE_METHODS:
                route = self._handle_routes.get(str(params.get("sandbox_id")))
            if route is None:
                with self.events._lock:
                    self.events._sequence += 2
        return super().dispatch(method, params)


class _RouteOperationIds(EventSource):
    def operation(self, route: dict[str, Any] | None, action: str, subject: dict[str, Any]) -> Operation:
        op = Operation.__new__(Operation)
        op.source, op.route, op.action, op.subject = self, route, action, subject
        op.operation_id = (uuid.uuid5(uuid.NAMESPACE_URL, route["route_id"]).hex if route else uuid.uuid4().hex)
        op.started = time.monotonic()
        op._emit({"type": "operation_started", "action": action})
        return op


@redteam("b5_operation_id_per_route", "SDP1-114",
         "operation_id is derived from the route_id, so every operation reported on one route (a handle's create "
         "and its later stop/delete) shares one operation_id")
class OperationIdPerRoute(_EventsPlugin):
    event_source_class = _RouteOperationIds


# ================================================================================================
# snapshots (4)
# ================================================================================================


@redteam("b5_snapshot_state_ready", "SDP1-040",
         "SnapshotStatus.state is 'ready' (the volume vocabulary) instead of 'active' for a usable snapshot")
class SnapshotStateReady(HostPlugin):
    def snapshot_status(self, record: dict[str, Any]) -> dict[str, Any]:
        status = super().snapshot_status(record)
        if status["state"] == "active":
            status["state"] = "ready"
        return status


@redteam("b5_snapshot_region_ignored", "SDP1-090 SDP1-051",
         "snapshot/create from a sandbox ignores a requested region instead of rejecting it invalid_spec (a "
         "snapshot of a sandbox inherits it); sandbox_kind and resources are still checked")
class SnapshotRegionIgnored(HostPlugin):
    def m_snapshot_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        if isinstance(spec, dict):
            spec = {k: v for k, v in spec.items() if k != "region"}
        return super().m_snapshot_create({**params, "spec": spec})


class _KeepRecordBackend(HostBackend):
    def delete_snapshot(self, snapshot_id: str) -> None:
        if SNAPSHOT_ID.fullmatch(snapshot_id):
            shutil.rmtree(self._snapshot_dir(snapshot_id) / "files", ignore_errors=True)  # record.json stays


@redteam("b5_snapshot_delete_keeps_record", "SDP1-089 SDP1-023",
         "snapshot/delete removes the snapshot's files but not its record, so the deleted snapshot is still "
         "listed and snapshot/get still reports it active")
class SnapshotDeleteKeepsRecord(_BackendPlugin):
    backend_class = _KeepRecordBackend


class _NamedSnapshotBackend(HostBackend):
    def _snapshot_dir(self, snapshot_id: str):
        if SNAPSHOT_ID.fullmatch(snapshot_id):
            return super()._snapshot_dir(snapshot_id)
        if not snapshot_id or "/" in snapshot_id or snapshot_id in (".", "..", "\x00"):
            raise not_found("snapshot", snapshot_id)
        return self.root / "_snapshots" / snapshot_id

    def create_snapshot(self, sandbox: HostSandbox, name: str | None) -> dict[str, Any]:
        if not name:
            return super().create_snapshot(sandbox, name)
        directory = self._snapshot_dir(name)  # a named snapshot's id is its name
        shutil.copytree(sandbox.workspace, directory / "files", symlinks=True)
        size = sum(p.stat().st_size for p in (directory / "files").rglob("*") if p.is_file() and not p.is_symlink())
        record = {"id": name, "name": name, "state": "active", "source": sandbox.id, "size_bytes": size,
                  "created_at": time.time()}
        (directory / "record.json").write_text(json.dumps(record))
        return record

    def delete_snapshot(self, snapshot_id: str) -> None:
        try:
            shutil.rmtree(self._snapshot_dir(snapshot_id), ignore_errors=True)
        except BackendError:
            pass


@redteam("b5_snapshot_id_from_name", "SDP1-038",
         "a named snapshot's snapshot_id is its requested name verbatim, so a name with spaces yields an id "
         "containing whitespace")
class SnapshotIdFromName(_BackendPlugin):
    backend_class = _NamedSnapshotBackend
