"""A small threaded JSON-RPC 2.0 server on stdin/stdout, shared by the reference plugins.

Every request runs on its own thread, so a slow call never blocks a fast one; one lock owns stdout.
Subclasses decide what a method does (``dispatch``) and how failures are encoded (``error_object``).
The streams and the environment are constructor arguments, so a server can also run inside another
process (on a thread, over pipes); ``StdioJsonRpcServer`` lists its seams.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, BinaryIO, NoReturn, TextIO


class RpcFailure(Exception):
    """A failure to send back as a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class NoAnswer(BaseException):
    """Raised by a handler that must end without answering (a variant that never answers a call): the
    request's thread ends quietly. A BaseException, so no ``except Exception`` turns it into an answer."""


class StopServing(Exception):
    """Raised by a handler that has answered and wants the server to stop reading (``shutdown``)."""

    def __init__(self, result: Any = None) -> None:
        super().__init__("stop")
        self.result = result


INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601


class StdioJsonRpcServer:
    """Reads NDJSON requests from ``stdin``, answers on ``stdout``.

    Seams (what a subclass, a test double or an in-process host may replace, each a small method or a
    constructor argument — never a copy of the loop):

    - ``__init__(stdin=None, stdout=None, stderr=None, environ=None, exit_now=None)``: binary ``stdin``/``stdout``
      (default ``sys.stdin.buffer``/``sys.stdout.buffer``), a text ``stderr`` for ``log()`` (default
      ``sys.stderr``), and ``environ``, the mapping the server and its backend read instead of
      ``os.environ`` (default ``os.environ``). It is copied, without ``BASH_ENV``; ``os.environ`` is
      never changed.
    - ``lines()``: the raw lines read, until the input ends (default: ``stdin.readline`` until EOF).
    - ``accept_line(raw) -> bool``: whether a line is handled at all (default: blank lines are skipped).
    - ``handle_line(raw) -> bool``: parse and route one line; False stops the server.
    - ``exit_now(code)``: end the whole provider at once, unanswered and unflushed, as a crash does
      (default ``os._exit(code)``; a host running the server on a thread passes its own ``exit_now``
      to the constructor, which ends the serving thread instead).
    - ``on_start()``, ``on_stop()``, ``dispatch(method, params)``, ``error_object(failure)``,
      ``malformed(reason)``, ``internal_error(method, exc)``, ``inline_methods``.
    - ``admit(method)``: admission before a request's work starts (default: everything is admitted); it
      answers a release callable or raises ``RpcFailure``, which is the request's answer.
    - ``exit_code`` (what ``serve()`` returns) and ``shutdown_wait_s`` (how long in-flight requests may
      still finish once the input ended).

    Everything a server writes goes through ``self.stdout`` (under ``_write_lock``) and ``self.stderr``,
    never ``sys.stdout``/``sys.stderr``.
    """

    inline_methods: frozenset[str] = frozenset({"shutdown"})
    shutdown_wait_s = 10.0

    def __init__(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None,
                 stderr: TextIO | None = None, environ: Mapping[str, str] | None = None,
                 exit_now: Callable[[int], NoReturn] | None = None) -> None:
        self._exit_hook = exit_now
        self._exiting = False
        self.stdin = stdin if stdin is not None else sys.stdin.buffer
        self.stdout = stdout if stdout is not None else sys.stdout.buffer
        self.stderr = stderr if stderr is not None else sys.stderr
        self.environ: dict[str, str] = dict(os.environ if environ is None else environ)
        # Never into the shell of a command this server runs, whoever set it.
        self.environ.pop("BASH_ENV", None)
        self._write_lock = threading.Lock()
        self._inflight: set[threading.Thread] = set()
        self._inflight_lock = threading.Lock()
        self.exit_code = 0  # a server whose transport failed sets it non-zero

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
            for raw in self.lines():
                if self.accept_line(raw) and not self.handle_line(raw):
                    break
        finally:
            self.on_stop()
            self._wait_inflight(timeout_s=self.shutdown_wait_s)
        return self.exit_code

    def lines(self) -> Iterator[bytes]:
        """The raw lines of the input, newline included, until it ends."""
        return iter(self.stdin.readline, b"")

    def accept_line(self, raw: bytes) -> bool:
        """Whether ``raw`` is handled at all: blank lines between messages are skipped."""
        return bool(raw.strip())

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
            self.stderr.write(f"{self.log_prefix}: {text}\n")
            self.stderr.flush()
        except (OSError, ValueError):
            pass

    def exit_now(self, code: int) -> NoReturn:
        """End the provider at once with exit code ``code``: no answer, no ``on_stop``, nothing flushed —
        what a crash looks like from the host. An override (a server on a thread) must not return either:
        it ends the serving loop with ``code`` and raises in the calling thread."""
        self._exiting = True
        if self._exit_hook is not None:
            self._exit_hook(code)
        os._exit(code)

    log_prefix = "plugin"

    def _run(self, request_id: int, method: str, params: Any) -> bool:
        started = time.monotonic()
        release = None
        try:
            release = self.admit(method)  # a refusal is answered like any failure, before any work
            result = self.dispatch(method, params)
        except StopServing as stop:
            self.log(f"#{request_id} {method}: ok, stopping")
            self.respond(request_id, stop.result)
            return False
        except RpcFailure as failure:
            self.log(f"#{request_id} {method}: error {failure.code} {failure.message}")
            self.respond_error(request_id, failure)
        except Exception as exc:  # noqa: BLE001 - a bug in the reference provider must still answer
            self.log(f"#{request_id} {method}: internal error {exc!r}")
            self.respond_error(request_id, self.internal_error(method, exc))
        except NoAnswer:
            self.log(f"#{request_id} {method}: left unanswered")
            return True
        except BaseException:
            if self._exiting:  # exit_now's hook ended the provider: this thread ends with it, quietly
                return False
            raise
        else:
            self.log(f"#{request_id} {method}: ok in {(time.monotonic() - started) * 1000:.0f} ms")
            self.respond(request_id, result)
        finally:
            if release is not None:
                release()  # after the answer was written: the request's slot covers its delivery too
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

    def admit(self, method: str) -> Callable[[], None] | None:
        """Admit a request before its work starts: a callable releasing its slot once it was answered, or
        None when nothing is held. Raise ``RpcFailure`` to refuse it (that refusal is the answer)."""
        return None

    def dispatch(self, method: str, params: Any) -> Any:
        raise RpcFailure(METHOD_NOT_FOUND, f"unknown method {method}")

    def internal_error(self, method: str, exc: Exception) -> RpcFailure:
        return RpcFailure(-32603, f"internal error in {method}: {exc}")


class ArgumentsEnd(Exception):
    """The command line asked to stop before serving (``--help``, a usage error): the exit status."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def parse_arguments(parser: argparse.ArgumentParser, argv: Sequence[str], stdout: BinaryIO,
                    stderr: TextIO) -> argparse.Namespace:
    """``parser.parse_args(argv)`` that writes help to ``stdout`` and errors to ``stderr`` and raises
    ``ArgumentsEnd`` instead of ``SystemExit`` (which a thread would swallow)."""

    def print_message(message: str, file: Any = None) -> None:
        if not message:
            return
        try:
            if file is sys.stdout:
                stdout.write(message.encode("utf-8"))
                stdout.flush()
            else:
                stderr.write(message)
                stderr.flush()
        except (OSError, ValueError):
            pass

    def exit(status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            print_message(message, stderr)
        raise ArgumentsEnd(status)

    parser._print_message = print_message  # type: ignore[method-assign]
    parser.exit = exit  # type: ignore[method-assign]
    return parser.parse_args(list(argv))
