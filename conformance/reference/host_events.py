"""Control-plane events for operations that ask for them (protocol section 10)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any


def _now() -> dict[str, int]:
    """The v1 timestamp: the structural form of a SystemTime (protocol sections 6 and 10)."""
    now = time.time_ns()
    return {"secs_since_epoch": now // 1_000_000_000, "nanos_since_epoch": now % 1_000_000_000}


def _duration(seconds: float) -> dict[str, int]:
    whole = int(seconds)
    return {"secs": whole, "nanos": int((seconds - whole) * 1e9)}


class EventSource:
    """One live event source: one ``source_id``, sequence numbers from 1 without gaps."""

    def __init__(self, provider_kind: str, notify: Callable[[str, Any], None]) -> None:
        self.provider_kind = provider_kind
        self.source_id = uuid.uuid4().hex
        self._sequence = 0
        self._lock = threading.Lock()
        self._notify = notify

    def emit(self, route: dict[str, Any], subject: dict[str, Any], operation_id: str, body: dict[str, Any]) -> None:
        with self._lock:  # sequence order and wire order must agree
            self._sequence += 1
            event: dict[str, Any] = {
                "id": {"source_id": self.source_id, "sequence": self._sequence},
                "occurred_at": _now(), "provider": self.provider_kind, "subject": subject,
                "operation_id": operation_id, **body,
            }
            if route.get("correlation_id") is not None:
                event["correlation_id"] = route["correlation_id"]
            self._notify("host/event", {"route_id": route["route_id"], "event": event})

    def operation(self, route: dict[str, Any] | None, action: str, subject: dict[str, Any]) -> Operation:
        return Operation(self, route, action, subject)


class Operation:
    """``operation_started`` now; exactly one terminal event when the work ends (before the answer)."""

    def __init__(self, source: EventSource, route: dict[str, Any] | None, action: str, subject: dict[str, Any]) -> None:
        self.source = source
        self.route = route
        self.action = action
        self.subject = subject
        self.operation_id = uuid.uuid4().hex
        self.started = time.monotonic()
        self._emit({"type": "operation_started", "action": action})

    def _emit(self, body: dict[str, Any]) -> None:
        if self.route is not None:
            self.source.emit(self.route, self.subject, self.operation_id, body)

    def progress(self, code: str, message: str) -> None:
        self._emit({"type": "operation_progress", "action": self.action, "progress": {"code": code, "message": message}})

    def completed(self, subject: dict[str, Any] | None = None) -> None:
        if subject is not None:
            self.subject = subject
        self._emit({"type": "operation_completed", "action": self.action,
                    "duration": _duration(time.monotonic() - self.started)})

    def failed(self, report: dict[str, Any]) -> None:
        self._emit({"type": "operation_failed", "action": self.action,
                    "duration": _duration(time.monotonic() - self.started), "error": report})
