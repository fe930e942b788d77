"""Control-plane events (v1 §10) for the operations that ask for them with ``events: {route_id,
correlation_id?}``: ``operation_started``, then exactly one ``operation_completed`` or
``operation_failed``, all sharing one operation id, numbered per source from 1 without gaps."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any


def timestamp(seconds: float) -> dict[str, int]:
    """v1's structural timestamp (v1 §6); an RFC 3339 string is what v2 writes, and a v1 host cannot read it."""
    return {"secs_since_epoch": int(seconds), "nanos_since_epoch": int(seconds % 1 * 1e9)}


class Events:
    """One event source of one plugin process."""

    def __init__(self, provider_kind: str, send: Callable[[dict[str, Any]], None]) -> None:
        self.provider_kind, self.send = provider_kind, send
        self.source_id, self.sequence = uuid.uuid4().hex, 0
        self.lock = threading.Lock()

    def emit(self, operation: dict[str, Any], body: dict[str, Any]) -> None:
        route = operation["route"]
        with self.lock:  # sequence order and wire order agree
            self.sequence += 1
            event = {"id": {"source_id": self.source_id, "sequence": self.sequence},
                     "occurred_at": timestamp(time.time()), "provider": self.provider_kind,
                     "subject": operation["subject"], "operation_id": operation["id"], **body}
            if route.get("correlation_id") is not None:
                event["correlation_id"] = route["correlation_id"]  # copied verbatim, never interpreted
            self.send({"jsonrpc": "2.0", "method": "host/event",
                       "params": {"route_id": route["route_id"], "event": event}})  # route_id echoed as given

    def start(self, route: dict[str, Any], action: str, params: dict[str, Any]) -> dict[str, Any]:
        subject = {"type": "sandbox", **({"id": params["sandbox_id"]} if "sandbox_id" in params else {})}
        operation = {"route": route, "action": action, "subject": subject, "id": uuid.uuid4().hex,
                     "started": time.monotonic()}
        self.emit(operation, {"type": "operation_started", "action": action})
        return operation

    def end(self, operation: dict[str, Any], reply: dict[str, Any]) -> None:
        """The one terminal event, from the operation's answer: it must reach the wire before that answer."""
        elapsed = time.monotonic() - operation["started"]
        body = {"action": operation["action"], "duration": {"secs": int(elapsed), "nanos": int(elapsed % 1 * 1e9)}}
        status = reply["result"].get("status") if isinstance(reply.get("result"), dict) else None
        if status is not None:
            operation["subject"]["id"] = status["id"]  # a create's events name the id it assigned
        if "error" in reply:
            report = reply["error"].get("data", {}).get("report") or {
                "kind": "invalid_spec", "message": reply["error"]["message"], "retryable": False, "causes": []}
            self.emit(operation, {"type": "operation_failed", **body, "error": report})
        else:
            self.emit(operation, {"type": "operation_completed", **body})
