"""Blind mutant set 1: single-fault variants of the reference v1 host plugin.

Written from the protocol digest (section 7 requirement numbers SDP1-NNN) and the reference
provider's source only. Every class overrides the smallest piece it can; everything else is the
honest ``HostPlugin``. Name prefixes give the protocol area:

``hs_`` handshake/capabilities, ``env_`` envelope/ids/errors, ``tr_`` transport (framing,
concurrency), ``lc_`` lifecycle, ``run_`` exec/run, ``stream_`` exec/stream, ``fs_`` filesystem,
``io_`` stdio processes and PTY, ``logs_`` logs, ``ev_`` events, ``sd_`` shutdown/EOF.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import queue
import shutil
import threading
import time
import uuid
from typing import Any

from conformance.reference import host_events
from conformance.reference.host_backend import HostBackend, HostSandbox, invalid_spec, not_found
from conformance.reference.host_interactive import LogStream
from conformance.reference.host_plugin import (
    INVALID_PARAMS,
    PROTOCOL_VERSION,
    HostPlugin,
    application_error,
    b64,
    unsupported,
)
from conformance.reference.sanitize import sanitize
from conformance.reference.stdio_server import RpcFailure
from tests.redteam import redteam


def _stream_result(run: Any, plugin: HostPlugin) -> dict[str, Any]:
    """The honest exec/stream result for ``run``."""
    return {
        "result": plugin.exec_result(run),
        "streams_separated": True,
        "live_streaming": True,
        "stdout_capture": run.stdout_capture,
        "stderr_capture": run.stderr_capture,
    }


class _StreamingPlugin(HostPlugin):
    """The honest exec/stream with its output forwarding as a seam (``make_forward``)."""

    def make_forward(self, exec_id: str):
        def forward(stream: str, chunk: bytes) -> None:
            self.notify("exec/output", {"exec_id": exec_id, "stream": stream, "data_b64": b64(chunk)})

        return forward, (lambda: None)

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        exec_id = params["exec_id"]
        cancel = threading.Event()
        with self._execs_lock:
            self._execs[exec_id] = cancel
        forward, finish = self.make_forward(exec_id)
        try:
            run = self.run_spec(params["sandbox_id"], params["spec"], on_output=forward, cancel=cancel,
                                retain_limit=params.get("retained_output_limit"))
        finally:
            with self._execs_lock:
                self._execs.pop(exec_id, None)
        finish()
        return _stream_result(run, self)


# ================================================================================================
# handshake / capabilities
# ================================================================================================

@redteam("hs_echo_protocol_version", "SDP1-017",
         "initialize echoes whatever protocol_version the host asked for and never reports a mismatch.")
class EchoProtocolVersion(HostPlugin):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        asked = params["protocol_version"]
        result = super().m_initialize({**params, "protocol_version": PROTOCOL_VERSION})
        return {**result, "protocol_version": asked}


@redteam("hs_kind_capitalized", "SDP1-018",
         "provider.kind in the initialize answer is the display name 'Host' instead of the lowercase kind.")
class KindCapitalized(HostPlugin):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        result = super().m_initialize(params)
        return {**result, "provider": {**result["provider"], "kind": "Host"}}


@redteam("hs_missing_provider_version", "SDP1-016",
         "the initialize answer's provider object carries only kind; the build version was left out.")
class MissingProviderVersion(HostPlugin):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        result = super().m_initialize(params)
        return {**result, "provider": {"kind": result["provider"]["kind"]}}


@redteam("hs_caps_change_on_reinitialize", "SDP1-020",
         "capabilities are re-probed on every initialize and the re-probe reports exec.cancel false, so a "
         "second initialize answers a different set.")
class CapsChangeOnReinitialize(HostPlugin):
    _initializations = 0

    def m_initialize(self, params: dict[str, Any]) -> Any:
        result = super().m_initialize(params)
        self._initializations += 1
        if self._initializations > 1:
            capabilities = copy.deepcopy(result["capabilities"])
            capabilities["exec"]["cancel"] = False
            result = {**result, "capabilities": capabilities}
        return result


@redteam("hs_vpn_declared", "SDP1-026",
         "the capability table copied from a VPN-capable provider leaves access.vpn true.")
class VpnDeclared(HostPlugin):
    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["access"]["vpn"] = True
        return capabilities


@redteam("hs_unsupported_names_method", "SDP1-024",
         "an undeclared operation fails unsupported, but detail.capability names the JSON-RPC method "
         "(e.g. 'sandbox/fork') instead of the dotted capability.")
class UnsupportedNamesMethod(HostPlugin):
    def unsupported(self, method: str, capability: str) -> RpcFailure:
        return unsupported(method)


# ================================================================================================
# envelope / ids / errors
# ================================================================================================

@redteam("env_id_as_string", "SDP1-009",
         "responses carry the request id converted to a string ('7' instead of 7).")
class IdAsString(HostPlugin):
    def respond(self, request_id: Any, result: Any) -> None:
        super().respond(str(request_id), result)

    def respond_error(self, request_id: Any, failure: RpcFailure) -> None:
        super().respond_error(str(request_id), failure)


@redteam("env_notification_answered", "SDP1-011",
         "a message without an id is dispatched like a request and answered with \"id\": null.")
class NotificationAnswered(HostPlugin):
    def handle_line(self, raw: bytes) -> bool:
        try:
            message = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return super().handle_line(raw)
        if (isinstance(message, dict) and "jsonrpc" in message and "id" not in message
                and isinstance(message.get("method"), str)):
            threading.Thread(target=self._run, args=(None, message["method"], message.get("params")),
                             daemon=True).start()
            return True
        return super().handle_line(raw)


@redteam("env_unknown_method_invalid_request", "SDP1-014",
         "an unknown method is answered -32600 (invalid request) instead of -32601 (method not found).")
class UnknownMethodInvalidRequest(HostPlugin):
    def unknown_method(self, method: str) -> RpcFailure:
        return RpcFailure(INVALID_PARAMS, f"unknown method {method}")


@redteam("env_bad_params_as_app_error", "SDP1-042",
         "params that do not decode (a missing required key) are answered -32000 invalid_spec instead "
         "of -32600.")
class BadParamsAsAppError(HostPlugin):
    def dispatch(self, method: str, params: Any) -> Any:
        try:
            return super().dispatch(method, params)
        except RpcFailure as failure:
            if failure.code != INVALID_PARAMS:
                raise
            raise application_error("invalid_spec", failure.message,
                                    {"field": "params", "reason": failure.message}) from None


@redteam("env_errors_without_jsonrpc", "SDP1-008",
         "error responses are written as {id, error} without the \"jsonrpc\":\"2.0\" member.")
class ErrorsWithoutJsonrpc(HostPlugin):
    def respond_error(self, request_id: Any, failure: RpcFailure) -> None:
        self.write_message({"id": request_id, "error": self.error_object(failure)})


@redteam("env_not_found_retryable", "SDP1-043",
         "not_found errors are reported retryable:true ('the sandbox may still be provisioning'); the "
         "digest (section 5.12) makes retryable true only for timeout, rate_limited and transport.")
class NotFoundRetryable(HostPlugin):
    def backend_failure(self, method: str, error: Any) -> RpcFailure:
        return application_error(error.kind, error.message, error.detail, retryable=error.kind == "not_found")


# ================================================================================================
# transport: framing and concurrency
# ================================================================================================

@redteam("tr_stdout_debug_line", "SDP1-001",
         "a leftover debug print writes 'exec/run: <command>' to stdout before each exec/run answer.")
class StdoutDebugLine(HostPlugin):
    def m_exec_run(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_run(params)
        with self._write_lock:
            self.stdout.write(f"exec/run: {params['spec']['command']!r} done\n".encode())
            self.stdout.flush()
        return result


class _Everything(frozenset):
    def __contains__(self, item: object) -> bool:
        return True


@redteam("tr_serialized_dispatch", "SDP1-007",
         "every request is handled on the reading thread, so a long exec/stream blocks every later request.")
class SerializedDispatch(HostPlugin):
    inline_methods = _Everything()


@redteam("tr_blank_line_answered", "SDP1-004",
         "blank lines are parsed like messages and answered with a -32600 malformed-message error.")
class BlankLineAnswered(HostPlugin):
    def accept_line(self, raw: bytes) -> bool:
        return True


@redteam("tr_exec_global_lock", "SDP1-109",
         "one lock around the exec path serializes all commands: a second exec waits until the first ends.")
class ExecGlobalLock(HostPlugin):
    _exec_lock = threading.Lock()

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        with self._exec_lock:
            return super().run_spec(sandbox_id, spec, **kwargs)


@redteam("tr_split_long_lines", "SDP1-002 SDP1-003",
         "the writer emits messages in 64 KiB pieces and ends each piece with a newline, so a message "
         "longer than 65536 bytes spans several lines.")
class SplitLongLines(HostPlugin):
    PIECE = 64 * 1024

    def write_message(self, message: dict[str, Any]) -> None:
        body = json.dumps(message, separators=(",", ":")).encode("utf-8")
        pieces = [body[i:i + self.PIECE] for i in range(0, len(body), self.PIECE)] or [b""]
        with self._write_lock:
            try:
                for piece in pieces:
                    self.stdout.write(piece + b"\n")
                self.stdout.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass


# ================================================================================================
# lifecycle
# ================================================================================================

@redteam("lc_delete_twice_not_found", "SDP1-059",
         "deleting an already-deleted sandbox finds its tombstone and answers not_found; only the first "
         "delete (and never-seen ids) succeed.")
class DeleteTwiceNotFound(HostPlugin):
    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        sandbox_id = params["sandbox_id"]
        with self.backend._lock:
            sandbox = self.backend._sandboxes.get(sandbox_id)
        if sandbox is not None and sandbox.state == "deleted":
            raise not_found("sandbox", sandbox_id)
        return super().m_sandbox_delete(params)


@redteam("lc_create_ignores_region", "SDP1-051",
         "a requested region is silently dropped at create instead of being rejected invalid_spec.")
class CreateIgnoresRegion(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        super().validate_spec({k: v for k, v in spec.items() if k != "region"})


class _NamedIdBackend(HostBackend):
    def create(self, name: str | None, labels: Any, env: Any, from_snapshot: str | None = None) -> HostSandbox:
        if not name:
            return super().create(name, labels, env, from_snapshot=from_snapshot)
        sandbox_id = f"host-{name}-{uuid.uuid4().hex[:8]}"
        workspace = self.root / sandbox_id / "workspace"
        if from_snapshot is not None:
            source = self._snapshot_dir(self.find_snapshot(from_snapshot)["id"]) / "files"
            workspace.parent.mkdir(parents=True)
            shutil.copytree(source, workspace, symlinks=True)
        else:
            workspace.mkdir(parents=True)
        sandbox = HostSandbox(sandbox_id, name, dict(labels), dict(env), workspace.resolve())
        sandbox.provision_log = [f"created workspace {sandbox.workspace}", f"sandbox {sandbox_id} is running"]
        with self._lock:
            self._sandboxes[sandbox_id] = sandbox
            self._save(sandbox)
        return sandbox


@redteam("lc_id_from_name", "SDP1-038",
         "the sandbox id is built from the display name unescaped ('host-<name>-<hex>'), so a name with a "
         "space yields an id containing whitespace.")
class IdFromName(HostPlugin):
    def make_backend(self) -> HostBackend:
        return _NamedIdBackend(environ=self.environ)


@redteam("lc_state_capitalized", "SDP1-040",
         "status.state is written in display casing ('Running', 'Stopped') instead of snake_case.")
class StateCapitalized(HostPlugin):
    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        status = super().status(sandbox)
        return {**status, "state": status["state"].capitalize()}


@redteam("lc_undelete_stale_state", "SDP1-061",
         "undelete builds its HandleInfo from the record read before restoring, so it reports state "
         "'deleted' for the restored sandbox.")
class UndeleteStaleState(HostPlugin):
    def m_sandbox_undelete(self, params: dict[str, Any]) -> Any:
        before = self.backend.get(params["sandbox_id"], include_deleted=True)
        status = self.status(before)
        restored = self.backend.undelete(params["sandbox_id"])
        return {**self.handle_info(restored), "status": status}


class _KeyOnlyLabelBackend(HostBackend):
    def list(self, labels: Any = None) -> list[HostSandbox]:
        everything = super().list(None)
        wanted = dict(labels or {})
        return [s for s in everything if all(key in s.labels for key in wanted)]


@redteam("lc_list_label_key_only", "SDP1-023 (section 2.2: sandbox/list label filter = all listed labels)",
         "the sandbox/list label filter checks only that each label key is present, ignoring its value.")
class ListLabelKeyOnly(HostPlugin):
    def make_backend(self) -> HostBackend:
        return _KeyOnlyLabelBackend(environ=self.environ)


# ================================================================================================
# exec/run
# ================================================================================================

@redteam("run_sh_for_buffered", "SDP1-066 SDP1-068",
         "exec/run runs the command with /bin/sh -c (exec/stream still uses bash), so bash syntax fails "
         "in buffered execs.")
class ShForBuffered(HostPlugin):
    def m_exec_run(self, params: dict[str, Any]) -> Any:
        sh = shutil.which("sh", path=self.environ.get("PATH")) or "/bin/sh"
        command = params["spec"]["command"]
        return self.exec_result(self.run_spec(params["sandbox_id"], params["spec"], argv=[sh, "-c", command]))


class _LateBashEnvBackend(HostBackend):
    def environment(self, sandbox: HostSandbox, spec_env: Any) -> dict[str, str]:
        env = super().environment(sandbox, {})  # inherited and sandbox env, BASH_ENV removed
        env.update(spec_env)  # ...but the command's own env is merged after the strip
        return env


@redteam("run_bash_env_from_spec", "SDP1-067",
         "BASH_ENV is stripped from the inherited and sandbox environment but the exec spec's env is "
         "merged after the strip, so a BASH_ENV sent in spec.env reaches bash.")
class BashEnvFromSpec(HostPlugin):
    def make_backend(self) -> HostBackend:
        return _LateBashEnvBackend(environ=self.environ)


class _ShellConventionBackend(HostBackend):
    def exit_status(self, sandbox: HostSandbox, proc: Any) -> tuple[int | None, int | None]:
        code = proc.returncode
        return (code, None) if code >= 0 else (128 - code, None)


@redteam("run_signal_as_exit_code", "SDP1-072",
         "a command killed by signal N is reported the shell way, exit_code 128+N with signal null.")
class SignalAsExitCode(HostPlugin):
    def make_backend(self) -> HostBackend:
        return _ShellConventionBackend(environ=self.environ)


@redteam("run_timeout_error", "SDP1-074",
         "an exec/run that hits timeout_ms is answered with a -32000 'timeout' error instead of a result "
         "with termination timed_out.")
class ExecRunTimeoutError(HostPlugin):
    def m_exec_run(self, params: dict[str, Any]) -> Any:
        run = self.run_spec(params["sandbox_id"], params["spec"])
        if run.termination == "timed_out":
            elapsed = run.duration_ms / 1000
            raise application_error("timeout", f"exec timed out after {elapsed:.3f}s",
                                    {"operation": "exec", "elapsed": {"secs": int(elapsed),
                                                                      "nanos": int((elapsed % 1) * 1e9)}},
                                    retryable=True)
        return self.exec_result(run)


class _StdinLeftOpenBackend(HostBackend):
    def feed_stdin(self, proc: Any, data: bytes) -> None:
        try:
            proc.stdin.write(data)
            proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass


@redteam("run_stdin_not_closed", "SDP1-075",
         "stdin_b64 is written to the command but the pipe is never closed, so a command reading to EOF "
         "hangs until its timeout.")
class StdinNotClosed(HostPlugin):
    def make_backend(self) -> HostBackend:
        return _StdinLeftOpenBackend(environ=self.environ)


@redteam("run_duration_seconds", "SDP1-036",
         "duration_ms carries whole seconds (the Duration's as_secs) instead of milliseconds.")
class DurationSeconds(HostPlugin):
    def exec_result(self, run: Any) -> dict[str, Any]:
        result = super().exec_result(run)
        return {**result, "duration_ms": run.duration_ms // 1000}


# ================================================================================================
# exec/stream
# ================================================================================================

@redteam("stream_last_batch_after_response", "SDP1-100",
         "exec/output goes through a sender that batches every 250 ms and the response is written "
         "without waiting for the last batch, so trailing output arrives after the response.")
class LastBatchAfterResponse(_StreamingPlugin):
    def make_forward(self, exec_id: str):
        pending: queue.Queue[tuple[str, bytes]] = queue.Queue()
        done = threading.Event()

        def sender() -> None:
            while True:
                finished = done.wait(0.25)
                while True:
                    try:
                        stream, chunk = pending.get_nowait()
                    except queue.Empty:
                        break
                    self.notify("exec/output", {"exec_id": exec_id, "stream": stream, "data_b64": b64(chunk)})
                if finished:
                    return

        threading.Thread(target=sender, daemon=True).start()

        def forward(stream: str, chunk: bytes) -> None:
            pending.put((stream, chunk))

        def finish() -> None:
            threading.Timer(0.3, done.set).start()  # flushed "soon": after the response is out

        return forward, finish


@redteam("stream_zero_limit_unbounded", "SDP1-105",
         "retained_output_limit: 0 is treated like an absent limit (`limit or None`), so everything is "
         "retained instead of nothing.")
class ZeroLimitUnbounded(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        return super().m_exec_stream({**params, "retained_output_limit": params.get("retained_output_limit") or None})


@redteam("stream_replay_claims_live", "SDP1-102",
         "exec/stream buffers all output and replays it after the command exits, yet answers "
         "live_streaming: true.")
class ReplayClaimsLive(_StreamingPlugin):
    def make_forward(self, exec_id: str):
        buffered: list[tuple[str, bytes]] = []

        def finish() -> None:
            for stream, chunk in buffered:
                self.notify("exec/output", {"exec_id": exec_id, "stream": stream, "data_b64": b64(chunk)})

        return (lambda stream, chunk: buffered.append((stream, chunk))), finish


@redteam("stream_stderr_as_stdout", "SDP1-103",
         "every exec/output notification is labelled stream 'stdout' (stderr included) while the result "
         "still claims streams_separated: true.")
class StderrAsStdout(_StreamingPlugin):
    def make_forward(self, exec_id: str):
        def forward(stream: str, chunk: bytes) -> None:
            self.notify("exec/output", {"exec_id": exec_id, "stream": "stdout", "data_b64": b64(chunk)})

        return forward, (lambda: None)


@redteam("stream_cancel_unknown_fails", "SDP1-110",
         "exec/cancel for an unknown or already finished exec_id fails invalid_spec 'unknown exec id'.")
class CancelUnknownFails(HostPlugin):
    def m_exec_cancel(self, params: dict[str, Any]) -> Any:
        with self._execs_lock:
            known = params["exec_id"] in self._execs
        if not known:
            raise invalid_spec("exec_id", "unknown exec id")
        return super().m_exec_cancel(params)


@redteam("stream_sanitize_only_result", "SDP1-070",
         "exec/stream applies output_sanitization only to the retained copy in the result; the exec/output "
         "notifications and the capture counts are of the raw bytes.")
class SanitizeOnlyResult(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        mode = spec.get("output_sanitization") or "raw"
        answer = super().m_exec_stream({**params, "spec": {**spec, "output_sanitization": "raw"}})
        if mode != "raw":
            result = answer["result"]
            for key in ("stdout_b64", "stderr_b64"):
                result[key] = b64(sanitize(base64.b64decode(result[key]), mode))
        return answer


# ================================================================================================
# filesystem
# ================================================================================================

@redteam("fs_read_past_eof_error", "SDP1-083",
         "fs/read with an offset at or past the end of a file fails io 'offset beyond end of file' instead "
         "of returning empty content.")
class ReadPastEofError(HostPlugin):
    def m_fs_read(self, params: dict[str, Any]) -> Any:
        offset = params.get("offset") or 0
        path = self._path(params)
        if offset and path.is_file() and offset >= path.stat().st_size:
            raise application_error("io", "read: offset beyond end of file", {"io_context": "read"})
        return super().m_fs_read(params)


@redteam("fs_append_missing_file_fails", "SDP1-084",
         "fs/write with append: true opens the file for update, so appending to a missing file fails "
         "instead of creating it.")
class AppendMissingFileFails(HostPlugin):
    def m_fs_write(self, params: dict[str, Any]) -> Any:
        if params.get("append") and not os.path.lexists(self._path(params)):
            raise application_error("io", "write: No such file or directory", {"io_context": "write"})
        return super().m_fs_write(params)


@redteam("fs_write_no_parents", "SDP1-082",
         "fs/write does not create missing parent directories; writing a/b/c.txt into an empty sandbox "
         "fails io.")
class WriteNoParents(HostPlugin):
    def m_fs_write(self, params: dict[str, Any]) -> Any:
        if not self._path(params).parent.is_dir():
            raise application_error("io", "write: No such file or directory", {"io_context": "write"})
        return super().m_fs_write(params)


@redteam("fs_metadata_kind_dir", "SDP1-086",
         "fs/metadata reports kind 'dir' for directories instead of 'directory'.")
class MetadataKindDir(HostPlugin):
    def m_fs_metadata(self, params: dict[str, Any]) -> Any:
        answer = super().m_fs_metadata(params)
        if answer["metadata"]["kind"] == "directory":
            answer["metadata"]["kind"] = "dir"
        return answer


@redteam("fs_chmod_mode_as_octal_digits", "SDP1-086 SDP1-023",
         "fs/set_permissions reads the numeric mode's decimal digits as octal (420 becomes 0o420), "
         "so 0o644 sent as 420 sets r---w----.")
class ChmodModeAsOctalDigits(HostPlugin):
    def m_fs_set_permissions(self, params: dict[str, Any]) -> Any:
        try:
            mode = int(str(params["mode"]), 8)
        except ValueError:
            raise invalid_spec("mode", f"{params['mode']} is not an octal mode") from None
        return super().m_fs_set_permissions({**params, "mode": mode})


class _RootRelativeBackend(HostBackend):
    def resolve(self, sandbox: HostSandbox, path: str | None) -> Any:
        resolved = super().resolve(sandbox, path)
        if path and not os.path.isabs(path):
            return sandbox.workspace.parent / path
        return resolved


@redteam("fs_relative_to_sandbox_root", "SDP1-081",
         "relative paths resolve against the sandbox's record directory (the workspace's parent) instead "
         "of its working directory.")
class RelativeToSandboxRoot(HostPlugin):
    def make_backend(self) -> HostBackend:
        return _RootRelativeBackend(environ=self.environ)


# ================================================================================================
# stdio processes and PTY
# ================================================================================================

@redteam("io_stdio_eof_empty_string", "SDP1-023 (section 2.4: exec/stdio_output null = EOF)",
         "exec/stdio_output signals end of output with data_b64 \"\" instead of null, so a host polls forever.")
class StdioEofEmptyString(HostPlugin):
    def m_exec_stdio_output(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stdio_output(params)
        return {"data_b64": ""} if answer["data_b64"] is None else answer


@redteam("io_stdio_duplicate_replaces", "SDP1-076",
         "exec/stdio_open with a process_id already in use kills the old process and reuses the id "
         "instead of rejecting the duplicate.")
class StdioDuplicateReplaces(HostPlugin):
    def m_exec_stdio_open(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            old = self._processes.pop(params["process_id"], None)
        if old is not None:
            try:
                os.killpg(old.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
        return super().m_exec_stdio_open(params)


@redteam("io_stdio_close_input_noop", "SDP1-023 (section 2.4: exec/stdio_close_input closes stdin)",
         "exec/stdio_close_input flushes the process's stdin but never closes it, so a reader never sees EOF.")
class StdioCloseInputNoop(HostPlugin):
    def m_exec_stdio_close_input(self, params: dict[str, Any]) -> Any:
        process = self._process(params)
        with process.stdin_lock:
            try:
                process.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass
        return None


@redteam("io_pty_output_blocks_input", "SDP1-077",
         "one per-plugin PTY lock is held during the pty/output long poll, so pty/input waits behind a "
         "pending read.")
class PtyOutputBlocksInput(HostPlugin):
    _pty_lock = threading.Lock()

    def m_pty_output(self, params: dict[str, Any]) -> Any:
        with self._pty_lock:
            return super().m_pty_output(params)

    def m_pty_input(self, params: dict[str, Any]) -> Any:
        with self._pty_lock:
            return super().m_pty_input(params)


@redteam("io_pty_output_strip_ansi", "SDP1-071",
         "pty/output runs terminal bytes through the exec strip_ansi sanitizer, removing escape sequences "
         "from PTY traffic.")
class PtyOutputStripAnsi(HostPlugin):
    def m_pty_output(self, params: dict[str, Any]) -> Any:
        answer = super().m_pty_output(params)
        if answer["data_b64"] is None:
            return answer
        return {"data_b64": b64(sanitize(base64.b64decode(answer["data_b64"]), "strip_ansi"))}


@redteam("io_pty_resize_unsupported", "SDP1-023",
         "pty/resize was never implemented: it fails unsupported 'pty' although pty.resize is declared true.")
class PtyResizeUnsupported(HostPlugin):
    def m_pty_resize(self, params: dict[str, Any]) -> Any:
        self._pty(params)
        raise unsupported("pty")


# ================================================================================================
# logs
# ================================================================================================

@redteam("logs_answer_before_output", "SDP1-079",
         "logs/follow of the provision log answers {} at once and emits the logs/output lines afterwards "
         "from a background thread.")
class LogsAnswerBeforeOutput(HostPlugin):
    def m_logs_follow(self, params: dict[str, Any]) -> Any:
        if params.get("source") != "provision":
            return super().m_logs_follow(params)
        sandbox = self.backend.get(params["sandbox_id"])
        stream_id = params["stream_id"]
        lines = list(sandbox.provision_log)

        def emit() -> None:
            time.sleep(0.1)
            for line in lines:
                self.notify("logs/output", {"stream_id": stream_id, "data_b64": b64(line.encode() + b"\n")})

        threading.Thread(target=emit, daemon=True).start()
        return None


@redteam("logs_cancel_wrong_key", "SDP1-080",
         "stream/cancel records the cancellation under a namespaced key ('logs:<id>'), so it answers {} "
         "but the follow it names never ends.")
class LogsCancelWrongKey(HostPlugin):
    def m_stream_cancel(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            self._streams.setdefault("logs:" + params["stream_id"], LogStream()).cancelled.set()
        return None


@redteam("logs_output_mime_b64", "SDP1-035",
         "logs/output data_b64 is encoded with base64.encodebytes (MIME style), so it carries a newline "
         "after every 76 characters and at the end instead of being plain standard base64.")
class LogsOutputMimeB64(HostPlugin):
    def notify(self, method: str, params: Any) -> None:
        if method == "logs/output":
            params = {**params, "data_b64": base64.encodebytes(base64.b64decode(params["data_b64"])).decode("ascii")}
        super().notify(method, params)


# ================================================================================================
# events
# ================================================================================================

class _EventPlugin(HostPlugin):
    """A plugin whose outgoing host/event notifications pass through ``edit_event``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events._notify = self._event_notify

    def _event_notify(self, method: str, params: Any) -> None:
        params = self.edit_event(copy.deepcopy(params))
        if params is not None:
            self.notify(method, params)

    def edit_event(self, params: dict[str, Any]) -> dict[str, Any] | None:
        return params


@redteam("ev_sequence_from_zero", "SDP1-113",
         "event id.sequence starts at 0 instead of 1.")
class SequenceFromZero(HostPlugin):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events._sequence = -1


@redteam("ev_terminal_after_response", "SDP1-115",
         "terminal events (operation_completed/operation_failed) are handed to a background emitter and "
         "reach the wire after the operation's response.")
class TerminalAfterResponse(_EventPlugin):
    def _event_notify(self, method: str, params: Any) -> None:
        if params["event"]["type"] in ("operation_completed", "operation_failed"):
            threading.Timer(0.2, self.notify, args=(method, params)).start()
        else:
            self.notify(method, params)


@redteam("ev_correlation_only_on_started", "SDP1-057",
         "correlation_id is copied into the operation_started event only; progress and terminal events "
         "lack it.")
class CorrelationOnlyOnStarted(_EventPlugin):
    def edit_event(self, params: dict[str, Any]) -> dict[str, Any] | None:
        if params["event"]["type"] != "operation_started":
            params["event"].pop("correlation_id", None)
        return params


@redteam("ev_route_id_from_correlation", "SDP1-118 SDP1-056",
         "host/event route_id is filled from the request's correlation_id when one is given, instead of "
         "echoing route_id.")
class RouteIdFromCorrelation(_EventPlugin):
    def edit_event(self, params: dict[str, Any]) -> dict[str, Any] | None:
        correlation = params["event"].get("correlation_id")
        if correlation is not None:
            params["route_id"] = correlation
        return params


class _FailedThenCompleted(host_events.Operation):
    def failed(self, report: dict[str, Any]) -> None:
        super().failed(report)
        super().completed()


class _DoubleTerminalSource(host_events.EventSource):
    def operation(self, route: Any, action: str, subject: dict[str, Any]) -> host_events.Operation:
        return _FailedThenCompleted(self, route, action, subject)


@redteam("ev_failed_then_completed", "SDP1-114",
         "a failing operation emits operation_failed and then, from the common exit path, "
         "operation_completed as well.")
class FailedThenCompleted(HostPlugin):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events = _DoubleTerminalSource(self.provider_kind, self.notify)


class _FixedSubjectOperation(host_events.Operation):
    def completed(self, subject: dict[str, Any] | None = None) -> None:
        super().completed(None)  # the subject captured at start is reused


class _FixedSubjectSource(host_events.EventSource):
    def operation(self, route: Any, action: str, subject: dict[str, Any]) -> host_events.Operation:
        return _FixedSubjectOperation(self, route, action, subject)


@redteam("ev_create_terminal_without_id", "SDP1-116",
         "the create's terminal event reuses the name-only subject captured at start, so it never carries "
         "the id the provider assigned.")
class CreateTerminalWithoutId(HostPlugin):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events = _FixedSubjectSource(self.provider_kind, self.notify)


# ================================================================================================
# shutdown / EOF
# ================================================================================================

@redteam("sd_shutdown_keeps_reading", "SDP1-096",
         "shutdown is answered but the server keeps reading and serving; it exits only when stdin closes.")
class ShutdownKeepsReading(HostPlugin):
    def m_shutdown(self, params: dict[str, Any]) -> Any:
        return None


@redteam("sd_shutdown_exits_unanswered", "SDP1-096",
         "shutdown cleans up and calls os._exit(0) before its answer is written.")
class ShutdownExitsUnanswered(HostPlugin):
    def m_shutdown(self, params: dict[str, Any]) -> Any:
        self.on_stop()
        self.exit_now(0)


@redteam("sd_eof_waits_for_running_exec", "SDP1-097",
         "on stdin EOF the plugin first waits for every in-flight request to finish and only then cancels "
         "sessions, so a running exec keeps it alive until the command ends.")
class EofWaitsForRunningExec(HostPlugin):
    def on_stop(self) -> None:
        with self._inflight_lock:
            threads = list(self._inflight)
        for thread in threads:
            thread.join()
        super().on_stop()


@redteam("sd_eof_lingering_thread", "SDP1-097 SDP1-096",
         "a non-daemon housekeeping thread started at launch is never told to stop, so the process lingers "
         "(about a minute) after stdin EOF or shutdown.")
class EofLingeringThread(HostPlugin):
    def on_start(self) -> None:
        super().on_start()
        never_set = threading.Event()

        def housekeeping() -> None:
            for _ in range(60):
                if never_set.wait(1.0):
                    return

        threading.Thread(target=housekeeping, name="housekeeping", daemon=False).start()
