"""Operations that stream notifications before they answer: exec/stream and logs/follow.

Their output goes into a bounded ``StreamRecord`` as it arrives. A chunk is late when the reader has
already routed the answer (both arrive on one reader thread, in wire order). The route stays subscribed
after the answer, so output a provider writes behind its answer still lands in the record, whenever it
comes; a scenario that judges late output waits for it on arrivals (``StreamOutcome.await_late``), never
on a fixed clock. The last ``LINGERING_ROUTES`` answered routes of a connection stay subscribed.
"""

from __future__ import annotations

import base64
import threading
import time
import weakref
from collections import deque
from typing import Any

from conformance.adapter import (
    CaptureStats,
    ChunkObserver,
    ExecOutcome,
    OutputChunk,
    StreamOutcome,
    StreamRecord,
)
from conformance.dialects.jsonrpc import Inbound, JsonRpcConnection, PendingCall
from conformance.dialects.sandbox_driver_v1.rules import NAME
from conformance.errors import ApplicationErrorAnswer, NotExpressible

# v1's exec/stream takes a command's input whole, in its spec (stdin_b64): nothing can follow it once it runs.
LIVE_INPUT = "feeding a streamed command's input while it runs"
# Answered routes kept subscribed per connection, for late output; the oldest is let go beyond that.
LINGERING_ROUTES = 16


class _Lingering:
    """A connection's answered routes that still listen for late output, oldest first."""

    # The connection is not held here: it is the weak key this is kept under.
    def __init__(self) -> None:
        self.routes: deque[tuple[str, str]] = deque()
        self.lock = threading.Lock()

    @staticmethod
    def of(connection: JsonRpcConnection) -> _Lingering:
        with _LINGERING_LOCK:
            lingering = _LINGERING.get(connection)
            if lingering is None:
                lingering = _LINGERING[connection] = _Lingering()
            return lingering

    def keep(self, connection: JsonRpcConnection, route: tuple[str, str]) -> None:
        with self.lock:
            self.routes.append(route)
            released = [self.routes.popleft() for _ in range(max(0, len(self.routes) - LINGERING_ROUTES))]
        for old in released:
            connection.unsubscribe(old)


_LINGERING: weakref.WeakKeyDictionary[JsonRpcConnection, _Lingering] = weakref.WeakKeyDictionary()
_LINGERING_LOCK = threading.Lock()


class _Collector:
    """Feeds the notifications routed to one exec or stream into its record, as they arrive."""

    def __init__(self, connection: JsonRpcConnection, route: tuple[str, str],
                 observers: tuple[ChunkObserver, ...] = ()) -> None:
        self.connection = connection
        self.route = route
        self.record = StreamRecord(observers)
        self.call: PendingCall | None = None  # set once sent (attach); no answer can be routed before that
        self._attached = threading.Event()
        self._finished = False
        connection.subscribe(route, self._on_notification)

    def attach(self, call: PendingCall) -> None:
        self.call = call
        self._attached.set()

    def _on_notification(self, inbound: Inbound) -> None:
        if self.call is None:
            # The request is on the wire but request() has not returned it yet: its answer, and output behind
            # it, may already be read. Wait for the call (microseconds) so lateness is judged against it.
            self._attached.wait(1.0)
        params = inbound.message.get("params") or {}
        data = inbound.data  # decoded once by the notification's check
        if data is None:
            try:
                data = base64.b64decode(params.get("data_b64", ""))
            except (ValueError, TypeError):
                data = b""  # the schema check already reported the bad encoding
        call = self.call
        answered = call.answer_sequence if call is not None else None
        self.record.add(inbound.at, inbound.sequence, str(params.get("stream", "stdout")), data,
                        late=answered is not None and inbound.sequence > answered)

    def snapshot(self) -> list[OutputChunk]:
        return self.record.chunks()

    def finish(self) -> None:
        """The call is over: keep listening for late output, among the connection's lingering routes."""
        if not self._finished:
            self._finished = True
            _Lingering.of(self.connection).keep(self.connection, self.route)


def capture_stats(raw: Any) -> CaptureStats | None:
    """A result's capture statistics, or None when it carries none."""
    if not isinstance(raw, dict):
        return None
    return CaptureStats(int(raw.get("observed_bytes", 0)), int(raw.get("retained_bytes", 0)),
                        int(raw.get("omitted_bytes", 0)), bool(raw.get("truncated", False)))


class V1RunningExec:
    """An ``exec/stream`` in flight."""

    def __init__(self, connection: JsonRpcConnection, exec_id: str, params: dict[str, Any], timeout_s: float,
                 outcome_of: Any, check_params: bool = True, observers: tuple[ChunkObserver, ...] = ()) -> None:
        self.exec_id = exec_id
        self._collector = _Collector(connection, ("exec/output", exec_id), observers)
        self.started_at = time.monotonic()
        self._outcome_of = outcome_of
        self.call: PendingCall = connection.request("exec/stream", params, timeout_s, check_params=check_params)
        self._collector.attach(self.call)
        self._outcome: StreamOutcome | None = None

    def done(self) -> bool:
        return self.call.done()

    def chunks_so_far(self) -> list[OutputChunk]:
        return self._collector.snapshot()

    def write_stdin(self, data: bytes) -> None:
        raise NotExpressible(NAME, LIVE_INPUT)

    def close_stdin(self) -> None:
        raise NotExpressible(NAME, LIVE_INPUT)

    def wait(self, timeout_s: float | None = None) -> StreamOutcome:
        if self._outcome is not None:
            return self._outcome
        try:
            result = self.call.result(timeout_s)
        except ApplicationErrorAnswer as error:
            self._collector.finish()
            self._outcome = StreamOutcome(
                ExecOutcome("infra", None, None, None, b"", b"", None, error=error),
                self._collector.record, self.started_at, self.call.answered_at, self.call.answer_sequence)
            return self._outcome
        except BaseException:
            self._collector.finish()
            raise
        self._collector.finish()
        self._collector.record.check_observers()
        self._outcome = StreamOutcome(
            result=self._outcome_of(result.get("result", {})),
            record=self._collector.record,
            started_at=self.started_at,
            answered_at=self.call.answered_at,
            answer_sequence=self.call.answer_sequence,
            live_streaming=result.get("live_streaming"),
            streams_separated=result.get("streams_separated"),
            stdout_capture=capture_stats(result.get("stdout_capture")),
            stderr_capture=capture_stats(result.get("stderr_capture")),
        )
        return self._outcome


class V1RunningFollow:
    """A ``logs/follow`` in flight; it answers when the stream ends."""

    def __init__(self, connection: JsonRpcConnection, stream_id: str, params: dict[str, Any], timeout_s: float) -> None:
        self.stream_id = stream_id
        self._collector = _Collector(connection, ("logs/output", stream_id))
        self.call: PendingCall = connection.request("logs/follow", params, timeout_s)
        self._collector.attach(self.call)

    def done(self) -> bool:
        return self.call.done()

    def chunks_so_far(self) -> list[OutputChunk]:
        return self._collector.snapshot()

    def await_output(self, timeout_s: float) -> bool:
        return self._collector.record.wait_until(lambda record: record.count > 0, timeout_s)

    @property
    def answer_sequence(self) -> int | None:
        return self.call.answer_sequence

    def wait(self, timeout_s: float | None = None) -> Any:
        try:
            return self.call.result(timeout_s)
        finally:
            self._collector.finish()
