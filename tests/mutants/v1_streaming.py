"""Broken variants of the v1 host plugin's streaming exec: chunk order and tagging, honesty flags,
retention accounting, dropped output, concurrency, sanitization of chunks, and cancellation; plus
control variants that honestly offer what the reference does not (combined streams, replayed output)."""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable
from typing import Any

from conformance.reference.host_backend import HostBackend
from conformance.reference.host_plugin import HostPlugin, application_error
from conformance.reference.sanitize import Sanitizer, sanitize
from tests.mutants import mutant

Forward = Callable[[str, bytes], None]


class Relay:
    """Sits between the backend and the exec/output notifications of one streaming exec."""

    def __init__(self, forward: Forward) -> None:
        self.forward = forward

    def __call__(self, stream: str, chunk: bytes) -> None:
        self.forward(stream, chunk)

    def close(self) -> None:
        """The command ended and its output was drained; the response is about to be built."""


class _InterceptsOutput(HostPlugin):
    """Streams a command's output through the relay ``relay_for`` makes."""

    def relay_for(self, forward: Forward) -> Relay:
        raise NotImplementedError

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        forward = kwargs.get("on_output")
        if forward is None:
            return super().run_spec(sandbox_id, spec, **kwargs)
        relay = self.relay_for(forward)
        run = super().run_spec(sandbox_id, spec, **{**kwargs, "on_output": relay})
        relay.close()
        return run


class _RewritesStreamAnswer(HostPlugin):
    def rewrite_answer(self, answer: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        return self.rewrite_answer(super().m_exec_stream(params))


# -- order ---------------------------------------------------------------------------------------


class _HeldUntilResponse(Relay):
    def __init__(self, forward: Forward, pending: dict[int, Callable[[], None]]) -> None:
        super().__init__(forward)
        self.pending = pending
        self.held: list[tuple[str, bytes]] = []

    def __call__(self, stream: str, chunk: bytes) -> None:
        self.held.append((stream, chunk))

    def close(self) -> None:
        # The server writes the response on the thread that served the request: flush after it.
        self.pending[threading.get_ident()] = self.flush

    def flush(self) -> None:
        for stream, chunk in self.held:
            self.forward(stream, chunk)


@mutant("output-after-response")
class OutputAfterResponse(_InterceptsOutput):
    """Queues a stream's output and flushes it only once the exec/stream response has been written."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._flush_after_response: dict[int, Callable[[], None]] = {}  # by the thread serving the request

    def relay_for(self, forward: Forward) -> Relay:
        return _HeldUntilResponse(forward, self._flush_after_response)

    def respond(self, request_id: Any, result: Any) -> None:
        super().respond(request_id, result)
        flush = self._flush_after_response.pop(threading.get_ident(), None)
        if flush is not None:
            flush()


class _SwapsPairs(Relay):
    def __init__(self, forward: Forward) -> None:
        super().__init__(forward)
        self.waiting: dict[str, bytes] = {}
        self.lock = threading.Lock()

    def __call__(self, stream: str, chunk: bytes) -> None:
        with self.lock:
            first = self.waiting.pop(stream, None)
            if first is None:
                self.waiting[stream] = chunk
                return
        self.forward(stream, chunk)
        self.forward(stream, first)

    def close(self) -> None:
        for stream, chunk in self.waiting.items():
            self.forward(stream, chunk)


@mutant("output-chunks-reordered")
class OutputChunksReordered(_InterceptsOutput):
    """Sends each pair of consecutive chunks of a stream in swapped order (two racing sender threads)."""

    def relay_for(self, forward: Forward) -> Relay:
        return _SwapsPairs(forward)


# -- tagging and honesty flags -------------------------------------------------------------------


class _TagsEverythingStdout(Relay):
    def __call__(self, stream: str, chunk: bytes) -> None:
        self.forward("stdout", chunk)


@mutant("stderr-streamed-as-stdout")
class StderrStreamedAsStdout(_InterceptsOutput):
    """Tags stderr chunks as stdout while the result still claims separated streams."""

    def relay_for(self, forward: Forward) -> Relay:
        return _TagsEverythingStdout(forward)


@mutant("combined-streams-honest")
class CombinedStreamsHonest(_RewritesStreamAnswer):
    """Control: a backend that merges stderr into stdout and says so, in its declaration and results."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["exec"]["streams_separated"] = False
        return capabilities

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        return super().run_spec(sandbox_id, {**spec, "command": "exec 2>&1\n" + spec["command"]}, **kwargs)

    def rewrite_answer(self, answer: dict[str, Any]) -> dict[str, Any]:
        return {**answer, "streams_separated": False}


class _Replay(Relay):
    def __init__(self, forward: Forward) -> None:
        super().__init__(forward)
        self.held: list[tuple[str, bytes]] = []

    def __call__(self, stream: str, chunk: bytes) -> None:
        self.held.append((stream, chunk))

    def close(self) -> None:
        for stream, chunk in self.held:
            self.forward(stream, chunk)


class _ReplaysOutput(_InterceptsOutput):
    """Buffers a stream's output and sends it all once the command has ended."""

    def relay_for(self, forward: Forward) -> Relay:
        return _Replay(forward)


@mutant("replayed-output-claims-live")
class ReplayedOutputClaimsLive(_ReplaysOutput):
    """Replays buffered output at the end of the command, yet claims live_streaming."""


@mutant("replayed-output-honest")
class ReplayedOutputHonest(_ReplaysOutput):
    """Control: replays buffered output at the end and says live_streaming false, declared and claimed."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["exec"]["live_streaming"] = False
        return capabilities

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        return {**super().m_exec_stream(params), "live_streaming": False}


@mutant("live-streaming-claimed-undeclared")
class LiveStreamingClaimedUndeclared(HostPlugin):
    """Declares exec.live_streaming false at initialize but claims live_streaming in results."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["exec"]["live_streaming"] = False
        return capabilities


@mutant("separated-claimed-undeclared")
class SeparatedClaimedUndeclared(HostPlugin):
    """Declares exec.streams_separated false at initialize but claims separated streams in results."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["exec"]["streams_separated"] = False
        return capabilities


# -- retention and volume ------------------------------------------------------------------------


@mutant("retention-keeps-tail-only")
class RetentionKeepsTailOnly(HostPlugin):
    """Keeps only the last retained_output_limit bytes instead of a head and a tail."""

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        limit = kwargs.get("retain_limit")
        run = super().run_spec(sandbox_id, spec, **{**kwargs, "retain_limit": None})
        if limit is not None:
            run.stdout = run.stdout[len(run.stdout) - limit:] if limit else b""
            run.stderr = run.stderr[len(run.stderr) - limit:] if limit else b""
            for capture, kept in ((run.stdout_capture, run.stdout), (run.stderr_capture, run.stderr)):
                capture.update(retained_bytes=len(kept), omitted_bytes=capture["observed_bytes"] - len(kept))
        return run


@mutant("observed-bytes-zero")
class ObservedBytesZero(_RewritesStreamAnswer):
    """Reports observed_bytes 0 in both capture statistics."""

    def rewrite_answer(self, answer: dict[str, Any]) -> dict[str, Any]:
        for name in ("stdout_capture", "stderr_capture"):
            answer[name] = {**answer[name], "observed_bytes": 0}
        return answer


class _CapsBytes(Relay):
    def __init__(self, forward: Forward, limit: int) -> None:
        super().__init__(forward)
        self.room = {"stdout": limit, "stderr": limit}

    def __call__(self, stream: str, chunk: bytes) -> None:
        room = self.room[stream]
        if room > 0:
            self.forward(stream, chunk[:room])
            self.room[stream] = max(0, room - len(chunk))


@mutant("retention-caps-notifications")
class RetentionCapsNotifications(_InterceptsOutput):
    """Stops streaming a stream's output once retained_output_limit bytes of it were sent."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._limits: dict[int, int | None] = {}  # by the thread serving the request

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        self._limits[threading.get_ident()] = params.get("retained_output_limit")
        try:
            return super().m_exec_stream(params)
        finally:
            self._limits.pop(threading.get_ident(), None)

    def relay_for(self, forward: Forward) -> Relay:
        limit = self._limits.get(threading.get_ident())
        return Relay(forward) if limit is None else _CapsBytes(forward, limit)


@mutant("retention-limit-zero-ignored")
class RetentionLimitZeroIgnored(HostPlugin):
    """Reads a retained_output_limit of 0 as "no limit" and retains everything."""

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        if kwargs.get("retain_limit") == 0:
            kwargs["retain_limit"] = None
        return super().run_spec(sandbox_id, spec, **kwargs)


@mutant("capture-truncated-when-omitted")
class CaptureTruncatedWhenOmitted(_RewritesStreamAnswer):
    """Sets truncated whenever bytes were omitted from the retained copy, though none were lost."""

    def rewrite_answer(self, answer: dict[str, Any]) -> dict[str, Any]:
        for name in ("stdout_capture", "stderr_capture"):
            if answer[name]["omitted_bytes"] > 0:
                answer[name] = {**answer[name], "truncated": True}
        return answer


class _DropsAfterCount(Relay):
    def __init__(self, forward: Forward, most: int) -> None:
        super().__init__(forward)
        self.left = most

    def __call__(self, stream: str, chunk: bytes) -> None:
        if self.left > 0:
            self.left -= 1
            self.forward(stream, chunk)


@mutant("output-dropped-after-limit")
class OutputDroppedAfterLimit(_InterceptsOutput):
    """Sends at most 1024 output notifications per exec and silently drops the rest."""

    def relay_for(self, forward: Forward) -> Relay:
        return _DropsAfterCount(forward, 1024)


# -- concurrency ---------------------------------------------------------------------------------


@mutant("global-exec-lock")
class GlobalExecLock(HostPlugin):
    """Runs one command at a time across the whole plugin."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._one_at_a_time = threading.Lock()

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        with self._one_at_a_time:
            return super().run_spec(sandbox_id, spec, **kwargs)


@mutant("stream-blocks-server")
class StreamBlocksServer(HostPlugin):
    """Serves exec/stream on the thread that reads requests, so nothing else is read until it ends."""

    inline_methods = frozenset({"shutdown", "exec/stream"})


@mutant("exec-output-cross-talk")
class ExecOutputCrossTalk(HostPlugin):
    """Tags output notifications with the id of the most recently started exec, not their own."""

    _latest_exec_id = ""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        self._latest_exec_id = params["exec_id"]
        return super().m_exec_stream(params)

    def notify(self, method: str, params: Any) -> None:
        if method == "exec/output":
            params = {**params, "exec_id": self._latest_exec_id}
        super().notify(method, params)


# -- interpreter and sanitization ----------------------------------------------------------------


@mutant("stream-through-sh")
class StreamThroughSh(HostPlugin):
    """Runs streamed commands with `sh -c` (buffered ones still under Bash)."""

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        if "on_output" in kwargs:
            spec = {**spec, "command": "exec " + shlex.join(["sh", "-c", spec["command"]])}
        return super().run_spec(sandbox_id, spec, **kwargs)


class _StatelessSanitizer(Sanitizer):
    def feed(self, data: bytes) -> bytes:
        return super().feed(data) + self.finish()


@mutant("sanitization-stateless")
class SanitizationStateless(HostPlugin):
    """Sanitizes each chunk on its own, so an escape sequence split across chunks survives in part."""

    def make_backend(self) -> HostBackend:
        backend = super().make_backend()
        backend.sanitizer_class = _StatelessSanitizer
        return backend


class _SanitizesWhenSending(Relay):
    def __init__(self, forward: Forward, mode: str) -> None:
        super().__init__(forward)
        self.sanitizers = {"stdout": Sanitizer(mode), "stderr": Sanitizer(mode)}

    def __call__(self, stream: str, chunk: bytes) -> None:
        clean = self.sanitizers[stream].feed(chunk)
        if clean:
            self.forward(stream, clean)


@mutant("capture-counts-raw-bytes")
class CaptureCountsRawBytes(HostPlugin):
    """Counts the capture statistics on the raw output and sanitizes only what it sends and returns."""

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        mode = spec.get("output_sanitization") or "raw"
        forward = kwargs.get("on_output")
        if forward is None or mode == "raw":
            return super().run_spec(sandbox_id, spec, **kwargs)
        run = super().run_spec(sandbox_id, {**spec, "output_sanitization": "raw"},
                               **{**kwargs, "on_output": _SanitizesWhenSending(forward, mode)})
        run.stdout, run.stderr = sanitize(run.stdout, mode), sanitize(run.stderr, mode)
        return run


# -- cancellation --------------------------------------------------------------------------------


@mutant("cancel-ignored")
class CancelIgnored(HostPlugin):
    """Declares exec.cancel and answers exec/cancel, but never stops the command."""

    def m_exec_cancel(self, params: dict[str, Any]) -> Any:
        return None


@mutant("cancelled-as-error")
class CancelledAsError(HostPlugin):
    """Answers a cancelled stream with an exec error instead of a result."""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stream(params)
        result = answer["result"]
        if result["termination"] == "cancelled":
            raise application_error("exec", "the command was cancelled", {"exec": {
                "label": "command", "termination": "cancelled", "exit_code": result["exit_code"],
                "stdout_b64": result["stdout_b64"], "stderr_b64": result["stderr_b64"]}})
        return answer


@mutant("cancel-unknown-not-found")
class CancelUnknownNotFound(HostPlugin):
    """Answers exec/cancel for an exec id it is not running with not_found."""

    def m_exec_cancel(self, params: dict[str, Any]) -> Any:
        with self._execs_lock:
            running = params["exec_id"] in self._execs
        if not running:
            raise application_error("not_found", f'Exec "{params["exec_id"]}" was not found',
                                    {"resource": "exec", "id": params["exec_id"]})
        return super().m_exec_cancel(params)


@mutant("cancel-finished-refused")
class CancelFinishedRefused(HostPlugin):
    """Remembers finished execs and refuses to cancel them with invalid_state."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._finished: set[str] = set()

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        try:
            return super().m_exec_stream(params)
        finally:
            self._finished.add(params["exec_id"])

    def m_exec_cancel(self, params: dict[str, Any]) -> Any:
        if params["exec_id"] in self._finished:
            raise application_error("invalid_state", f"exec {params['exec_id']} has already finished",
                                    {"current": "stopped", "action": "unknown"})
        return super().m_exec_cancel(params)



@mutant("cancel-declared-refused")
class CancelDeclaredRefused(HostPlugin):
    """Declares exec.cancel, then refuses every exec/cancel as unsupported."""

    def m_exec_cancel(self, params: dict[str, Any]) -> Any:
        raise self.unsupported("exec/cancel", "exec.cancel")


@mutant("cancel-not-offered")
class CancelNotOffered(HostPlugin):
    """Control: declares exec.cancel false and refuses exec/cancel honestly as unsupported, naming it."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["exec"]["cancel"] = False
        return capabilities

    def m_exec_cancel(self, params: dict[str, Any]) -> Any:
        raise self.unsupported("exec/cancel", "exec.cancel")
