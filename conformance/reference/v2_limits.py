"""Protocol v2's finite transport budgets (v2 §2.2, §6.2) as the reference plugin enforces them, and the
refusals they (and malformed v2 params) answer with."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from conformance.reference.host_backend import BackendError
from conformance.reference.stdio_server import RpcFailure

INVALID_PARAMS = -32600


@dataclass(frozen=True)
class TransportLimits:
    """The per-connection budgets this plugin enforces, at their protocol defaults. A test or a variant
    lowers one with ``dataclasses.replace`` on the plugin class's ``limits``."""

    active_io: int = 1024
    pending_opens: int = 1024
    provider_requests: int = 2048
    reserved_requests: int = 64
    control_message_bytes: int = 1024 * 1024
    event_queue_bytes: int = 1024 * 1024
    event_queue_messages: int = 256
    retained_output_bytes: int = 16 * 1024 * 1024
    buffered_value_bytes: int = 16 * 1024 * 1024
    output_progress_timeout_s: float = 30.0
    open_timeout_s: float = 10.0
    shutdown_timeout_s: float = 5.0


class Budget:
    """A count of held slots that never waits: admission either takes a slot at once or is refused."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    def try_acquire(self, also_held: int = 0) -> bool:
        """Take a slot unless ``held`` plus ``also_held`` (slots counted elsewhere) reached the limit."""
        with self._lock:
            if self.held + also_held >= self.limit:
                return False
            self.held += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.held -= 1


def overloaded(limit: str) -> BackendError:
    return BackendError("overloaded", f"transport capacity exhausted: {limit}; operation did not start",
                        limit=limit, not_started=True)


def limit_exceeded(limit: str, max_bytes: int) -> BackendError:
    return BackendError("limit_exceeded", f"{limit} exceeds the {max_bytes} byte buffer limit",
                        limit=limit, max_bytes=max_bytes)


def invalid_params(method: str, reason: str) -> RpcFailure:
    return RpcFailure(INVALID_PARAMS, f"invalid params for {method}: {reason}")


def optional_count(method: str, params: dict, key: str, prefix: str = "") -> int | None:
    """``params[key]`` as an unsigned integer, None when absent or null."""
    value = params.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise invalid_params(method, f"{prefix}{key} must be an unsigned integer or null")
    return value
