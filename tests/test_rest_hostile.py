"""A hostile REST server cannot hang or flood the suite: an answer body that never ends fails its request at
the profile's ``max_answer_bytes`` (memory stays bounded), and an answer trickled a byte at a time fails at
the request's deadline, which covers the whole answer (headers and body), not each read.

The servers are real sockets on 127.0.0.1 served by threads of this process: timing on a socket is the
point. Each hostile answer stops by itself after a while (a safety net, far past what the suite may wait or
hold), so that a suite without these limits fails these tests instead of hanging the test run.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from conformance.adapter import ExecRequest
from conformance.dialects.rest import open_rest_adapter, parse_profile
from conformance.dialects.rest.adapter import RestAdapter
from conformance.errors import CallTimeout, ProviderStartError, UsageError, WireViolation
from conformance.providers import ProviderConfig
from conformance.reference import rest_server as server_module
from conformance.reference.rest_server import EAGAIN_MESSAGE
from conformance.transports.http import DEFAULT_MAX_ANSWER_BYTES, WATCHDOG_THREAD, Credentials, HttpTransport
from tests import inprocess
from tests.helpers import REPO

TOKEN_ENV = "FORKD_TOKEN"
FORKD_TEXT = (REPO / "conformance" / "profiles" / "forkd.yaml").read_text()
CAP = 256 * 1024  # the cap the tests set: low, so that reaching it is cheap
FLOOD_LIMIT = 64 * 1024 * 1024  # where an "endless" answer gives up: 256 times the cap
TRICKLE_PAUSE_S = 0.05  # between two bytes of a trickled answer


def _watchdogs_left() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == WATCHDOG_THREAD and thread.is_alive()]


class Answers:
    """The hostile answers a server is writing; each ends when the suite hangs up (or at its safety net)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0
        self._idle = threading.Event()
        self._idle.set()
        self.stop = threading.Event()  # the test is over: stop writing
        self.written: list[int] = []  # bytes of each answer written before it ended

    @contextlib.contextmanager
    def one(self) -> Iterator[None]:
        with self._lock:
            self._open += 1
            self._idle.clear()
        try:
            yield
        finally:
            with self._lock:
                self._open -= 1
                if self._open == 0:
                    self._idle.set()

    def all_ended(self, timeout_s: float) -> bool:
        return self._idle.wait(timeout_s)


def flood(write: Callable[[bytes], object], answers: Answers) -> None:
    """An answer body that goes on (until the reader hangs up, or the safety net)."""
    chunk, sent = b"x" * 8192, 0
    try:
        while sent < FLOOD_LIMIT and not answers.stop.is_set():
            write(chunk)
            sent += len(chunk)
    except OSError:
        pass  # the suite hung up: what it should do
    answers.written.append(sent)


def trickle(write: Callable[[bytes], object], data: bytes, answers: Answers) -> None:
    """``data`` one byte at a time; each byte comes well within any read timeout."""
    sent = 0
    try:
        for byte in data:
            if answers.stop.wait(TRICKLE_PAUSE_S):
                break
            write(bytes([byte]))
            sent += 1
    except OSError:
        pass
    answers.written.append(sent)


@contextlib.contextmanager
def raw_server(respond: Callable[[socket.socket, Answers], None]) -> Iterator[tuple[str, Answers]]:
    """A server that reads a request's head and hands the socket to ``respond``; its URL and its answers."""
    answers = Answers()
    listener = socket.create_server(("127.0.0.1", 0))
    threads: list[threading.Thread] = []

    def serve(connection: socket.socket) -> None:
        with connection, answers.one():
            head = b""
            while b"\r\n\r\n" not in head:
                more = connection.recv(4096)
                if not more:
                    return
                head += more
            respond(connection, answers)

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return  # the listener was closed
            thread = threading.Thread(target=serve, args=(connection,), daemon=True)
            threads.append(thread)
            thread.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", answers
    finally:
        answers.stop.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        acceptor.join(5)
        for thread in threads:
            thread.join(5)


def _transport(url: str, timeout_s: float = 30.0, max_answer_bytes: int = CAP) -> HttpTransport:
    return HttpTransport(url, Credentials("bearer", None, "secret-token-123"), timeout_s=timeout_s,
                         max_answer_bytes=max_answer_bytes)


# -- an answer body that never ends ----------------------------------------------------------------


@pytest.mark.parametrize("framing", ["chunked", "until-close"])
def test_an_endless_answer_body_fails_at_the_cap_with_bounded_memory(framing: str) -> None:
    def respond(connection: socket.socket, answers: Answers) -> None:
        if framing == "chunked":
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            flood(lambda chunk: connection.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk)), answers)
        else:
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
            flood(connection.sendall, answers)

    with raw_server(respond) as (url, answers):
        http = _transport(url)
        tracemalloc.start()
        started = time.monotonic()
        try:
            with pytest.raises(WireViolation) as failure:
                http.request("GET", "/v1/sandboxes")
            elapsed = time.monotonic() - started
            _size, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            http.close()
        assert answers.all_ended(10), "the server is still writing: the suite did not hang up"
    assert f"the answer body exceeded {CAP} bytes" in str(failure.value)
    assert "max_answer_bytes" in str(failure.value)  # where to raise it
    assert peak < 16 * CAP, f"reading the answer held {peak} bytes at its peak (cap {CAP})"
    assert elapsed < 20, elapsed
    assert answers.written[0] < FLOOD_LIMIT  # it ended because the suite hung up, not at its safety net
    assert _watchdogs_left() == []


def test_a_body_declared_longer_than_the_cap_is_refused_before_it_is_read() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Length": str(CAP + 1)}, content=b"x" * (CAP + 1))

    http = HttpTransport("http://provider.test", transport=httpx.MockTransport(handler), max_answer_bytes=CAP)
    with pytest.raises(WireViolation, match=f"the answer body exceeded {CAP} bytes \\(its Content-Length says {CAP + 1}\\)"):
        http.request("GET", "/healthz")
    # at the cap exactly, the answer is read
    http.max_answer_bytes = CAP + 1
    assert len(http.request("GET", "/healthz").body) == CAP + 1


def test_an_endless_health_answer_is_a_start_error_naming_the_cap() -> None:
    """The health check that starts a run: an endless body there is one line naming the cap, not a hang."""
    def endless() -> Iterator[bytes]:
        chunk = b" " * 65536
        for _ in range(FLOOD_LIMIT // len(chunk)):  # the safety net: a suite without a cap reads 64 MiB
            yield chunk

    mock_seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        mock_seen.append(request)
        return httpx.Response(200, content=endless())

    profile = parse_profile(FORKD_TEXT + f"max_answer_bytes: {CAP}\n", "test profile")
    adapter = open_rest_adapter(profile, "http://provider.test", environ={TOKEN_ENV: "secret-token-123"},
                                transport=httpx.MockTransport(handler))
    with pytest.raises(ProviderStartError) as failure:
        adapter.connect()
    message = str(failure.value)
    assert message.startswith("the REST provider at http://provider.test is not healthy: GET "), message
    assert f"the answer body exceeded {CAP} bytes" in message, message
    assert len(mock_seen) == 1  # a flood is not retried
    assert adapter.health().status == "unknown"


def test_the_cap_is_a_profile_key_with_a_generous_default(tmp_path: Path) -> None:
    assert parse_profile(FORKD_TEXT, "forkd").max_answer_bytes == DEFAULT_MAX_ANSWER_BYTES == 64 * 1024 * 1024
    profile = parse_profile(FORKD_TEXT + "max_answer_bytes: 1024\n", "test profile")
    assert profile.max_answer_bytes == 1024
    adapter = open_rest_adapter(profile, "http://provider.test", environ={TOKEN_ENV: "secret-token-123"})
    assert adapter.transport.max_answer_bytes == 1024
    wrong = adapter.credentials.with_credentials("wrong")
    assert wrong.transport.max_answer_bytes == 1024  # the same cap for every credential's requests
    with pytest.raises(UsageError, match="max_answer_bytes"):
        parse_profile(FORKD_TEXT + "max_answer_bytes: 0\n", "test profile")


# -- an answer trickled a byte at a time -----------------------------------------------------------

ANSWER_BODY = b'{"id": "sb-1", "state": "running", "padding": "' + b"p" * 100 + b'"}'
ANSWER_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
               b"X-Padding: %s\r\n\r\n" % (len(ANSWER_BODY), b"h" * 100))


@pytest.mark.parametrize("trickled", ["headers", "body"])
def test_a_trickled_answer_fails_at_the_deadline_of_the_whole_answer(trickled: str) -> None:
    """Each byte comes 0.05 s after the last, well within a 1 s read timeout; the whole answer would take
    8 s or more. The deadline (1 s) covers it all: the request fails at about 1 s, naming the deadline."""
    def respond(connection: socket.socket, answers: Answers) -> None:
        if trickled == "headers":
            trickle(connection.sendall, ANSWER_HEAD + ANSWER_BODY, answers)
        else:
            connection.sendall(ANSWER_HEAD)
            trickle(connection.sendall, ANSWER_BODY, answers)

    with raw_server(respond) as (url, answers):
        http = _transport(url, timeout_s=1.0)
        started = time.monotonic()
        try:
            with pytest.raises(CallTimeout) as failure:
                http.request("GET", "/v1/sandboxes/sb-1")
        finally:
            http.close()
        elapsed = time.monotonic() - started
        assert answers.all_ended(10), "the server is still trickling: the suite did not hang up"
    message = str(failure.value)
    assert "within 1.0s" in message, message
    if trickled == "body":
        assert "headers and body" in message, message
        assert re.search(r"\(\d+ bytes of its body had come\)", message), message
    assert elapsed < 4, f"a 1 s deadline took {elapsed:.1f} s"  # generous: about 1 s
    assert _watchdogs_left() == []


def test_a_server_silent_after_its_headers_is_cut_off_at_the_deadline() -> None:
    """A byte just before the deadline, then silence: no read may block past the deadline for a full read
    timeout more."""
    def respond(connection: socket.socket, answers: Answers) -> None:
        connection.sendall(ANSWER_HEAD)
        answers.stop.wait(1.8)
        with contextlib.suppress(OSError):
            connection.sendall(ANSWER_BODY[:1])
        answers.stop.wait(30)

    with raw_server(respond) as (url, _answers):
        http = _transport(url, timeout_s=2.0)
        started = time.monotonic()
        try:
            with pytest.raises(CallTimeout, match="within 2.0s"):
                http.request("GET", "/v1/sandboxes/sb-1")
        finally:
            http.close()
        elapsed = time.monotonic() - started
    # the watchdog ends it at 2 s; a read timeout alone would have waited until 3.8 s
    assert elapsed < 3.2, f"a 2 s deadline took {elapsed:.2f} s"
    assert _watchdogs_left() == []


def test_an_exec_keeps_the_providers_late_timeout_allowance_for_its_whole_answer() -> None:
    """forkd 0.5.2 answers a timeout 5 s late: an exec's whole-answer deadline is the command's timeout, that
    allowance and the call timeout, so an answer whose body comes in over longer than the call timeout
    (1 s here) is still read whole."""
    def streamed() -> Iterator[bytes]:
        body = b'{"error": "%s"}' % EAGAIN_MESSAGE.encode()
        step = len(body) // 16 + 1
        for index in range(0, len(body), step):  # 16 pieces, 0.08 s apart: about 1.3 s in all
            time.sleep(0.08)
            yield body[index:index + step]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, content=streamed())

    http = HttpTransport("http://provider.test", Credentials("bearer", None, "secret-token-123"),
                         transport=httpx.MockTransport(handler))
    adapter = RestAdapter(parse_profile(FORKD_TEXT, "test profile"), http, call_timeout_s=1.0, call_timeout_given=True)
    started = time.monotonic()
    outcome = adapter.exec("sb-1", ExecRequest("sleep 5", timeout_s=0.4))
    assert time.monotonic() - started > 1.0  # the answer took longer than the call timeout ...
    assert outcome.termination == "timed_out"  # ... and was read whole: forkd 0.5.2's late timeout answer


# -- whole runs against the reference server made hostile on one route ------------------------------


class HostileHandler(server_module.Handler):
    """The reference server, but its answers on one route are hostile (``hostile``: method, path pattern)."""

    hostile: tuple[str, re.Pattern[str]]
    answers: Answers
    kind: str  # "flood" or "trickle"

    def answer(self, answer: server_module.Answer, path: str, started: float) -> None:
        method, pattern = self.hostile
        if self.command != method or not pattern.fullmatch(path):
            super().answer(answer, path, started)
            return
        self.close_connection = True
        with self.answers.one():
            if self.kind == "flood":
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
                flood(self.wfile.write, self.answers)
            else:
                body = json.dumps(answer.body).encode() + b" " * 100
                head = b"HTTP/1.1 %d OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
                    answer.status, len(body))
                self.wfile.write(head)
                trickle(self.wfile.write, body, self.answers)


@contextlib.contextmanager
def hostile_rest_server(token: str, kind: str, method: str, path: str) -> Iterator[tuple[str, Answers]]:
    app = server_module.ForkdApp(token)
    app.log = lambda _line: None
    answers = Answers()
    handler = type("Hostile", (HostileHandler,), {"app": app, "answers": answers, "kind": kind,
                                                  "hostile": (method, re.compile(path))})
    server = server_module.Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", answers
    finally:
        answers.stop.set()
        server.shutdown()
        server.server_close()
        app.close()
        thread.join(5)


def _run(url: str, token: str, monkeypatch: pytest.MonkeyPatch, report_dir: Path, scenario: str,
         **provider: object) -> tuple[inprocess.InProcessRun, float]:
    monkeypatch.setenv(TOKEN_ENV, token)
    started = time.monotonic()
    run = inprocess.run_suite(ProviderConfig(rest_url=url, **provider), report_dir, scenarios=(scenario,))
    return run, time.monotonic() - started


def test_a_run_against_an_endless_exec_answer_fails_that_scenario_at_the_cap_and_cleans_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = f"token-{uuid.uuid4().hex}"
    profile = tmp_path / "capped.yaml"
    profile.write_text(FORKD_TEXT.replace("name: forkd", "name: capped") + f"max_answer_bytes: {CAP}\n")
    with hostile_rest_server(token, "flood", "POST", r"/v1/sandboxes/[^/]+/exec") as (url, answers):
        run, elapsed = _run(url, token, monkeypatch, tmp_path / "reports", "exec-exit-code[0]", profile=str(profile))
        assert answers.all_ended(10), "the server is still writing: the suite did not hang up"
    assert run.exit_code == 1, run.stdout[-2000:] + run.stderr[-2000:]
    scenario = next(s for s in run.results["scenarios"] if s["id"] == "exec-exit-code[0]")
    assert scenario["outcome"] == "failed", scenario
    assert f"the answer body exceeded {CAP} bytes" in scenario["message"], scenario["message"]
    assert (run.report_dir / "results.json").is_file() and (run.report_dir / "junit.xml").is_file()
    sandboxes = run.results["sandboxes"]
    assert sandboxes["leaked"] == [] and sandboxes["created"] == sandboxes["deleted"] > 0, sandboxes
    assert answers.written and max(answers.written) < FLOOD_LIMIT
    assert elapsed < 60, elapsed
    assert _watchdogs_left() == []


def test_a_run_against_a_trickled_describe_answer_fails_that_scenario_at_the_deadline_and_cleans_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The get answer comes a byte every 0.05 s (about 10 s in all) against a 2 s --call-timeout."""
    token = f"token-{uuid.uuid4().hex}"
    with hostile_rest_server(token, "trickle", "GET", r"/v1/sandboxes/[^/]+") as (url, answers):
        run, elapsed = _run(url, token, monkeypatch, tmp_path / "reports", "create-describe-delete",
                            profile="forkd", call_timeout_s=2.0, call_timeout_given=True)
        assert answers.all_ended(10), "the server is still trickling: the suite did not hang up"
    assert run.exit_code == 1, run.stdout[-2000:] + run.stderr[-2000:]
    scenario = next(s for s in run.results["scenarios"] if s["id"] == "create-describe-delete")
    assert scenario["outcome"] == "failed", scenario
    assert "within 2.0s, the deadline of the answer's headers and body together" in scenario["message"], \
        scenario["message"]
    assert (run.report_dir / "results.json").is_file()
    sandboxes = run.results["sandboxes"]
    assert sandboxes["leaked"] == [] and sandboxes["created"] == sandboxes["deleted"] > 0, sandboxes
    assert elapsed < 30, elapsed
    assert _watchdogs_left() == []
