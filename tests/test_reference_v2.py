"""The reference v2 plugin (``HostPluginV2``) against a small raw host written here: its own Unix-socket
listener and frame parsing, independent of both the plugin's ``data_channel.py`` and the checker's
``conformance/transports/channels.py`` (so a misreading shared by either of them cannot pass here).

The plugin is served on a thread over ``os.pipe`` pairs (``host_plugin.serve``), except where a real
process is the point (the installed ``--dialect sandbox-driver-v2`` entry point).
"""

from __future__ import annotations

import dataclasses
import fcntl
import io
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
import termios
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from conformance.reference import host_plugin
from conformance.reference.host_plugin_v2 import EventDelivery, HostPluginV2

OPEN, STDOUT, STDERR, STDIN, EOF = 0, 1, 2, 3, 4
MAX_FRAME = 65536
REPO = Path(__file__).resolve().parents[1]


# -- a raw host: the data socket ---------------------------------------------------------------------


class HostChannel:
    """The host's end of one expected channel: what the plugin sent, where its eof ended on the wire,
    and where the wire was when the operation's answer arrived."""

    def __init__(self, channel_id: int, token: str) -> None:
        self.channel_id, self.token = channel_id, token
        self.opened = threading.Event()
        self.open_payload: dict[str, Any] = {}
        self.frames: list[tuple[int, bytes]] = []
        self.eof_end: int | None = None  # wire offset just past the plugin's eof frame
        self.eof_seen = threading.Event()
        self.closed = threading.Event()
        self.answered_at: int | None = None
        self.sock: socket.socket | None = None
        self.reading = threading.Event()  # cleared: this host stops reading (the plugin must stall)
        self.reading.set()
        self._consumed = 0
        self._lock = threading.Lock()

    @property
    def request(self) -> dict[str, Any]:
        return {"channel_id": self.channel_id, "token": self.token}

    def data(self, kind: int = STDOUT, complete: bool = True) -> bytes:
        """The bytes of ``kind`` received so far; with ``complete``, once the plugin's eof was parsed
        (an answer can be read before its channel's frames are)."""
        if complete:
            self.eof_seen.wait(2)
        return b"".join(payload for k, payload in self.frames if k == kind)

    def bind(self, sock: socket.socket, payload: dict[str, Any], consumed: int) -> None:
        with self._lock:
            self.sock, self.open_payload, self._consumed = sock, payload, consumed
            if self.answered_at is not None:  # the answer was read before this host bound the channel
                self.answered_at = None
                self._mark_answered_locked()
        self.opened.set()
        threading.Thread(target=self._read, daemon=True).start()

    def _recv_exact(self, count: int) -> bytes | None:
        data = b""
        while len(data) < count:
            try:
                select.select([self.sock], [], [], 1.0)
            except (OSError, ValueError):
                return None  # the test closed this end
            with self._lock:  # a read and its count move together, so mark_answered sees a true offset
                try:
                    chunk = self.sock.recv(count - len(data), socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                except OSError:
                    return None
                self._consumed += len(chunk)
            if not chunk:
                return None
            data += chunk
        return data

    def _read(self) -> None:
        while True:
            self.reading.wait()
            header = self._recv_exact(5)
            if header is None:
                break
            kind, length = struct.unpack(">BI", header)
            assert length <= MAX_FRAME, f"plugin sent a {length}-byte frame"
            payload = self._recv_exact(length) if length else b""
            if payload is None:
                break
            if kind == EOF:
                self.eof_end = self._consumed
                self.eof_seen.set()
            self.frames.append((kind, payload))
        self.closed.set()

    def mark_answered(self) -> None:
        with self._lock:
            self._mark_answered_locked()

    def _mark_answered_locked(self) -> None:
        """Where the wire was: what was read plus what waits in the socket. Before the bind (a busy test
        thread can accept the channel after reading the answer) there is no socket yet: the bind marks it
        again, then counting all that had arrived by the bind."""
        pending = struct.unpack("i", fcntl.ioctl(self.sock.fileno(), termios.FIONREAD, b"\0" * 4))[0] \
            if self.sock is not None and self.sock.fileno() >= 0 else 0
        self.answered_at = self._consumed + pending

    @property
    def eof_before_answer(self) -> bool:
        """Whether the plugin's eof was on the wire when the answer arrived (its parsing may come later)."""
        self.eof_seen.wait(2)
        return self.eof_end is not None and self.answered_at is not None and self.eof_end <= self.answered_at

    def send_frame(self, kind: int, payload: bytes = b"") -> None:
        assert self.opened.wait(5), "the plugin never opened the channel"
        self.sock.sendall(struct.pack(">BI", kind, len(payload)) + payload)

    def send_stdin(self, data: bytes) -> None:
        for start in range(0, len(data), MAX_FRAME):
            self.send_frame(STDIN, data[start:start + MAX_FRAME])


class RawHost:
    """A listener in a private directory that authenticates ``open`` frames against its expectations."""

    def __init__(self, open_ack: bool = True, withhold_ack: bool = False) -> None:
        self.open_ack, self.withhold_ack = open_ack, withhold_ack
        self.directory = tempfile.mkdtemp(prefix="v2-raw-host-")
        os.chmod(self.directory, 0o700)
        self.socket_path = os.path.join(self.directory, "data.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.socket_path)
        self.listener.listen(16)
        self.expected: dict[int, HostChannel] = {}
        self.refused: list[str] = []
        self._next_id = 1
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def transport(self) -> dict[str, Any]:
        return {"socket_path": self.socket_path, "max_frame_bytes": MAX_FRAME, "open_ack": self.open_ack}

    def expect(self) -> HostChannel:
        channel = HostChannel(self._next_id, secrets.token_hex(32))
        self._next_id += 1
        self.expected[channel.channel_id] = channel
        return channel

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._admit, args=(sock,), daemon=True).start()

    def _admit(self, sock: socket.socket) -> None:
        header = sock.recv(5, socket.MSG_WAITALL)
        kind, length = struct.unpack(">BI", header)
        payload = json.loads(sock.recv(length, socket.MSG_WAITALL))
        channel = self.expected.get(payload.get("channel_id"))
        if kind != OPEN or channel is None or payload.get("token") != channel.token:
            self.refused.append(repr(payload))
            sock.close()
            return
        if payload.get("acknowledge") and not self.withhold_ack:
            sock.sendall(struct.pack(">BI", OPEN, 0))
        channel.bind(sock, payload, consumed=5 + length)

    def close(self) -> None:
        self.listener.close()
        shutil.rmtree(self.directory, ignore_errors=True)


# -- a raw host: the control connection --------------------------------------------------------------


class Session:
    """The plugin served on a thread; requests go in as NDJSON lines, answers are collected by id."""

    def __init__(self, plugin_class: type[HostPluginV2] = HostPluginV2, host: RawHost | None = None,
                 initialize: bool = True) -> None:
        self.host = host or RawHost()
        to_plugin_r, self._to_plugin = os.pipe()
        from_plugin, to_host_w = os.pipe()
        self.stderr = io.StringIO()
        self.exit_code: int | None = None
        self.answers: dict[int, dict[str, Any]] = {}
        self.notifications: list[dict[str, Any]] = []
        self._arrived = threading.Condition()
        self._on_answer: dict[int, HostChannel] = {}
        self._next_id = 1
        plugin_stdin, plugin_stdout = os.fdopen(to_plugin_r, "rb"), os.fdopen(to_host_w, "wb")
        environ = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}

        def serve() -> None:
            try:
                self.exit_code = host_plugin.serve(["--dialect", "sandbox-driver-v2"], plugin_stdin, plugin_stdout,
                                                   self.stderr, environ, plugin_class=plugin_class)
            finally:
                plugin_stdout.close()

        self.server = threading.Thread(target=serve, daemon=True)
        self.server.start()
        threading.Thread(target=self._read, args=(os.fdopen(from_plugin, "rb"),), daemon=True).start()
        if initialize:
            answer = self.call("initialize", {"protocol_version": 2, "data_transport": self.host.transport})
            assert "result" in answer, answer
            self.initialize_result = answer["result"]

    def _read(self, stream: Any) -> None:
        for line in iter(stream.readline, b""):
            message = json.loads(line)
            with self._arrived:
                if "id" in message:
                    channel = self._on_answer.get(message["id"])
                    if channel is not None:
                        channel.mark_answered()
                    self.answers[message["id"]] = message
                else:
                    self.notifications.append(message)
                self._arrived.notify_all()

    def send(self, method: str, params: Any, channel: HostChannel | None = None) -> int:
        request_id = self._next_id
        self._next_id += 1
        if channel is not None:
            self._on_answer[request_id] = channel
        self.send_raw(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
                      + b"\n")
        return request_id

    def send_raw(self, data: bytes) -> None:
        os.write(self._to_plugin, data)

    def answer(self, request_id: int, timeout_s: float = 10.0) -> dict[str, Any]:
        with self._arrived:
            assert self._arrived.wait_for(lambda: request_id in self.answers, timeout_s), \
                f"no answer to #{request_id}; plugin stderr:\n{self.stderr.getvalue()}"
            return self.answers[request_id]

    def answered(self, request_id: int) -> bool:
        return request_id in self.answers

    def call(self, method: str, params: Any, channel: HostChannel | None = None,
             timeout_s: float = 10.0) -> dict[str, Any]:
        return self.answer(self.send(method, params, channel), timeout_s)

    def result(self, method: str, params: Any, channel: HostChannel | None = None) -> Any:
        answer = self.call(method, params, channel)
        assert "result" in answer, answer
        return answer["result"]

    def create_sandbox(self, **extra: Any) -> str:
        return self.result("sandbox/create", {"spec": {"source": "host_directory"}, **extra})["status"]["id"]

    def end_input(self, timeout_s: float = 10.0) -> int | None:
        os.close(self._to_plugin)
        self.server.join(timeout_s)
        return self.exit_code

    def close(self) -> None:
        if not self.server.is_alive():
            self.host.close()
            return
        self.end_input()
        self.host.close()


@pytest.fixture
def session():
    opened = Session()
    yield opened
    opened.close()


def report(answer: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(kind, detail) of an application error."""
    error = answer["error"]
    assert error["code"] == -32000, answer
    return error["data"]["report"]["kind"], error["data"].get("detail", {})


def exec_params(sandbox_id: str, channel: HostChannel, program: str, *args: str, exec_id: str = "x1",
                **extra: Any) -> dict[str, Any]:
    spec = {"program": program, "args": list(args), "env": {}, **extra.pop("spec", {})}
    return {"sandbox_id": sandbox_id, "exec_id": exec_id, "channel": channel.request, "spec": spec,
            "retained_output_limit": None, **extra}


class _Limited(HostPluginV2):
    """The reference with other limits; it keeps its instances, so a test can wait on its budgets."""

    instances: ClassVar[list[HostPluginV2]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        type(self).instances.append(self)


def with_limits(**changes: Any) -> type[HostPluginV2]:
    return type("LimitedHostPluginV2", (_Limited,),
                {"limits": dataclasses.replace(HostPluginV2.limits, **changes), "instances": []})


def until_no_request_held(plugin_class: type[HostPluginV2], within_s: float = 5.0) -> None:
    """A request's slot is given back only after its answer was written, so a client that sends the next
    request the moment an answer arrives may still find the previous one held: wait for the release."""
    [plugin] = plugin_class.instances  # type: ignore[attr-defined]
    deadline = time.monotonic() + within_s
    while plugin._requests.held and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not plugin._requests.held, "a request's slot was never given back after its answer"


# -- handshake ---------------------------------------------------------------------------------------


def test_initialize_declares_v2_capabilities(session: Session) -> None:
    result = session.initialize_result
    assert result["protocol_version"] == 2
    assert result["provider"]["kind"] == "host"
    exec_caps = result["capabilities"]["exec"]
    assert exec_caps["stop"] and exec_caps["stdin"] and exec_caps["stdin_stream"] and "cancel" not in exec_caps
    assert "one_shot" in result["capabilities"] and result["capabilities"]["one_shot"] is None


def test_handshake_refusals() -> None:
    opened = Session(initialize=False)
    try:
        missing = opened.call("initialize", {"protocol_version": 2})
        assert missing["error"]["code"] == -32600 and "data" not in missing["error"]
        wrong_frame = opened.call("initialize", {"protocol_version": 2, "data_transport": {
            **opened.host.transport, "max_frame_bytes": 1024}})
        assert report(wrong_frame) == ("invalid_spec", {"field": "data_transport.max_frame_bytes",
                                                        "reason": "must be 65536"})
        v1 = opened.call("initialize", {"protocol_version": 1})
        kind, detail = report(v1)
        assert kind == "invalid_spec" and detail["field"] == "protocol_version"
        assert "version 2" in detail["reason"] and "asked for 1" in detail["reason"]
        sandbox_id = opened.create_sandbox()
        early = opened.call("fs/read", {"sandbox_id": sandbox_id, "path": "x", "channel": opened.host.expect().request})
        assert report(early)[0] == "transport" and "before initialize" in early["error"]["message"]
    finally:
        opened.close()


def test_second_initialize_is_answered_but_keeps_the_first_transport(session: Session) -> None:
    other = RawHost()
    try:
        again = session.result("initialize", {"protocol_version": 2, "data_transport": other.transport})
        assert again["protocol_version"] == 2
        sandbox_id = session.create_sandbox()
        channel = session.host.expect()
        session.result("exec/stream", exec_params(sandbox_id, channel, "true"), channel)
        assert channel.opened.is_set()
    finally:
        other.close()


def test_removed_v1_methods_are_unknown(session: Session) -> None:
    for method in ("exec/run", "exec/cancel", "exec/stdio_input", "exec/stdio_output", "exec/stdio_close_input",
                   "pty/input", "pty/output"):
        assert session.call(method, {"exec_id": "x"})["error"]["code"] == -32601, method


def test_undeclared_v2_methods_are_unsupported(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    for method, capability in (("one_shot/run", "one_shot"), ("git/clone", "git"),
                               ("snapshot/build_logs", "snapshots.build_logs")):
        assert report(session.call(method, {"sandbox_id": sandbox_id})) == ("unsupported", {"capability": capability})


def test_environment_is_what_a_command_starts_with(session: Session) -> None:
    sandbox_id = session.result("sandbox/create", {"spec": {"source": "host_directory",
                                                            "env": {"CONFORMANCE_OWN": "sandbox value"}}})["status"]["id"]
    environment = session.result("sandbox/environment", {"sandbox_id": sandbox_id})["environment"]
    channel = session.host.expect()
    session.result("exec/stream", exec_params(sandbox_id, channel, "env", "-0"), channel)
    started_with = dict(line.split("=", 1) for line in channel.data(STDOUT).decode().split("\0") if line)
    assert environment == started_with and environment["CONFORMANCE_OWN"] == "sandbox value"


def test_preview_url_is_the_port_itself_and_release_always_succeeds(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    preview = session.result("access/preview_url", {"sandbox_id": sandbox_id, "port": 8123})["preview"]
    assert preview == {"url": "http://127.0.0.1:8123", "headers": {}, "expires_at": None}
    for _ in range(2):  # released once, and again
        assert session.result("access/preview_release", {"sandbox_id": sandbox_id, "port": 8123}) is None
    assert session.result("access/preview_release", {"sandbox_id": sandbox_id, "port": 9}) is None  # never asked


# -- exec over channels ------------------------------------------------------------------------------


def test_exec_round_trip_separates_streams_and_sends_eof_before_the_answer(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    channel = session.host.expect()
    result = session.result("exec/stream", exec_params(
        sandbox_id, channel, "bash", "-c", "printf out; printf err >&2; exit 3"), channel)
    assert result["result"]["exit_code"] == 3 and result["result"]["termination"] == "exited"
    assert channel.data(STDOUT) == b"out" and channel.data(STDERR) == b"err"
    assert [kind for kind, _ in channel.frames].count(EOF) == 1 and channel.frames[-1] == (EOF, b"")
    assert channel.eof_before_answer
    assert result["stdout_capture"] == {"observed_bytes": 3, "retained_bytes": 0, "omitted_bytes": 3,
                                        "truncated": False}
    assert result["streams_separated"] and result["live_streaming"]
    assert not any(n["method"] in ("exec/output", "logs/output") for n in session.notifications)


def test_exec_runs_the_argument_vector_literally_with_its_environment(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    channel = session.host.expect()
    session.result("exec/stream", exec_params(sandbox_id, channel, "printf", "%s|", "a b", "$HOME", "*"), channel)
    assert channel.data() == b"a b|$HOME|*|"
    channel = session.host.expect()
    session.result("exec/stream", exec_params(sandbox_id, channel, "printenv", "BASH_ENV", exec_id="x2",
                                              spec={"env": {"BASH_ENV": "/nowhere/rc"}}), channel)
    assert channel.data() == b"/nowhere/rc\n"


def test_exec_output_larger_than_a_frame_is_split(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    channel = session.host.expect()
    session.result("exec/stream", exec_params(sandbox_id, channel, "head", "-c", "300000", "/dev/zero"), channel)
    assert channel.data() == b"\0" * 300000
    assert all(len(payload) <= MAX_FRAME for _, payload in channel.frames)


def test_a_host_that_does_not_read_stalls_the_command(session: Session) -> None:
    handle = session.result("sandbox/create", {"spec": {"source": "host_directory"}})
    sandbox_id, workspace = handle["status"]["id"], Path(handle["working_directory"])
    channel = session.host.expect()
    channel.reading.clear()
    size = 4 * 1024 * 1024
    request_id = session.send("exec/stream", exec_params(
        sandbox_id, channel, "bash", "-c", f"head -c {size} /dev/zero; touch written"), channel)
    time.sleep(0.5)
    assert not (workspace / "written").exists(), "the command finished writing: its output was buffered somewhere"
    channel.reading.set()
    assert "result" in session.answer(request_id)
    assert len(channel.data()) == size and channel.eof_before_answer


def test_streamed_stdin_reaches_the_command(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    channel = session.host.expect()
    request_id = session.send("exec/stream", exec_params(sandbox_id, channel, "cat", stdin=True), channel)
    channel.send_stdin(b"hello ")
    channel.send_stdin(b"world\n")
    channel.send_frame(EOF)
    assert "result" in session.answer(request_id)
    assert channel.data() == b"hello world\n" and channel.eof_before_answer


def test_fixed_stdin_is_collected_to_eof_and_bounded() -> None:
    fixed = type("FixedStdin", (with_limits(buffered_value_bytes=100_000),),
                 {"streams_stdin": lambda self: False})
    opened = Session(fixed)
    try:
        sandbox_id = opened.create_sandbox()
        channel = opened.host.expect()
        request_id = opened.send("exec/stream", exec_params(sandbox_id, channel, "wc", "-c", stdin=True), channel)
        channel.send_stdin(b"x" * 70000)
        channel.send_frame(EOF)
        assert "result" in opened.answer(request_id) and channel.data().strip() == b"70000"
        channel = opened.host.expect()
        request_id = opened.send("exec/stream", exec_params(sandbox_id, channel, "cat", exec_id="x2", stdin=True),
                                 channel)
        channel.send_stdin(b"y" * 120000)
        channel.send_frame(EOF)
        assert report(opened.answer(request_id)) == ("limit_exceeded", {"limit": "buffered_value_bytes",
                                                                       "max_bytes": 100_000})
    finally:
        opened.close()


def test_stop_term_sends_one_sigterm_and_kill_sends_sigkill(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    channel = session.host.expect()
    request_id = session.send("exec/stream", exec_params(sandbox_id, channel, "sleep", "30"), channel)
    assert channel.opened.wait(5)
    assert "result" in session.call("exec/stop", {"exec_id": "x1", "level": "term"})
    result = session.answer(request_id)["result"]["result"]
    assert result["termination"] == "cancelled" and result["signal"] == 15

    channel = session.host.expect()
    request_id = session.send("exec/stream", exec_params(
        sandbox_id, channel, "bash", "-c", 'trap "" TERM; echo ready; sleep 30', exec_id="x2"), channel)
    deadline = time.monotonic() + 5
    while b"ready" not in channel.data(complete=False) and time.monotonic() < deadline:
        time.sleep(0.01)  # the trap must be in place before the signal
    session.result("exec/stop", {"exec_id": "x2", "level": "term"})
    time.sleep(0.3)
    assert not session.answered(request_id), "a term is one signal, not an ending"
    session.result("exec/stop", {"exec_id": "x2", "level": "kill"})
    result = session.answer(request_id)["result"]["result"]
    assert result["termination"] == "killed" and result["signal"] == 9
    assert "result" in session.call("exec/stop", {"exec_id": "never-ran", "level": "kill"})


def test_timeout_kills_outright_or_runs_the_grace_ladder(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    channel = session.host.expect()
    outright = session.result("exec/stream", exec_params(sandbox_id, channel, "sleep", "30",
                                                         spec={"timeout_ms": 100}), channel)["result"]
    assert outright["termination"] == "timed_out" and outright["signal"] == 9
    channel = session.host.expect()
    laddered = session.result("exec/stream", exec_params(sandbox_id, channel, "sleep", "30", exec_id="x2",
                                                         spec={"timeout_ms": 100, "stop_grace_ms": 2000}),
                              channel)["result"]
    assert laddered["termination"] == "timed_out" and laddered["signal"] == 15


def test_duplicate_exec_id_is_refused(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    first = session.host.expect()
    request_id = session.send("exec/stream", exec_params(sandbox_id, first, "sleep", "30"), first)
    assert first.opened.wait(5)
    duplicate = session.call("exec/stream", exec_params(sandbox_id, session.host.expect(), "true"))
    assert report(duplicate) == ("invalid_spec", {"field": "exec_id", "reason": "duplicate execution id"})
    session.result("exec/stop", {"exec_id": "x1", "level": "kill"})
    assert session.answer(request_id)["result"]["result"]["termination"] == "killed"


# -- files over channels -----------------------------------------------------------------------------


def test_file_round_trip_above_one_frame(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    content = os.urandom(200_000)
    writing = session.host.expect()
    request_id = session.send("fs/write", {"sandbox_id": sandbox_id, "path": "deep/dir/blob", "channel": writing.request,
                                           "content_length": len(content)}, writing)
    writing.send_stdin(content)
    writing.send_frame(EOF)
    assert "result" in session.answer(request_id)
    assert writing.eof_before_answer
    reading = session.host.expect()
    assert session.result("fs/read", {"sandbox_id": sandbox_id, "path": "deep/dir/blob", "channel": reading.request},
                          reading) in ({}, None)
    assert reading.data() == content and reading.eof_before_answer
    assert max(len(payload) for _, payload in reading.frames) == MAX_FRAME
    ranged = session.host.expect()
    session.result("fs/read", {"sandbox_id": sandbox_id, "path": "deep/dir/blob", "channel": ranged.request,
                               "offset": 70000, "length": 10}, ranged)
    assert ranged.data() == content[70000:70010]


def test_write_without_length_and_append(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    for data, append in ((b"one ", False), (b"two", True)):
        channel = session.host.expect()
        params = {"sandbox_id": sandbox_id, "path": "log.txt", "channel": channel.request, "append": append}
        request_id = session.send("fs/write", params, channel)
        channel.send_stdin(data)
        channel.send_frame(EOF)
        assert "result" in session.answer(request_id)
    reading = session.host.expect()
    session.result("fs/read", {"sandbox_id": sandbox_id, "path": "log.txt", "channel": reading.request}, reading)
    assert reading.data() == b"one two"


def test_content_length_too_few_and_too_many(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    for sent, expected_kind in ((b"abc", "io"), (b"abcdefgh", "invalid_spec")):
        channel = session.host.expect()
        request_id = session.send("fs/write", {"sandbox_id": sandbox_id, "path": "f", "channel": channel.request,
                                               "content_length": 5}, channel)
        channel.send_stdin(sent)
        channel.send_frame(EOF)
        kind, detail = report(session.answer(request_id))
        assert kind == expected_kind
        if kind == "invalid_spec":
            assert detail["field"] == "content_length"


def test_reading_a_missing_file_is_not_found_file(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    channel = session.host.expect()
    kind, detail = report(session.call("fs/read", {"sandbox_id": sandbox_id, "path": "absent",
                                                   "channel": channel.request}, channel))
    assert (kind, detail["resource"]) == ("not_found", "file")
    assert channel.eof_seen.wait(2) and channel.eof_before_answer


@pytest.mark.parametrize("fault", ["unexpected stdout", "unknown kind", "oversized header", "after eof",
                                   "closed before eof"])
def test_host_frame_faults_fail_the_write(session: Session, fault: str) -> None:
    sandbox_id = session.create_sandbox()
    channel = session.host.expect()
    request_id = session.send("fs/write", {"sandbox_id": sandbox_id, "path": "f", "channel": channel.request},
                              channel)
    if fault == "unexpected stdout":
        channel.send_frame(STDOUT, b"not input")
    elif fault == "unknown kind":
        channel.send_frame(9, b"?")
    elif fault == "oversized header":
        assert channel.opened.wait(5)
        channel.sock.sendall(struct.pack(">BI", STDIN, MAX_FRAME + 1))
    elif fault == "after eof":
        channel.send_stdin(b"data")
        channel.send_frame(EOF)
        channel.send_stdin(b"more")
    else:
        channel.send_stdin(b"partial")
        channel.sock.close()
    kind, detail = report(session.answer(request_id))
    assert (kind, detail.get("field")) == (("transport", None) if fault == "closed before eof" else ("invalid_spec", "frame"))
    if fault != "after eof":  # (after the eof the content was complete: v2 allows the write to have happened)
        exists = session.result("fs/exists", {"sandbox_id": sandbox_id, "path": "f"})["exists"]
        assert not exists, "a write refused before its content was complete left a file behind"


def test_data_after_eof_fails_a_streamed_exec(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    channel = session.host.expect()
    request_id = session.send("exec/stream", exec_params(sandbox_id, channel, "sleep", "5", stdin=True), channel)
    channel.send_frame(EOF)
    channel.send_stdin(b"late")
    kind, detail = report(session.answer(request_id))
    assert kind == "invalid_spec" and detail["field"] == "frame"


# -- open acknowledgement ----------------------------------------------------------------------------


@pytest.mark.parametrize("open_ack", [True, False])
def test_open_asks_acknowledgement_exactly_when_offered(open_ack: bool) -> None:
    opened = Session(host=RawHost(open_ack=open_ack))
    try:
        sandbox_id = opened.create_sandbox()
        channel = opened.host.expect()
        opened.result("exec/stream", exec_params(sandbox_id, channel, "echo", "hi"), channel)
        # the answer can be read before this host's acceptor has bound the channel its open frame named
        assert channel.opened.wait(10), "the plugin never opened the channel"
        assert channel.open_payload == {"channel_id": channel.channel_id, "token": channel.token,
                                        "acknowledge": open_ack}
        assert channel.data() == b"hi\n"
    finally:
        opened.close()


def test_a_withheld_acknowledgement_is_a_transport_error() -> None:
    opened = Session(with_limits(open_timeout_s=0.5), host=RawHost(withhold_ack=True))
    try:
        sandbox_id = opened.create_sandbox()
        channel = opened.host.expect()
        answer = opened.call("exec/stream", exec_params(sandbox_id, channel, "echo", "hi"), channel)
        assert report(answer)[0] == "transport"
        assert channel.data(complete=False) == b"", "no data before the acknowledgement"
    finally:
        opened.close()


# -- long-lived streams ------------------------------------------------------------------------------


def test_stdio_process_over_one_channel(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    channel = session.host.expect()
    session.result("exec/stdio_open", {"sandbox_id": sandbox_id, "process_id": "p1", "channel": channel.request,
                                       "spec": {"program": "bash", "args": ["-c", "cat; echo bye >&2"], "env": {}}},
                   channel)
    channel.send_stdin(b"ping\n")
    channel.send_frame(EOF)
    waited = session.result("exec/stdio_wait", {"process_id": "p1"}, channel)
    assert waited["termination"] == "exited" and waited["exit_code"] == 0 and waited["stderr_tail"] == "bye\n"
    assert channel.data() == b"ping\n" and channel.eof_before_answer


def test_pty_over_one_channel(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    channel = session.host.expect()
    session.result("pty/open", {"sandbox_id": sandbox_id, "pty_id": "t1", "channel": channel.request,
                                "options": {"size": {"rows": 24, "cols": 80}, "env": {}}}, channel)
    channel.send_stdin(b"echo mark-$((40+2))\n")
    deadline = time.monotonic() + 5
    while b"mark-42" not in channel.data(complete=False) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert b"mark-42" in channel.data(complete=False)
    session.result("pty/resize", {"pty_id": "t1", "size": {"rows": 30, "cols": 100}})
    session.result("pty/close", {"pty_id": "t1"}, channel)
    assert channel.eof_before_answer


def test_logs_follow_sends_lines_then_eof_then_answers(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    channel = session.host.expect()
    session.result("logs/follow", {"sandbox_id": sandbox_id, "stream_id": "l1", "channel": channel.request,
                                   "source": "provision"}, channel)
    assert b"is running" in channel.data() and channel.eof_before_answer
    following = session.host.expect()
    request_id = session.send("logs/follow", {"sandbox_id": sandbox_id, "stream_id": "l2",
                                              "channel": following.request, "source": "entrypoint"}, following)
    assert following.opened.wait(5)
    duplicate = session.call("logs/follow", {"sandbox_id": sandbox_id, "stream_id": "l2",
                                             "channel": session.host.expect().request, "source": "entrypoint"})
    assert report(duplicate) == ("invalid_spec", {"field": "stream_id", "reason": "duplicate stream id"})
    session.result("stream/cancel", {"stream_id": "l2"})
    assert "result" in session.answer(request_id) and following.eof_before_answer


# -- limits, diagnostics, events, shutdown -----------------------------------------------------------


def test_admission_refuses_before_work_but_reserved_methods_pass() -> None:
    limited = with_limits(provider_requests=2, active_io=1)
    opened = Session(limited)
    try:
        sandbox_id = opened.create_sandbox()
        until_no_request_held(limited)  # else the create's slot and the stream fill provider_requests first
        channel = opened.host.expect()
        running = opened.send("exec/stream", exec_params(sandbox_id, channel, "sleep", "30"), channel)
        assert channel.opened.wait(5)
        io_refused = opened.host.expect()
        assert report(opened.call("exec/stream", exec_params(sandbox_id, io_refused, "true", exec_id="x2"))) == (
            "overloaded", {"limit": "active_io", "not_started": True})
        assert not io_refused.opened.is_set()
        diagnostics = opened.result("transport/diagnostics", None)
        assert diagnostics["execs"] == 1 and diagnostics["active_io"] == 1
        assert channel.token not in json.dumps(diagnostics)
        opened.result("exec/stop", {"exec_id": "x1", "level": "kill"})
        assert opened.answer(running)["result"]["result"]["termination"] == "killed"
    finally:
        opened.close()


def test_request_budget_leaves_room_for_reserved_methods() -> None:
    # Two slots, each taken by a long streamed command once the create's own slot is back.
    limited = with_limits(provider_requests=2)
    opened = Session(limited)
    try:
        sandbox_id = opened.create_sandbox()
        until_no_request_held(limited)
        running = []
        for exec_id in ("x1", "x2"):
            channel = opened.host.expect()
            running.append(opened.send("exec/stream", exec_params(sandbox_id, channel, "sleep", "30",
                                                                  exec_id=exec_id), channel))
            assert channel.opened.wait(5)
        assert report(opened.call("sandbox/list", {"filter": {}})) == (
            "overloaded", {"limit": "provider_requests", "not_started": True})
        assert "result" in opened.call("provider/health", None)
        for exec_id, request_id in zip(("x1", "x2"), running):
            opened.result("exec/stop", {"exec_id": exec_id, "level": "kill"})
            opened.answer(request_id)
    finally:
        opened.close()


def test_retained_output_limit_beyond_the_budget(session: Session) -> None:
    sandbox_id = session.create_sandbox()
    params = exec_params(sandbox_id, session.host.expect(), "true")
    params["retained_output_limit"] = 16 * 1024 * 1024 + 1
    assert report(session.call("exec/stream", params)) == ("limit_exceeded", {"limit": "retained_output_bytes",
                                                                               "max_bytes": 16 * 1024 * 1024})


def test_control_message_limit_in_both_directions() -> None:
    opened = Session(with_limits(control_message_bytes=4096))
    try:
        for index in range(4):
            opened.create_sandbox(spec={"source": "host_directory", "labels": {"pad": "p" * 900 + str(index)}})
        listed = opened.call("sandbox/list", {"filter": {}})
        assert report(listed) == ("limit_exceeded", {"limit": "control_message_bytes", "max_bytes": 4096})
        prefix, suffix = b'{"jsonrpc":"2.0","id":98,"method":"provider/health","params":"', b'"}\n'
        opened.send_raw(prefix + b"x" * (4096 - len(prefix) - len(suffix)) + suffix)  # exactly at the limit
        assert "result" in opened.answer(98)
        opened.send_raw(b'{"jsonrpc":"2.0","id":99,"method":"provider/health","params":"' + b"x" * 5000 + b'"}\n')
        opened.server.join(10)
        assert opened.exit_code not in (0, None)
        assert "control message limit exceeded" in opened.stderr.getvalue()
    finally:
        opened.close()


def test_create_events_report_provisioning(session: Session) -> None:
    sandbox_id = session.create_sandbox(events={"route_id": "event-1"})
    deadline = time.monotonic() + 5
    while len(session.notifications) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    events = [n["params"]["event"] for n in session.notifications if n["method"] == "host/event"]
    assert [e["type"] for e in events] == ["operation_started", "operation_progress", "operation_completed"]
    assert events[1]["progress"]["code"] == "sandbox.provision" and events[2]["subject"]["id"] == sandbox_id


def test_event_queue_overflow_fails_the_subscription_once() -> None:
    written: list[dict[str, Any]] = []
    release = threading.Event()

    def slow_write(message: dict[str, Any]) -> None:
        release.wait(5)
        written.append(message)

    delivery = EventDelivery(slow_write, max_messages=2, max_bytes=1 << 20)
    for sequence in range(6):
        delivery.offer("host/event", {"sequence": sequence})
    release.set()
    delivery.flush(5)
    assert [m["method"] for m in written] == ["host/event", "host/event", "host/event_failed"]
    assert written[-1]["params"] is None


def test_shutdown_answers_kills_in_flight_work_and_ends_its_channels() -> None:
    opened = Session()
    sandbox_id = opened.create_sandbox()
    channel = opened.host.expect()
    opened.send("exec/stream", exec_params(sandbox_id, channel, "sleep", "30"), channel)
    session_channel = opened.host.expect()
    opened.result("exec/stdio_open", {"sandbox_id": sandbox_id, "process_id": "p1", "channel": session_channel.request,
                                      "spec": {"program": "sleep", "args": ["30"], "env": {}}}, session_channel)
    assert channel.opened.wait(5)
    started = time.monotonic()
    assert "result" in opened.call("shutdown", None)
    opened.server.join(10)
    assert not opened.server.is_alive() and opened.exit_code == 0 and time.monotonic() - started < 6
    assert channel.eof_seen.wait(2) and session_channel.eof_seen.wait(2), "killed work still ends its channels"
    opened.close()


def test_the_entry_point_serves_v2_as_a_process(tmp_path: Path) -> None:
    host = RawHost()
    proc = subprocess.Popen([sys.executable, "-m", "conformance.reference.host_plugin", "--dialect",
                             "sandbox-driver-v2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        def call(request_id: int, method: str, params: Any) -> dict[str, Any]:
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                         "params": params}).encode() + b"\n")
            proc.stdin.flush()
            return json.loads(proc.stdout.readline())

        assert call(1, "initialize", {"protocol_version": 2, "data_transport": host.transport})["result"][
            "protocol_version"] == 2
        sandbox_id = call(2, "sandbox/create", {"spec": {"source": "host_directory"}})["result"]["status"]["id"]
        channel = host.expect()
        answer = call(3, "exec/stream", exec_params(sandbox_id, channel, "echo", "from a process"))
        assert answer["result"]["result"]["exit_code"] == 0
        assert channel.eof_seen.wait(5) and channel.data() == b"from a process\n"
        assert call(4, "shutdown", None)["result"] is None
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()
        host.close()
