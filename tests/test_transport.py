"""The stdio JSON-RPC layer: framing, correlation, routing, deadlines, violations, stderr, teardown."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable

import pytest

from conformance.dialects.jsonrpc import JsonRpcConnection
from conformance.dialects.sandbox_driver_v1 import V1Rules
from conformance.errors import (
    ApplicationErrorAnswer,
    CallTimeout,
    ProtocolErrorAnswer,
    ProviderCrashed,
    ProviderStartError,
    SchemaViolation,
)
from conformance.transports.base import StderrTail
from conformance.transports.process import ProcessTransport, scrubbed_environment


class FakeTransport:
    """An in-memory peer: ``handler`` sees every frame the host sends and may answer with ``emit``."""

    def __init__(self, handler: Callable[[FakeTransport, dict], None] | None = None) -> None:
        self.handler = handler
        self.frames: list[bytes] = []
        self._on_line: Callable[[bytes], None] | None = None
        self._on_close: Callable[[], None] | None = None
        self.alive = True

    def start(self, on_line, on_close, on_overflow=None) -> None:
        self._on_line, self._on_close = on_line, on_close

    def send(self, frame: bytes, timeout_s: float | None = None) -> None:
        self.frames.append(frame)
        if self.handler is not None:
            self.handler(self, json.loads(frame))

    def emit(self, line: bytes | dict) -> None:
        assert self._on_line is not None
        self._on_line(json.dumps(line).encode() if isinstance(line, dict) else line)

    def hang_up(self) -> None:
        self.alive = False
        assert self._on_close is not None
        self._on_close()

    def close_input(self) -> None: ...

    def close(self, grace_s: float = 2.0) -> None:
        if self.alive:
            self.hang_up()

    def describe(self) -> str:
        return "fake"

    def stderr_tail(self) -> str:
        return ""

    def wait_exit(self, timeout_s: float) -> int | None:
        return 0


def connect(handler=None) -> tuple[JsonRpcConnection, FakeTransport]:
    transport = FakeTransport(handler)
    connection = JsonRpcConnection(transport, V1Rules())
    connection.start()
    return connection, transport


def ok(request_id: int, result) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def test_requests_are_one_compact_json_line_with_increasing_ids_from_1() -> None:
    connection, transport = connect(lambda t, m: t.emit(ok(m["id"], None)))
    connection.call("shutdown", None)
    connection.call("shutdown", None)
    assert all(frame.endswith(b"\n") and frame.count(b"\n") == 1 for frame in transport.frames)
    assert [json.loads(f)["id"] for f in transport.frames] == [1, 2]
    assert json.loads(transport.frames[0]) == {"jsonrpc": "2.0", "id": 1, "method": "shutdown", "params": None}


def test_out_of_order_responses_reach_their_callers() -> None:
    connection, transport = connect()
    first = connection.request("sandbox/describe", {"sandbox_id": "a"})
    second = connection.request("sandbox/describe", {"sandbox_id": "b"})
    transport.emit(ok(second.id, {"status": {"id": "b", "state": "running"}}))
    transport.emit(ok(first.id, {"status": {"id": "a", "state": "stopped"}}))
    assert first.result()["status"]["id"] == "a"
    assert second.result()["status"]["id"] == "b"
    assert connection.take_violations() == []


def test_notifications_are_routed_to_their_exec() -> None:
    connection, transport = connect()
    mine = connection.subscribe(("exec/output", "x1"))
    other = connection.subscribe(("exec/output", "x2"))
    transport.emit({"jsonrpc": "2.0", "method": "exec/output", "params": {"exec_id": "x1", "stream": "stdout", "data_b64": "aGk="}})
    assert mine.get(timeout=1).message["params"]["data_b64"] == "aGk="
    assert other.empty()


def test_a_call_without_answer_times_out_at_its_deadline() -> None:
    connection, _ = connect()
    started = time.monotonic()
    with pytest.raises(CallTimeout, match="no answer within 0.3s"):
        connection.call("shutdown", None, timeout_s=0.3)
    assert 0.25 < time.monotonic() - started < 2.0


def test_pending_calls_fail_when_the_provider_hangs_up() -> None:
    connection, transport = connect()
    call = connection.request("shutdown", None)
    threading.Timer(0.05, transport.hang_up).start()
    with pytest.raises(ProviderCrashed, match="shutdown"):
        call.result(timeout_s=5)


def test_lines_that_are_not_messages_are_violations() -> None:
    connection, transport = connect()
    transport.emit(b"starting up...")
    transport.emit(b'[{"jsonrpc":"2.0","id":1,"result":null}]')
    transport.emit(ok(99, None))
    transport.emit(b"   ")  # blank lines are allowed and ignored
    summaries = [v.summary for v in connection.take_violations()]
    assert len(summaries) == 3
    assert "not JSON" in summaries[0]
    assert "batches" in summaries[1]
    assert "id 99" in summaries[2]


def test_a_result_that_violates_its_schema_names_the_pointer() -> None:
    connection, transport = connect(lambda t, m: t.emit(ok(m["id"], {"status": {"id": "a b", "state": "running"}})))
    with pytest.raises(SchemaViolation) as caught:
        connection.call("sandbox/describe", {"sandbox_id": "a"})
    assert caught.value.pointer == "/status/id"
    assert "a b" in str(caught.value.offending_message)


def test_application_errors_are_normalized() -> None:
    error = {"code": -32000, "message": "capability lifecycle.pause is not supported by this provider",
             "data": {"report": {"kind": "unsupported", "message": "x", "retryable": False, "causes": []},
                      "detail": {"capability": "lifecycle.pause"}}}
    connection, _ = connect(lambda t, m: t.emit({"jsonrpc": "2.0", "id": m["id"], "error": error}))
    with pytest.raises(ApplicationErrorAnswer) as caught:
        connection.call("sandbox/pause", {"sandbox_id": "a"})
    assert caught.value.kind == "unsupported"
    assert caught.value.detail == {"capability": "lifecycle.pause"}


def test_an_application_error_without_report_is_a_violation() -> None:
    connection, _ = connect(lambda t, m: t.emit({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32000, "message": "no"}}))
    with pytest.raises(ProtocolErrorAnswer):
        connection.call("sandbox/pause", {"sandbox_id": "a"})
    assert any("/error" in v.summary for v in connection.take_violations())


def test_stderr_tail_is_bounded_and_keeps_the_newest_bytes() -> None:
    tail = StderrTail(limit_bytes=10)
    tail.append(b"0123456789")
    tail.append(b"abcde")
    assert tail.text().endswith("56789abcde")
    assert "5 earlier bytes dropped" in tail.text()


def _process(script: str, env: dict[str, str] | None = None) -> tuple[ProcessTransport, list[bytes]]:
    lines: list[bytes] = []
    transport = ProcessTransport([sys.executable, "-c", script], env or scrubbed_environment())
    transport.start(lines.append, lambda: None)
    return transport, lines


def test_process_stderr_is_drained_continuously_into_the_ring() -> None:
    transport, lines = _process(
        "import sys\nsys.stderr.write('x' * 300000 + 'END')\nsys.stderr.flush()\nprint('done', flush=True)")
    deadline = time.monotonic() + 10
    while not lines and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lines == [b"done"], "a plugin writing lots of stderr must not stall"
    transport.wait_exit(5)
    time.sleep(0.1)
    assert transport.stderr_tail().endswith("END")
    transport.close()


def test_close_kills_the_whole_process_group() -> None:
    transport, lines = _process(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)")
    deadline = time.monotonic() + 10
    while not lines and time.monotonic() < deadline:
        time.sleep(0.01)
    child = int(lines[0])
    transport.close(grace_s=0.2)
    assert _gone_or_zombie(child)


def _gone_or_zombie(pid: int, timeout_s: float = 5.0) -> bool:
    """A killed orphan may linger as a zombie until init reaps it; that still counts as ended."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_the_environment_is_scrubbed_to_declared_variables() -> None:
    source = {"PATH": "/bin", "HOME": "/root", "SECRET_TOKEN": "s3cr3t", "FORWARDED": "yes"}
    env = scrubbed_environment({"DECLARED": "1"}, ["FORWARDED"], source=source)
    assert env == {"PATH": "/bin", "HOME": "/root", "FORWARDED": "yes", "DECLARED": "1"}


def test_a_missing_executable_is_a_start_error() -> None:
    transport = ProcessTransport(["/nonexistent/plugin"], {})
    with pytest.raises(ProviderStartError, match="not found: /nonexistent/plugin"):
        transport.start(lambda line: None, lambda: None)
