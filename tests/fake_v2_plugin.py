"""A small, scripted sandbox-driver v2 plugin for the v2 dialect's unit tests, served in this process.

Not a reference: it answers just what the adapter's mapping tests ask (initialize, create/delete,
exec/stream, fs/read, fs/write, exec/stdio_open/wait, logs/follow, exec/stop), runs commands with the
real ``bash``, keeps files in memory, and records every request it got (``REQUESTS``) so a test can
check what the adapter sent. ``argv`` picks one misbehaviour on purpose (``--fault NAME``), so a test
sees the adapter turn it into a wire violation. Channel frames are written here from the protocol text
with ``struct``, independently of the host side under test.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any, BinaryIO

HEADER = struct.Struct(">BI")
OPEN, STDOUT, STDERR, STDIN, EOF = range(5)
MAX_FRAME_BYTES = 65536
FAULTS = ("eof-after-response", "answer-without-channel", "unknown-kind", "refuse-as-v1", "always-ack",
          "refuse-then-open")

# What the last served plugin was asked, newest last: (method, params).
REQUESTS: list[tuple[str, Any]] = []

CAPABILITIES: dict[str, Any] = {
    "isolation": "none",
    "lifecycle": {key: False for key in ("pause", "archive", "fork", "resize", "recover", "undelete",
                                         "refresh_activity", "timers", "labels", "update_network",
                                         "snapshot_sandbox")},
    "exec": {"live_streaming": True, "streams_separated": True, "stdin": True, "stop": True,
             "stdio_process": True, "stdin_stream": False, "environment": False},
    "fs": {"native": True, "upload": True, "download": True, "permissions": False},
    "search": {"supported": False, "native": False},
    "git": {"supported": False, "native": False},
    "services": {"supported": False, "native": False},
    "pty": None,
    "logs": {"provision": True, "entrypoint": False},
    "one_shot": None,
    "access": {key: False for key in ("preview_urls", "signed_preview_urls", "ssh", "ssh_ttl", "ssh_revoke",
                                      "shell_command", "web_terminal", "vnc", "vpn")},
    "network": {key: False for key in ("allow_all", "block_all", "cidr_allow_list", "domain_allow_list",
                                       "outbound_proxy")},
    "snapshots": None,
    "volumes": None,
}


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    """``size`` bytes from a data channel socket; EOFError when it ends first (the test peers' one reader)."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


class _Channel:
    """The plugin's side of one data channel."""

    def __init__(self, transport: dict[str, Any], request: dict[str, Any], always_ack: bool = False) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(transport["socket_path"])
        acknowledge = always_ack or bool(transport.get("open_ack"))
        self.frame(OPEN, json.dumps({**request, "acknowledge": acknowledge}).encode())
        if acknowledge:
            kind, length = self.header()
            assert (kind, length) == (OPEN, 0), "the host's acknowledgement is an empty open frame"

    def frame(self, kind: int, payload: bytes = b"") -> None:
        """``payload`` as frames of ``kind`` within the 64 KiB frame limit."""
        for start in range(0, max(len(payload), 1), MAX_FRAME_BYTES):
            piece = payload[start:start + MAX_FRAME_BYTES]
            try:
                self.sock.sendall(HEADER.pack(kind, len(piece)) + piece)
            except (BrokenPipeError, ConnectionResetError):
                return  # the host closed the channel (after a bad frame): the answer still goes out

    def _exact(self, size: int) -> bytes:
        return recv_exactly(self.sock, size)

    def header(self) -> tuple[int, int]:
        return HEADER.unpack(self._exact(HEADER.size))

    def input(self) -> bytes:
        """Every stdin frame up to the host's eof."""
        return b"".join(self.input_frames())

    def input_frames(self) -> Iterator[bytes]:
        """Each stdin frame's payload as it comes, up to the host's eof."""
        while True:
            kind, length = self.header()
            payload = self._exact(length)
            if kind == EOF:
                return
            yield payload

    def close(self) -> None:
        self.sock.close()


class FakeV2Plugin:
    def __init__(self, argv: list[str], stdout: BinaryIO) -> None:
        self.fault = argv[argv.index("--fault") + 1] if "--fault" in argv else None
        assert self.fault is None or self.fault in FAULTS, self.fault
        self.stdout = stdout
        self.lock = threading.Lock()
        self.transport: dict[str, Any] | None = None
        self.files: dict[str, bytes] = {}
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.sandboxes = 0

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            self.stdout.write(json.dumps(message).encode() + b"\n")
            self.stdout.flush()

    def handle(self, message: dict[str, Any]) -> None:
        method, params, request_id = message.get("method"), message.get("params"), message.get("id")
        REQUESTS.append((method, params))
        try:
            result = getattr(self, "m_" + str(method).replace("/", "_"))(params, request_id)
        except _Refusal as refusal:
            self.send({"jsonrpc": "2.0", "id": request_id, "error": refusal.error})
            return
        if result is not _ANSWERED:
            self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    # -- methods ---------------------------------------------------------------------------------

    def m_initialize(self, params: dict[str, Any], request_id: int) -> Any:
        speaks = 1 if self.fault == "refuse-as-v1" else 2
        if params.get("protocol_version") != speaks:
            reason = f"plugin speaks protocol version {speaks} but the host asked for {params.get('protocol_version')}"
            raise _Refusal(_application_error("invalid_spec", f"invalid spec: protocol_version: {reason}",
                                              {"field": "protocol_version", "reason": reason}))
        if speaks == 1:  # playing a v1 plugin: no data transport to keep
            return {"protocol_version": 1, "provider": {"kind": "fake", "version": "0.0.1"}, "capabilities": {}}
        self.transport = params["data_transport"]
        return {"protocol_version": 2, "provider": {"kind": "fake", "version": "0.0.1"}, "capabilities": CAPABILITIES}

    def m_shutdown(self, params: Any, request_id: int) -> Any:
        return None

    def m_sandbox_create(self, params: dict[str, Any], request_id: int) -> Any:
        self.sandboxes += 1
        status = {"id": f"fake-{self.sandboxes}", "state": "running", "labels": params["spec"].get("labels", {})}
        return {"status": status, "capabilities": CAPABILITIES, "working_directory": "/tmp", "runtime_directory": None}

    def m_sandbox_delete(self, params: dict[str, Any], request_id: int) -> Any:
        return None

    def m_exec_stop(self, params: dict[str, Any], request_id: int) -> Any:
        return None

    def _channel(self, params: dict[str, Any]) -> _Channel:
        assert self.transport is not None
        return _Channel(self.transport, params["channel"], always_ack=self.fault == "always-ack")

    def m_exec_stream(self, params: dict[str, Any], request_id: int) -> Any:
        spec = params["spec"]
        if self.fault == "answer-without-channel":
            return _stream_result(0)
        if self.fault == "refuse-then-open":  # the refusal overtakes a channel it was opening anyway
            self.send({"jsonrpc": "2.0", "id": request_id,
                       "error": _application_error("invalid_spec", "invalid spec: exec_id: duplicate execution id",
                                                   {"field": "exec_id", "reason": "duplicate execution id"})})
            time.sleep(0.2)
            with contextlib.suppress(OSError, EOFError):  # the host closes it unanswered
                self._channel(params).close()
            return _ANSWERED
        channel = self._channel(params)
        stdin = channel.input() if params.get("stdin") else b""
        ran = subprocess.run([spec["program"], *spec.get("args", [])], input=stdin, capture_output=True,
                             env={"PATH": "/usr/bin:/bin", **spec["env"]}, timeout=30, check=False)
        if self.fault == "unknown-kind":
            channel.frame(9, b"?")
        if ran.stdout:
            channel.frame(STDOUT, ran.stdout)
        if ran.stderr:
            channel.frame(STDERR, ran.stderr)
        result = _stream_result(ran.returncode, len(ran.stdout), len(ran.stderr))
        if self.fault == "eof-after-response":
            self.send({"jsonrpc": "2.0", "id": request_id, "result": result})
            time.sleep(0.2)  # well after the response: the host has read it by then
            channel.frame(EOF)
            channel.close()
            return _ANSWERED
        channel.frame(EOF)
        channel.close()
        return result

    def m_fs_read(self, params: dict[str, Any], request_id: int) -> Any:
        channel = self._channel(params)
        channel.frame(STDOUT, self.files.get(params["path"], b""))
        channel.frame(EOF)
        channel.close()
        return None

    def m_fs_write(self, params: dict[str, Any], request_id: int) -> Any:
        channel = self._channel(params)
        self.files[params["path"]] = channel.input()
        channel.frame(EOF)
        channel.close()
        return None

    def m_logs_follow(self, params: dict[str, Any], request_id: int) -> Any:
        channel = self._channel(params)
        channel.frame(STDOUT, b"provisioned\n")
        channel.frame(EOF)
        channel.close()
        return None

    def m_exec_stdio_open(self, params: dict[str, Any], request_id: int) -> Any:
        spec = params["spec"]
        channel = self._channel(params)
        process = subprocess.Popen([spec["program"], *spec.get("args", [])], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, env={"PATH": "/usr/bin:/bin", **spec["env"]})
        self.processes[params["process_id"]] = process

        def pump_in() -> None:
            assert process.stdin is not None
            try:
                for payload in channel.input_frames():
                    process.stdin.write(payload)
                    process.stdin.flush()
            except EOFError:
                pass
            process.stdin.close()

        def pump_out() -> None:
            assert process.stdout is not None
            for line in iter(process.stdout.readline, b""):
                channel.frame(STDOUT, line)
            channel.frame(EOF)

        threading.Thread(target=pump_in, daemon=True).start()
        threading.Thread(target=pump_out, daemon=True).start()
        return None

    def m_exec_stdio_wait(self, params: dict[str, Any], request_id: int) -> Any:
        code = self.processes[params["process_id"]].wait(timeout=30)
        return {"termination": "exited", "exit_code": code, "stderr_tail": ""}


class _Refusal(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error)
        self.error = error


_ANSWERED = object()  # the method wrote its response itself


def _application_error(kind: str, message: str, detail: dict[str, Any]) -> dict[str, Any]:
    return {"code": -32000, "message": message,
            "data": {"report": {"kind": kind, "message": message, "retryable": False, "causes": []}, "detail": detail}}


def _capture(observed: int) -> dict[str, Any]:
    return {"observed_bytes": observed, "retained_bytes": 0, "omitted_bytes": observed, "truncated": False}


def _stream_result(code: int, out: int = 0, err: int = 0) -> dict[str, Any]:
    return {"result": {"exit_code": code, "termination": "exited", "duration_ms": 1}, "streams_separated": True,
            "live_streaming": False, "stdout_capture": _capture(out), "stderr_capture": _capture(err)}


def serve(argv: list[str], stdin: BinaryIO, stdout: BinaryIO, stderr: Any, environ: Any, exit_now: Any = None) -> int:
    """The in-process entry point (``tests.fake_v2_plugin:serve``)."""
    REQUESTS.clear()
    plugin = FakeV2Plugin(list(argv), stdout)
    for line in iter(stdin.readline, b""):
        if not line.strip():
            continue
        message = json.loads(line)
        threading.Thread(target=plugin.handle, args=(message,), daemon=True).start()
    return 0
