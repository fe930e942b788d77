"""Operations that stream notifications before they answer: exec/stream and logs/follow."""

from __future__ import annotations

import base64
import threading
import time
from typing import Any

from conformance.adapter import CaptureStats, ExecOutcome, OutputChunk, StreamOutcome
from conformance.dialects.jsonrpc import Inbound, JsonRpcConnection, PendingCall
from conformance.errors import ApplicationErrorAnswer

# How long to keep listening after an answer, to catch chunks a provider sends too late.
LATE_GRACE_S = 0.3


class _Collector:
    """Collects the notifications routed to one exec or stream, as they arrive."""

    def __init__(self, connection: JsonRpcConnection, route: tuple[str, str]) -> None:
        self.connection = connection
        self.route = route
        self.chunks: list[OutputChunk] = []
        self._lock = threading.Lock()
        connection.subscribe(route, self._on_notification)

    def _on_notification(self, inbound: Inbound) -> None:
        params = inbound.message.get("params") or {}
        try:
            data = base64.b64decode(params.get("data_b64", ""))
        except (ValueError, TypeError):
            data = b""  # the schema check already reported the bad encoding
        with self._lock:
            self.chunks.append(OutputChunk(inbound.at, inbound.sequence, str(params.get("stream", "stdout")), data))

    def snapshot(self) -> list[OutputChunk]:
        with self._lock:
            return list(self.chunks)

    def finish(self) -> None:
        time.sleep(LATE_GRACE_S)
        self.connection.unsubscribe(self.route)


def _capture(raw: Any) -> CaptureStats | None:
    if not isinstance(raw, dict):
        return None
    return CaptureStats(int(raw.get("observed_bytes", 0)), int(raw.get("retained_bytes", 0)),
                        int(raw.get("omitted_bytes", 0)), bool(raw.get("truncated", False)))


class V1RunningExec:
    """An ``exec/stream`` in flight."""

    def __init__(self, connection: JsonRpcConnection, exec_id: str, params: dict[str, Any], timeout_s: float,
                 outcome_of: Any, check_params: bool = True) -> None:
        self.exec_id = exec_id
        self._collector = _Collector(connection, ("exec/output", exec_id))
        self.started_at = time.monotonic()
        self._outcome_of = outcome_of
        self.call: PendingCall = connection.request("exec/stream", params, timeout_s, check_params=check_params)
        self._outcome: StreamOutcome | None = None

    def done(self) -> bool:
        return self.call.done()

    def chunks_so_far(self) -> list[OutputChunk]:
        return self._collector.snapshot()

    def wait(self, timeout_s: float | None = None) -> StreamOutcome:
        if self._outcome is not None:
            return self._outcome
        try:
            result = self.call.result(timeout_s)
        except ApplicationErrorAnswer as error:
            self._collector.finish()
            self._outcome = StreamOutcome(
                ExecOutcome("infra", None, None, None, b"", b"", None, error=error),
                self._collector.snapshot(), self.started_at, self.call.answered_at, self.call.answer_sequence)
            return self._outcome
        except BaseException:
            self._collector.finish()
            raise
        self._collector.finish()
        chunks = self._collector.snapshot()
        answered = self.call.answer_sequence
        self._outcome = StreamOutcome(
            result=self._outcome_of(result.get("result", {})),
            chunks=chunks,
            started_at=self.started_at,
            answered_at=self.call.answered_at,
            answer_sequence=answered,
            live_streaming=result.get("live_streaming"),
            streams_separated=result.get("streams_separated"),
            stdout_capture=_capture(result.get("stdout_capture")),
            stderr_capture=_capture(result.get("stderr_capture")),
            late_chunks=sum(1 for c in chunks if answered is not None and c.sequence > answered),
        )
        return self._outcome


class V1RunningFollow:
    """A ``logs/follow`` in flight; it answers when the stream ends."""

    def __init__(self, connection: JsonRpcConnection, stream_id: str, params: dict[str, Any], timeout_s: float) -> None:
        self.stream_id = stream_id
        self._collector = _Collector(connection, ("logs/output", stream_id))
        self.call: PendingCall = connection.request("logs/follow", params, timeout_s)
        self._finished = False

    def done(self) -> bool:
        return self.call.done()

    def chunks_so_far(self) -> list[OutputChunk]:
        return self._collector.snapshot()

    @property
    def answer_sequence(self) -> int | None:
        return self.call.answer_sequence

    def wait(self, timeout_s: float | None = None) -> Any:
        try:
            return self.call.result(timeout_s)
        finally:
            if not self._finished:
                self._finished = True
                self._collector.finish()
