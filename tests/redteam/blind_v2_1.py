"""First blind red-team set for protocol VERSION 2 (``v2b1_*``): single-fault mutants of the reference v2
host plugin (``HostPluginV2``).

Written from the protocol digest (its v2 marks, section 7 items 127-145, the Errata) and upstream's v2
protocol text, and from the reference plugin's sources only. Each class overrides the smallest piece of
``HostPluginV2`` -- or of its backend (``make_backend``), its channel class (``channel_class``), its stdio
process class (``stdio_process_class``) or its event delivery (``event_delivery``) -- so that exactly one
behaviour differs from the honest plugin, and that behaviour is a violation of v2 (never a difference an
upstream reader tolerates).

Areas: the data channel as the plugin writes it (open, token, frames, eof, open_ack), the host's frames as
the plugin reads them, file transfers, exec (argv, env, stops, timeout, stdin, honesty flags, backpressure),
the handshake, transport budgets, event delivery, stdio/PTY/logs, shutdown.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import select
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from conformance import __version__
from conformance.reference import data_channel
from conformance.reference.data_channel import (
    EOF,
    HEADER,
    KIND_NAMES,
    MAX_FRAME_BYTES,
    OPEN,
    STDERR,
    STDIN,
    STDOUT,
    DataTransport,
    PluginChannel,
    transport_error,
)
from conformance.reference.host_backend import (
    TERM_GRACE_S,
    BackendError,
    HostBackend,
    HostSandbox,
    invalid_spec,
)
from conformance.reference.host_fs import _io
from conformance.reference.host_fs_v2 import _file_error
from conformance.reference.host_interactive import STDERR_TAIL
from conformance.reference.host_interactive_v2 import ChannelStdioProcess
from conformance.reference.host_plugin import HostPlugin
from conformance.reference.host_plugin_v2 import (
    PROTOCOL_VERSION,
    RESERVED_METHODS,
    EventDelivery,
    ExecSpecV2,
    ExecStops,
    HostBackendV2,
    HostPluginV2,
    ProvisionReportingEvents,
    _kill_group,
)
from conformance.reference.stdio_server import StdioJsonRpcServer
from conformance.reference.v2_limits import invalid_params, limit_exceeded, optional_count, overloaded
from tests.redteam import redteam

# ================================================================================================
# seams of this set (the v1 seams in tests/redteam/seams.py wrap HostPlugin, not HostPluginV2)
# ================================================================================================


class _BackendPluginV2(HostPluginV2):
    """A v2 plugin over a mutated backend (``backend_class``)."""

    backend_class: type[HostBackendV2] = HostBackendV2

    def make_backend(self) -> HostBackend:
        return self.backend_class(environ=self.environ)


class _DeliveryPluginV2(HostPluginV2):
    """A v2 plugin whose events go through ``delivery_class``."""

    delivery_class: type[EventDelivery] = EventDelivery

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.event_delivery = self.delivery_class(self.write_message, self.limits.event_queue_messages,
                                                  self.limits.event_queue_bytes)
        self.events = ProvisionReportingEvents(self.provider_kind, self.event_delivery.offer)


def _raw_frames(channel: PluginChannel, kind: int, data: bytes) -> None:
    """Write frames straight to the socket, past ``send_frame``'s rules (what a mutant's own write path does)."""
    with channel._write_lock:
        for start in range(0, len(data), MAX_FRAME_BYTES):
            chunk = data[start:start + MAX_FRAME_BYTES]
            channel.sock.sendall(HEADER.pack(kind, len(chunk)) + chunk)


def _open_on(plugin: HostPluginV2, transport: DataTransport, request: tuple[int, str], accepts_input: bool,
             channel_class: type[PluginChannel]) -> PluginChannel:
    """``HostPluginV2.open_channel`` against an explicit transport and channel class."""
    if not plugin._opens.try_acquire():
        raise overloaded("pending_opens")
    try:
        channel = data_channel.open_channel(
            transport, *request, accepts_input=accepts_input, open_timeout_s=plugin.limits.open_timeout_s,
            progress_timeout_s=plugin.limits.output_progress_timeout_s, channel_class=channel_class)
    finally:
        plugin._opens.release()
    with plugin._channels_lock:
        plugin._channels.add(channel)
    return channel


# ================================================================================================
# the data channel as the plugin writes it (12)
# ================================================================================================


@redteam("v2b1_eof_after_response", "§7-129 (v2 §2.1: eof before the response)",
         "the channel's eof is sent by a release task that runs after the operation's response was written, so "
         "every result (exec/stream, fs/read, logs/follow) reaches the host ahead of the eof of its bytes")
class EofAfterResponse(HostPluginV2):
    @contextmanager
    def serving(self, channel: PluginChannel) -> Iterator[PluginChannel]:
        try:
            yield channel
            violation = channel.settled_violation()
            if violation is not None:
                raise violation
        finally:
            def release_later() -> None:
                time.sleep(0.5)  # "after the reply is flushed"
                try:
                    channel.finish()
                except BackendError:
                    pass
                self.release_channel(channel)

            threading.Thread(target=release_later, daemon=True).start()


class _PrimedChannel(PluginChannel):
    def send_frame(self, kind: int, payload: bytes) -> None:
        if kind == OPEN and not getattr(self, "_primed", False):
            self._primed = True
            super().send_frame(STDOUT, b"")  # an empty data frame "to prime the connection"
        super().send_frame(kind, payload)


@redteam("v2b1_data_before_open", "§7-130 (v2 §2.1: the open frame is the first frame)",
         "every channel connection starts with an empty stdout frame (a 'priming' write) before the open frame, "
         "so the open is not the first frame and the host must close the connection")
class DataBeforeOpen(HostPluginV2):
    channel_class = _PrimedChannel


class _LazyChannel:
    """A channel that connects to the host on its first use (the first frame written or read)."""

    def __init__(self, plugin: HostPluginV2, request: tuple[int, str], accepts_input: bool) -> None:
        self._plugin, self._request, self._accepts_input = plugin, request, accepts_input
        self._real: PluginChannel | None = None
        self._deferred_pump: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def _connect(self) -> PluginChannel:
        with self._lock:
            if self._real is None:
                self._real = HostPluginV2.open_channel(self._plugin, self._request, self._accepts_input)
                if self._deferred_pump is not None:
                    args, kwargs = self._deferred_pump
                    self._real.pump_input(*args, **kwargs)
            return self._real

    def pump_input(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            if self._real is None:
                self._deferred_pump = (args, kwargs)
                return None
        return self._real.pump_input(*args, **kwargs)

    @property
    def violation(self) -> BackendError | None:
        return None if self._real is None else self._real.violation

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connect(), name)


@redteam("v2b1_open_after_work_started", "§7-129 (v2 §2.1: open the channel before starting the work)",
         "data channels are connected lazily, on the first frame written or read: exec/stream starts the command "
         "first and sends the open frame only when the first output is ready")
class OpenAfterWorkStarted(HostPluginV2):
    def open_channel(self, request: tuple[int, str], accepts_input: bool) -> Any:
        if self.transport is None:
            raise transport_error("a data channel was requested before initialize")
        return _LazyChannel(self, request, accepts_input)


@redteam("v2b1_stale_token", "§7-130 (v2 §2.1: the open carries the exact one-use token)",
         "the token of the connection's first channel is cached like a session key and sent in the open frame "
         "of every later channel, so the second and later channels never authenticate")
class StaleToken(HostPluginV2):
    def channel_request(self, method: str, params: dict[str, Any]) -> tuple[int, str]:
        channel_id, token = super().channel_request(method, params)
        with self._channels_lock:
            if not hasattr(self, "_session_token"):
                self._session_token = token
            return channel_id, self._session_token


@redteam("v2b1_oversized_read_frames", "§7-131 (v2 §2.1: frames at most max_frame_bytes; senders split)",
         "fs/read reads the requested range in one piece and writes it as a single stdout frame ('the length "
         "field has 32 bits'), so a file over 64 KiB crosses in a frame larger than 65,536 bytes")
class OversizedReadFrames(HostPluginV2):
    def send_file(self, channel: PluginChannel, path: Path, display_path: str, offset: int,
                  length: int | None) -> None:
        try:
            with path.open("rb") as handle:
                handle.seek(offset)
                data = handle.read() if length is None else handle.read(length)
        except OSError as exc:
            raise _file_error(display_path, "read", exc) from None
        if data:
            try:
                with channel._write_lock:
                    channel.sock.sendall(HEADER.pack(STDOUT, len(data)) + data)
            except OSError as exc:
                raise transport_error(f"writing data frame: {exc}") from None


@redteam("v2b1_exit_status_frame", "§7-132 §7-131 (v2 §2.1: only open/stdout/stderr/stdin/eof kinds exist)",
         "exec/stream sends an extra frame of kind 5 carrying the exit status as JSON just before its eof (a "
         "'trailer' frame), a kind byte the protocol does not define")
class ExitStatusFrame(HostPluginV2):
    def stream_exec(self, sandbox: HostSandbox, spec: ExecSpecV2, channel: PluginChannel, stops: ExecStops,
                    wants_stdin: bool) -> Any:
        run = super().stream_exec(sandbox, spec, channel, stops, wants_stdin)
        channel.send_frame(5, json.dumps({"exit_code": run.exit_code, "termination": run.termination}).encode())
        return run


@redteam("v2b1_double_eof", "§7-131 (v2 §2.1: each side sends at most one eof)",
         "exec/stream writes an eof frame itself when the command's output ends, and the channel's own finish "
         "then writes a second eof")
class DoubleEof(HostPluginV2):
    def stream_exec(self, sandbox: HostSandbox, spec: ExecSpecV2, channel: PluginChannel, stops: ExecStops,
                    wants_stdin: bool) -> Any:
        run = super().stream_exec(sandbox, spec, channel, stops, wants_stdin)
        channel.send_frame(EOF, b"")  # "the output is complete"
        return run


class _StatusEofChannel(PluginChannel):
    def finish(self) -> None:
        if self.finished:
            return
        self.send_frame(EOF, b"\x00")  # a status byte: 0 = complete
        self.finished = True
        self._finished.set()


@redteam("v2b1_eof_with_payload", "§7-131 (v2 §2.1: an eof frame has an empty payload)",
         "the plugin's eof frame carries a one-byte completion status (0x00) instead of an empty payload")
class EofWithPayload(HostPluginV2):
    channel_class = _StatusEofChannel


@redteam("v2b1_stderr_after_eof", "§7-131 §7-129 (v2 §2.1/§9: nothing after eof; every output frame before it)",
         "exec/stream coalesces stderr in a buffer that is flushed when the channel closes, i.e. after the eof, "
         "so the command's stderr arrives as frames after the plugin's eof")
class StderrAfterEof(HostPluginV2):
    def stream_exec(self, sandbox: HostSandbox, spec: ExecSpecV2, channel: PluginChannel, stops: ExecStops,
                    wants_stdin: bool) -> Any:
        held = bytearray()
        live_send, live_finish = channel.send, channel.finish

        def send(kind: int, data: bytes) -> None:
            if kind == STDERR:
                held.extend(data)
            else:
                live_send(kind, data)

        def finish() -> None:
            already = channel.finished
            live_finish()
            if not already and held:
                try:
                    _raw_frames(channel, STDERR, bytes(held))
                except OSError:
                    pass
                held.clear()

        channel.send, channel.finish = send, finish  # type: ignore[method-assign]
        return super().stream_exec(sandbox, spec, channel, stops, wants_stdin)


class _HalfCloseChannel(PluginChannel):
    def finish(self) -> None:
        """The end of data is the socket's end: half-close instead of an eof frame."""
        if self.finished:
            return
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            raise transport_error(f"closing data channel: {exc}") from None
        self.finished = True
        self._finished.set()


@redteam("v2b1_close_without_eof", "§7-131 (v2 §2.1: a connection closed before its eof is incomplete)",
         "the plugin signals the end of its data by half-closing the socket instead of sending an eof frame, "
         "while the control response reports success: every transfer looks incomplete to the host")
class CloseWithoutEof(HostPluginV2):
    channel_class = _HalfCloseChannel


class _AckClaimingChannel(PluginChannel):
    def send_frame(self, kind: int, payload: bytes) -> None:
        if kind == OPEN and payload:
            payload = json.dumps({**json.loads(payload), "acknowledge": True}, separators=(",", ":")).encode()
        super().send_frame(kind, payload)


@redteam("v2b1_ack_not_awaited", "§7-133 (v2 §2.1: with open_ack, wait for the host's empty open before data)",
         "with open_ack offered the open frame says acknowledge:true, but the plugin never waits for (or reads) "
         "the host's acknowledgement: data frames go out before it, and the acknowledgement is then misread as "
         "an unexpected frame")
class AckNotAwaited(HostPluginV2):
    def open_channel(self, request: tuple[int, str], accepts_input: bool) -> PluginChannel:
        if self.transport is None or not self.transport.open_ack:
            return super().open_channel(request, accepts_input)
        return _open_on(self, dataclasses.replace(self.transport, open_ack=False), request, accepts_input,
                        _AckClaimingChannel)


@redteam("v2b1_ack_always_requested", "§7-133 (v2 §2.1: open_ack defaults to false; acknowledge only when offered)",
         "the plugin always sets acknowledge:true and waits for the host's acknowledgement, even when the host "
         "did not offer open_ack: against such a host every channel waits out the 10 s open timeout and fails")
class AckAlwaysRequested(HostPluginV2):
    def open_channel(self, request: tuple[int, str], accepts_input: bool) -> PluginChannel:
        if self.transport is None:
            return super().open_channel(request, accepts_input)
        return _open_on(self, dataclasses.replace(self.transport, open_ack=True), request, accepts_input,
                        self.channel_class)


# ================================================================================================
# the host's frames as the plugin reads them (3)
# ================================================================================================


class _LateFramesIgnoredChannel(PluginChannel):
    def next_input(self) -> bytes | None:
        if self.host_eof:
            while True:  # "late frames after the host's eof are ignored"
                frame = self.receive_frame()
                if frame is None:
                    self.peer_closed = True
                    return None
        return super().next_input()


@redteam("v2b1_frames_after_host_eof_ignored", "§7-131 §7-132 (v2 §2.1: nothing after eof; it must fail the operation)",
         "frames the host sends after its eof are silently read and discarded, so an fs/write whose host kept "
         "writing after its eof answers success instead of failing invalid_spec field frame")
class FramesAfterHostEofIgnored(HostPluginV2):
    channel_class = _LateFramesIgnoredChannel


class _AnyDataKindChannel(PluginChannel):
    def receive_frame(self) -> tuple[int, bytes] | None:
        frame = super().receive_frame()
        if frame is not None and frame[0] in (STDOUT, STDERR):
            return STDIN, frame[1]  # "a data frame is a data frame"
        return frame


@redteam("v2b1_stdout_frame_becomes_input", "§7-132 (v2 §2.1: an unexpected frame kind must not become data)",
         "on a write channel any data kind from the host (stdout and stderr as well as stdin) is taken as input, "
         "so a host's stdout frame becomes file content instead of failing the operation")
class StdoutFrameBecomesInput(HostPluginV2):
    channel_class = _AnyDataKindChannel


class _UncappedReadChannel(PluginChannel):
    def check_header(self, kind: int, length: int) -> None:
        if kind not in KIND_NAMES:
            raise invalid_spec("frame", f"unknown kind {kind}")
        if kind == EOF and length:
            raise invalid_spec("frame", "EOF must have an empty payload")
        # the length is trusted: the host negotiated the limit, so it will keep to it


@redteam("v2b1_inbound_frame_limit_unchecked", "§7-131 (v2 §2.1: reject a frame over the limit before allocating)",
         "the plugin trusts the length of the host's frames and reads (allocates) payloads of any size: a 70,000 "
         "byte stdin frame is accepted as file content instead of being rejected")
class InboundFrameLimitUnchecked(HostPluginV2):
    channel_class = _UncappedReadChannel


# ================================================================================================
# file transfers (5)
# ================================================================================================


@redteam("v2b1_content_length_excess_trimmed", "§7-136 (v2 §8.5: too many bytes -> invalid_spec content_length)",
         "fs/write trims content beyond content_length and answers success, instead of failing invalid_spec "
         "field content_length when the host sent more bytes than it declared")
class ContentLengthExcessTrimmed(HostPluginV2):
    def receive_exactly(self, channel: PluginChannel, length: int, output: BinaryIO) -> None:
        remaining = length
        while (data := channel.next_input()) is not None:
            data = data[:remaining]
            remaining -= len(data)
            try:
                output.write(data)
            except OSError as exc:
                raise _io("write", exc) from None
        if remaining:
            raise BackendError("io", "reading file stream: file ended before its declared length",
                               io_context="reading file stream")
        channel.pump_input()


@redteam("v2b1_content_length_short_accepted", "§7-136 (v2 §8.5: too few bytes -> io error)",
         "fs/write with content_length accepts a transfer that ended early (fewer bytes than declared) and "
         "answers success with the short file, instead of failing with an io error")
class ContentLengthShortAccepted(HostPluginV2):
    def receive_exactly(self, channel: PluginChannel, length: int, output: BinaryIO) -> None:
        remaining = length
        while (data := channel.next_input()) is not None:
            if len(data) > remaining:
                raise invalid_spec("content_length", "file exceeds its declared length")
            remaining -= len(data)
            try:
                output.write(data)
            except OSError as exc:
                raise _io("write", exc) from None
        channel.pump_input()


@redteam("v2b1_read_missing_is_io", "§7-135 (v2 §8.5: a missing file is not_found resource file)",
         "fs/read of a missing file fails with report.kind io ('read: No such file or directory', the v1-era "
         "mapping) instead of not_found with resource file")
class ReadMissingIsIo(HostPluginV2):
    def send_file(self, channel: PluginChannel, path: Path, display_path: str, offset: int,
                  length: int | None) -> None:
        try:
            super().send_file(channel, path, display_path, offset, length)
        except BackendError as error:
            if error.kind == "not_found":
                raise BackendError("io", "read: No such file or directory", io_context="read") from None
            raise


@redteam("v2b1_write_no_parents", "§7-136 (v2 §8.5: fs/write creates missing parent directories)",
         "fs/write opens the destination without creating its missing parent directories, so a write to a new "
         "subdirectory fails with an io error")
class WriteNoParents(HostPluginV2):
    def destination(self, path: Path, mode: str) -> Any:
        try:
            return path.open(mode)
        except OSError as exc:
            raise _io("write", exc) from None


@redteam("v2b1_append_limit_unchecked", "v2 §6.2 (buffered_value_bytes bounds an append payload -> limit_exceeded)",
         "an append declaring a content_length beyond buffered_value_bytes (16 MiB) is not refused up front with "
         "limit_exceeded buffered_value_bytes: the plugin opens the channel and sets out to buffer it")
class AppendLimitUnchecked(HostPluginV2):
    def m_fs_write(self, params: dict[str, Any]) -> Any:
        request = self.channel_request("fs/write", params)
        path = self._path(params)
        append = params.get("append") or False
        if not isinstance(append, bool):
            raise invalid_params("fs/write", "append must be a boolean")
        content_length = optional_count("fs/write", params, "content_length")
        buffered = append or content_length is None
        channel = self.open_channel(request, accepts_input=True)
        with self.serving(channel):
            if buffered:
                if content_length is None:
                    content = self.collect_input(channel, self.limits.buffered_value_bytes)
                else:
                    held = io.BytesIO()
                    self.receive_exactly(channel, content_length, held)
                    content = held.getvalue()
                with self.destination(path, "ab" if append else "wb") as handle:
                    handle.write(content)
            else:
                with self.destination(path, "wb") as handle:
                    self.receive_exactly(channel, content_length, handle)  # type: ignore[arg-type]
        return None


# ================================================================================================
# exec (15)
# ================================================================================================


class _ShellJoinBackend(HostBackendV2):
    def start_process(self, sandbox: HostSandbox, command: str, env: Any, working_dir: str | None,
                      stdin_piped: bool, argv: list[str] | None) -> subprocess.Popen[bytes]:
        if argv is not None:
            command, argv = " ".join(argv), None  # "the backend takes a command line"
        return super().start_process(sandbox, command, env, working_dir, stdin_piped, argv)


@redteam("v2b1_argv_through_shell", "v2 §8.4 (argv with execvp semantics, no shell: nothing split or expanded)",
         "exec/stream joins program and args with spaces and runs the line with bash -c, so arguments with "
         "spaces are split and $VARS / globs are expanded")
class ArgvThroughShell(_BackendPluginV2):
    backend_class = _ShellJoinBackend


class _StripsBashEnvBackend(HostBackendV2):
    def environment(self, sandbox: HostSandbox, spec_env: Any) -> dict[str, str]:
        return HostBackend.environment(self, sandbox, spec_env)  # v1's rule kept


@redteam("v2b1_bash_env_dropped", "Errata [v2] (v2 §8.4: env reaches the process unchanged, BASH_ENV included)",
         "the v2 backend keeps v1's rule and drops BASH_ENV from the request's env, so a command never sees the "
         "BASH_ENV the host set")
class BashEnvDropped(_BackendPluginV2):
    backend_class = _StripsBashEnvBackend


@redteam("v2b1_duplicate_exec_id_accepted", "v2 §2.5 §9 (duplicate exec_id -> invalid_spec 'duplicate execution id')",
         "a second exec/stream with an exec_id still running is accepted and replaces the first registration "
         "(the first exec can no longer be stopped), instead of failing invalid_spec field exec_id")
class DuplicateExecIdAccepted(HostPluginV2):
    def register_exec(self, exec_id: str, grace_s: float | None) -> ExecStops:
        with self._execs_lock:
            stops = self._execs[exec_id] = ExecStops(grace_s)
        return stops


@redteam("v2b1_stop_kill_as_term", "§7-140 (v2 §9: level kill sends SIGKILL)",
         "exec/stop never looks at level: kill is delivered as a SIGTERM like term, so a command that handles or "
         "ignores SIGTERM is never killed")
class StopKillAsTerm(HostPluginV2):
    def m_exec_stop(self, params: dict[str, Any]) -> Any:
        return super().m_exec_stop({**params, "level": "term"} if params.get("level") == "kill" else params)


class _TermKillsBackend(HostBackendV2):
    def await_exit(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes], cancel: Any,
                   deadline: float | None) -> str:
        stops: ExecStops = cancel
        termination = "exited"
        term_sent = timed_out = own_stopped = killed = False
        kill_at = float("inf")
        while proc.poll() is None:
            now = time.monotonic()
            if not killed:
                if stops.kill.is_set():
                    kill_at, termination = now, "killed"
                elif deadline is not None and now >= deadline and not timed_out:
                    timed_out, termination = True, "timed_out"
                    kill_at = min(kill_at, self._own_stop(proc, stops.grace_s, now))
                elif stops.own_stop.is_set() and not own_stopped:
                    own_stopped = True
                    termination = "cancelled" if termination == "exited" else termination
                    kill_at = min(kill_at, self._own_stop(proc, stops.grace_s, now))
                elif stops.term.is_set() and not term_sent:
                    term_sent = True
                    termination = "cancelled" if termination == "exited" else termination
                    _kill_group(proc)  # "terminate" implemented with SIGKILL
                if now >= kill_at:
                    killed = True
                    _kill_group(proc)
            try:
                proc.wait(timeout=0.02)
            except subprocess.TimeoutExpired:
                pass
        return termination


@redteam("v2b1_term_sends_kill", "§7-140 (v2 §9: term is one SIGTERM to the process group)",
         "exec/stop level term ends the command with SIGKILL (reported as cancelled), so the command never sees "
         "a SIGTERM it could handle")
class TermSendsKill(_BackendPluginV2):
    backend_class = _TermKillsBackend


@redteam("v2b1_term_escalates", "§7-140 (v2 §9: the host owns escalation; term leaves the command running)",
         "exec/stop level term keeps v1's cancel ladder: without stop_grace_ms the plugin sends SIGKILL itself "
         "2 s after the SIGTERM, so a command that survives SIGTERM is killed though the host never sent kill")
class TermEscalates(HostPluginV2):
    def m_exec_stop(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_stop(params)
        if params.get("level") == "term":
            with self._execs_lock:
                stops = self._execs.get(params["exec_id"])
            if stops is not None and stops.grace_s is None:
                timer = threading.Timer(TERM_GRACE_S, stops.request, args=("kill",))
                timer.daemon = True
                timer.start()
        return result


@redteam("v2b1_timeout_ignored", "§7-141 (v2 §9: timeout_ms elapsing kills the command -> timed_out)",
         "timeout_ms is never applied (the spec is read as if timeout were the one-shot's structural 'timeout' "
         "member), so a command past its timeout keeps running and the call never resolves timed_out")
class TimeoutIgnored(HostPluginV2):
    def exec_spec(self, method: str, spec: Any) -> ExecSpecV2:
        parsed = super().exec_spec(method, spec)
        timeout = spec.get("timeout") if isinstance(spec, dict) else None
        seconds = timeout.get("secs") if isinstance(timeout, dict) else None
        return dataclasses.replace(parsed, timeout_s=float(seconds) if isinstance(seconds, int) else None)


@redteam("v2b1_stop_grace_ignored", "§7-141 (v2 §8.4: stop_grace_ms -> TERM, grace, KILL for the plugin's own stops)",
         "stop_grace_ms is parsed but dropped, so a timeout kills outright: the command never gets the SIGTERM "
         "and grace period the spec asked for")
class StopGraceIgnored(HostPluginV2):
    def exec_spec(self, method: str, spec: Any) -> ExecSpecV2:
        return dataclasses.replace(super().exec_spec(method, spec), grace_s=None)


class _LadderOwnStopBackend(HostBackendV2):
    @staticmethod
    def _own_stop(proc: subprocess.Popen[bytes], grace_s: float | None, now: float) -> float:
        return HostBackendV2._own_stop(proc, TERM_GRACE_S if grace_s is None else grace_s, now)


@redteam("v2b1_own_stop_ladder_default", "§7-141 (v2 §9: without stop_grace_ms the plugin's own stops kill outright)",
         "without stop_grace_ms the timeout still runs v1's TERM, 2 s grace, KILL ladder, so the command sees a "
         "SIGTERM (and keeps running through the grace) instead of being killed outright")
class OwnStopLadderDefault(_BackendPluginV2):
    backend_class = _LadderOwnStopBackend


@redteam("v2b1_stops_registered_after_open", "v2 §9 (stop tokens are registered before the channel opens)",
         "exec/stream registers the exec's stops only after its channel was opened and acknowledged, so an "
         "exec/stop sent meanwhile finds no exec, succeeds as a no-op, and the command then runs unstopped")
class StopsRegisteredAfterOpen(HostPluginV2):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        exec_id = params["exec_id"]
        if not isinstance(exec_id, str):
            raise invalid_params("exec/stream", "exec_id must be a string")
        request = self.channel_request("exec/stream", params)
        spec = self.exec_spec("exec/stream", params["spec"])
        wants_stdin = params.get("stdin", False)
        if not isinstance(wants_stdin, bool):
            raise invalid_params("exec/stream", "stdin must be a boolean")
        retained_limit = optional_count("exec/stream", params, "retained_output_limit")
        if retained_limit is not None and retained_limit > self.limits.retained_output_bytes:
            raise limit_exceeded("retained_output_bytes", self.limits.retained_output_bytes)
        sandbox = self.backend.get(params["sandbox_id"])
        channel = self.open_channel(request, accepts_input=wants_stdin)
        try:
            stops = self.register_exec(exec_id, spec.grace_s)
        except BaseException:
            self.abandon_channel(channel)
            raise
        try:
            with self.serving(channel):
                run = self.stream_exec(sandbox, spec, channel, stops, wants_stdin)
        finally:
            with self._execs_lock:
                self._execs.pop(exec_id, None)
        result: dict[str, Any] = {"exit_code": run.exit_code, "termination": run.termination,
                                  "duration_ms": run.duration_ms}
        if run.signal is not None:
            result["signal"] = run.signal
        return {"result": result, "streams_separated": True, "live_streaming": True,
                "stdout_capture": run.stdout_capture, "stderr_capture": run.stderr_capture}


@redteam("v2b1_stdin_stream_buffered", "v2 §9 §5 (exec.stdin_stream declared: stdin frames reach the command live)",
         "exec.stdin_stream is declared but the plugin always collects the host's stdin frames to its eof before "
         "starting the command, so an interactive command sees none of its input until the host closes it")
class StdinStreamBuffered(HostPluginV2):
    def streams_stdin(self) -> bool:
        return False


@redteam("v2b1_result_carries_b64", "§7-128 (v2 §2: no bytes cross the control transport)",
         "the exec/stream result keeps v1's stdout_b64/stderr_b64 fields, filled with a copy of the output, so "
         "the command's bytes cross the control transport as base64 besides the data channel")
class ResultCarriesB64(HostPluginV2):
    def stream_exec(self, sandbox: HostSandbox, spec: ExecSpecV2, channel: PluginChannel, stops: ExecStops,
                    wants_stdin: bool) -> Any:
        copies = {STDOUT: bytearray(), STDERR: bytearray()}
        live_send = channel.send

        def send(kind: int, data: bytes) -> None:
            copies.setdefault(kind, bytearray()).extend(data)
            live_send(kind, data)

        channel.send = send  # type: ignore[method-assign]
        run = super().stream_exec(sandbox, spec, channel, stops, wants_stdin)
        run.stdout, run.stderr = bytes(copies[STDOUT]), bytes(copies[STDERR])
        self._copies = getattr(self, "_copies", {})
        self._copies[threading.get_ident()] = run
        return run

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stream(params)
        run = getattr(self, "_copies", {}).pop(threading.get_ident(), None)
        if run is not None:
            answer["result"]["stdout_b64"] = base64.b64encode(run.stdout).decode("ascii")
            answer["result"]["stderr_b64"] = base64.b64encode(run.stderr).decode("ascii")
        return answer


@redteam("v2b1_replay_claims_live", "v2 §9 (honesty: live_streaming true only if output was delivered while running)",
         "exec/stream collects the command's output and writes it to the channel when the command has ended, "
         "while the result still claims live_streaming: true")
class ReplayClaimsLive(HostPluginV2):
    def stream_exec(self, sandbox: HostSandbox, spec: ExecSpecV2, channel: PluginChannel, stops: ExecStops,
                    wants_stdin: bool) -> Any:
        held: list[tuple[int, bytes]] = []
        live_send = channel.send
        channel.send = lambda kind, data: held.append((kind, bytes(data)))  # type: ignore[method-assign]
        try:
            return super().stream_exec(sandbox, spec, channel, stops, wants_stdin)
        finally:
            channel.send = live_send  # type: ignore[method-assign]
            for kind, data in held:
                live_send(kind, data)


@redteam("v2b1_streams_merged", "v2 §9 (honesty: streams_separated true only if stdout and stderr are distinct)",
         "exec/stream writes the command's stderr as stdout frames (2>&1 in the pump) while the result still "
         "claims streams_separated: true")
class StreamsMerged(HostPluginV2):
    def stream_exec(self, sandbox: HostSandbox, spec: ExecSpecV2, channel: PluginChannel, stops: ExecStops,
                    wants_stdin: bool) -> Any:
        live_send = channel.send
        channel.send = lambda kind, data: live_send(STDOUT, data)  # type: ignore[method-assign]
        return super().stream_exec(sandbox, spec, channel, stops, wants_stdin)


class _DropWhenFullChannel(PluginChannel):
    def send_frame(self, kind: int, payload: bytes) -> None:
        if kind in (STDOUT, STDERR) and not self.finished:
            _, writable, _ = select.select([], [self.sock], [], 0)
            if not writable:
                return  # "never block the command on a slow host": the chunk is dropped
        super().send_frame(kind, payload)


@redteam("v2b1_drops_output_under_backpressure", "§7-108 (v2 §2.1/§9: stall the producer, never drop output)",
         "output frames are written only when the socket is writable at once; while the host is slow to read, "
         "chunks are silently dropped instead of stalling the command")
class DropsOutputUnderBackpressure(HostPluginV2):
    channel_class = _DropWhenFullChannel


# ================================================================================================
# handshake and removed methods (4)
# ================================================================================================


@redteam("v2b1_exec_run_still_served", "v2 §2.5 §13 (exec/run is removed in v2 -> -32601)",
         "the removed v1 method exec/run is still served (with v1's command/stdout_b64 shapes), instead of "
         "being answered -32601 unknown method")
class ExecRunStillServed(HostPluginV2):
    def dispatch(self, method: str, params: Any) -> Any:
        if method == "exec/run":
            return HostPlugin.dispatch(self, method, params)
        return super().dispatch(method, params)


@redteam("v2b1_missing_transport_accepted", "§7-134 (v2 §4: initialize without data_transport is refused)",
         "initialize without data_transport succeeds (the transport is 'optional until a channel is needed') "
         "instead of being refused")
class MissingTransportAccepted(HostPluginV2):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        if params.get("protocol_version") == PROTOCOL_VERSION and params.get("data_transport") is None:
            return {"protocol_version": PROTOCOL_VERSION,
                    "provider": {"kind": self.provider_kind, "version": __version__},
                    "capabilities": self.capabilities}
        return super().m_initialize(params)


@redteam("v2b1_max_frame_unchecked", "§7-131 (v2 §1.4/§2.1: max_frame_bytes other than 65536 refused, never exceeded)",
         "initialize accepts any max_frame_bytes the host announces without refusing it, but the plugin keeps "
         "framing at 65,536 bytes, so a host that announced a smaller limit receives frames over its limit")
class MaxFrameUnchecked(HostPluginV2):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        announced = params.get("data_transport")
        if isinstance(announced, dict) and isinstance(announced.get("max_frame_bytes"), int):
            params = {**params, "data_transport": {**announced, "max_frame_bytes": MAX_FRAME_BYTES}}
        return super().m_initialize(params)


@redteam("v2b1_reinitialize_replaces_transport", "v2 §1.4 (a second initialize keeps the first data_transport)",
         "every initialize replaces the data transport, so a repeated initialize redirects later channels to the "
         "socket it names instead of keeping the first one")
class ReinitializeReplacesTransport(HostPluginV2):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        result = super().m_initialize(params)
        announced = params["data_transport"]
        self.transport = DataTransport(announced["socket_path"], announced["max_frame_bytes"],
                                       bool(announced.get("open_ack") or False))
        return result


# ================================================================================================
# transport budgets (4)
# ================================================================================================


@redteam("v2b1_control_limit_off_by_one", "v2 §6.2 (control_message_bytes 1 MiB includes the newline)",
         "the control reader treats a line that fills its 1 MiB read buffer as too long, so a request of exactly "
         "1,048,576 bytes including its newline ends the connection instead of being served")
class ControlLimitOffByOne(HostPluginV2):
    def lines(self) -> Iterator[bytes]:
        limit = self.limits.control_message_bytes
        while True:
            raw = self.stdin.readline(limit)
            if not raw:
                return
            if len(raw) >= limit:
                self.transport_failed(f"control message limit exceeded ({limit} bytes)")
                return
            if not raw.endswith(b"\n"):
                self.transport_failed("incomplete control message at the end of the input")
                return
            yield raw


@redteam("v2b1_reply_limit_unenforced", "v2 §6.2 (an outbound reply over control_message_bytes -> limit_exceeded)",
         "replies are written whatever their size: a sandbox/list answer over 1 MiB goes out as one huge line "
         "instead of being replaced by limit_exceeded control_message_bytes")
class ReplyLimitUnenforced(HostPluginV2):
    def write_message(self, message: dict[str, Any]) -> None:
        StdioJsonRpcServer.write_message(self, message)


@redteam("v2b1_overloaded_without_not_started", "§7-127 (v2 §2.2: overloaded detail carries not_started:true)",
         "admission refusals are answered overloaded with detail.limit only: not_started is left out, so the host "
         "cannot know the operation never began")
class OverloadedWithoutNotStarted(HostPluginV2):
    def backend_failure(self, method: str, error: BackendError) -> Any:
        if error.kind == "overloaded":
            error = BackendError("overloaded", error.message, limit=error.detail.get("limit"))
        return super().backend_failure(method, error)


@redteam("v2b1_reserved_unbounded", "§7-127 (v2 §2.2: reserved_requests is a finite budget, 64)",
         "reserved methods (stop, cancel, close, health, ...) are admitted without any budget 'so they always get "
         "through', so their outstanding count is unbounded instead of refused overloaded past reserved_requests")
class ReservedUnbounded(HostPluginV2):
    def admit(self, method: str) -> Callable[[], None] | None:
        if method in RESERVED_METHODS:
            return None
        return super().admit(method)


# ================================================================================================
# event delivery (2)
# ================================================================================================


class _SilentOverflowDelivery(EventDelivery):
    def offer(self, method: str, params: Any) -> None:
        with self._ready:
            full = len(self._queue) + self._writing >= self.max_messages
        if full:
            return  # best effort, like early v1: an event that does not fit is dropped
        super().offer(method, params)


@redteam("v2b1_event_failed_never_sent", "§7-145 (v2 §10: a full event queue is signalled with host/event_failed)",
         "when the event queue is full the plugin drops the events that do not fit (early v1's best effort) and "
         "never sends host/event_failed, so the host cannot know its event history is incomplete")
class EventFailedNeverSent(_DeliveryPluginV2):
    delivery_class = _SilentOverflowDelivery


class _RecoveringDelivery(EventDelivery):
    def offer(self, method: str, params: Any) -> None:
        with self._ready:
            if self.failed and not self._queue and not self._writing:
                self.failed = False  # "the queue has drained: deliver again"
        super().offer(method, params)


@redteam("v2b1_events_after_event_failed", "§7-145 (v2 §10: after host/event_failed the subscription has failed)",
         "after an overflow the plugin sends host/event_failed but clears the failure once its queue has drained "
         "and goes on emitting events, instead of emitting no more events on the connection")
class EventsAfterEventFailed(_DeliveryPluginV2):
    delivery_class = _RecoveringDelivery


# ================================================================================================
# stdio, PTY, logs, shutdown (5)
# ================================================================================================


class _HeadKeepingStdio(ChannelStdioProcess):
    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for chunk in iter(lambda: self.proc.stderr.read1(4096), b""):
            room = STDERR_TAIL - self.stderr_size
            if room > 0:  # "the first 8 KiB say what went wrong"
                self.stderr_tail.append(chunk[:room])
                self.stderr_size += len(chunk[:room])


@redteam("v2b1_stderr_tail_keeps_head", "v2 §5.7 (stderr_tail: the newest <= 8 KiB, prefixed '…' when cut)",
         "exec/stdio_wait's stderr_tail keeps the first 8 KiB of stderr and drops the rest, instead of the newest "
         "8 KiB prefixed with '…'")
class StderrTailKeepsHead(HostPluginV2):
    stdio_process_class = _HeadKeepingStdio


@redteam("v2b1_pty_resize_ignored", "v2 §2.5 (pty.resize declared: pty/resize changes the terminal size)",
         "pty/resize checks the pty_id and answers {} without resizing the terminal")
class PtyResizeIgnored(HostPluginV2):
    def m_pty_resize(self, params: dict[str, Any]) -> Any:
        self._pty(params)
        return None


@redteam("v2b1_logs_answered_before_stream", "§7-129 (v2 §8.4: logs/follow answers {} after the stream's eof)",
         "logs/follow is answered as soon as the follow has been started; the log bytes and the eof follow on "
         "the channel after the response")
class LogsAnsweredBeforeStream(HostPluginV2):
    def m_logs_follow(self, params: dict[str, Any]) -> Any:
        self.backend.get(params["sandbox_id"])
        if params["source"] not in ("provision", "entrypoint"):
            raise invalid_params("logs/follow", "source: unknown variant, expected provision or entrypoint")
        self.channel_request("logs/follow", params)

        def follow() -> None:
            try:
                HostPluginV2.m_logs_follow(self, params)
            except Exception as exc:  # noqa: BLE001 - nobody is waiting for it any more
                self.log(f"background follow failed: {exc}")

        threading.Thread(target=follow, daemon=True).start()
        return None


@redteam("v2b1_stream_cancel_ignored", "v2 §2.5 (stream/cancel ends a logs/follow, which then answers)",
         "stream/cancel answers {} but does not cancel anything: a following logs/follow stays open")
class StreamCancelIgnored(HostPluginV2):
    def m_stream_cancel(self, params: dict[str, Any]) -> Any:
        return None


@redteam("v2b1_shutdown_leaves_commands", "§7-139 (v2 §8.10: shutdown cancels active commands)",
         "on shutdown (or stdin EOF) the plugin stops reading and exits but leaves running commands to finish on "
         "their own: an exec in flight keeps running after the plugin is gone")
class ShutdownLeavesCommands(HostPluginV2):
    def on_stop(self) -> None:
        self.stop_interactive()
        with self._channels_lock:
            channels = list(self._channels)
        for channel in channels:
            channel.close()
        self.event_delivery.flush(self.limits.shutdown_timeout_s)
        if not self.backend.persistent:
            shutil.rmtree(self.backend.root, ignore_errors=True)  # the registry goes; the commands are left be

    def m_shutdown(self, params: dict[str, Any]) -> Any:
        self.shutdown_wait_s = 0.5  # do not wait on the commands either
        return super().m_shutdown(params)
