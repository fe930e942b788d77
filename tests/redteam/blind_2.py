"""Second, independent set of blind red-team mutants (``b2_*``) of the reference v1 host plugin.

Written from the protocol digest and the reference provider only. Each class overrides the smallest
piece of ``HostPlugin`` it can, so that exactly one behaviour differs from the honest plugin.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from conformance.reference.host_backend import HostBackend, invalid_spec, not_found
from conformance.reference.host_events import EventSource, Operation, _duration, _now
from conformance.reference.host_interactive import _decode, _encode, _set_size
from conformance.reference.host_plugin import (
    INVALID_PARAMS,
    HostPlugin,
    application_error,
    b64,
    unsupported,
)
from conformance.reference.sanitize import sanitize
from conformance.reference.stdio_server import RpcFailure
from tests.redteam import redteam
from tests.redteam.seams import EventsPlugin as _EventsPlugin

# ---------------------------------------------------------------- handshake / capabilities (6)


@redteam("b2_second_initialize_caps_change", "SDP1-020",
         "a second initialize on the same connection answers a capability set with exec.cancel flipped to false "
         "(capabilities recomputed from a 'first call only' flag)")
class SecondInitializeCapsChange(HostPlugin):
    _initialized = False

    def m_initialize(self, params: dict[str, Any]) -> Any:
        result = super().m_initialize(params)
        if self._initialized:
            caps = json.loads(json.dumps(result["capabilities"]))
            caps["exec"]["cancel"] = False
            result = {**result, "capabilities": caps}
        self._initialized = True
        return result


@redteam("b2_version_zero_accepted", "SDP1-017",
         "protocol_version 0 is treated as 'not given' (truthiness check) and the handshake succeeds instead of "
         "failing with a version-mismatch error")
class VersionZeroAccepted(HostPlugin):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        if params.get("protocol_version") == 0:
            params = {**params, "protocol_version": 1}
        return super().m_initialize(params)


@redteam("b2_version_mismatch_names_one", "SDP1-017",
         "the version-mismatch error message names only the host's requested version, not the plugin's own")
class VersionMismatchNamesOne(HostPlugin):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        asked = params["protocol_version"]
        if asked != 1:
            raise application_error("invalid_spec", f"invalid spec: protocol_version: unsupported version {asked}",
                                    {"field": "protocol_version", "reason": f"unsupported version {asked}"})
        return super().m_initialize(params)


@redteam("b2_initialize_rejects_unknown_fields", "SDP1-034",
         "initialize params are decoded strictly (deny unknown fields): an extra member next to protocol_version "
         "is answered -32600 instead of being ignored")
class InitializeRejectsUnknownFields(HostPlugin):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        extra = sorted(set(params) - {"protocol_version"})
        if extra:
            raise RpcFailure(INVALID_PARAMS, f"invalid params for initialize: unknown field `{extra[0]}`")
        return super().m_initialize(params)


@redteam("b2_resize_unsupported_names_fork", "SDP1-024",
         "sandbox/resize (undeclared) fails unsupported but detail.capability says lifecycle.fork (copy-paste "
         "in the gate table); every other gated method names its own capability")
class ResizeUnsupportedNamesFork(HostPlugin):
    def unsupported(self, method: str, capability: str) -> RpcFailure:
        if method == "sandbox/resize":
            capability = "lifecycle.fork"
        return super().unsupported(method, capability)


@redteam("b2_activate_method_not_found", "SDP1-029",
         "snapshot/activate and snapshot/deactivate (snapshots non-null, snapshots.activation false) answer "
         "-32601 instead of unsupported snapshots.activation")
class ActivateMethodNotFound(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        if method in ("snapshot/activate", "snapshot/deactivate"):
            raise self.unknown_method(method)
        return super().dispatch(method, params)


# ---------------------------------------------------------------- envelope / ids / errors (6)


@redteam("b2_large_id_wrapped", "SDP1-009",
         "request ids above 2^31-1 are echoed through a signed 32-bit field: the response id wraps negative")
class LargeIdWrapped(HostPlugin):
    @staticmethod
    def _wrap(request_id: Any) -> Any:
        if isinstance(request_id, int) and request_id > 0x7FFFFFFF:
            return ((request_id + 2**31) % 2**32) - 2**31
        return request_id

    def respond(self, request_id: Any, result: Any) -> None:
        super().respond(self._wrap(request_id), result)

    def respond_error(self, request_id: Any, failure: RpcFailure) -> None:
        super().respond_error(self._wrap(request_id), failure)


@redteam("b2_id_zero_as_notification", "SDP1-009",
         "a request with id 0 is taken for a notification (falsy id check) and never answered")
class IdZeroAsNotification(HostPlugin):
    def handle_line(self, raw: bytes) -> bool:
        try:
            message = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            message = None
        if isinstance(message, dict) and "method" in message and message.get("id") == 0 \
                and not isinstance(message.get("id"), bool):
            return True
        return super().handle_line(raw)


@redteam("b2_whitespace_line_malformed", "SDP1-004",
         "only a bare LF line counts as blank: a line of spaces or a CRLF line is answered with a -32600 "
         "malformed-message error")
class WhitespaceLineMalformed(HostPlugin):
    def accept_line(self, raw: bytes) -> bool:
        return raw != b"\n"


@redteam("b2_unknown_method_in_known_group", "SDP1-014",
         "an unknown method whose group is known (sandbox/…, exec/…, fs/…) is answered -32600 'invalid params' "
         "instead of -32601")
class UnknownMethodInKnownGroup(HostPlugin):
    def unknown_method(self, method: str) -> RpcFailure:
        if method.split("/", 1)[0] in ("sandbox", "exec", "fs"):
            return RpcFailure(INVALID_PARAMS, f"invalid params for {method}: unknown variant")
        return super().unknown_method(method)


@redteam("b2_missing_field_32602", "SDP1-042",
         "params missing a required field are answered with JSON-RPC's -32602 instead of the protocol's -32600")
class MissingField32602(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        try:
            return super().dispatch(method, params)
        except RpcFailure as failure:
            if failure.code == INVALID_PARAMS and failure.message.startswith("invalid params"):
                raise RpcFailure(-32602, failure.message, failure.data) from None
            raise


@redteam("b2_invalid_state_retryable", "SDP1-043",
         "invalid_state errors (e.g. exec in a stopped sandbox) carry report.retryable:true; only timeout, "
         "rate_limited, transport (and provider's own flag) may be retryable")
class InvalidStateRetryable(HostPlugin):
    def backend_failure(self, method: str, error: Any) -> RpcFailure:
        return application_error(error.kind, error.message, error.detail, retryable=error.kind == "invalid_state")


# ---------------------------------------------------------------- lifecycle (6)


@redteam("b2_delete_twice_not_found", "SDP1-059",
         "deleting a sandbox that is already deleted fails not_found (only never-seen ids succeed)")
class DeleteTwiceNotFound(HostPlugin):
    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend._sandboxes.get(params["sandbox_id"])
        if sandbox is not None and sandbox.state == "deleted":
            raise not_found("sandbox", params["sandbox_id"])
        return super().m_sandbox_delete(params)


@redteam("b2_undelete_missing_capabilities", "SDP1-061",
         "sandbox/undelete returns a HandleInfo without its capabilities member (built from status only)")
class UndeleteMissingCapabilities(HostPlugin):
    def m_sandbox_undelete(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_undelete(params)
        info.pop("capabilities", None)
        return info


@redteam("b2_fork_gate_before_options", "SDP1-062",
         "sandbox/fork checks the capability gate before the options, so include_memory:false is answered "
         "unsupported lifecycle.fork instead of invalid_spec include_memory")
class ForkGateBeforeOptions(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        if method == "sandbox/fork" and not self.declares("lifecycle.fork"):
            raise self.unsupported(method, "lifecycle.fork")
        return super().dispatch(method, params)


@redteam("b2_checkpoint_unsupported", "SDP1-065",
         "the reserved sandbox/checkpoint and sandbox/restore_checkpoint answer -32000 unsupported "
         "lifecycle.checkpoint instead of -32601")
class CheckpointUnsupported(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        if method in ("sandbox/checkpoint", "sandbox/restore_checkpoint"):
            raise unsupported("lifecycle.checkpoint")
        return super().dispatch(method, params)


@redteam("b2_sandbox_kind_substituted", "SDP1-052",
         "a requested sandbox_kind is silently dropped: create succeeds and the status reports sandbox_kind null")
class SandboxKindSubstituted(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        super().validate_spec({k: v for k, v in spec.items() if k != "sandbox_kind"})


@redteam("b2_set_labels_merges", "SDP1-023",
         "sandbox/set_labels (lifecycle.labels declared) merges into the existing labels instead of replacing "
         "them: a label left out is still reported by describe/list")
class SetLabelsMerges(HostPlugin):
    def m_sandbox_set_labels(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        self.backend.set_labels(sandbox, {**sandbox.labels, **params["labels"]})
        return None


# ---------------------------------------------------------------- exec/run (6)


@redteam("b2_exit_code_signed_byte", "SDP1-072",
         "exit codes above 127 are read as a signed byte: exit 255 is reported as exit_code -1, exit 200 as -56")
class ExitCodeSignedByte(HostPlugin):
    def exec_result(self, run: Any) -> dict[str, Any]:
        result = super().exec_result(run)
        if isinstance(result["exit_code"], int) and result["exit_code"] > 127:
            result["exit_code"] -= 256
        return result


@redteam("b2_stdin_truncated_pipe_buffer", "SDP1-075",
         "stdin_b64 is written with one non-blocking write: anything beyond the 64 KiB pipe buffer is lost "
         "before EOF")
class StdinTruncatedPipeBuffer(HostPlugin):
    def decode_stdin(self, spec: dict[str, Any]) -> bytes | None:
        data = super().decode_stdin(spec)
        return data[:65536] if data is not None else None


@redteam("b2_run_timeout_as_error", "SDP1-074",
         "exec/run whose timeout_ms elapses fails with a -32000 timeout error instead of resolving with "
         "termination timed_out (exec/stream is right)")
class RunTimeoutAsError(HostPlugin):
    def m_exec_run(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_run(params)
        if result["termination"] == "timed_out":
            elapsed = result["duration_ms"] / 1000
            raise application_error("timeout", f"exec timed out after {elapsed}s",
                                    {"operation": "exec", "elapsed": _duration(elapsed)}, retryable=True)
        return result


class _BashEnvBackend(HostBackend):
    def environment(self, sandbox: Any, spec_env: Mapping[str, str]) -> dict[str, str]:
        env = super().environment(sandbox, spec_env)
        if "BASH_ENV" in spec_env:
            env["BASH_ENV"] = spec_env["BASH_ENV"]
        return env


@redteam("b2_bash_env_from_spec_kept", "SDP1-067",
         "BASH_ENV is stripped from the plugin's own environment but a BASH_ENV sent in spec.env reaches bash")
class BashEnvFromSpecKept(HostPlugin):
    def make_backend(self) -> HostBackend:
        return _BashEnvBackend(environ=self.environ)


@redteam("b2_run_stderr_not_sanitized", "SDP1-070",
         "exec/run applies output_sanitization to stdout only; stderr comes back raw (exec/stream is right)")
class RunStderrNotSanitized(HostPlugin):
    def m_exec_run(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        mode = spec.get("output_sanitization") or "raw"
        run = self.run_spec(params["sandbox_id"], {**spec, "output_sanitization": "raw"})
        run.stdout = sanitize(run.stdout, mode)
        return self.exec_result(run)


class _PipefailBackend(HostBackend):
    def start_process(self, sandbox: Any, command: str, env: Mapping[str, str], working_dir: str | None,
                      stdin_piped: bool, argv: list[str] | None) -> Any:
        if argv is None:
            command = "set -o pipefail\n" + command
        return super().start_process(sandbox, command, env, working_dir, stdin_piped, argv)


@redteam("b2_exec_pipefail", "SDP1-066",
         "commands run with pipefail set (a 'safer shell' prelude): `false | true` exits 1 instead of 0")
class ExecPipefail(HostPlugin):
    def make_backend(self) -> HostBackend:
        return _PipefailBackend(environ=self.environ)


# ---------------------------------------------------------------- exec/stream (6)


class _PerExecOutputHook(HostPlugin):
    """Routes one exec's exec/output notifications through a hook (keyed by exec_id, so concurrent
    streams never see each other's hook)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._output_hooks: dict[str, Any] = {}

    def notify(self, method: str, params: Any) -> None:
        hook = None
        if method == "exec/output" and isinstance(params, dict):
            hook = getattr(self, "_output_hooks", {}).get(params.get("exec_id"))
        if hook is not None:
            hook(params)
        else:
            super().notify(method, params)

    def send_output(self, params: Any) -> None:
        HostPlugin.notify(self, "exec/output", params)


@redteam("b2_stream_last_chunk_late", "SDP1-100",
         "exec/stream holds back each stdout chunk until the next one arrives; the last chunk is flushed by a "
         "timer, after the exec/stream response")
class StreamLastChunkLate(_PerExecOutputHook):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        exec_id = params["exec_id"]
        pending: list[dict[str, Any]] = []

        def hook(payload: dict[str, Any]) -> None:
            if payload.get("stream") != "stdout":
                self.send_output(payload)
                return
            if pending:
                self.send_output(pending.pop())
            pending.append(payload)

        self._output_hooks[exec_id] = hook
        try:
            result = super().m_exec_stream(params)
        finally:
            self._output_hooks.pop(exec_id, None)
        if pending:
            threading.Timer(0.05, self.send_output, args=(pending.pop(),)).start()
        return result


@redteam("b2_limit_stops_notifications", "SDP1-105",
         "with retained_output_limit set, exec/output notifications stop once a stream has emitted `limit` "
         "bytes: the limit bounds the live stream, not only the buffered copy")
class LimitStopsNotifications(_PerExecOutputHook):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        limit = params.get("retained_output_limit")
        if limit is None:
            return super().m_exec_stream(params)
        exec_id = params["exec_id"]
        sent: dict[str, int] = {}

        def hook(payload: dict[str, Any]) -> None:
            data = base64.b64decode(payload["data_b64"])
            room = limit - sent.get(payload["stream"], 0)
            if room <= 0:
                return
            data = data[:room]
            sent[payload["stream"]] = sent.get(payload["stream"], 0) + len(data)
            self.send_output({**payload, "data_b64": b64(data)})

        self._output_hooks[exec_id] = hook
        try:
            return super().m_exec_stream(params)
        finally:
            self._output_hooks.pop(exec_id, None)


@redteam("b2_odd_limit_accounting", "SDP1-106",
         "an odd retained_output_limit keeps limit//2 head + limit//2 tail bytes (one too few) while "
         "omitted_bytes is computed as observed - limit: retained + omitted == observed - 1")
class OddLimitAccounting(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_stream(params)
        limit = params.get("retained_output_limit")
        if limit is None or limit % 2 == 0:
            return result
        for stream in ("stdout", "stderr"):
            stats = result[f"{stream}_capture"]
            if stats["observed_bytes"] > limit:
                kept = base64.b64decode(result["result"][f"{stream}_b64"])
                kept = kept[: limit // 2] + kept[limit // 2 + 1:]
                result["result"][f"{stream}_b64"] = b64(kept)
                stats["retained_bytes"] = len(kept)
                stats["omitted_bytes"] = stats["observed_bytes"] - limit
        return result


@redteam("b2_cancel_unknown_error", "SDP1-110",
         "exec/cancel for an exec_id that is unknown or already finished fails invalid_spec exec_id instead of "
         "succeeding as a no-op")
class CancelUnknownError(HostPlugin):
    def m_exec_cancel(self, params: dict[str, Any]) -> Any:
        with self._execs_lock:
            known = params["exec_id"] in self._execs
        if not known:
            raise invalid_spec("exec_id", "no running exec with this id")
        return super().m_exec_cancel(params)


@redteam("b2_truncated_when_omitted", "SDP1-107",
         "capture stats set truncated:true whenever omitted_bytes > 0 (a retained_output_limit was hit), though "
         "no byte was lost beyond the accounting")
class TruncatedWhenOmitted(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_stream(params)
        for stream in ("stdout", "stderr"):
            stats = result[f"{stream}_capture"]
            stats["truncated"] = stats["truncated"] or stats["omitted_bytes"] > 0
        return result


@redteam("b2_stream_notifications_unsanitized", "SDP1-070",
         "exec/stream sanitizes only the buffered result: exec/output notifications carry the raw bytes, escape "
         "sequences included, when output_sanitization is strip_ansi/strip_all")
class StreamNotificationsUnsanitized(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        mode = spec.get("output_sanitization") or "raw"
        if mode == "raw":
            return super().m_exec_stream(params)
        result = super().m_exec_stream({**params, "spec": {**spec, "output_sanitization": "raw"}})
        for stream in ("stdout", "stderr"):
            clean = sanitize(base64.b64decode(result["result"][f"{stream}_b64"]), mode)
            result["result"][f"{stream}_b64"] = b64(clean)
            if params.get("retained_output_limit") is None:
                result[f"{stream}_capture"].update(observed_bytes=len(clean), retained_bytes=len(clean),
                                                   omitted_bytes=0)
        return result


# ---------------------------------------------------------------- files (6)


@redteam("b2_read_past_eof_invalid", "SDP1-083",
         "fs/read with an offset beyond the end of the file fails invalid_spec offset instead of returning "
         "empty content (an offset exactly at EOF is still right)")
class ReadPastEofInvalid(HostPlugin):
    def m_fs_read(self, params: dict[str, Any]) -> Any:
        path = self._path(params)
        offset = params.get("offset") or 0
        if path.is_file() and offset > path.stat().st_size:
            raise invalid_spec("offset", "offset is past the end of the file")
        return super().m_fs_read(params)


@redteam("b2_read_length_zero_whole", "SDP1-083",
         "fs/read length:0 is taken as 'not given' (truthiness) and returns the rest of the file instead of "
         "nothing")
class ReadLengthZeroWhole(HostPlugin):
    def m_fs_read(self, params: dict[str, Any]) -> Any:
        if params.get("length") == 0:
            params = {**params, "length": None}
        return super().m_fs_read(params)


@redteam("b2_append_missing_file_io", "SDP1-084",
         "fs/write append:true to a file that does not exist fails io (opened for update, not append-create)")
class AppendMissingFileIo(HostPlugin):
    def m_fs_write(self, params: dict[str, Any]) -> Any:
        if params.get("append") and not self._path(params).exists():
            from conformance.reference.host_backend import BackendError
            raise BackendError("io", "write: No such file or directory", io_context="write")
        return super().m_fs_write(params)


@redteam("b2_append_no_parents", "SDP1-082",
         "fs/write creates missing parent directories only when append is false: an appending write under a "
         "missing directory fails io")
class AppendNoParents(HostPlugin):
    def m_fs_write(self, params: dict[str, Any]) -> Any:
        if params.get("append") and not self._path(params).parent.is_dir():
            from conformance.reference.host_backend import BackendError
            raise BackendError("io", "write: No such file or directory", io_context="write")
        return super().m_fs_write(params)


@redteam("b2_set_permissions_octal_digits", "SDP1-086",
         "fs/set_permissions reads the numeric mode's decimal digits as octal (mode 420 becomes 0o420, 493 "
         "fails): mode is not taken as the numeric POSIX value")
class SetPermissionsOctalDigits(HostPlugin):
    def m_fs_set_permissions(self, params: dict[str, Any]) -> Any:
        return super().m_fs_set_permissions({**params, "mode": int(str(params["mode"]), 8)})


@redteam("b2_exists_relative_cwd", "SDP1-081",
         "fs/exists resolves a relative path against the plugin's own working directory, not the sandbox's")
class ExistsRelativeCwd(HostPlugin):
    def m_fs_exists(self, params: dict[str, Any]) -> Any:
        self.backend.get(params["sandbox_id"])
        path = Path(params["path"])
        if params["path"] and not path.is_absolute():
            path = Path(os.getcwd()) / path
        return {"exists": os.path.lexists(path)}


# ---------------------------------------------------------------- interactive processes and PTY (6)


@redteam("b2_stdio_duplicate_id_replaces", "SDP1-076",
         "exec/stdio_open with a process_id already in use silently replaces the old process instead of "
         "rejecting the duplicate")
class StdioDuplicateIdReplaces(HostPlugin):
    def m_exec_stdio_open(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            self._processes.pop(params["process_id"], None)
        return super().m_exec_stdio_open(params)


@redteam("b2_pty_resize_swapped", "SDP1-023",
         "pty/resize (pty.resize declared) passes cols as rows and rows as cols to the terminal; pty/open's "
         "initial size is right")
class PtyResizeSwapped(HostPlugin):
    def m_pty_resize(self, params: dict[str, Any]) -> Any:
        session = self._pty(params)
        _set_size(session.master, params["size"]["cols"], params["size"]["rows"])
        return None


@redteam("b2_stdio_input_holds_lock", "SDP1-077",
         "exec/stdio_input writes while holding the interactive table lock: an input larger than the pipe "
         "buffer to a process that is not reading blocks every other stdio/pty call")
class StdioInputHoldsLock(HostPlugin):
    def m_exec_stdio_input(self, params: dict[str, Any]) -> Any:
        process = self._process(params)
        data = _decode(params)
        with self._interactive_lock:
            try:
                process.proc.stdin.write(data)
                process.proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass
        return None


@redteam("b2_pty_output_sanitized", "SDP1-071",
         "pty/output bytes go through strip_ansi: escape sequences the terminal program writes are removed; "
         "PTY traffic must stay raw")
class PtyOutputSanitized(HostPlugin):
    def m_pty_output(self, params: dict[str, Any]) -> Any:
        result = super().m_pty_output(params)
        if result["data_b64"] is not None:
            result["data_b64"] = _encode(sanitize(base64.b64decode(result["data_b64"]), "strip_ansi"))
        return result


@redteam("b2_stdio_wait_terminated_enum", "SDP1-073",
         "exec/stdio_wait of a process ended by exec/stdio_terminate reports termination 'terminated', which "
         "is not a Termination value")
class StdioWaitTerminatedEnum(HostPlugin):
    def m_exec_stdio_wait(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_stdio_wait(params)
        if result["termination"] == "killed":
            result["termination"] = "terminated"
        return result


@redteam("b2_stdio_output_lossy_utf8", "SDP1-071",
         "exec/stdio_output chunks are decoded as UTF-8 with replacement and re-encoded: invalid UTF-8 bytes "
         "become U+FFFD instead of crossing raw")
class StdioOutputLossyUtf8(HostPlugin):
    def m_exec_stdio_output(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_stdio_output(params)
        if result["data_b64"] is not None:
            text = base64.b64decode(result["data_b64"]).decode("utf-8", errors="replace")
            result["data_b64"] = _encode(text.encode("utf-8"))
        return result


# ---------------------------------------------------------------- logs (3)


class _ProvisionFollow(HostPlugin):
    """The honest logs/follow bookkeeping (duplicate ids, pre-cancelled ids) around a changed provision send."""

    def send_provision(self, stream: Any, stream_id: str, lines: list[str]) -> None:
        raise NotImplementedError

    def m_logs_follow(self, params: dict[str, Any]) -> Any:
        if params.get("source") != "provision":
            return super().m_logs_follow(params)
        sandbox = self.backend.get(params["sandbox_id"])
        stream_id = params["stream_id"]
        from conformance.reference.host_interactive import LogStream
        with self._interactive_lock:
            stream = self._streams.get(stream_id)
            if stream is not None and stream.following:
                raise invalid_spec("stream_id", "duplicate stream id")
            if stream is None:
                stream = self._streams[stream_id] = LogStream()
            stream.following = True
        try:
            self.send_provision(stream, stream_id, list(sandbox.provision_log))
        finally:
            with self._interactive_lock:
                self._streams.pop(stream_id, None)
        return None

    def _line(self, stream_id: str, line: str) -> None:
        self.notify("logs/output", {"stream_id": stream_id, "data_b64": _encode(line.encode() + b"\n")})


@redteam("b2_logs_output_after_response", "SDP1-079",
         "logs/follow of the provision log answers {} at once and sends the logs/output notifications from a "
         "background thread, after the response")
class LogsOutputAfterResponse(_ProvisionFollow):
    def send_provision(self, stream: Any, stream_id: str, lines: list[str]) -> None:
        if stream.cancelled.is_set():
            return

        def send() -> None:
            time.sleep(0.05)
            for line in lines:
                self._line(stream_id, line)

        threading.Thread(target=send, daemon=True).start()


@redteam("b2_logs_cancel_ignored_active", "SDP1-080",
         "stream/cancel only pre-cancels ids not yet followed; a follow already running (the entrypoint log) is "
         "never signalled and its logs/follow never ends")
class LogsCancelIgnoredActive(HostPlugin):
    def m_stream_cancel(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            stream = self._streams.get(params["stream_id"])
            if stream is not None and stream.following:
                return None
        return super().m_stream_cancel(params)


@redteam("b2_logs_last_line_dropped", "SDP1-079",
         "logs/follow of the provision log skips the final line (off-by-one range); the earlier lines arrive")
class LogsLastLineDropped(_ProvisionFollow):
    def send_provision(self, stream: Any, stream_id: str, lines: list[str]) -> None:
        for line in lines[: len(lines) - 1]:
            if stream.cancelled.is_set():
                break
            self._line(stream_id, line)


# ---------------------------------------------------------------- events (6)


class _FailedReusesSequence(EventSource):
    def emit(self, route: dict[str, Any], subject: dict[str, Any], operation_id: str, body: dict[str, Any]) -> None:
        with self._lock:
            if body.get("type") != "operation_failed":
                self._sequence += 1
            event: dict[str, Any] = {
                "id": {"source_id": self.source_id, "sequence": self._sequence},
                "occurred_at": _now(), "provider": self.provider_kind, "subject": subject,
                "operation_id": operation_id, **body,
            }
            if route.get("correlation_id") is not None:
                event["correlation_id"] = route["correlation_id"]
            self._notify("host/event", {"route_id": route["route_id"], "event": event})


@redteam("b2_event_failed_reuses_sequence", "SDP1-113",
         "an operation_failed event does not advance the sequence: it repeats its operation_started's number")
class EventFailedReusesSequence(_EventsPlugin):
    event_source_class = _FailedReusesSequence


class _FailedDropsCorrelation(EventSource):
    def emit(self, route: dict[str, Any], subject: dict[str, Any], operation_id: str, body: dict[str, Any]) -> None:
        if body.get("type") == "operation_failed":
            route = {k: v for k, v in route.items() if k != "correlation_id"}
        super().emit(route, subject, operation_id, body)


@redteam("b2_event_failed_no_correlation", "SDP1-057",
         "operation_failed events omit the request's correlation_id (started/completed carry it)")
class EventFailedNoCorrelation(_EventsPlugin):
    event_source_class = _FailedDropsCorrelation


class _LateDeleteOperation(Operation):
    def completed(self, subject: dict[str, Any] | None = None) -> None:
        if self.action == "delete":
            threading.Timer(0.05, Operation.completed, args=(self, subject)).start()
        else:
            super().completed(subject)


class _LateDeleteSource(EventSource):
    def operation(self, route: dict[str, Any] | None, action: str, subject: dict[str, Any]) -> Operation:
        return _LateDeleteOperation(self, route, action, subject)


@redteam("b2_event_delete_completed_late", "SDP1-115",
         "sandbox/delete's operation_completed is emitted from a completion callback after the delete response; "
         "other operations order terminal event before response")
class EventDeleteCompletedLate(_EventsPlugin):
    event_source_class = _LateDeleteSource


@redteam("b2_event_create_completed_no_id", "SDP1-116",
         "the terminal event of sandbox/create keeps the name-only subject: the provider-assigned id is never "
         "added")
class EventCreateCompletedNoId(HostPlugin):
    def event_subject(self, subject_type: str, params: dict[str, Any], result: Any = None) -> dict[str, Any]:
        if result is not None and isinstance(params.get("spec"), dict):
            result = None
        return super().event_subject(subject_type, params, result)


@redteam("b2_event_delete_unknown_silent", "SDP1-114",
         "sandbox/delete of an unknown or already-deleted id succeeds without any events although the request "
         "asked for them (early return before the operation is opened)")
class EventDeleteUnknownSilent(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        if method == "sandbox/delete" and isinstance(params, dict):
            sandbox = self.backend._sandboxes.get(str(params.get("sandbox_id")))
            if sandbox is None or sandbox.state == "deleted":
                return self.m_sandbox_delete(params)
        return super().dispatch(method, params)


class _LowercaseRoute(EventSource):
    def emit(self, route: dict[str, Any], subject: dict[str, Any], operation_id: str, body: dict[str, Any]) -> None:
        super().emit({**route, "route_id": str(route["route_id"]).lower()}, subject, operation_id, body)


@redteam("b2_event_route_id_lowercased", "SDP1-118",
         "host/event's route_id is normalised to lower case: a route_id with capitals is not echoed verbatim")
class EventRouteIdLowercased(_EventsPlugin):
    event_source_class = _LowercaseRoute


# ---------------------------------------------------------------- shutdown / EOF (3)


@redteam("b2_shutdown_keeps_reading", "SDP1-096",
         "shutdown is answered but the plugin keeps reading and serving; it exits only when stdin ends")
class ShutdownKeepsReading(HostPlugin):
    def m_shutdown(self, params: dict[str, Any]) -> Any:
        return None


@redteam("b2_shutdown_waits_running_exec", "SDP1-096",
         "on shutdown the running execs are drained instead of cancelled: with a long exec/stream in flight "
         "the plugin waits (up to 10 s) for it before exiting")
class ShutdownWaitsRunningExec(HostPlugin):
    def on_stop(self) -> None:
        # "graceful": let running execs finish (up to 10 s) instead of cancelling them
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            with self._execs_lock:
                if not self._execs:
                    break
            time.sleep(0.05)
        super().on_stop()


@redteam("b2_eof_leaves_interactive", "SDP1-097",
         "at stdin EOF (no shutdown) the plugin waits up to 10 s for live stdio processes and PTY shells to end "
         "on their own before killing them, so it does not exit promptly; shutdown is right")
class EofLeavesInteractive(HostPlugin):
    _shutdown_asked = False

    def m_shutdown(self, params: dict[str, Any]) -> Any:
        self._shutdown_asked = True
        return super().m_shutdown(params)

    def on_stop(self) -> None:
        if not self._shutdown_asked:
            # at EOF, wait (up to 10 s) for stdio processes and PTY shells to end by themselves
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:
                with self._interactive_lock:
                    procs = [p.proc for p in list(self._processes.values()) + list(self._ptys.values())
                             if p is not None and p.proc is not None]
                if all(proc.poll() is not None for proc in procs):
                    break
                time.sleep(0.05)
        super().on_stop()
