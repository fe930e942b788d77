"""A small threaded JSON-RPC 2.0 server on stdin/stdout, shared by the reference plugins.

Every request runs on its own thread, so a slow call never blocks a fast one; one lock owns stdout.
Subclasses decide what a method does (``dispatch``) and how failures are encoded (``error_object``).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, BinaryIO


class RpcFailure(Exception):
    """A failure to send back as a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class StopServing(Exception):
    """Raised by a handler that has answered and wants the server to stop reading (``shutdown``)."""

    def __init__(self, result: Any = None) -> None:
        super().__init__("stop")
        self.result = result


INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601


class StdioJsonRpcServer:
    """Reads NDJSON requests from ``stdin``, answers on ``stdout``."""

    inline_methods: frozenset[str] = frozenset({"shutdown"})

    def __init__(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        self.stdin = stdin or sys.stdin.buffer
        self.stdout = stdout or sys.stdout.buffer
        self._write_lock = threading.Lock()
        self._inflight: set[threading.Thread] = set()
        self._inflight_lock = threading.Lock()

    # -- output ----------------------------------------------------------------------------------

    def write_message(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n"
        with self._write_lock:
            try:
                self.stdout.write(line)
                self.stdout.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass

    def notify(self, method: str, params: Any) -> None:
        self.write_message({"jsonrpc": "2.0", "method": method, "params": params})

    def respond(self, request_id: Any, result: Any) -> None:
        self.write_message({"jsonrpc": "2.0", "id": request_id, "result": result})

    def respond_error(self, request_id: Any, failure: RpcFailure) -> None:
        self.write_message({"jsonrpc": "2.0", "id": request_id, "error": self.error_object(failure)})

    def error_object(self, failure: RpcFailure) -> dict[str, Any]:
        error: dict[str, Any] = {"code": failure.code, "message": failure.message}
        if failure.data is not None:
            error["data"] = failure.data
        return error

    # -- input -----------------------------------------------------------------------------------

    def malformed(self, reason: str) -> None:
        self.respond_error(0, RpcFailure(INVALID_REQUEST, f"malformed message: {reason}"))

    def serve(self) -> int:
        """Serve until stdin ends or a handler stops the server; returns the process exit code."""
        self.on_start()
        try:
            for raw in iter(self.stdin.readline, b""):
                if not raw.strip():
                    continue
                if not self.handle_line(raw):
                    break
        finally:
            self.on_stop()
            self._wait_inflight(timeout_s=10.0)
        return 0

    def handle_line(self, raw: bytes) -> bool:
        """Handle one line; False stops the server."""
        try:
            message = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self.malformed(str(exc))
            return True
        if not isinstance(message, dict):
            self.malformed("expected a JSON object (batches are not supported)")
            return True
        if "jsonrpc" not in message:
            self.malformed("missing jsonrpc member")
            return True
        request_id = message.get("id")
        if "id" in message and (not isinstance(request_id, int) or isinstance(request_id, bool) or request_id < 0):
            self.malformed("id must be an unsigned integer")
            return True
        method = message.get("method")
        if method is None:
            return True  # a stray response: ignored
        if "id" not in message:
            return True  # a notification: never answered
        if not isinstance(method, str):
            self.malformed("method must be a string")
            return True
        params = message.get("params")
        if method in self.inline_methods:
            return self._run(request_id, method, params)
        thread = threading.Thread(target=self._run, args=(request_id, method, params), daemon=True)
        with self._inflight_lock:
            self._inflight.add(thread)
        thread.start()
        return True

    def log(self, text: str) -> None:
        """Diagnostics go to stderr, never stdout."""
        try:
            sys.stderr.write(f"{self.log_prefix}: {text}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass

    log_prefix = "plugin"

    def _run(self, request_id: int, method: str, params: Any) -> bool:
        started = time.monotonic()
        try:
            result = self.dispatch(method, params)
        except StopServing as stop:
            self.log(f"#{request_id} {method}: ok, stopping")
            self.respond(request_id, stop.result)
            return False
        except RpcFailure as failure:
            self.log(f"#{request_id} {method}: error {failure.code} {failure.message}")
            self.respond_error(request_id, failure)
        except Exception as exc:  # a bug in the reference provider must still answer
            self.log(f"#{request_id} {method}: internal error {exc!r}")
            self.respond_error(request_id, self.internal_error(method, exc))
        else:
            self.log(f"#{request_id} {method}: ok in {(time.monotonic() - started) * 1000:.0f} ms")
            self.respond(request_id, result)
        finally:
            with self._inflight_lock:
                self._inflight.discard(threading.current_thread())
        return True

    def _wait_inflight(self, timeout_s: float) -> None:
        with self._inflight_lock:
            threads = list(self._inflight)
        for thread in threads:
            thread.join(timeout=timeout_s)

    # -- for subclasses --------------------------------------------------------------------------

    def on_start(self) -> None:
        """Called before the first line is read."""

    def on_stop(self) -> None:
        """Called once stdin ended or the server was stopped: end sessions, cancel work."""

    def dispatch(self, method: str, params: Any) -> Any:
        raise RpcFailure(METHOD_NOT_FOUND, f"unknown method {method}")

    def internal_error(self, method: str, exc: Exception) -> RpcFailure:
        return RpcFailure(-32603, f"internal error in {method}: {exc}")
