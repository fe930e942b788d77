"""The reference sandbox-driver v2 plugin: the v1 reference's host-directory sandboxes, with every byte
stream on a data channel (``data_channel.py``) and the transport budgets of v2 §2.2.

Run it as ``sandbox-conformance-host-plugin --dialect sandbox-driver-v2``; ``host_plugin.serve(argv,
...)`` runs it inside another process. What it shares with v1 it inherits (handles, lifecycle, snapshots,
the metadata filesystem calls, events); what v2 changed is here and in ``host_fs_v2.py`` and
``host_interactive_v2.py``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from conformance import __version__
from conformance.reference import data_channel
from conformance.reference.data_channel import STDERR, STDOUT, DataTransport, PluginChannel
from conformance.reference.host_backend import (
    DRAIN_GRACE_S,
    BackendError,
    HostBackend,
    HostSandbox,
    _signal_group,
    invalid_spec,
)
from conformance.reference.host_events import EventSource, Operation
from conformance.reference.host_fs_v2 import ChannelFilesystemMethods
from conformance.reference.host_interactive_v2 import ChannelInteractiveMethods
from conformance.reference.host_plugin import HostPlugin, application_error
from conformance.reference.sanitize import MODES as SANITIZATION_MODES
from conformance.reference.stdio_server import RpcFailure
from conformance.reference.v2_limits import (
    Budget,
    TransportLimits,
    invalid_params,
    limit_exceeded,
    optional_count,
    overloaded,
)

PROTOCOL_VERSION = 2
SHUTDOWN_EOF_WAIT_S = 1.0  # how long a closing connection lets killed work send its channels' eof

# v1 methods that version 2 does not have: answered as unknown, whatever the v1 mixins still define.
REMOVED_METHODS = frozenset({
    "exec/run", "exec/cancel", "exec/stdio_input", "exec/stdio_output", "exec/stdio_close_input",
    "pty/input", "pty/output",
})

# Admitted from their own budget, so a stop, cancel or close still gets through when ordinary requests
# have filled theirs (v2 §2.2).
RESERVED_METHODS = frozenset({
    "exec/stop", "exec/stdio_terminate", "pty/close", "stream/cancel", "shutdown", "sandbox/stop",
    "sandbox/delete", "access/preview_release", "transport/diagnostics", "provider/health",
})

# Methods that move bytes over a data channel: each holds an `active_io` slot.
IO_METHODS = frozenset({
    "exec/stream", "one_shot/run", "exec/stdio_open", "pty/open", "logs/follow", "fs/read", "fs/write",
    "snapshot/build_logs",
})

# Version-2 methods an undeclared capability makes `unsupported` (beside v1's GATED_METHODS).
V2_GATED_METHODS = {
    "exec/stop": "exec.stop",
    "one_shot/run": "one_shot",
    "sandbox/environment": "exec.environment",
    "git/clone": "git",
    "access/preview_release": "access.preview_urls",
    "snapshot/build_logs": "snapshots.build_logs",  # v1's gate names the snapshot service, which is declared
}


# -- exec ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecSpecV2:
    """The v2 exec spec: an argument vector run with execvp semantics, no shell."""

    argv: list[str]
    env: dict[str, str]
    working_dir: str | None
    timeout_s: float | None  # None: unbounded
    grace_s: float | None  # the TERM→grace→KILL ladder when set; raw stops when not
    sanitization: str


class ExecStops:
    """The stop requests of one exec, registered under its ``exec_id`` before its channel opens (so a stop
    sent before the command starts still reaches it): the host's ``term``/``kill`` and the plugin's own
    stop (a failing output sink, a host that broke a frame rule)."""

    def __init__(self, grace_s: float | None) -> None:
        self.grace_s = grace_s
        self.term = threading.Event()
        self.kill = threading.Event()
        self.own_stop = threading.Event()
        self.failure: BackendError | None = None  # what made the plugin stop the command itself

    def request(self, level: str) -> None:
        (self.kill if level == "kill" else self.term).set()

    def fail(self, error: BackendError) -> None:
        self.failure = self.failure or error
        self.own_stop.set()


class StreamedStdin:
    """A command's stdin fed live from the channel's ``stdin`` frames (``exec.stdin_stream``); the host's
    eof closes it. Writes block while the command does not read: that stalls the host's frames."""

    def __init__(self, channel: PluginChannel, on_violation: Callable[[BackendError], None]) -> None:
        self.channel = channel
        self.on_violation = on_violation

    def feed(self, pipe: Any) -> None:
        broken = False

        def deliver(data: bytes) -> None:
            nonlocal broken
            if broken:
                return  # the command stopped reading its input: not an error, and the rest is unwanted
            try:
                pipe.write(data)
                pipe.flush()
            except (BrokenPipeError, OSError, ValueError):
                broken = True

        def close() -> None:
            try:
                pipe.close()
            except (BrokenPipeError, OSError, ValueError):
                pass

        self.channel.pump_input(deliver, on_eof=close, on_violation=self.on_violation)


class HostBackendV2(HostBackend):
    """The host backend with v2's exec contract: the request's environment reaches the command unchanged
    (``BASH_ENV`` included), stops are signals (``ExecStops``), stdin may stream.

    Seams: those of ``HostBackend``; here ``environment``, ``feed_stdin``, ``await_exit`` (how stops and
    the timeout end a command, and the termination they report) and ``drain_output``.
    """

    def environment(self, sandbox: HostSandbox, spec_env: Mapping[str, str]) -> dict[str, str]:
        env = super().environment(sandbox, spec_env)
        if "BASH_ENV" in spec_env:  # v1 strips it; in v2 a host that wants a clean shell says so itself
            env["BASH_ENV"] = spec_env["BASH_ENV"]
        return env

    def feed_stdin(self, proc: subprocess.Popen[bytes], data: Any) -> None:
        if isinstance(data, StreamedStdin):
            data.feed(proc.stdin)
        else:
            super().feed_stdin(proc, data)

    def await_exit(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes], cancel: Any,
                   deadline: float | None) -> str:
        """Wait for the command, delivering stops as signals. ``term``: one SIGTERM (the command may
        keep running); ``kill``: SIGKILL; the timeout and the plugin's own stops kill outright, or run the
        TERM→grace→KILL ladder when the spec asked for a grace. The termination names the stop that
        ended the command."""
        stops: ExecStops = cancel
        termination = "exited"
        term_sent = timed_out = own_stopped = killed = False
        kill_at = float("inf")  # when the ladder's KILL is due
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
                    _signal_group(proc, signal.SIGTERM)
                    if stops.grace_s is not None:
                        kill_at = min(kill_at, now + stops.grace_s)
                if now >= kill_at:
                    killed = True
                    _kill_group(proc)
            try:
                proc.wait(timeout=0.02)
            except subprocess.TimeoutExpired:
                pass
        return termination

    @staticmethod
    def _own_stop(proc: subprocess.Popen[bytes], grace_s: float | None, now: float) -> float:
        """Start a stop no host is present to escalate; when its KILL is due."""
        if grace_s is None:
            return now
        _signal_group(proc, signal.SIGTERM)
        return now + grace_s

    def drain_output(self, proc: subprocess.Popen[bytes], readers: list[threading.Thread], cancel: Any,
                     deadline: float | None) -> bool:
        """Stops and the timeout stay active while output drains after the command exited: a kill ends
        whatever still holds the pipes instead of waiting for it."""
        stops: ExecStops = cancel
        drain_deadline = time.monotonic() + DRAIN_GRACE_S
        signalled = False
        while any(reader.is_alive() for reader in readers) and time.monotonic() < drain_deadline:
            timed_out = deadline is not None and time.monotonic() >= deadline
            if not signalled and (stops.kill.is_set() or stops.own_stop.is_set() or timed_out):
                signalled = True
                _kill_group(proc)
            for reader in readers:
                reader.join(timeout=0.02)
        return any(reader.is_alive() for reader in readers)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    _signal_group(proc, signal.SIGKILL)
    _signal_group(proc, signal.SIGCONT)  # a paused group must run to die


# -- events ----------------------------------------------------------------------------------------


class ProvisionReportingEvents(EventSource):
    """v1's event source, plus v2's provisioning progress between a sandbox create's start and end."""

    def operation(self, route: dict[str, Any] | None, action: str, subject: dict[str, Any]) -> Operation:
        operation = super().operation(route, action, subject)
        if action == "create" and subject.get("type") == "sandbox":
            operation.progress("sandbox.provision", "preparing the workspace directory")
        return operation


_EVENT_FAILED = {"jsonrpc": "2.0", "method": "host/event_failed", "params": None}


class EventDelivery:
    """Ordered, bounded event delivery on a writer thread of its own, so events never hold up a response
    (v2 §10: a response may precede its terminal event). When the queue is full the connection's event
    subscription fails: one ``host/event_failed`` after what was queued, then no more events."""

    def __init__(self, write: Callable[[dict[str, Any]], None], max_messages: int, max_bytes: int) -> None:
        self._write = write
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.failed = False
        self._queue: deque[tuple[dict[str, Any], int]] = deque()
        self._queued_bytes = 0  # including the message being written
        self._writing = 0
        self._ready = threading.Condition()
        threading.Thread(target=self._deliver, name="event-delivery", daemon=True).start()

    def offer(self, method: str, params: Any) -> None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        size = len(json.dumps(message, separators=(",", ":"))) + 1
        with self._ready:
            if self.failed:
                return
            if (len(self._queue) + self._writing >= self.max_messages
                    or self._queued_bytes + size > self.max_bytes):
                self.failed = True
                self._queue.append((_EVENT_FAILED, 0))  # past the budget: the one signal left to give
            else:
                self._queue.append((message, size))
                self._queued_bytes += size
            self._ready.notify()

    def _deliver(self) -> None:
        while True:
            with self._ready:
                while not self._queue:
                    self._ready.wait()
                message, size = self._queue.popleft()
                self._writing += 1
            self._write(message)
            with self._ready:
                self._writing -= 1
                self._queued_bytes -= size
                self._ready.notify_all()

    def flush(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until everything queued was written."""
        deadline = time.monotonic() + timeout_s
        with self._ready:
            while (self._queue or self._writing) and time.monotonic() < deadline:
                self._ready.wait(timeout=max(0.0, deadline - time.monotonic()))


# -- the plugin ------------------------------------------------------------------------------------


class HostPluginV2(ChannelFilesystemMethods, ChannelInteractiveMethods, HostPlugin):
    """sandbox-driver v2 over the host-directory backend.

    Seams: those of ``HostPlugin`` (streams, ``environ``, ``make_backend()``, ``declared_capabilities()``,
    one ``m_<group>_<verb>(params)`` per method), plus ``limits`` (a ``TransportLimits``),
    ``channel_class`` (the ``PluginChannel`` subclass, whose own seams hold the frame rules),
    ``open_channel(request, accepts_input)`` (every data channel this plugin opens),
    ``serving(channel)`` (the eof-before-answer envelope of an operation), ``exec_spec(method, spec)``,
    ``stream_exec(sandbox, spec, channel, stops, wants_stdin)``, ``collect_input(channel, max_bytes)``,
    ``streams_stdin()``, ``admit(method)``, ``lines()`` (the inbound size limit), ``transport_failed(reason)``
    and ``write_message(message)`` (the outbound size limit); events go through ``event_delivery``
    (``EventDelivery``) and ``events`` (``ProvisionReportingEvents``).
    """

    limits = TransportLimits()
    channel_class = PluginChannel
    log_prefix = "host-plugin-v2"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shutdown_wait_s = self.limits.shutdown_timeout_s
        self.transport: DataTransport | None = None
        self.event_delivery = EventDelivery(self.write_message, self.limits.event_queue_messages,
                                            self.limits.event_queue_bytes)
        self.events = ProvisionReportingEvents(self.provider_kind, self.event_delivery.offer)
        self._execs: dict[str, ExecStops] = {}  # type: ignore[assignment]  # v1 keeps bare cancel events
        self._requests = Budget(self.limits.provider_requests)
        self._reserved = Budget(self.limits.reserved_requests)
        self._io = Budget(self.limits.active_io)
        self._opens = Budget(self.limits.pending_opens)
        self._channels: set[PluginChannel] = set()
        self._channels_lock = threading.Lock()

    def make_backend(self) -> HostBackend:
        return HostBackendV2(environ=self.environ)

    # -- capabilities ----------------------------------------------------------------------------

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        exec_caps = capabilities["exec"]
        del exec_caps["cancel"]  # v2 renamed it
        # A command's environment is the backend's, which this plugin can report (sandbox/environment); a port a
        # sandbox process listens on is a port of this machine, so its preview URL is the port itself.
        exec_caps.update({"stop": True, "stdin": True, "stdin_stream": True, "environment": True})
        capabilities["access"]["preview_urls"] = True
        capabilities["one_shot"] = None
        return capabilities

    def declares(self, dotted: str) -> bool:
        if dotted == "git":  # the group gates git/clone (and names it when refused); git.supported says it is there
            return super().declares("git.supported")
        if dotted.split(".")[0] == "one_shot":
            group = self.capabilities.get("one_shot")
            return group is not None and (dotted == "one_shot" or bool(group.get(dotted.split(".", 1)[1])))
        return super().declares(dotted)

    def streams_stdin(self) -> bool:
        """Whether stdin frames reach the command live; otherwise they are collected to eof first."""
        return self.declares("exec.stdin_stream")

    # -- control transport -----------------------------------------------------------------------

    def lines(self) -> Iterator[bytes]:
        """Lines up to ``control_message_bytes`` (newline included); a longer one, or a last line
        without its newline, ends the connection as a transport error."""
        limit = self.limits.control_message_bytes
        while True:
            raw = self.stdin.readline(limit + 1)  # never reads more than one byte past the cap
            if not raw:
                return
            if len(raw) > limit:
                self.transport_failed(f"control message limit exceeded ({limit} bytes)")
                return
            if not raw.endswith(b"\n"):
                self.transport_failed("incomplete control message at the end of the input")
                return
            yield raw

    def transport_failed(self, reason: str) -> None:
        self.log(f"transport error: {reason}")
        self.exit_code = 1

    def write_message(self, message: dict[str, Any]) -> None:
        """A reply longer than ``control_message_bytes`` becomes a ``limit_exceeded`` error; a
        notification that long is not sent."""
        limit = self.limits.control_message_bytes
        if len(json.dumps(message, separators=(",", ":")).encode("utf-8")) + 1 > limit:
            if "id" not in message:
                self.log(f"dropped a {message.get('method')} notification over {limit} bytes")
                return
            error = self.backend_failure("", limit_exceeded("control_message_bytes", limit))
            message = {"jsonrpc": "2.0", "id": message["id"], "error": self.error_object(error)}
        super().write_message(message)

    def admit(self, method: str) -> Callable[[], None] | None:
        reserved = method in RESERVED_METHODS
        budget = self._reserved if reserved else self._requests
        if not budget.try_acquire():
            raise self.backend_failure(method, overloaded("reserved_requests" if reserved else "provider_requests"))
        if method not in IO_METHODS:
            return budget.release
        if not self._io.try_acquire(also_held=self.held_sessions()):
            budget.release()
            raise self.backend_failure(method, overloaded("active_io"))

        def release() -> None:
            self._io.release()
            budget.release()

        return release

    # -- dispatch --------------------------------------------------------------------------------

    def dispatch(self, method: str, params: Any) -> Any:
        if method in REMOVED_METHODS:
            raise self.unknown_method(method)
        capability = V2_GATED_METHODS.get(method)
        if capability is not None and not self.declares(capability):
            raise self.unsupported(method, capability)
        return super().dispatch(method, params)

    def backend_failure(self, method: str, error: BackendError) -> RpcFailure:
        # v2 §7: transport failures may be retried by the host; the other kinds here may not.
        return application_error(error.kind, error.message, error.detail, retryable=error.kind == "transport")

    # -- session ---------------------------------------------------------------------------------

    def on_start(self) -> None:
        self.log(f"{__version__} serving sandbox-driver protocol {PROTOCOL_VERSION}; sandboxes in {self.backend.root}")

    def m_initialize(self, params: dict[str, Any]) -> Any:
        asked = params.get("protocol_version")
        if not isinstance(asked, int) or isinstance(asked, bool) or asked < 0:
            raise invalid_params("initialize", "protocol_version must be an unsigned integer")
        if asked != PROTOCOL_VERSION:
            raise invalid_spec("protocol_version", f"plugin speaks protocol version {PROTOCOL_VERSION} but the "
                               f"host asked for {asked}")
        announced = params.get("data_transport")
        if not isinstance(announced, dict):
            raise invalid_params("initialize", "missing field `data_transport`")
        socket_path, max_frame, open_ack = (announced.get("socket_path"), announced.get("max_frame_bytes"),
                                            announced.get("open_ack", False))
        if not isinstance(socket_path, str):
            raise invalid_params("initialize", "data_transport.socket_path must be a string")
        if not isinstance(max_frame, int) or isinstance(max_frame, bool) or max_frame < 0:
            raise invalid_params("initialize", "data_transport.max_frame_bytes must be an unsigned integer")
        if open_ack is None:
            open_ack = False
        if not isinstance(open_ack, bool):
            raise invalid_params("initialize", "data_transport.open_ack must be a boolean")
        if max_frame != data_channel.MAX_FRAME_BYTES:
            raise invalid_spec("data_transport.max_frame_bytes", f"must be {data_channel.MAX_FRAME_BYTES}")
        if self.transport is None:  # a second initialize keeps the first: channels were named against it
            self.transport = DataTransport(socket_path, max_frame, open_ack)
        return {
            "protocol_version": PROTOCOL_VERSION,
            "provider": {"kind": self.provider_kind, "version": __version__},
            "capabilities": self.capabilities,
        }

    def on_stop(self) -> None:
        # A closing connection has no caller left to escalate: every in-flight exec is killed outright.
        with self._execs_lock:
            for stops in self._execs.values():
                stops.request("kill")
        self.stop_interactive()
        with self._channels_lock:
            channels = list(self._channels)
        # The killed work's last output and eof usually follow within moments: a transfer that can still
        # end completely is not cut short; what cannot is closed as incomplete.
        deadline = time.monotonic() + min(SHUTDOWN_EOF_WAIT_S, self.limits.shutdown_timeout_s)
        for channel in channels:
            channel.wait_finished(max(0.0, deadline - time.monotonic()))
            channel.close()
        self.event_delivery.flush(self.limits.shutdown_timeout_s)
        self.backend.close()

    def m_sandbox_environment(self, params: dict[str, Any]) -> Any:
        """What a command started without variables of its own gets: exactly the env its process starts with."""
        sandbox = self.backend.get(params["sandbox_id"])
        return {"environment": self.backend.environment(sandbox, {})}

    # -- access ----------------------------------------------------------------------------------

    def preview_port(self, method: str, params: dict[str, Any]) -> int:
        port = params["port"]
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 0xFFFF:
            raise invalid_params(method, "port must be an unsigned 16-bit integer")
        self.backend.get(params["sandbox_id"])
        return port

    def m_access_preview_url(self, params: dict[str, Any]) -> Any:
        """A sandbox's processes run on this machine: the host reaches their port directly, no forward."""
        port = self.preview_port("access/preview_url", params)
        return {"preview": {"url": f"http://127.0.0.1:{port}", "headers": {}, "expires_at": None}}

    def m_access_preview_release(self, params: dict[str, Any]) -> Any:
        self.preview_port("access/preview_release", params)
        return None  # nothing is held for a preview URL, so releasing one (asked for or not) has nothing to end

    def m_transport_diagnostics(self, params: dict[str, Any]) -> Any:
        """Counts only: no channel tokens, ids or paths."""
        with self._interactive_lock:
            stdios = sum(1 for process in self._processes.values() if process is not None)
            ptys = sum(1 for pty in self._ptys.values() if pty.proc is not None)
            streams = sum(1 for stream in self._streams.values() if stream.following)
        with self._execs_lock:
            execs = len(self._execs)
        return {
            "active_io": self._io.held + self.held_sessions(), "pending_opens": self._opens.held,
            "execs": execs, "stdios": stdios, "ptys": ptys, "streams": streams,
            "cached_handles": 0,  # every call looks its sandbox up in the registry: nothing is cached
            "background_tasks": self.session_pumps(), "runtime_tasks": threading.active_count(),
        }

    # -- data channels ---------------------------------------------------------------------------

    def channel_request(self, method: str, params: dict[str, Any]) -> tuple[int, str]:
        request = params["channel"]
        channel_id = request.get("channel_id") if isinstance(request, dict) else None
        token = request.get("token") if isinstance(request, dict) else None
        if not isinstance(channel_id, int) or isinstance(channel_id, bool) or not 0 <= channel_id < 2 ** 64:
            raise invalid_params(method, "channel.channel_id must be an unsigned 64-bit integer")
        if not isinstance(token, str):
            raise invalid_params(method, "channel.token must be a string")
        return channel_id, token

    def open_channel(self, request: tuple[int, str], accepts_input: bool) -> PluginChannel:
        """Connect the channel a request named, before any of the operation's work starts."""
        if self.transport is None:
            raise data_channel.transport_error("a data channel was requested before initialize")
        if not self._opens.try_acquire():
            raise overloaded("pending_opens")
        try:
            channel = data_channel.open_channel(
                self.transport, *request, accepts_input=accepts_input, open_timeout_s=self.limits.open_timeout_s,
                progress_timeout_s=self.limits.output_progress_timeout_s, channel_class=self.channel_class)
        finally:
            self._opens.release()
        with self._channels_lock:
            self._channels.add(channel)
        return channel

    @contextmanager
    def serving(self, channel: PluginChannel) -> Iterator[PluginChannel]:
        """One operation's use of its channel: whatever happens, this side's eof goes out before the
        answer; on success a frame rule the host broke meanwhile becomes the answer."""
        try:
            yield channel
            channel.finish()
            violation = channel.settled_violation()
            if violation is not None:
                raise violation
        except BaseException:
            try:
                channel.finish()
            except BackendError:
                pass  # the host is gone; the error being raised says more
            raise
        finally:
            self.release_channel(channel)

    def release_channel(self, channel: PluginChannel) -> None:
        with self._channels_lock:
            self._channels.discard(channel)
        channel.close_after(self.limits.shutdown_timeout_s)

    def collect_input(self, channel: PluginChannel, max_bytes: int,
                      on_violation: Callable[[BackendError], None] | None = None) -> bytes:
        """The host's ``stdin`` frames through its eof, refused beyond ``max_bytes`` (a buffered value).
        Reading goes on after the eof, so a frame sent after it is still caught (``on_violation``)."""
        content = bytearray()
        while (data := channel.next_input()) is not None:
            if len(data) > max_bytes - len(content):
                raise limit_exceeded("buffered_value_bytes", max_bytes)
            content.extend(data)
        channel.pump_input(on_violation=on_violation)
        return bytes(content)

    # -- exec ------------------------------------------------------------------------------------

    def exec_spec(self, method: str, spec: Any) -> ExecSpecV2:
        if not isinstance(spec, dict):
            raise invalid_params(method, "spec must be an object")
        program, args, env = spec.get("program"), spec.get("args", []), spec.get("env")
        if not isinstance(program, str):
            raise invalid_params(method, "spec.program must be a string")
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise invalid_params(method, "spec.args must be a list of strings")
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise invalid_params(method, "spec.env must be an object of strings")
        working_dir = spec.get("working_dir")
        if working_dir is not None and not isinstance(working_dir, str):
            raise invalid_params(method, "spec.working_dir must be a string")
        timeout_ms, grace_ms = (optional_count(method, spec, "timeout_ms", "spec."),
                                optional_count(method, spec, "stop_grace_ms", "spec."))
        sanitization = spec.get("output_sanitization") or "raw"
        if sanitization not in SANITIZATION_MODES:
            raise invalid_params(method, f"spec.output_sanitization: unknown variant {json.dumps(sanitization)}, "
                                         "expected one of raw, strip_ansi, strip_all")
        return ExecSpecV2(argv=[program, *args], env=dict(env), working_dir=working_dir,
                          timeout_s=None if timeout_ms is None else timeout_ms / 1000,
                          grace_s=None if grace_ms is None else grace_ms / 1000, sanitization=sanitization)

    def register_exec(self, exec_id: str, grace_s: float | None) -> ExecStops:
        with self._execs_lock:
            if exec_id in self._execs:
                raise invalid_spec("exec_id", "duplicate execution id")
            stops = self._execs[exec_id] = ExecStops(grace_s)
        return stops

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
        if wants_stdin and not (self.declares("exec.stdin") or self.declares("exec.stdin_stream")):
            raise self.unsupported("exec/stream", "exec.stdin")
        sandbox = self.backend.get(params["sandbox_id"])
        stops = self.register_exec(exec_id, spec.grace_s)  # before the channel: a stop can address it at once
        try:
            channel = self.open_channel(request, accepts_input=wants_stdin)
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

    def stream_exec(self, sandbox: HostSandbox, spec: ExecSpecV2, channel: PluginChannel, stops: ExecStops,
                    wants_stdin: bool) -> Any:
        """Run the command with its output as frames on ``channel`` (each chunk written before the next is
        read from the command: a slow host stalls the command, never a buffer)."""

        stdin: bytes | StreamedStdin | None = None
        if wants_stdin and self.streams_stdin():
            stdin = StreamedStdin(channel, on_violation=stops.fail)
        elif wants_stdin:
            stdin = self.collect_input(channel, self.limits.buffered_value_bytes, on_violation=stops.fail)
        else:
            channel.pump_input(on_violation=stops.fail)

        def forward(stream: str, chunk: bytes) -> None:
            if stops.failure is not None:
                return
            try:
                channel.send(STDOUT if stream == "stdout" else STDERR, chunk)
            except BackendError as error:  # the host stopped reading: nobody is left to escalate
                stops.fail(error)

        run = self.backend.run(
            sandbox, "", spec.env, working_dir=spec.working_dir, stdin=stdin, timeout_s=spec.timeout_s,
            sanitization=spec.sanitization, on_output=forward, cancel=stops,
            # The host keeps its own copy from the frames: the plugin only counts (retained 0, all omitted).
            retain_limit=0, argv=spec.argv)
        if stops.failure is not None:
            raise stops.failure
        return run

    def m_exec_stop(self, params: dict[str, Any]) -> Any:
        level = params["level"]
        if level not in ("term", "kill"):
            raise invalid_params("exec/stop", f"level: unknown variant {json.dumps(level)}, expected term or kill")
        with self._execs_lock:
            stops = self._execs.get(params["exec_id"])
        if stops is not None:  # an unknown or finished exec: nothing to stop, and that is a success
            stops.request(level)
        return None
