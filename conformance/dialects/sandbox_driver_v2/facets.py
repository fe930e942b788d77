"""The facets of a v2 plugin where v2 differs from v1: every byte rides a data channel.

Files, stdio processes, terminals and streams keep v1's metadata calls (subclassed from the v1 facets)
and move their bytes onto channels the way upstream's host does: a file read collects stdout frames to
the plugin's eof; a write sends ``content_length`` and the content as stdin frames, then the host's eof;
a process or terminal keeps its channel for the session (input as stdin frames, closing the input as the
host's eof, output as the plugin's stdout frames); a streamed exec and a log follow collect frames while
the request runs, and their response comes after the channel's eof.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conformance.adapter import (
    ChunkObserver,
    EventRoute,
    ExecOutcome,
    ExecRequest,
    OperationResult,
    OutputChunk,
    ProcessExit,
    SandboxEnvironment,
    SandboxHandle,
    StreamOutcome,
    StreamRecord,
)
from conformance.dialects.sandbox_driver_v1.facets import (
    V1Files,
    V1Operations,
    V1Processes,
    V1Streams,
    V1Terminals,
)
from conformance.dialects.sandbox_driver_v1.operations import OPERATIONS as V1_OPERATIONS
from conformance.dialects.sandbox_driver_v1.operations import V1Operation
from conformance.dialects.sandbox_driver_v1.streams import capture_stats
from conformance.dialects.sandbox_driver_v2.channel_calls import ChannelCall
from conformance.dialects.sandbox_driver_v2.rules import NAME
from conformance.errors import ApplicationErrorAnswer, HarnessError, NotExpressible, WireViolation
from conformance.transports.channels import STDERR, STDOUT, DataChannel

if TYPE_CHECKING:
    from conformance.dialects.sandbox_driver_v2.adapter import SandboxDriverV2Adapter


def retained_copy(data: bytes, limit: int | None) -> bytes:
    """What a host retaining at most ``limit`` bytes keeps of a stream: a stable head of ``limit // 2``
    bytes and a rolling tail of the rest (v2 leaves retention to the host; this is upstream's host's)."""
    if limit is None or len(data) <= limit:
        return data
    head = limit // 2
    tail = limit - head
    return data[:head] + (data[-tail:] if tail else b"")


# What the host keeps of a stream whose retention the request leaves unlimited: upstream's host caps a
# requested capture at TransportLimits.retained_output_bytes (16 MiB), and so a flood cannot bloat the suite.
UNLIMITED_RETAINED_BYTES = 16 * 1024 * 1024


class RetainedCopy:
    """``retained_copy`` of one stream, kept as its chunks arrive: the head, then the tail in a ring of
    ``limit - limit // 2`` bytes that fills once and is then overwritten in place (each byte is copied
    once and nothing is allocated past the limit: a large stream costs a copy, not fresh memory for every
    chunk); without a limit, everything up to UNLIMITED_RETAINED_BYTES."""

    def __init__(self, stream: str, limit: int | None) -> None:
        self.stream = stream
        self.limit = UNLIMITED_RETAINED_BYTES if limit is None else limit
        self.head = bytearray()
        self.tail = bytearray()  # grows to the tail's size, then wraps: its oldest byte is at _oldest
        self._oldest = 0

    def __call__(self, chunk: OutputChunk) -> None:
        if chunk.stream != self.stream:
            return
        data = chunk.data
        room = self.limit // 2 - len(self.head)
        if room > 0:
            self.head += data[:room]
            if len(data) <= room:
                return
            data = data[room:]
        keep = self.limit - self.limit // 2
        if keep and data:
            self._into_tail(data, keep)

    def _into_tail(self, data: bytes, keep: int) -> None:
        tail = self.tail
        room = keep - len(tail)
        if room > 0:  # still filling
            tail += data[:room]
            if len(data) <= room:
                return
            data = data[room:]
        if len(data) >= keep:
            tail[:] = data[-keep:]
            self._oldest = 0
            return
        # Equal-length slice assignments: copies in place, the ring never changes size.
        at = self._oldest
        end = at + len(data)
        if end <= keep:
            tail[at:end] = data
        else:
            split = keep - at
            tail[at:] = data[:split]
            tail[:end - keep] = data[split:]
        self._oldest = end % keep

    def value(self) -> bytes:
        ring = memoryview(self.tail)
        return b"".join((self.head, ring[self._oldest:], ring[:self._oldest]))


class V2Files(V1Files):
    """fs/read and fs/write over a channel; the metadata calls as in v1."""

    def __init__(self, adapter: SandboxDriverV2Adapter) -> None:
        super().__init__(adapter)
        self._adapter = adapter

    def read(self, sandbox_id: str, path: str, offset: int | None = None, length: int | None = None) -> bytes:
        params: dict[str, Any] = {"sandbox_id": sandbox_id, "path": path}
        if offset is not None:
            params["offset"] = offset
        if length is not None:
            params["length"] = length
        call = ChannelCall(self._adapter, "fs/read")
        call.send(params, self._adapter.call_timeout_s)
        call.result()
        return b"".join(f.payload for f in call.frames_so_far() if f.kind == STDOUT)

    def write(self, sandbox_id: str, path: str, data: bytes, append: bool | None = None) -> None:
        call = ChannelCall(self._adapter, "fs/write", host_reads=False)
        params: dict[str, Any] = {"sandbox_id": sandbox_id, "path": path,
                                  "content_length": len(data) + call.injected_bytes() + call.faults.content_length_delta}
        if append is not None:
            params["append"] = append
        # The plugin's side of a write channel carries only its eof; it is still read, for the record.
        call.send(params, self._adapter.call_timeout_s, host_input=data)
        call.result()


@dataclass
class _Session:
    """A stdio process's or terminal's channel, kept for the session."""

    channel: DataChannel
    input_closed: bool = False


class _ChannelSessions:
    """Sessions (stdio processes, terminals) by their host-generated id, each with its channel."""

    def __init__(self, adapter: SandboxDriverV2Adapter) -> None:
        self._adapter = adapter
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def open(self, method: str, session_id: str, params: dict[str, Any]) -> None:
        call = ChannelCall(self._adapter, method, answer_follows_eof=False)
        call.send(params, self._adapter.call_timeout_s, collect=False)
        call.result()  # the session's frames are read on demand, so this only waits for the channel to open
        if call.channel.opened_at is None:
            # Nothing of the session can cross; the finding is reported with the scenario's violations too.
            raise WireViolation(f"the plugin answered {method} without opening its data channel")
        with self._lock:
            self._sessions[session_id] = _Session(call.channel)

    def _session(self, session_id: str) -> _Session:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            # v2 has no request for a session's bytes: they ride the channel its open named, and an id
            # that was never opened has none.
            raise NotExpressible(NAME, f"input or output of a session never opened ({session_id!r}): v2 moves "
                                       f"them over the data channel of the session's open")
        return session

    def write(self, session_id: str, data: bytes) -> None:
        self._session(session_id).channel.send_stdin(data)

    def close_input(self, session_id: str) -> None:
        session = self._session(session_id)
        if not session.input_closed:
            session.input_closed = True
            session.channel.send_eof()

    def read(self, session_id: str, timeout_s: float, kinds: tuple[int, ...]) -> bytes | None:
        """The next frame of ``kinds`` (others are skipped); ``None`` at the plugin's eof. Raises
        ``TimeoutError`` (a ``CallTimeout`` for the caller) when nothing came in time."""
        session = self._session(session_id)
        deadline = time.monotonic() + timeout_s
        while True:
            frame = session.channel.read(max(0.0, deadline - time.monotonic()))
            if frame is None:
                return None
            if frame.kind in kinds:
                return frame.payload

    def end(self, session_id: str) -> None:
        """The session is over (waited for, closed): the host ends its input if it had not."""
        session = self._session(session_id)
        if not session.input_closed:
            session.input_closed = True
            with contextlib.suppress(TimeoutError, HarnessError, OSError):  # a channel let go needs no eof
                session.channel.send_eof()


class V2Processes(V1Processes):
    """exec/stdio_open with a channel; input, its end and output ride it; terminate and wait as in v1."""

    def __init__(self, adapter: SandboxDriverV2Adapter) -> None:
        super().__init__(adapter)
        self._adapter = adapter
        self._sessions = _ChannelSessions(adapter)

    def open(self, sandbox_id: str, command: str, env: Mapping[str, str] | None = None,
             working_dir: str | None = None, process_id: str | None = None) -> str:
        process_id = process_id or self._adapter.next_token("stdio")
        spec = self._adapter.spawn_spec(ExecRequest(command, env=dict(env or {}), working_dir=working_dir))
        self._sessions.open("exec/stdio_open", process_id,
                            {"sandbox_id": sandbox_id, "process_id": process_id, "spec": spec})
        return process_id

    def write(self, process_id: str, data: bytes) -> None:
        self._sessions.write(process_id, data)

    def close_input(self, process_id: str) -> None:
        self._sessions.close_input(process_id)

    def read(self, process_id: str, timeout_s: float = 10.0) -> bytes | None:
        return self._adapter.timed_read(lambda: self._sessions.read(process_id, timeout_s, (STDOUT,)),
                                        f"stdout of stdio process {process_id}", timeout_s)

    def wait(self, process_id: str, timeout_s: float = 30.0) -> ProcessExit:
        outcome = super().wait(process_id, timeout_s)
        self._sessions.end(process_id)
        return outcome


class V2Terminals(V1Terminals):
    """pty/open with a channel; keystrokes and output ride it; resize and close as in v1."""

    def __init__(self, adapter: SandboxDriverV2Adapter) -> None:
        super().__init__(adapter)
        self._adapter = adapter
        self._sessions = _ChannelSessions(adapter)

    def open(self, sandbox_id: str, rows: int = 24, cols: int = 80, env: Mapping[str, str] | None = None,
             working_dir: str | None = None, pty_id: str | None = None) -> str:
        pty_id = pty_id or self._adapter.next_token("pty")
        options: dict[str, Any] = {"size": {"rows": rows, "cols": cols}, "env": dict(env or {})}
        if working_dir is not None:
            options["working_dir"] = working_dir
        self._sessions.open("pty/open", pty_id, {"sandbox_id": sandbox_id, "pty_id": pty_id, "options": options})
        return pty_id

    def write(self, pty_id: str, data: bytes) -> None:
        self._sessions.write(pty_id, data)

    def read(self, pty_id: str, timeout_s: float = 10.0) -> bytes | None:
        # A terminal has one output; upstream's host reads stderr frames on it as output too.
        return self._adapter.timed_read(lambda: self._sessions.read(pty_id, timeout_s, (STDOUT, STDERR)),
                                        f"output of terminal {pty_id}", timeout_s)


class V2RunningExec:
    """An ``exec/stream`` in flight: chunks as its frames arrive, the outcome once answered and the
    channel ended."""

    def __init__(self, adapter: SandboxDriverV2Adapter, exec_id: str, params: dict[str, Any], timeout_s: float,
                 host_input: bytes | None, retained_limit: int | None, check_params: bool,
                 live_stdin: bool = False, observers: tuple[ChunkObserver, ...] = ()) -> None:
        self.exec_id = exec_id
        self._adapter = adapter
        self._retained_limit = retained_limit
        # Input fed while the command runs (ExecRequest.live_stdin): the host writes its stdin frames and its
        # eof on the channel itself, when the scenario says, instead of the call's writer sending it all first.
        self._live_stdin = live_stdin
        self._stdin_closed = False
        self._retained = (RetainedCopy("stdout", retained_limit), RetainedCopy("stderr", retained_limit))
        self._call = ChannelCall(adapter, "exec/stream", record=StreamRecord(self._retained + observers))
        self.started_at = time.monotonic()
        self._pending = self._call.send(params, timeout_s, host_input=host_input, check_params=check_params)
        self._outcome: StreamOutcome | None = None

    def done(self) -> bool:
        return self._pending.done()

    def chunks_so_far(self) -> list[OutputChunk]:
        return self._call.chunks()[0]

    def write_stdin(self, data: bytes) -> None:
        if not self._live_stdin or self._stdin_closed:
            raise HarnessError(f"exec {self.exec_id} takes no more input: it was started without live stdin, or "
                               f"its input was closed")
        # A False (the plugin closed its side) is no verdict here: the command's output says what it got.
        self._call.channel.send_stdin(data)

    def close_stdin(self) -> None:
        if not self._live_stdin or self._stdin_closed:
            return
        self._stdin_closed = True
        # A channel the plugin ended or the host let go needs no eof (as at a session's end: _ChannelSessions.end).
        with contextlib.suppress(TimeoutError, HarnessError, OSError):
            self._call.channel.send_eof()

    def wait(self, timeout_s: float | None = None) -> StreamOutcome:
        if self._outcome is not None:
            return self._outcome
        try:
            answer = self._call.result(timeout_s)
        except ApplicationErrorAnswer as error:
            self._outcome = StreamOutcome(ExecOutcome("infra", None, None, None, b"", b"", None, error=error),
                                          StreamRecord(), self.started_at, self._pending.answered_at, None)
            return self._outcome
        record = self._call.record
        assert record is not None
        record.check_observers()
        answer = answer if isinstance(answer, dict) else {}
        stdout, stderr = (retained.value() for retained in self._retained)
        result = self._adapter.exec_result(answer.get("result"), stdout, stderr)
        self._outcome = StreamOutcome(
            result=result, record=record, started_at=self.started_at, answered_at=self._pending.answered_at,
            answer_sequence=record.count + 1, live_streaming=answer.get("live_streaming"),
            streams_separated=answer.get("streams_separated"),
            stdout_capture=capture_stats(answer.get("stdout_capture")), stderr_capture=capture_stats(answer.get("stderr_capture")),
        )
        return self._outcome


class V2RunningFollow:
    """A ``logs/follow`` in flight: its stdout frames, then its eof, then the response."""

    def __init__(self, adapter: SandboxDriverV2Adapter, stream_id: str, params: dict[str, Any]) -> None:
        self.stream_id = stream_id
        self._record = StreamRecord()
        self._call = ChannelCall(adapter, "logs/follow", record=self._record)
        self._pending = self._call.send(params, adapter.call_timeout_s)

    def done(self) -> bool:
        return self._pending.done()

    def chunks_so_far(self) -> list[OutputChunk]:
        return self._call.chunks()[0]

    def await_output(self, timeout_s: float) -> bool:
        return self._record.wait_until(lambda record: record.count > 0, timeout_s)

    @property
    def answer_sequence(self) -> int | None:
        return self._call.chunks()[1] if self._pending.done() else None

    def wait(self, timeout_s: float | None = None) -> Any:
        return self._call.result(timeout_s)


class V2Streams(V1Streams):
    """exec/stream and logs/follow over channels; exec/stop for cancelling and stopping."""

    dialect = NAME

    def __init__(self, adapter: SandboxDriverV2Adapter) -> None:
        super().__init__(adapter)
        self._adapter = adapter

    def start_exec(self, sandbox_id: str, request: ExecRequest, retained_limit: int | None = None,
                   exec_id: str | None = None, observers: tuple[ChunkObserver, ...] = ()) -> V2RunningExec:
        adapter = self._adapter
        exec_id = exec_id or adapter.next_token(f"x{sandbox_id}")
        params: dict[str, Any] = {"sandbox_id": sandbox_id, "exec_id": exec_id, "spec": adapter.exec_spec(request),
                                  "stdin": request.stdin is not None or request.live_stdin, **request.undefined_fields}
        if retained_limit is not None:
            params["retained_output_limit"] = retained_limit
        # Live input is written by the scenario through the running exec, so nothing is sent up front.
        host_input = None if request.live_stdin else request.stdin
        return V2RunningExec(adapter, exec_id, params, request.timeout_s + adapter.call_timeout_s, host_input,
                             retained_limit, check_params=not request.unchecked, live_stdin=request.live_stdin,
                             observers=observers)

    def cancel_exec(self, exec_id: str) -> None:
        self.stop_exec(exec_id, "term")

    def stop_exec(self, exec_id: str, level: str) -> None:
        self._call("exec/stop", {"exec_id": exec_id, "level": level})

    def start_log_follow(self, sandbox_id: str, source: str, stream_id: str | None = None) -> V2RunningFollow:
        adapter = self._adapter
        stream_id = stream_id or adapter.next_token("logs")
        return V2RunningFollow(adapter, stream_id, {"sandbox_id": sandbox_id, "stream_id": stream_id, "source": source})


@dataclass(frozen=True)
class V2ChannelOperation(V1Operation):
    """An optional operation whose request needs a data channel in v2: the input the host sends on it,
    if any (the channel is then read to the plugin's eof and let go)."""

    host_input: bytes | None = None


def _spawn(command: str) -> dict[str, Any]:
    return {"program": "bash", "args": ["-c", command], "env": {"BASH_ENV": ""}}


def _one_shot(image: dict[str, Any]) -> Any:
    """A one_shot/run builder for this image source; ``entrypoint`` and ``args`` come from the arguments."""
    def build(adapter: Any, sandbox_id: str | None, args: dict[str, Any]) -> dict[str, Any]:
        spec = {"image": image, "entrypoint": args.get("entrypoint", "true"), "args": list(args.get("args", [])),
                "env": {}, "timeout": {"secs": 60, "nanos": 0}}
        return {"sandbox_id": sandbox_id, "exec_id": adapter.next_token(f"x{sandbox_id}"), "spec": spec}

    return build


def _environment(result: Any) -> OperationResult:
    variables = result.get("environment") if isinstance(result, dict) else None
    return SandboxEnvironment(result, variables=variables if isinstance(variables, dict) else None)


def _clone(adapter: Any, sandbox_id: str | None, args: dict[str, Any]) -> dict[str, Any]:
    params = {"sandbox_id": sandbox_id, "url": args["url"], "target_path": args["target_path"]}
    if args.get("options") is not None:
        params["options"] = args["options"]
    return params


# v1's optional operations, with the ones whose v2 request differs replaced: stdin, processes, terminals
# and logs take a channel, and the cancellation became exec/stop.
OPERATIONS: dict[str, V1Operation] = {
    **V1_OPERATIONS,
    "run with stdin": V2ChannelOperation("exec/stream", "exec.stdin", lambda a, s, args: {
        "sandbox_id": s, "exec_id": a.next_token(f"x{s}"), "stdin": True,
        "spec": {**_spawn("cat"), "timeout_ms": 10_000}}, host_input=b"conformance"),
    # exec/stop takes an exec id only; stopping one that is unknown or finished succeeds.
    "cancel a command": V1Operation("exec/stop", "exec.stop", lambda a, s, args: {
        "exec_id": args.get("exec_id", "conformance-no-such-exec"), "level": args.get("level", "term")}, True),
    "open a stdio process": V2ChannelOperation("exec/stdio_open", "exec.stdio_process", lambda a, s, args: {
        "sandbox_id": s, "process_id": a.next_token("stdio"), "spec": _spawn("true")}, host_input=b""),
    "open a terminal": V2ChannelOperation("pty/open", "pty", lambda a, s, args: {
        "sandbox_id": s, "pty_id": a.next_token("pty"), "options": {"size": {"rows": 24, "cols": 80}, "env": {}}}),
    "follow logs": V2ChannelOperation("logs/follow", "logs", lambda a, s, args: {
        "sandbox_id": s, "stream_id": a.next_token("logs"), "source": args.get("source", "provision")}),
    # What v2 added. A one-shot's bytes ride its channel like an exec's; only its answer is read here.
    "run a one-shot container": V2ChannelOperation("one_shot/run", "one_shot", _one_shot(
        {"registry": {"reference": "busybox:1.36"}})),
    "run a one-shot container from a built image": V2ChannelOperation(
        "one_shot/run", "one_shot.build", _one_shot({"build": {"context": ".", "dockerfile": None,
                                                               "tag": "conformance-one-shot", "reuse": True}}),
        served_through=("one_shot",)),
    "get the sandbox's environment": V1Operation("sandbox/environment", "exec.environment",
                                                 lambda a, s, args: {"sandbox_id": s}, read=_environment),
    "release a preview url": V1Operation("access/preview_release", "access.preview_urls", lambda a, s, args: {
        "sandbox_id": s, "port": args.get("port", 8080)}),
    # A host sends git/clone only to a sandbox that declares its clone native (git.native).
    "clone a repository": V1Operation("git/clone", "git.native", _clone, served_through=("git.supported",)),
    "follow a snapshot's build logs": V2ChannelOperation("snapshot/build_logs", "snapshots.build_logs",
                                                         lambda a, s, args: {
        "snapshot_id": args.get("snapshot_id", "conformance-no-such-snapshot"),
        "stream_id": a.next_token("build-logs"), "follow": args.get("follow", False)}, provider_level=True),
}


class V2Operations(V1Operations):
    """v1's optional operations as v2 asks for them."""

    table = OPERATIONS

    def __init__(self, adapter: SandboxDriverV2Adapter) -> None:
        super().__init__(adapter)
        self._v2 = adapter

    def invoke(self, operation: str, sandbox_id: str | None, events: EventRoute | None = None,
               **arguments: Any) -> OperationResult | SandboxHandle:
        op = self.table.get(operation)
        if not isinstance(op, V2ChannelOperation):
            return super().invoke(operation, sandbox_id, events, **arguments)
        if events is not None:
            raise NotExpressible(NAME, f"events for {operation}")
        adapter = self._v2
        # A terminal stays open after its answer: only its opening is judged, its channel is left to it.
        session = op.method == "pty/open"
        call = ChannelCall(adapter, op.method, answer_follows_eof=op.method not in ("exec/stdio_open", "pty/open"))
        call.send(op.build(adapter, sandbox_id, arguments), adapter.call_timeout_s, collect=not session,
                  host_input=op.host_input)
        return op.read(call.result())
