"""Broken variants of the v1 host plugin's interactive methods: stdio processes, PTYs, log follows."""

from __future__ import annotations

import base64
import threading
from typing import Any

from conformance.reference.host_backend import BackendError, not_found
from conformance.reference.host_interactive import _encode, _kill_group
from conformance.reference.host_plugin import HostPlugin
from conformance.reference.sanitize import Sanitizer
from tests.mutants import mutant


class _PerIdLocks:
    """One lock per process or terminal id."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def __call__(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())


def _sanitized(answer: dict[str, Any], sanitizer: Sanitizer) -> dict[str, Any]:
    data = answer.get("data_b64")
    if data is None:
        return answer
    return {"data_b64": _encode(sanitizer.feed(base64.b64decode(data)))}


# -- stdio processes -------------------------------------------------------------------------------


@mutant("stdio-exit-code-dropped")
class StdioExitCodeDropped(HostPlugin):
    """exec/stdio_wait reports termination exited but never the exit code."""

    def m_exec_stdio_wait(self, params: dict[str, Any]) -> Any:
        return {**super().m_exec_stdio_wait(params), "exit_code": None}


@mutant("stdio-output-sanitized")
class StdioOutputSanitized(HostPlugin):
    """Applies the exec output sanitizer (strip_ansi) to a stdio process's output too."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sanitizers: dict[str, Sanitizer] = {}

    def m_exec_stdio_output(self, params: dict[str, Any]) -> Any:
        sanitizer = self.sanitizers.setdefault(params["process_id"], Sanitizer("strip_ansi"))
        return _sanitized(super().m_exec_stdio_output(params), sanitizer)


@mutant("stdio-duplicate-replaces")
class StdioDuplicateReplaces(HostPlugin):
    """A second exec/stdio_open with an id in use kills the first process and takes its id."""

    def m_exec_stdio_open(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            previous = self._processes.pop(params["process_id"], None)
        if previous is not None:
            _kill_group(previous.proc)
        return super().m_exec_stdio_open(params)


@mutant("stdio-poll-holds-process-lock")
class StdioPollHoldsProcessLock(HostPlugin):
    """Serialises every call on a stdio process with one lock, which a waiting output poll holds."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.process_lock = _PerIdLocks()

    def m_exec_stdio_output(self, params: dict[str, Any]) -> Any:
        with self.process_lock(params["process_id"]):
            return super().m_exec_stdio_output(params)

    def m_exec_stdio_input(self, params: dict[str, Any]) -> Any:
        with self.process_lock(params["process_id"]):
            return super().m_exec_stdio_input(params)

    def m_exec_stdio_terminate(self, params: dict[str, Any]) -> Any:
        with self.process_lock(params["process_id"]):
            return super().m_exec_stdio_terminate(params)


# -- terminals -------------------------------------------------------------------------------------


@mutant("pty-output-sanitized")
class PtyOutputSanitized(HostPlugin):
    """Strips ANSI escape sequences from terminal output."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sanitizers: dict[str, Sanitizer] = {}

    def m_pty_output(self, params: dict[str, Any]) -> Any:
        sanitizer = self.sanitizers.setdefault(params["pty_id"], Sanitizer("strip_ansi"))
        while True:  # a chunk that was all escape sequences is no answer to a long poll
            answer = _sanitized(super().m_pty_output(params), sanitizer)
            if answer["data_b64"] != "":
                return answer


@mutant("pty-duplicate-replaces")
class PtyDuplicateReplaces(HostPlugin):
    """A second pty/open with an id in use closes the first terminal and takes its id."""

    def m_pty_open(self, params: dict[str, Any]) -> Any:
        self.m_pty_close({"pty_id": params["pty_id"]})
        return super().m_pty_open(params)


@mutant("pty-resize-ignored")
class PtyResizeIgnored(HostPlugin):
    """Answers pty/resize (it declares pty.resize) without changing the terminal's size."""

    def m_pty_resize(self, params: dict[str, Any]) -> Any:
        self._pty(params)
        return None


@mutant("pty-poll-holds-session-lock")
class PtyPollHoldsSessionLock(HostPlugin):
    """Serialises every call on a terminal with one lock, which a waiting output poll holds."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.session_lock = _PerIdLocks()

    def m_pty_output(self, params: dict[str, Any]) -> Any:
        with self.session_lock(params["pty_id"]):
            return super().m_pty_output(params)

    def m_pty_input(self, params: dict[str, Any]) -> Any:
        with self.session_lock(params["pty_id"]):
            return super().m_pty_input(params)

    def m_pty_resize(self, params: dict[str, Any]) -> Any:
        with self.session_lock(params["pty_id"]):
            return super().m_pty_resize(params)


# -- logs ------------------------------------------------------------------------------------------


@mutant("logs-output-after-answer")
class LogsOutputAfterAnswer(HostPlugin):
    """Answers a provision-log follow at once and sends the log lines from a background thread after it."""

    def m_logs_follow(self, params: dict[str, Any]) -> Any:
        if params["source"] != "provision":
            return super().m_logs_follow(params)
        sandbox = self.backend.get(params["sandbox_id"])

        def send_later() -> None:
            for line in sandbox.provision_log:
                data = _encode(line.encode() + b"\n")
                self.notify("logs/output", {"stream_id": params["stream_id"], "data_b64": data})

        timer = threading.Timer(0.05, send_later)
        timer.daemon = True
        timer.start()
        return None


@mutant("stream-cancel-ignored")
class StreamCancelIgnored(HostPlugin):
    """Answers stream/cancel without ending the follow it names."""

    def m_stream_cancel(self, params: dict[str, Any]) -> Any:
        return None


@mutant("pty-unknown-id-not-found")
class PtyUnknownIdNotFound(HostPlugin):
    """Refuses a terminal id that is not open as not_found of a resource v1 does not have ("pty"), instead of
    invalid_spec naming pty_id."""

    def _pty(self, params: dict[str, Any]) -> Any:
        try:
            return super()._pty(params)
        except BackendError:
            raise not_found("pty", str(params.get("pty_id"))) from None
