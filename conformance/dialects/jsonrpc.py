"""JSON-RPC 2.0 over a line transport: framing, correlation, routing, deadlines, and wire rules.

Shared by every JSON-RPC dialect. It validates each message through the ``MessageRules`` the dialect
supplies, records every frame for the active transcript, and keeps wire violations for the scenario.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import json
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Protocol

from conformance.errors import (
    CallTimeout,
    HarnessError,
    ProviderCallError,
    ProviderCrashed,
    SchemaViolation,
    WireViolation,
)
from conformance.schemas import SchemaProblem
from conformance.transcript import REDACTOR
from conformance.transports import json_text
from conformance.transports.base import DEFAULT_WRITE_TIMEOUT_S, EXIT_GRACE_S, InputStalled, LineTransport

Observer = Callable[[str, str, str], None]  # (channel, direction, text)

# The longest line the suite reads from a plugin whose protocol sets no limit of its own (v1: "no limit in
# v1 code; the line reader is unbounded"). Legal v1 lines can be large — a buffered exec/run answer carries
# its whole output as base64 (64 MiB of output is an 85 MiB line, which must work) — but the suite's own
# scenarios ask for at most a few MiB in one message (4 MiB file chunks). 256 MiB is three times the
# largest legal answer the suite is measured with, and bounds what a plugin that never ends a line costs.
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
# Lines longer than this are shown (transcript, violations) by an excerpt, not decoded whole: an 85 MiB
# answer must not cost another 85 MiB of text that only its first few thousand characters are kept of.
EXCERPT_FROM_BYTES = 64 * 1024
EXCERPT_BYTES = 3900  # with its "… [N more bytes]" marker, within a transcript entry (4000 characters)


class MessageRules(Protocol):
    """What a dialect tells the connection about its messages."""

    def envelope_problems(self, message: Any) -> list[SchemaProblem]: ...

    def params_problems(self, method: str, params: Any) -> list[SchemaProblem]: ...

    def result_problems(self, method: str, result: Any) -> list[SchemaProblem]: ...

    def notification_problems(self, method: str, params: Any) -> list[SchemaProblem]: ...

    def checked_notification(self, method: str, params: Any) -> tuple[list[SchemaProblem], bytes | None]: ...

    def notification_route(self, method: str, params: Any) -> tuple[str, str] | None: ...

    def error_answer(self, method: str, error: dict[str, Any]) -> ProviderCallError: ...


@dataclass
class Violation:
    """A wire or schema violation seen on a connection, kept until a scenario claims it."""

    channel: str
    summary: str
    message_text: str = ""

    def __str__(self) -> str:
        text = f"{self.channel}: {self.summary}"
        return f"{text}\n    message: {self.message_text}" if self.message_text else text


@dataclass
class Inbound:
    """A message the plugin sent; ``sequence`` is its position among everything received. ``text`` is the
    line as text (an excerpt of a very long one). ``data`` is an output notification's payload, decoded
    once by its check (None when the check did not decode it): a collector may take it from there."""

    at: float
    message: Any
    text: str
    raw: bytes = field(repr=False, default=b"")
    sequence: int = 0
    data: bytes | None = field(repr=False, default=None)

    @property
    def is_response(self) -> bool:
        return isinstance(self.message, dict) and "id" in self.message and "method" not in self.message

    @property
    def is_notification(self) -> bool:
        return isinstance(self.message, dict) and "method" in self.message and "id" not in self.message


class PendingCall:
    """A request in flight. ``result()`` waits for its answer."""

    def __init__(self, connection: JsonRpcConnection, request_id: int, method: str, timeout_s: float,
                 check_result: bool = True) -> None:
        self.connection = connection
        self.check_result = check_result
        self.id = request_id
        self.method = method
        self.timeout_s = timeout_s
        self.sent_at = time.monotonic()
        self.answered_at: float | None = None
        self.answer_sequence: int | None = None
        self.future: Future[Any] = Future()

    def done(self) -> bool:
        return self.future.done()

    def result(self, timeout_s: float | None = None) -> Any:
        wait = self.timeout_s if timeout_s is None else timeout_s
        try:
            return self.future.result(timeout=wait)
        except FutureTimeout:
            self.connection.forget(self.id)
            raise CallTimeout(
                f"{self.method} (request id {self.id}) got no answer within {wait:.1f}s", method=self.method
            ) from None


class JsonRpcConnection:
    """One JSON-RPC peer. Thread-safe: any thread may call; one reader thread routes answers."""

    def __init__(self, transport: LineTransport, rules: MessageRules, channel: str = "provider",
                 max_message_bytes: int | None = None, write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S) -> None:
        self.transport = transport
        self.write_timeout_s = write_timeout_s  # a frame's deadline where no call gives one (notifications, raw)
        self.max_message_bytes = max_message_bytes  # the run's --max-message-bytes; None: the dialect's
        self.rules = rules
        self.channel = channel
        self._ids = itertools.count(1)  # id 0 is what plugins answer to lines they could not parse
        self._pending: dict[int, PendingCall] = {}
        self._lock = threading.Lock()
        self._routes: dict[tuple[str, str], Callable[[Inbound], None]] = {}
        self._watchers: dict[str, list[Callable[[Inbound], None]]] = {}
        self._received = itertools.count(1)
        self._observers: list[Observer] = []
        self._violations: list[Violation] = []
        self._inbox: queue.Queue[Inbound] | None = None
        self._raw_sends = 0
        self._closed = threading.Event()
        self._started = False
        self.stdout_lines = 0
        self._reading = threading.Event()  # cleared while the host holds off reading (hold_reading)
        self._reading.set()
        # Whether anything sent on this connection named the shutdown method (a call, or raw bytes).
        self.shutdown_sent = False
        self.input_lost: str | None = None  # why nothing more can be sent (the plugin stopped reading its input)
        self.ended_mid_call = False  # the output ended while a call was outstanding, unasked (no clean exit)
        self.input_closed = False  # a scenario closed the plugin's input (asking it to exit)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self.transport.start(self._on_line, self._on_close, self._on_overflow)
        self._started = True

    @property
    def rules(self) -> MessageRules:
        return self._rules

    @rules.setter
    def rules(self, rules: MessageRules) -> None:
        """The dialect's rules; settled after detection, when the line limit becomes the dialect's own."""
        self._rules = rules
        self.transport.max_line_bytes = self.line_limit

    @property
    def line_limit(self) -> int:
        """The longest line read from the peer: the protocol's limit where it states one, lowered (never
        raised: a line over it breaks the protocol whatever the run allows) by the run's setting; else the
        run's setting, else the suite's default."""
        protocol = getattr(self._rules, "max_message_bytes", None)
        limits = [limit for limit in (protocol, self.max_message_bytes) if limit is not None]
        return min(limits) if limits else DEFAULT_MAX_MESSAGE_BYTES

    def _limit_source(self) -> str:
        protocol = getattr(self._rules, "max_message_bytes", None)
        if self.max_message_bytes is not None and (protocol is None or self.max_message_bytes < protocol):
            return "--max-message-bytes"
        if protocol is not None:
            return "the protocol's control message limit"
        return "the suite's default for a protocol without one"

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close_input(self) -> None:
        self.input_closed = True
        self.transport.close_input()

    def close(self, grace_s: float = EXIT_GRACE_S) -> None:
        self.input_closed = True  # the suite ends the plugin: an exit from here on was asked for
        self.transport.close(grace_s=grace_s)
        self._closed.wait(timeout=2.0)

    # -- observation -----------------------------------------------------------------------------

    def add_observer(self, observer: Observer) -> None:
        with self._lock:
            self._observers.append(observer)

    def remove_observer(self, observer: Observer) -> None:
        with self._lock:
            if observer in self._observers:
                self._observers.remove(observer)

    def _emit(self, direction: str, text: str) -> None:
        with self._lock:
            observers = list(self._observers)
        for observer in observers:
            observer(self.channel, direction, text)

    def take_violations(self) -> list[Violation]:
        with self._lock:
            taken, self._violations = self._violations, []
        return taken

    def _violation(self, summary: str, text: str = "") -> None:
        with self._lock:
            self._violations.append(Violation(self.channel, summary, text))
        self._emit("violation", summary)

    def enable_inbox(self) -> None:
        """Keep every inbound message for raw reads (wire-level scenarios)."""
        with self._lock:
            if self._inbox is None:
                self._inbox = queue.Queue()

    # -- sending ---------------------------------------------------------------------------------

    def request(self, method: str, params: Any, timeout_s: float = 30.0, check_params: bool = True,
                check_result: bool = True) -> PendingCall:
        if check_params:
            problems = self.rules.params_problems(method, params)
            if problems:
                raise HarnessError(f"the suite built invalid params for {method}: {problems[0]}")
        request_id = next(self._ids)
        call = PendingCall(self, request_id, method, timeout_s, check_result)
        with self._lock:
            self._pending[request_id] = call
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self._send_text(json.dumps(message, separators=(",", ":")), call, method, timeout_s)
        return call

    def call(self, method: str, params: Any, timeout_s: float = 30.0) -> Any:
        return self.request(method, params, timeout_s).result()

    def notify(self, method: str, params: Any) -> None:
        self._send_text(json.dumps({"jsonrpc": "2.0", "method": method, "params": params}, separators=(",", ":")),
                        method=method)

    def send_raw(self, line: bytes) -> None:
        """Send bytes exactly as given (a newline is appended when missing). Answers go to the inbox."""
        self.enable_inbox()
        with self._lock:
            self._raw_sends += 1
        frame = line if line.endswith(b"\n") else line + b"\n"
        self._emit("sent", frame[:-1].decode("utf-8", errors="replace") or "(blank line)")
        try:
            self._write(frame, _method_named(frame), self.write_timeout_s)
        except InputStalled as stalled:
            raise CallTimeout(f"a raw line could not be sent: {stalled}") from None

    def _send_text(self, text: str, call: PendingCall | None = None, method: str | None = None,
                   timeout_s: float | None = None) -> None:
        self._emit("sent", text)
        try:
            self._write(text.encode("utf-8") + b"\n", method, self.write_timeout_s if timeout_s is None else timeout_s)
        except InputStalled as stalled:
            if call is None:
                raise CallTimeout(f"a notification could not be sent: {stalled}") from None
            self.forget(call.id)
            _fail_once(call, CallTimeout(f"{call.method} (request id {call.id}) could not be sent: {stalled}",
                                         method=call.method))
        except (BrokenPipeError, OSError):
            if call is not None:
                self.forget(call.id)
                # The reader may have failed the call already, having seen stdout close first.
                _fail_once(call, self._crash_error(f"{call.method} could not be sent"))
            else:
                raise self._crash_error("a notification could not be sent") from None

    def _write(self, frame: bytes, method: str | None, timeout_s: float) -> None:
        if self.input_lost is not None:
            raise InputStalled(self.input_lost, broken=True)
        if self.closed:
            raise BrokenPipeError("connection closed")
        try:
            self.transport.send(frame, timeout_s)
        except InputStalled as stalled:
            self._lose_input(str(stalled))
            raise
        except BaseException:
            # Interrupted (Ctrl-C) while the plugin was not taking a frame: the part sent ends the framing.
            broken = getattr(self.transport, "input_broken", None)
            if broken is not None:
                self._lose_input(broken)
            raise
        if method == "shutdown":
            self.shutdown_sent = True  # it reached the provider: the close asks no second time

    def _lose_input(self, cause: str) -> None:
        """The plugin stopped reading its input: nothing more gets through, so the connection ends here, as
        when its output closes, every outstanding call failing with this cause instead of its deadline."""
        with self._lock:
            first = self.input_lost is None
            self.input_lost = self.input_lost or cause
            pending, self._pending = list(self._pending.values()), {}
        if first:
            self._violation(cause)
        self._closed.set()
        for call in pending:
            _fail_once(call, CallTimeout(f"{cause}, while {call.method} (id {call.id}) was outstanding",
                                         method=call.method))

    def forget(self, request_id: int) -> None:
        with self._lock:
            self._pending.pop(request_id, None)

    # -- routing of notifications ----------------------------------------------------------------

    def subscribe(self, route: tuple[str, str], listener: Callable[[Inbound], None] | None = None) -> queue.Queue[Inbound]:
        """Deliver notifications the dialect routes to ``route`` (a (method, key) pair) to ``listener``,
        called on the reader thread in arrival order; without one they are queued and returned."""
        box: queue.Queue[Inbound] = queue.Queue()
        with self._lock:
            self._routes[route] = listener or box.put
        return box

    def listen_all(self, method: str, listener: Callable[[Inbound], None]) -> None:
        """Also deliver every notification of ``method`` to ``listener``, whatever its route."""
        with self._lock:
            self._watchers.setdefault(method, []).append(listener)

    def unsubscribe(self, route: tuple[str, str]) -> None:
        with self._lock:
            self._routes.pop(route, None)

    def next_message(self, timeout_s: float) -> Inbound | None:
        """The next inbound message of any kind (raw mode), or None at the deadline."""
        self.enable_inbox()
        assert self._inbox is not None
        try:
            return self._inbox.get(timeout=timeout_s)
        except queue.Empty:
            return None

    # -- receiving -------------------------------------------------------------------------------

    def hold_reading(self, seconds: float) -> None:
        """Take no line from the peer for ``seconds``: the reader waits before handing on the next one, so the
        peer's output backs up (its pipe fills and its writes block) as behind a host slow to read."""
        self._reading.clear()
        timer = threading.Timer(seconds, self._reading.set)
        timer.daemon = True
        timer.start()

    def _on_line(self, raw: bytes) -> None:
        self._reading.wait()
        self.stdout_lines += 1
        sequence = next(self._received)
        if not raw or raw.isspace():  # not raw.strip(): that would copy a line of any length
            self._emit("note", "(blank line on stdout)")
            return
        text = _shown(raw)
        self._emit("received", text)
        try:
            message = json_text.loads(raw)
        except UnicodeDecodeError as exc:
            self._not_utf8(raw, text, exc, sequence)
            return
        except json.JSONDecodeError as exc:
            self._violation(f"stdout carried a line that is not JSON ({exc.msg})", text)
            self._deliver_to_inbox(Inbound(time.monotonic(), None, text, raw, sequence))
            return
        except json_text.UnreadableJson as exc:
            self._unreadable(raw, text, str(exc), sequence)
            return
        try:
            self._route(raw, text, message, sequence)
        except RecursionError:  # parsed, but too deep for a check that walks it (a schema's validator)
            self._unreadable(raw, text, json_text.TOO_DEEP_TO_CHECK, sequence)

    def _route(self, raw: bytes, text: str, message: Any, sequence: int) -> None:
        inbound = Inbound(time.monotonic(), message, text, raw, sequence)
        if isinstance(message, list):
            self._violation("the plugin sent a JSON array (batches are not allowed)", text)
            self._deliver_to_inbox(inbound)
            return
        for problem in self.rules.envelope_problems(message):
            self._violation(f"message envelope violates the protocol {problem}", text)
            break
        if not isinstance(message, dict):
            self._deliver_to_inbox(inbound)
            return
        if "method" in message and "id" not in message:
            self._on_notification(inbound)
        elif "id" in message and ("result" in message or "error" in message):
            self._on_response(inbound)
        else:
            self._deliver_to_inbox(inbound)

    def _on_response(self, inbound: Inbound) -> None:
        message = inbound.message
        request_id = message.get("id")
        with self._lock:
            call = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
            raw_mode = self._raw_sends > 0
        self._deliver_to_inbox(inbound)
        if call is None:
            if not raw_mode:
                self._violation(f"a response carried id {request_id!r}, which no outstanding request has", inbound.text)
            return
        call.answered_at = inbound.at
        call.answer_sequence = inbound.sequence
        if "error" in message and isinstance(message["error"], dict):
            call.future.set_exception(self._error_answer(call.method, message["error"], inbound.text))
            return
        result = message.get("result")
        try:
            problems = self.rules.result_problems(call.method, result) if call.check_result else []
        except RecursionError:
            self._violation(f"stdout carried a line that {json_text.TOO_DEEP_TO_CHECK}", inbound.text)
            _fail_once(call, WireViolation(f"the answer to {call.method} (id {call.id}) {json_text.TOO_DEEP_TO_CHECK}"))
            return
        if problems:
            call.future.set_exception(SchemaViolation(f"the {call.method} result", problems[0].pointer, problems[0].reason, inbound.text))
            self._violation(f"the {call.method} result violates its schema {problems[0]}", inbound.text)
            return
        call.future.set_result(result)

    def _error_answer(self, method: str, error: dict[str, Any], text: str) -> Exception:
        try:
            return self.rules.error_answer(method, error)
        except SchemaViolation as violation:
            self._violation(str(violation), text)
            return violation

    def _not_utf8(self, raw: bytes, text: str, error: UnicodeDecodeError, sequence: int) -> None:
        """A line that is not UTF-8 breaks the wire at once; if it answers an outstanding request (its id read
        from the text decoded with replacement), that call fails now with this cause instead of waiting out
        its deadline for an answer that has come."""
        where = f"byte 0x{raw[error.start]:02x} at offset {error.start}" if error.start < len(raw) else "its end"
        summary = f"stdout carried a line that is not valid UTF-8 ({where})"
        self._violation(summary, text)
        inbound = Inbound(time.monotonic(), None, text, raw, sequence)
        self._deliver_to_inbox(inbound)
        try:
            readable = json_text.loads(raw.decode("utf-8", errors="replace"))
        except ValueError:
            return
        request_id = readable.get("id") if isinstance(readable, dict) and "method" not in readable else None
        with self._lock:
            call = self._pending.pop(request_id, None) if type(request_id) is int else None
        if call is not None:
            call.answered_at, call.answer_sequence = inbound.at, sequence
            _fail_once(call, WireViolation(f"the answer to {call.method} (id {call.id}) is not valid UTF-8 ({where})"))

    def _unreadable(self, raw: bytes, text: str, problem: str, sequence: int) -> None:
        """A line the suite cannot read (too deep, an integer too long): a violation naming why; the framing
        holds, so the connection goes on. If the line answers an outstanding request (its id found by
        nesting alone), that call fails now with this cause instead of waiting out its deadline."""
        self._violation(f"stdout carried a line that {problem}", text)
        inbound = Inbound(time.monotonic(), None, text, raw, sequence)
        self._deliver_to_inbox(inbound)
        request_id = json_text.top_level_id(raw)
        with self._lock:
            call = self._pending.pop(request_id, None) if request_id is not None else None
        if call is not None:
            call.answered_at, call.answer_sequence = inbound.at, sequence
            _fail_once(call, WireViolation(f"the answer to {call.method} (id {call.id}) {problem}"))

    def _on_overflow(self, limit: int) -> None:
        """The peer sent a line longer than ``limit``: the framing is lost (the rest of the line cannot be told
        from the next message), so the connection is useless: every outstanding call fails with this cause
        at once, as when a crashed peer's output closes."""
        summary = (f"stdout carried a line longer than {limit} bytes ({self._limit_source()}); "
                   "the suite stopped reading this connection")
        self._violation(summary)
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        for call in pending:
            _fail_once(call, WireViolation(f"{summary}, while {call.method} (id {call.id}) was outstanding"))

    def _on_notification(self, inbound: Inbound) -> None:
        method = inbound.message.get("method")
        params = inbound.message.get("params")
        problems, inbound.data = self.rules.checked_notification(method, params)
        for problem in problems:
            self._violation(f"the {method} notification violates its schema {problem}", inbound.text)
            break
        route = self.rules.notification_route(method, params)
        listener = None
        with self._lock:
            if route is not None:
                listener = self._routes.get(route)
            watchers = list(self._watchers.get(method, ()))
        if listener is not None:
            listener(inbound)
        for watcher in watchers:
            watcher(inbound)
        self._deliver_to_inbox(inbound)

    def _deliver_to_inbox(self, inbound: Inbound) -> None:
        inbox = self._inbox
        if inbox is not None:
            inbox.put(inbound)

    def _on_close(self) -> None:
        with self._lock:  # told before the connection reads as closed: the cleanup asks once it does
            self.ended_mid_call = bool(self._pending) and not (self.shutdown_sent or self.input_closed)
        self._closed.set()
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        if pending:
            error = self._crash_error("the provider's stdout closed")
            for call in pending:
                _fail_once(call, ProviderCrashed(f"{error} while {call.method} (id {call.id}) was outstanding",
                                                  method=call.method))

    def _crash_error(self, what: str) -> ProviderCrashed:
        code = self.transport.wait_exit(0.5)
        if code is None:
            state = "is still running"
        elif code < 0:
            state = f"was killed by signal {-code}"
        else:
            state = f"exited with code {code}"
        return ProviderCrashed(f"{what}; the provider process {state}")

    # -- wire-level helpers for scenarios ---------------------------------------------------------

    def wait_for_exit(self, timeout_s: float) -> int | None:
        return self.transport.wait_exit(timeout_s)

    def pending_count(self) -> int:
        with self._lock:
            return len(self._pending)


def _shown(raw: bytes) -> str:
    """The line as text for transcripts and violations: whole, or an excerpt when it is very long."""
    if len(raw) <= EXCERPT_FROM_BYTES:
        return raw.decode("utf-8", errors="replace")
    # Redacted before the cut: a secret the cut went through would otherwise show its first part unredacted.
    window = raw[:EXCERPT_BYTES + 4 * REDACTOR.longest()].decode("utf-8", errors="replace")
    return f"{REDACTOR.text(window)[:EXCERPT_BYTES]}… [{len(raw) - EXCERPT_BYTES} more bytes]"


class JsonRpcRaw:
    """The ``RawChannel`` of a JSON-RPC connection."""

    def __init__(self, connection: JsonRpcConnection) -> None:
        self.connection = connection
        connection.enable_inbox()

    def send_line(self, line: bytes) -> None:
        self.connection.send_raw(line)

    def call(self, method: str, params: Any, timeout_s: float = 10.0) -> Any:
        return self.connection.request(method, params, timeout_s, check_params=False, check_result=False).result()

    def notify(self, method: str, params: Any) -> None:
        self.connection.notify(method, params)

    def next_message(self, timeout_s: float) -> Any:
        inbound = self.connection.next_message(timeout_s)
        if inbound is None:
            return None
        return inbound.message if inbound.message is not None else inbound.text

    def close_input(self) -> None:
        self.connection.close_input()

    def wait_exit(self, timeout_s: float) -> int | None:
        return self.connection.transport.wait_exit(timeout_s)


def _method_named(frame: bytes) -> str | None:
    """The method a raw line names, when it is a JSON object naming one (raw lines may be anything)."""
    try:
        message = json_text.loads(frame)
    except ValueError:
        return None
    method = message.get("method") if isinstance(message, dict) else None
    return method if isinstance(method, str) else None


def _fail_once(call: PendingCall, error: BaseException) -> None:
    """Fail a pending call unless it is settled already (a sender and the reader can race to it)."""
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        call.future.set_exception(error)
