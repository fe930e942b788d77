"""Self-check of the v2b1_* mutants (``tests/redteam/blind_v2_1.py``) with a minimal raw v2 host of its own.

``python -m tests.redteam.selfcheck_v2_1 [NAME ...]`` (from the worktree root, PYTHONPATH set). Every mutant
must start and answer a v2 initialize; for every mutant a probe -- a function of a live plugin and a live host
that returns True when the plugin behaves as protocol v2 says -- must pass against the honest reference
(``python -m conformance.reference.host_plugin --dialect sandbox-driver-v2``) and fail against the mutant
(``python -m tests.redteam.serve NAME``). Both run as real processes: the control transport is their stdio,
the data channels connect to this host's Unix socket (``Host``: a private 0700 directory, its own frame parser
that checks the frame rules of v2 §2.1 as it reads, open_ack when offered).

Independent of the suite and of ``conformance.transports``: nothing here is imported from them.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.redteam.selfcheck_client import err, kind

PY = sys.executable
HONEST = [PY, "-m", "conformance.reference.host_plugin", "--dialect", "sandbox-driver-v2"]
PREFIX = "v2b1_"

OPEN, STDOUT, STDERR, STDIN, EOF = 0, 1, 2, 3, 4
MAX_FRAME = 65536
HDR = struct.Struct(">BI")
MIB = 1024 * 1024


def mutant_cmd(name: str) -> list[str]:
    return [PY, "-m", "tests.redteam.serve", name]


# ------------------------------------------------------------------------------------------------ data side


class Channel:
    """One channel the host named: what arrived on it, in order, with arrival times."""

    def __init__(self, host: Host, channel_id: int, *, input: bool = False, on_bind: Callable[[Channel], None] | None = None,
                 ack_gate: threading.Event | None = None, ack_delay: float = 0.0, read_delay: float = 0.0,
                 send_on_bind: list[tuple[int, bytes]] | None = None) -> None:
        self.host = host
        self.id = channel_id
        self.token = secrets.token_hex(32)
        self.input = input  # a write channel: the probe sends the host's frames (and eof) itself
        self.on_bind, self.ack_gate, self.ack_delay, self.read_delay = on_bind, ack_gate, ack_delay, read_delay
        self.send_on_bind = send_on_bind or []
        self.conn: socket.socket | None = None
        self.bound = threading.Event()
        self.eof = threading.Event()
        self.closed = threading.Event()
        self.frames: list[tuple[float, int, bytes]] = []
        self.violations: list[str] = []
        self.open_payload: dict[str, Any] | None = None
        self.open_time = self.ack_time = self.eof_time = self.close_time = None
        self.cond = threading.Condition()
        self._wlock = threading.Lock()

    @property
    def param(self) -> dict[str, Any]:
        return {"channel_id": self.id, "token": self.token}

    def data(self, kind: int = STDOUT) -> bytes:
        with self.cond:
            return b"".join(p for _, k, p in self.frames if k == kind)

    def kinds(self) -> list[int]:
        with self.cond:
            return [k for _, k, _ in self.frames]

    def first_time(self, kind: int) -> float | None:
        with self.cond:
            return next((t for t, k, _ in self.frames if k == kind), None)

    def wait_data(self, needle: bytes, timeout: float = 10.0, kind: int = STDOUT) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while needle not in b"".join(p for _, k, p in self.frames if k == kind):
                left = deadline - time.monotonic()
                if left <= 0 or self.closed.is_set():
                    return needle in b"".join(p for _, k, p in self.frames if k == kind)
                self.cond.wait(min(left, 0.1))
            return True

    def send(self, kind: int, payload: bytes = b"") -> None:
        assert self.conn is not None
        with self._wlock:
            self.conn.sendall(HDR.pack(kind, len(payload)) + payload)

    def send_input(self, data: bytes, eof: bool = True) -> None:
        for start in range(0, len(data), MAX_FRAME):
            self.send(STDIN, data[start:start + MAX_FRAME])
        if eof:
            self.send(EOF)

    def clean(self) -> bool:
        return not self.violations


class Host:
    """The host's side of the data transport: a listening socket in a private directory."""

    def __init__(self, open_ack: bool = True) -> None:
        self.open_ack = open_ack
        self.dir = tempfile.mkdtemp(prefix="v2b1-host-")
        os.chmod(self.dir, 0o700)
        self.path = os.path.join(self.dir, "data.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(256)
        self.channels: dict[int, Channel] = {}
        self.violations: list[str] = []  # connections that never bound to a channel
        self._next = 1
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def transport(self, **overrides: Any) -> dict[str, Any]:
        return {"socket_path": self.path, "max_frame_bytes": MAX_FRAME, "open_ack": self.open_ack, **overrides}

    def channel(self, **options: Any) -> Channel:
        with self._lock:
            channel = Channel(self, self._next, **options)
            self.channels[self._next] = channel
            self._next += 1
        return channel

    def clean(self) -> bool:
        return not self.violations and all(c.clean() for c in self.channels.values())

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        for conn in list(self._conns):
            try:
                conn.close()
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- reading ---------------------------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _exact(conn: socket.socket, count: int) -> bytes | None:
        data = bytearray()
        while len(data) < count:
            try:
                chunk = conn.recv(count - len(data))
            except OSError:
                chunk = b""
            if not chunk:
                if not data:
                    return None
                raise EOFError("closed inside a frame")
            data.extend(chunk)
        return bytes(data)

    def _refuse(self, conn: socket.socket, why: str) -> None:
        self.violations.append(why)
        try:
            conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        conn.close()

    def _serve(self, conn: socket.socket) -> None:
        try:
            header = self._exact(conn, HDR.size)
        except EOFError:
            return self._refuse(conn, "closed inside the first frame")
        if header is None:
            return self._refuse(conn, "closed without an open frame")
        kind, length = HDR.unpack(header)
        if kind != OPEN:
            return self._refuse(conn, f"first frame is kind {kind}, not open")
        if length > MAX_FRAME:
            return self._refuse(conn, f"open frame of {length} bytes")
        try:
            payload = json.loads(self._exact(conn, length) or b"")
        except (EOFError, ValueError):
            return self._refuse(conn, "open payload is not JSON")
        channel_id = payload.get("channel_id") if isinstance(payload, dict) else None
        channel = self.channels.get(channel_id) if type(channel_id) is int else None
        if channel is None or payload.get("token") != channel.token or channel.conn is not None:
            return self._refuse(conn, f"open does not match a waiting channel: {payload!r}")
        channel.conn, channel.open_payload, channel.open_time = conn, payload, time.monotonic()
        if channel.on_bind is not None:
            channel.on_bind(channel)
        if self.open_ack and payload.get("acknowledge") is True:
            # While the acknowledgement is withheld nothing may arrive: watch the socket meanwhile.
            release = time.monotonic() + channel.ack_delay
            gate_deadline = time.monotonic() + 15
            early = False
            while not early and (time.monotonic() < release or (
                    channel.ack_gate is not None and not channel.ack_gate.is_set()
                    and time.monotonic() < gate_deadline)):
                readable, _, _ = select.select([conn], [], [], 0.01)
                early = bool(readable)
            if not early:  # one last look: a frame sent just before the acknowledgement is still early
                early = bool(select.select([conn], [], [], 0)[0])
            if early:
                channel.violations.append("bytes arrived before the host's acknowledgement")
            channel.ack_time = time.monotonic()
            try:
                channel.send(OPEN)
            except OSError:
                pass
        channel.bound.set()
        if channel.send_on_bind:
            def send_all() -> None:
                # One write: every scripted frame is in the plugin's socket before it reads the first.
                data = b"".join(HDR.pack(k, len(p)) + p for k, p in channel.send_on_bind)
                try:
                    with channel._wlock:
                        conn.sendall(data)
                except OSError:
                    pass
            threading.Thread(target=send_all, daemon=True).start()
        if channel.read_delay:
            time.sleep(channel.read_delay)
        self._read(channel, conn)

    def _read(self, channel: Channel, conn: socket.socket) -> None:
        try:
            while True:
                try:
                    header = self._exact(conn, HDR.size)
                except EOFError:
                    channel.violations.append("closed inside a frame header")
                    break
                now = time.monotonic()
                if header is None:
                    if not channel.eof.is_set():
                        channel.violations.append("connection closed before the plugin's eof")
                    break
                kind, length = HDR.unpack(header)
                if length > MAX_FRAME:
                    channel.violations.append(f"frame of {length} bytes over the limit")
                    break  # rejected before allocating: the connection is done
                try:
                    payload = self._exact(conn, length) if length else b""
                except EOFError:
                    channel.violations.append("closed inside a frame")
                    break
                payload = payload or b""
                if channel.ack_time is None and channel.open_payload and channel.open_payload.get("acknowledge") \
                        and self.open_ack:
                    channel.violations.append(f"kind {kind} frame before the host's acknowledgement")
                if channel.eof.is_set():
                    channel.violations.append(f"kind {kind} frame after the plugin's eof")
                with channel.cond:
                    channel.frames.append((now, kind, payload))
                    channel.cond.notify_all()
                if kind == EOF:
                    if payload:
                        channel.violations.append("eof frame with a payload")
                    if not channel.eof.is_set():
                        channel.eof_time = now
                        channel.eof.set()
                        if not channel.input:
                            try:
                                channel.send(EOF)  # the host's side of a read channel ends too
                            except OSError:
                                pass
                elif kind not in (STDOUT, STDERR):
                    channel.violations.append(f"unexpected kind {kind} from the plugin")
        finally:
            channel.close_time = time.monotonic()
            channel.closed.set()
            with channel.cond:
                channel.cond.notify_all()
            try:
                conn.close()
            except OSError:
                pass


# --------------------------------------------------------------------------------------------- control side


class Plugin:
    """A plugin process spoken to over its stdio; ``gate`` pauses reading its stdout (backpressure)."""

    def __init__(self, cmd: list[str], host: Host) -> None:
        self.host = host
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=None if os.environ.get("V2B1_DEBUG") else subprocess.DEVNULL)
        self.log: list[tuple[float, dict[str, Any]]] = []
        self.cond = threading.Condition()
        self.gate = threading.Event()
        self.gate.set()
        self.ended = threading.Event()
        self.next_id = 10
        self._send_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            self.gate.wait()
            line = self.proc.stdout.readline()
            if not line:
                break
            try:
                msg = json.loads(line)
            except ValueError:
                msg = {"unparsable": line[:200].decode("utf-8", "replace")}
            with self.cond:
                self.log.append((time.monotonic(), msg))
                self.cond.notify_all()
        self.ended.set()
        with self.cond:
            self.cond.notify_all()

    def raw(self, data: bytes) -> bool:
        try:
            with self._send_lock:
                assert self.proc.stdin is not None
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def send(self, method: str, params: Any = None) -> int:
        with self._send_lock:
            request_id = self.next_id
            self.next_id += 1
        self.raw(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n")
        return request_id

    def _find(self, request_id: int) -> tuple[float, dict[str, Any]] | None:
        for t, msg in self.log:
            if "method" not in msg and msg.get("id") == request_id:
                return t, msg
        return None

    def response(self, request_id: int, timeout: float = 15.0) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while (found := self._find(request_id)) is None:
                left = deadline - time.monotonic()
                if left <= 0 or self.ended.is_set():
                    return None
                self.cond.wait(min(left, 0.2))
            return found[1]

    def resp_time(self, request_id: int) -> float | None:
        with self.cond:
            found = self._find(request_id)
        return found[0] if found else None

    def call(self, method: str, params: Any = None, timeout: float = 15.0) -> dict[str, Any] | None:
        return self.response(self.send(method, params), timeout)

    def notes(self, method: str) -> list[tuple[int, dict[str, Any]]]:
        with self.cond:
            return [(i, m) for i, (_, m) in enumerate(self.log) if m.get("method") == method]

    def init(self, **transport: Any) -> dict[str, Any] | None:
        return self.call("initialize", {"protocol_version": 2, "data_transport": self.host.transport(**transport)})

    def close(self) -> None:
        self.gate.set()
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def detail(resp: dict | None) -> dict:
    return (err(resp).get("data") or {}).get("detail") or {}


def ok(resp: dict | None) -> bool:
    return resp is not None and "result" in resp


def result(resp: dict | None) -> Any:
    return (resp or {}).get("result")


# --------------------------------------------------------------------------------------------- helpers


def setup(pl: Plugin, **spec: Any) -> tuple[str, str]:
    """initialize, create a sandbox: (sandbox id, working directory)."""
    assert ok(pl.init()), "initialize failed"
    info = result(pl.call("sandbox/create", {"spec": {"source": "host_directory", **spec}}))
    return info["status"]["id"], info["working_directory"]


def exec_send(pl: Plugin, sid: str, argv: list[str], *, exec_id: str | None = None, stdin: bool = False,
              timeout_ms: int | None = 30000, env: dict[str, str] | None = None, retained: int | None = None,
              spec: dict[str, Any] | None = None, **channel_options: Any) -> tuple[int, Channel]:
    channel = pl.host.channel(input=stdin, **channel_options)
    params: dict[str, Any] = {
        "sandbox_id": sid, "exec_id": exec_id or f"x{channel.id}", "channel": channel.param, "stdin": stdin,
        "spec": {"program": argv[0], "args": argv[1:], "env": env or {}, "timeout_ms": timeout_ms, **(spec or {})},
    }
    if retained is not None:
        params["retained_output_limit"] = retained
    return pl.send("exec/stream", params), channel


def exec_run(pl: Plugin, sid: str, argv: list[str], timeout: float = 20.0, **kw: Any) -> tuple[dict | None, Channel]:
    rid, channel = exec_send(pl, sid, argv, **kw)
    resp = pl.response(rid, timeout)
    channel.closed.wait(3)
    return resp, channel


def bash(script: str) -> list[str]:
    return ["bash", "-c", script]


def read_file(pl: Plugin, sid: str, path: str, timeout: float = 15.0, **extra: Any) -> tuple[dict | None, Channel]:
    channel = pl.host.channel()
    rid = pl.send("fs/read", {"sandbox_id": sid, "path": path, "channel": channel.param, **extra})
    resp = pl.response(rid, timeout)
    channel.closed.wait(3)
    return resp, channel


def write_file(pl: Plugin, sid: str, path: str, frames: list[tuple[int, bytes]], timeout: float = 15.0,
               **extra: Any) -> tuple[dict | None, Channel]:
    channel = pl.host.channel(input=True, send_on_bind=frames)
    rid = pl.send("fs/write", {"sandbox_id": sid, "path": path, "channel": channel.param, **extra})
    resp = pl.response(rid, timeout)
    channel.closed.wait(3)
    return resp, channel


def stdin_frames(data: bytes) -> list[tuple[int, bytes]]:
    return [(STDIN, data[i:i + MAX_FRAME]) for i in range(0, len(data), MAX_FRAME)] + [(EOF, b"")]


def _file_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def invalid_frame(resp: dict | None) -> bool:
    return kind(resp) == "invalid_spec" and detail(resp).get("field") == "frame"


def exec_ok(resp: dict | None) -> dict:
    inner = (result(resp) or {}).get("result")
    return inner if isinstance(inner, dict) else {}


# --------------------------------------------------------------------------------------------- probes

CHECKS: dict[str, Callable[[Plugin], bool]] = {}
HOST_OPTIONS: dict[str, dict[str, Any]] = {}


def check(name: str, **host_options: Any):
    def register(fn: Callable[[Plugin], bool]) -> Callable[[Plugin], bool]:
        CHECKS[PREFIX + name] = fn
        HOST_OPTIONS[PREFIX + name] = host_options
        return fn
    return register


# -- the data channel as the plugin writes it


@check("eof_after_response")
def _(pl):
    sid, _ = setup(pl)
    rid, ch = exec_send(pl, sid, ["echo", "hi"])
    resp = pl.response(rid)
    ch.closed.wait(3)
    answered = pl.resp_time(rid)
    return (ok(resp) and ch.data() == b"hi\n" and ch.eof_time is not None and answered is not None
            and ch.eof_time <= answered + 0.2)


@check("data_before_open")
def _(pl):
    sid, _ = setup(pl)
    resp, ch = exec_run(pl, sid, ["echo", "hi"])
    return ok(resp) and ch.data() == b"hi\n" and pl.host.clean()


@check("open_after_work_started")
def _(pl):
    sid, work = setup(pl)
    seen: dict[str, bool] = {}
    marker = os.path.join(work, "started")
    resp, ch = exec_run(pl, sid, bash("touch started; echo hi"),
                        on_bind=lambda c: seen.setdefault("marker_at_open", os.path.exists(marker)))
    return ok(resp) and ch.data() == b"hi\n" and seen.get("marker_at_open") is False


@check("stale_token")
def _(pl):
    sid, work = setup(pl)
    with open(os.path.join(work, "a.txt"), "wb") as f:
        f.write(b"alpha")
    first, c1 = read_file(pl, sid, "a.txt")
    second, c2 = read_file(pl, sid, "a.txt")
    return ok(first) and ok(second) and c1.data() == b"alpha" and c2.data() == b"alpha" and pl.host.clean()


@check("oversized_read_frames")
def _(pl):
    sid, work = setup(pl)
    content = os.urandom(200_000)
    with open(os.path.join(work, "big.bin"), "wb") as f:
        f.write(content)
    resp, ch = read_file(pl, sid, "big.bin")
    return ok(resp) and ch.data() == content and ch.clean()


@check("exit_status_frame")
def _(pl):
    sid, _ = setup(pl)
    resp, ch = exec_run(pl, sid, ["echo", "hi"])
    return ok(resp) and ch.clean() and set(ch.kinds()) <= {STDOUT, STDERR, EOF}


@check("double_eof")
def _(pl):
    sid, _ = setup(pl)
    resp, ch = exec_run(pl, sid, ["echo", "hi"])
    time.sleep(0.2)
    return ok(resp) and ch.kinds().count(EOF) == 1 and ch.clean()


@check("eof_with_payload")
def _(pl):
    sid, _ = setup(pl)
    resp, ch = exec_run(pl, sid, ["echo", "hi"])
    return ok(resp) and ch.clean() and all(not p for _, k, p in ch.frames if k == EOF)


@check("stderr_after_eof")
def _(pl):
    sid, _ = setup(pl)
    resp, ch = exec_run(pl, sid, bash("echo out; echo err >&2"))
    with ch.cond:
        before_eof = b"".join(p for t, k, p in ch.frames if k == STDERR and ch.eof_time and t <= ch.eof_time)
    return ok(resp) and before_eof == b"err\n" and ch.clean()


@check("close_without_eof")
def _(pl):
    sid, work = setup(pl)
    with open(os.path.join(work, "a.txt"), "wb") as f:
        f.write(b"alpha")
    resp, ch = read_file(pl, sid, "a.txt")
    return ok(resp) and ch.data() == b"alpha" and ch.eof.is_set() and ch.clean()


@check("ack_not_awaited")
def _(pl):
    sid, _ = setup(pl)
    resp, ch = exec_run(pl, sid, ["echo", "hi"], ack_delay=0.5)
    return (ok(resp) and ch.data() == b"hi\n" and ch.ack_time is not None
            and all(t >= ch.ack_time for t, _, _ in ch.frames) and ch.clean())


@check("ack_always_requested", open_ack=False)
def _(pl):
    sid, work = setup(pl)
    with open(os.path.join(work, "a.txt"), "wb") as f:
        f.write(b"alpha")
    resp, ch = read_file(pl, sid, "a.txt", timeout=6)
    return (ok(resp) and ch.data() == b"alpha" and ch.open_payload is not None
            and ch.open_payload.get("acknowledge") is not True)


# -- the host's frames as the plugin reads them


@check("frames_after_host_eof_ignored")
def _(pl):
    sid, _ = setup(pl)
    resp, _ = write_file(pl, sid, "late.txt", [(STDIN, b"abc"), (EOF, b""), (STDIN, b"def")])
    return invalid_frame(resp)


@check("stdout_frame_becomes_input")
def _(pl):
    sid, work = setup(pl)
    resp, _ = write_file(pl, sid, "mixed.txt", [(STDIN, b"abc"), (STDOUT, b"XYZ"), (EOF, b"")])
    path = os.path.join(work, "mixed.txt")
    written = _file_bytes(path)
    return invalid_frame(resp) and b"XYZ" not in written


@check("inbound_frame_limit_unchecked")
def _(pl):
    sid, _ = setup(pl)
    resp, _ = write_file(pl, sid, "big.txt", [(STDIN, b"x" * 70_000), (EOF, b"")])
    return invalid_frame(resp)


# -- file transfers


@check("content_length_excess_trimmed")
def _(pl):
    sid, _ = setup(pl)
    resp, _ = write_file(pl, sid, "cl.txt", stdin_frames(b"abcdef"), content_length=3)
    return kind(resp) == "invalid_spec" and detail(resp).get("field") == "content_length"


@check("content_length_short_accepted")
def _(pl):
    sid, _ = setup(pl)
    resp, _ = write_file(pl, sid, "cl.txt", stdin_frames(b"abc"), content_length=10)
    return kind(resp) == "io"


@check("read_missing_is_io")
def _(pl):
    sid, _ = setup(pl)
    resp, _ = read_file(pl, sid, "no-such-file.txt")
    return kind(resp) == "not_found" and detail(resp).get("resource") == "file"


@check("write_no_parents")
def _(pl):
    sid, work = setup(pl)
    resp, _ = write_file(pl, sid, "a/b/c.txt", stdin_frames(b"deep"))
    path = os.path.join(work, "a", "b", "c.txt")
    return ok(resp) and _file_bytes(path) == b"deep"


@check("append_limit_unchecked")
def _(pl):
    sid, _ = setup(pl)
    resp, _ = write_file(pl, sid, "huge.txt", [(EOF, b"")], append=True, content_length=16 * MIB + 1, timeout=10)
    return kind(resp) == "limit_exceeded" and detail(resp).get("limit") == "buffered_value_bytes"


# -- exec


@check("argv_through_shell")
def _(pl):
    sid, _ = setup(pl)
    resp, ch = exec_run(pl, sid, ["printf", "[%s]", "a b", "$HOME", "*"])
    return ok(resp) and ch.data() == b"[a b][$HOME][*]"


@check("bash_env_dropped")
def _(pl):
    sid, _ = setup(pl)
    resp, ch = exec_run(pl, sid, ["printenv", "BASH_ENV"], env={"BASH_ENV": "/nonexistent/v2b1-bash-env"})
    return ok(resp) and ch.data() == b"/nonexistent/v2b1-bash-env\n"


@check("duplicate_exec_id_accepted")
def _(pl):
    sid, _ = setup(pl)
    first, c1 = exec_send(pl, sid, bash("echo ready; sleep 20"), exec_id="dup")
    c1.wait_data(b"ready", 10)
    second = pl.response(exec_send(pl, sid, ["echo", "again"], exec_id="dup")[0])
    pl.call("exec/stop", {"exec_id": "dup", "level": "kill"})
    first_resp = pl.response(first, 8)
    return (kind(second) == "invalid_spec" and detail(second).get("field") == "exec_id"
            and exec_ok(first_resp).get("termination") == "killed")


def _stop_probe(pl: Plugin, script: str, level: str, wait: float) -> tuple[dict | None, Channel, float]:
    sid, _ = setup(pl)
    rid, ch = exec_send(pl, sid, bash(script))
    ch.wait_data(b"ready", 10)
    sent = time.monotonic()
    pl.call("exec/stop", {"exec_id": f"x{ch.id}", "level": level})
    resp = pl.response(rid, wait)
    return resp, ch, (pl.resp_time(rid) or float("inf")) - sent


@check("stop_kill_as_term")
def _(pl):
    resp, _, took = _stop_probe(pl, 'trap "" TERM; echo ready; sleep 30', "kill", 5)
    return exec_ok(resp).get("termination") == "killed" and took < 4


@check("term_sends_kill")
def _(pl):
    resp, ch, _ = _stop_probe(pl, 'trap "echo got-term; exit 7" TERM; echo ready; while :; do sleep 0.05; done',
                              "term", 8)
    inner = exec_ok(resp)
    return inner.get("termination") == "cancelled" and inner.get("exit_code") == 7 and b"got-term" in ch.data()


@check("term_escalates")
def _(pl):
    sid, _ = setup(pl)
    rid, ch = exec_send(pl, sid, bash('trap "" TERM; echo ready; sleep 30'))
    ch.wait_data(b"ready", 10)
    pl.call("exec/stop", {"exec_id": f"x{ch.id}", "level": "term"})
    still_running = pl.response(rid, 3.5) is None
    pl.call("exec/stop", {"exec_id": f"x{ch.id}", "level": "kill"})
    resp = pl.response(rid, 8)
    return still_running and exec_ok(resp).get("termination") == "killed"


@check("timeout_ignored")
def _(pl):
    sid, _ = setup(pl)
    resp, _ = exec_run(pl, sid, ["sleep", "30"], timeout_ms=500, timeout=6)
    return exec_ok(resp).get("termination") == "timed_out"


@check("stop_grace_ignored")
def _(pl):
    sid, _ = setup(pl)
    resp, ch = exec_run(pl, sid, bash('trap "echo graceful; exit 3" TERM; echo ready; while :; do sleep 0.05; done'),
                        timeout_ms=700, spec={"stop_grace_ms": 3000}, timeout=10)
    return exec_ok(resp).get("termination") == "timed_out" and b"graceful" in ch.data()


@check("own_stop_ladder_default")
def _(pl):
    sid, _ = setup(pl)
    resp, ch = exec_run(pl, sid, bash('trap "echo term-seen" TERM; echo ready; while :; do sleep 0.05; done'),
                        timeout_ms=700, timeout=10)
    return exec_ok(resp).get("termination") == "timed_out" and b"ready" in ch.data() and b"term-seen" not in ch.data()


@check("stops_registered_after_open")
def _(pl):
    sid, _ = setup(pl)
    gate = threading.Event()
    opened = threading.Event()
    rid, _ = exec_send(pl, sid, ["sleep", "3"], exec_id="early", ack_gate=gate, on_bind=lambda c: opened.set())
    opened.wait(10)
    stopped = pl.call("exec/stop", {"exec_id": "early", "level": "kill"})
    gate.set()
    resp = pl.response(rid, 10)
    return ok(stopped) and exec_ok(resp).get("termination") == "killed"


@check("stdin_stream_buffered")
def _(pl):
    sid, _ = setup(pl)
    rid, ch = exec_send(pl, sid, ["head", "-n", "1"], stdin=True)
    ch.bound.wait(10)
    ch.send(STDIN, b"first line\n")
    live = ch.wait_data(b"first line\n", 3)
    try:
        ch.send(EOF)
    except OSError:
        pass
    resp = pl.response(rid, 10)
    return live and ok(resp)


@check("result_carries_b64")
def _(pl):
    sid, _ = setup(pl)
    resp, ch = exec_run(pl, sid, bash("echo out; echo err >&2"))
    text = json.dumps(result(resp))
    return ok(resp) and ch.data() == b"out\n" and "_b64" not in text


@check("replay_claims_live")
def _(pl):
    sid, _ = setup(pl)
    resp, ch = exec_run(pl, sid, bash("echo a; sleep 1.5; echo b"))
    first = ch.first_time(STDOUT)
    if not ok(resp) or not result(resp).get("live_streaming"):
        return ok(resp)
    return first is not None and ch.eof_time is not None and ch.eof_time - first > 1.0


@check("streams_merged")
def _(pl):
    sid, _ = setup(pl)
    resp, ch = exec_run(pl, sid, bash("echo out; echo err >&2"))
    if not ok(resp) or not result(resp).get("streams_separated"):
        return ok(resp)
    return ch.data(STDOUT) == b"out\n" and ch.data(STDERR) == b"err\n"


@check("drops_output_under_backpressure")
def _(pl):
    sid, _ = setup(pl)
    size = 4_000_000
    resp, ch = exec_run(pl, sid, ["head", "-c", str(size), "/dev/zero"], read_delay=1.5, timeout=30)
    return ok(resp) and len(ch.data()) == size and ch.clean()


# -- handshake and removed methods


@check("exec_run_still_served")
def _(pl):
    sid, _ = setup(pl)
    resp = pl.call("exec/run", {"sandbox_id": sid, "spec": {"command": "echo hi", "env": {}, "timeout_ms": 5000}})
    return err(resp).get("code") == -32601


@check("missing_transport_accepted")
def _(pl):
    resp = pl.call("initialize", {"protocol_version": 2})
    return resp is not None and "error" in resp


@check("max_frame_unchecked")
def _(pl):
    resp = pl.init(max_frame_bytes=4096)
    if kind(resp) == "invalid_spec" and detail(resp).get("field") == "data_transport.max_frame_bytes":
        return True  # refused, as the reference does
    if not ok(resp):
        return False
    # accepted: then the plugin must keep to the limit the host announced
    info = result(pl.call("sandbox/create", {"spec": {"source": "host_directory"}}))
    content = os.urandom(20_000)
    with open(os.path.join(info["working_directory"], "f.bin"), "wb") as f:
        f.write(content)
    read, ch = read_file(pl, info["status"]["id"], "f.bin")
    return ok(read) and ch.data() == content and all(len(p) <= 4096 for _, _, p in ch.frames)


@check("reinitialize_replaces_transport")
def _(pl):
    sid, work = setup(pl)
    elsewhere = os.path.join(pl.host.dir, "elsewhere.sock")  # nothing listens there
    again = pl.call("initialize", {"protocol_version": 2, "data_transport": pl.host.transport(socket_path=elsewhere)})
    with open(os.path.join(work, "a.txt"), "wb") as f:
        f.write(b"alpha")
    resp, ch = read_file(pl, sid, "a.txt")
    return ok(again) and ok(resp) and ch.data() == b"alpha"


# -- transport budgets


@check("control_limit_off_by_one")
def _(pl):
    assert ok(pl.init())
    head = b'{"jsonrpc":"2.0","id":5,"method":"provider/health","params":{"pad":"'
    tail = b'"}}\n'
    line = head + b"x" * (MIB - len(head) - len(tail)) + tail
    assert len(line) == MIB
    pl.raw(line)
    at_limit = pl.response(5, 15)
    after = pl.call("provider/health", None, 5)
    return ok(at_limit) and ok(after)


@check("reply_limit_unenforced")
def _(pl):
    assert ok(pl.init())
    for n in range(2):
        created = pl.call("sandbox/create", {"spec": {"source": "host_directory",
                                                      "labels": {"big": "x" * 600_000, "n": str(n)}}}, 30)
        assert ok(created)
    resp = pl.call("sandbox/list", {"filter": {}}, 30)
    return (kind(resp) == "limit_exceeded" and detail(resp).get("limit") == "control_message_bytes"
            and detail(resp).get("max_bytes") == MIB)


def _reserved_overload(pl: Plugin) -> list[dict]:
    """Block the plugin's stdout, hold more reserved requests than their budget, then read the answers."""
    sid, _ = setup(pl)
    pl.gate.clear()
    fillers = [pl.send("sandbox/describe", {"sandbox_id": sid}) for _ in range(300)]
    time.sleep(1.0)
    healths = [pl.send("provider/health", None) for _ in range(90)]
    time.sleep(1.5)
    pl.gate.set()
    answers = [pl.response(rid, 20) for rid in healths]
    for rid in fillers:
        pl.response(rid, 20)
    return [a for a in answers if a is not None]


@check("overloaded_without_not_started")
def _(pl):
    refused = [a for a in _reserved_overload(pl) if kind(a) == "overloaded"]
    return bool(refused) and all(detail(a).get("not_started") is True for a in refused)


@check("reserved_unbounded")
def _(pl):
    refused = [a for a in _reserved_overload(pl) if kind(a) == "overloaded"]
    return bool(refused) and all(detail(a).get("limit") == "reserved_requests" for a in refused)


# -- event delivery


def _event_overflow(pl: Plugin) -> None:
    """Block the plugin's stdout while more events are produced than the event queue holds."""
    assert ok(pl.init())
    pl.gate.clear()
    creates = [pl.send("sandbox/create", {"spec": {"source": "host_directory"}, "events": {"route_id": f"r{n}"}})
               for n in range(220)]
    time.sleep(2.5)
    pl.gate.set()
    for rid in creates:
        pl.response(rid, 30)
    time.sleep(0.5)


@check("event_failed_never_sent")
def _(pl):
    _event_overflow(pl)
    return len(pl.notes("host/event_failed")) == 1


@check("events_after_event_failed")
def _(pl):
    _event_overflow(pl)
    failed = pl.notes("host/event_failed")
    later = pl.call("sandbox/create", {"spec": {"source": "host_directory"}, "events": {"route_id": "late"}})
    time.sleep(0.5)
    return (len(failed) >= 1 and ok(later)
            and not [i for i, _ in pl.notes("host/event") if i > failed[0][0]])


# -- stdio, PTY, logs, shutdown


@check("stderr_tail_keeps_head")
def _(pl):
    sid, _ = setup(pl)
    ch = pl.host.channel(input=True)
    opened = pl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1", "channel": ch.param, "spec": {
        "program": "bash", "args": ["-c", "head -c 10000 /dev/zero | tr '\\0' A >&2; printf END >&2"], "env": {}}})
    ch.bound.wait(10)
    ch.send(EOF)
    waited = pl.call("exec/stdio_wait", {"process_id": "p1"}, 15)
    tail = (result(waited) or {}).get("stderr_tail", "")
    return (ok(opened) and ok(waited) and tail.startswith("…") and tail.endswith("END")
            and len(tail.encode("utf-8")) <= 8 * 1024 + len("…".encode()))


@check("pty_resize_ignored")
def _(pl):
    sid, _ = setup(pl)
    ch = pl.host.channel(input=True)
    opened = pl.call("pty/open", {"sandbox_id": sid, "pty_id": "t1", "channel": ch.param, "options": {
        "size": {"rows": 24, "cols": 80}, "env": {"PS1": "$ "}, "working_dir": None}})
    ch.bound.wait(10)
    ch.send(STDIN, b"stty size\n")
    before = ch.wait_data(b"24 80", 8)
    resized = pl.call("pty/resize", {"pty_id": "t1", "size": {"rows": 40, "cols": 100}})
    ch.send(STDIN, b"stty size\n")
    after = ch.wait_data(b"40 100", 8)
    pl.call("pty/close", {"pty_id": "t1"}, 10)
    return ok(opened) and before and ok(resized) and after


@check("logs_answered_before_stream")
def _(pl):
    sid, _ = setup(pl)
    ch = pl.host.channel(ack_delay=0.3)
    rid = pl.send("logs/follow", {"sandbox_id": sid, "stream_id": "l1", "channel": ch.param, "source": "provision"})
    resp = pl.response(rid, 10)
    ch.closed.wait(3)
    answered = pl.resp_time(rid)
    return (ok(resp) and b"running" in ch.data() and ch.eof_time is not None and answered is not None
            and ch.eof_time <= answered + 0.2)


@check("stream_cancel_ignored")
def _(pl):
    sid, _ = setup(pl)
    ch = pl.host.channel()
    rid = pl.send("logs/follow", {"sandbox_id": sid, "stream_id": "l2", "channel": ch.param, "source": "entrypoint"})
    ch.bound.wait(10)
    time.sleep(0.3)
    cancelled = pl.call("stream/cancel", {"stream_id": "l2"})
    resp = pl.response(rid, 4)
    return ok(cancelled) and ok(resp)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@check("shutdown_leaves_commands")
def _(pl):
    sid, _ = setup(pl)
    _, ch = exec_send(pl, sid, bash("echo $$; exec sleep 30"))
    ch.wait_data(b"\n", 10)
    pid = int(ch.data().strip() or 0)
    answered = pl.call("shutdown", None, 10)
    try:
        pl.proc.wait(timeout=12)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + 3
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    survived = pid > 0 and _alive(pid)
    if survived:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    return ok(answered) and pid > 0 and not survived


# --------------------------------------------------------------------------------------------- driver


INIT_PROBE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocol_version": 2, "data_transport": {"socket_path": "/nonexistent/v2b1.sock", "max_frame_bytes": MAX_FRAME,
                                              "open_ack": True}}}).encode() + b"\n"


def starts(cmd: list[str]) -> bool:
    """Does the plugin start and answer a v2 initialize?"""
    try:
        out = subprocess.run(cmd, input=INIT_PROBE, capture_output=True, timeout=20, check=False).stdout
    except subprocess.TimeoutExpired:
        return False
    for line in out.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("id") == 1 and (msg.get("result") or {}).get("protocol_version") == 2:
            return True
    return False


def conforms(cmd: list[str], name: str) -> bool | str:
    """The probe of ``name`` against the plugin ``cmd``: True when it behaves as protocol v2 says."""
    host = Host(**HOST_OPTIONS.get(name, {}))
    pl = Plugin(cmd, host)
    try:
        return bool(CHECKS[name](pl))
    except Exception as exc:  # noqa: BLE001 - a mutant may answer garbage
        return f"error: {exc!r}"
    finally:
        pl.close()
        host.close()


def main(argv: list[str] | None = None) -> int:
    from tests.redteam import load

    only = set(argv if argv is not None else sys.argv[1:])
    names = sorted(n for n in load() if n.startswith(PREFIX) and (not only or n in only))
    failures = 0
    with ThreadPoolExecutor(3) as pool:
        honest_starts = pool.submit(starts, HONEST)
        started = dict(zip(names, pool.map(lambda n: starts(mutant_cmd(n)), names)))
        if not honest_starts.result():
            failures += 1
            print("FAIL the honest reference does not answer a v2 initialize")
        for name in names:
            if not started[name]:
                failures += 1
                print(f"FAIL start {name}")
        print(f"{sum(started.values())}/{len(names)} mutants start and answer a v2 initialize")
        for name in (n for n in names if n not in CHECKS):
            failures += 1
            print(f"FAIL no reachability probe for {name}")
        jobs = {name: (pool.submit(conforms, HONEST, name), pool.submit(conforms, mutant_cmd(name), name))
                for name in names if name in CHECKS}
        reached = honest_ok = separated = 0
        for name, (honest, mutant) in jobs.items():
            h, m = honest.result(), mutant.result()
            good = h is True and m is not True
            honest_ok += h is True
            reached += m is not True
            failures += not good
            separated += good
            print(f"{'ok  ' if good else 'FAIL'} reach {name}: honest={h} mutant={m}", flush=True)
    print(f"honest reference conforms on {honest_ok}/{len(jobs)} probes; {reached}/{len(jobs)} mutants fail "
          f"their probe; {separated}/{len(jobs)} faults reached (honest conforms, mutant does not)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
