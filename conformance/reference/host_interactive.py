"""Long-lived processes of the reference plugin: bidirectional stdio processes, PTY sessions, and
log streams. Long polls block only their own caller; every request runs on its own thread."""

from __future__ import annotations

import base64
import binascii
import fcntl
import os
import queue
import select
import signal
import struct
import subprocess
import termios
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from conformance.reference.host_backend import HostBackend, HostSandbox, invalid_spec

STDIO_CHUNK = 32 * 1024
STDERR_TAIL = 8 * 1024
_EOF = object()


def _decode(params: dict[str, Any]) -> bytes:
    try:
        return base64.b64decode(params["data_b64"], validate=True)
    except binascii.Error:
        raise invalid_spec("data_b64", "not valid base64") from None


def _encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class StdioProcess:
    """A process whose stdin the host writes and whose stdout it long-polls."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.output: queue.Queue[Any] = queue.Queue()
        self.stderr_tail: deque[bytes] = deque()
        self.stderr_size = 0
        self.stderr_dropped = False
        self.terminated = False
        self.stdin_lock = threading.Lock()
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        self._stderr_thread = threading.Thread(target=self._pump_stderr, daemon=True)
        self._stderr_thread.start()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for chunk in iter(lambda: self.proc.stdout.read1(STDIO_CHUNK), b""):
            self.output.put(chunk)
        self.output.put(_EOF)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for chunk in iter(lambda: self.proc.stderr.read1(4096), b""):
            self.stderr_tail.append(chunk)
            self.stderr_size += len(chunk)
            while self.stderr_size > STDERR_TAIL:
                head = self.stderr_tail[0]
                excess = self.stderr_size - STDERR_TAIL
                self.stderr_dropped = True
                if len(head) <= excess:
                    self.stderr_tail.popleft()
                    self.stderr_size -= len(head)
                else:
                    self.stderr_tail[0] = head[excess:]
                    self.stderr_size -= excess

    def tail(self) -> str:
        self._stderr_thread.join(timeout=2)
        text = b"".join(self.stderr_tail).decode("utf-8", errors="replace")
        return "…" + text if self.stderr_dropped else text


class PtySession:
    """A Bash session on a pseudo-terminal."""

    def __init__(self, proc: subprocess.Popen[bytes], master: int) -> None:
        self.proc = proc
        self.master = master
        self.closed = False

    def read(self, timeout_s: float = 60.0) -> bytes | None:
        readable, _, _ = select.select([self.master], [], [], timeout_s)
        if not readable:
            return b""
        try:
            data = os.read(self.master, STDIO_CHUNK)
        except OSError:
            return None  # EIO: the session ended
        return data or None


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class LogStream:
    """A follow of a sandbox's logs; ends when its source ends or the host cancels it."""

    def __init__(self, following: bool = False) -> None:
        self.cancelled = threading.Event()
        self.following = following  # False: a placeholder stream/cancel left for an id not yet followed


class InteractiveMethods:
    """Mixin for the reference plugin: exec/stdio_*, pty/*, logs/follow and stream/cancel."""

    backend: HostBackend

    def init_interactive(self) -> None:
        self._processes: dict[str, StdioProcess] = {}
        self._ptys: dict[str, PtySession] = {}
        self._streams: dict[str, LogStream] = {}
        self._interactive_lock = threading.Lock()

    def stop_interactive(self) -> None:
        with self._interactive_lock:
            processes, ptys, streams = list(self._processes.values()), list(self._ptys.values()), list(self._streams.values())
        for process in processes:
            _kill_group(process.proc)
        for pty in ptys:
            _kill_group(pty.proc)
        for stream in streams:
            stream.cancelled.set()

    # -- stdio processes -------------------------------------------------------------------------

    def _process(self, params: dict[str, Any]) -> StdioProcess:
        with self._interactive_lock:
            process = self._processes.get(params["process_id"])
        if process is None:
            raise invalid_spec("process_id", "unknown stdio process id")
        return process

    def m_exec_stdio_open(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        process_id = params["process_id"]
        spec = params["spec"]
        with self._interactive_lock:
            if process_id in self._processes:
                raise invalid_spec("process_id", "duplicate stdio process id")
            self._processes[process_id] = None  # type: ignore[assignment]  # reserve the id
        try:
            proc = self._spawn(sandbox, spec["command"], spec["env"], spec.get("working_dir"),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except BaseException:
            with self._interactive_lock:
                self._processes.pop(process_id, None)
            raise
        with self._interactive_lock:
            self._processes[process_id] = StdioProcess(proc)
        return None

    def _spawn(self, sandbox: HostSandbox, command: str, env: dict[str, str], working_dir: str | None,
               argv: list[str] | None = None, **streams: Any) -> subprocess.Popen[bytes]:
        """Start Bash source ``command`` (or ``argv`` as given) in its own session."""
        cwd = self.backend.resolve(sandbox, working_dir)
        if not cwd.is_dir():
            raise invalid_spec("working_dir", f"{working_dir} is not a directory in the sandbox")
        proc = subprocess.Popen(argv if argv is not None else [self.backend.bash, "-c", command], cwd=cwd,
                                env=self.backend.environment(sandbox, env), start_new_session=True, **streams)
        sandbox.processes.add(proc)
        return proc

    def m_exec_stdio_input(self, params: dict[str, Any]) -> Any:
        process = self._process(params)
        data = _decode(params)
        with process.stdin_lock:
            try:
                assert process.proc.stdin is not None
                process.proc.stdin.write(data)
                process.proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass  # the process stopped reading: not an error of the host
        return None

    def m_exec_stdio_close_input(self, params: dict[str, Any]) -> Any:
        process = self._process(params)
        with process.stdin_lock:
            try:
                assert process.proc.stdin is not None
                process.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        return None

    def m_exec_stdio_output(self, params: dict[str, Any]) -> Any:
        process = self._process(params)
        chunk = process.output.get()
        if chunk is _EOF:
            process.output.put(_EOF)  # every later poll sees the end too
            return {"data_b64": None}
        return {"data_b64": _encode(chunk)}

    def m_exec_stdio_terminate(self, params: dict[str, Any]) -> Any:
        process = self._process(params)
        process.terminated = True
        _kill_group(process.proc)
        return None

    def m_exec_stdio_wait(self, params: dict[str, Any]) -> Any:
        process = self._process(params)
        code = process.proc.wait()
        if process.terminated:
            termination, exit_code = "killed", None
        else:
            termination, exit_code = "exited", (code if code >= 0 else None)
        return {"termination": termination, "exit_code": exit_code, "stderr_tail": process.tail()}

    # -- PTY sessions ----------------------------------------------------------------------------

    def _pty(self, params: dict[str, Any]) -> PtySession:
        with self._interactive_lock:
            session = self._ptys.get(params["pty_id"])
        if session is None or session.closed:
            raise invalid_spec("pty_id", "unknown PTY id")
        return session

    def m_pty_open(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        self._open_pty(sandbox, params["pty_id"], params["options"])
        return None

    def _open_pty(self, sandbox: HostSandbox, pty_id: str, options: dict[str, Any]) -> PtySession:
        """Start an interactive Bash on a fresh pseudo-terminal registered as ``pty_id``."""
        size = options["size"]
        with self._interactive_lock:
            if pty_id in self._ptys:
                raise invalid_spec("pty_id", "duplicate PTY id")
            self._ptys[pty_id] = PtySession(None, -1)  # type: ignore[arg-type]  # reserve the id
        master, slave = os.openpty()
        _set_size(slave, size["rows"], size["cols"])
        env = {"TERM": "xterm-256color", **options["env"]}
        try:
            proc = self._spawn(sandbox, "exec bash --noprofile --norc -i", env, options.get("working_dir"),
                               stdin=slave, stdout=slave, stderr=slave, preexec_fn=_take_terminal)
        except BaseException:
            os.close(master)
            with self._interactive_lock:
                self._ptys.pop(pty_id, None)
            raise
        finally:
            os.close(slave)
        session = PtySession(proc, master)
        with self._interactive_lock:
            self._ptys[pty_id] = session
        return session

    def m_pty_input(self, params: dict[str, Any]) -> Any:
        session = self._pty(params)
        os.write(session.master, _decode(params))
        return None

    def m_pty_output(self, params: dict[str, Any]) -> Any:
        session = self._pty(params)
        while True:
            data = session.read()
            if data is None:
                return {"data_b64": None}
            if data:
                return {"data_b64": _encode(data)}

    def m_pty_resize(self, params: dict[str, Any]) -> Any:
        session = self._pty(params)
        _set_size(session.master, params["size"]["rows"], params["size"]["cols"])
        return None

    def m_pty_close(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            session = self._ptys.pop(params["pty_id"], None)
        if session is not None and session.proc is not None:
            session.closed = True
            _kill_group(session.proc)
            session.proc.wait()
            self._pty_ended(params["pty_id"], session)
            os.close(session.master)
        return None

    def _pty_ended(self, pty_id: str, session: PtySession) -> None:
        """Called by ``pty/close`` once the session's process is gone, before its terminal closes."""

    # -- logs ------------------------------------------------------------------------------------

    def m_logs_follow(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        stream_id = params["stream_id"]
        stream = self._reserve_stream(stream_id)
        try:
            self._follow_logs(sandbox, stream, params["source"], lambda data: self.notify(
                "logs/output", {"stream_id": stream_id, "data_b64": _encode(data)}))
        finally:
            self._release_stream(stream_id)
        return None

    def _reserve_stream(self, stream_id: str) -> LogStream:
        """Claim ``stream_id`` for a follow (a placeholder that ``stream/cancel`` left is taken over)."""
        with self._interactive_lock:
            stream = self._streams.get(stream_id)
            if stream is not None and stream.following:
                raise invalid_spec("stream_id", "duplicate stream id")
            if stream is None:
                stream = self._streams[stream_id] = LogStream()
            stream.following = True
        return stream

    def _release_stream(self, stream_id: str) -> None:
        with self._interactive_lock:
            self._streams.pop(stream_id, None)

    def _follow_logs(self, sandbox: HostSandbox, stream: LogStream, source: str,
                     emit: Callable[[bytes], None]) -> None:
        """Hand each log chunk to ``emit`` until the source ends or the stream is cancelled."""
        if source == "provision":
            for line in sandbox.provision_log:
                if stream.cancelled.is_set():
                    break
                emit(line.encode() + b"\n")
        else:
            # The entrypoint log is replayed from its start, then stays open until cancelled or deleted.
            for line in sandbox.entrypoint_log:
                if stream.cancelled.is_set():
                    return
                emit(line.encode() + b"\n")
            while not stream.cancelled.wait(0.1):
                if sandbox.state in ("deleting", "deleted", "stopped"):
                    break

    def m_stream_cancel(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            # An unknown id is pre-cancelled, so a follow that arrives later ends at once.
            self._streams.setdefault(params["stream_id"], LogStream()).cancelled.set()
        return None


def _take_terminal() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _kill_group(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
