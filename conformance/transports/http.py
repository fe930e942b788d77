"""HTTP to a REST provider (httpx): one request, one answer, each recorded for the scenario's transcript.

Bytes only, like the process transport: what a path means, which statuses are success and how a body is
read is the REST dialect's business. This module adds per-call deadlines, retries for idempotent
requests (a connect error or a 5xx answer, with exponential backoff) and credentials that never appear
in what observers see.

A hostile server must not hang or flood the suite: an answer's deadline covers all of it, headers and
body, not each read (a server sending one byte a second never lets a per-read timeout fire), and its body
is read in chunks against a byte cap, never whole into memory first.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from conformance.errors import CallTimeout, ProviderCrashed, WireViolation

Observer = Callable[[str, str, str], None]  # (channel, direction, text), as JsonRpcConnection's observers
BODY_PREVIEW_CHARS = 2000
DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024  # a profile's max_answer_bytes, when it sets none
WATCHDOG_THREAD = "rest-answer-deadline"  # the name of the thread that ends a late answer's connection


@dataclass(frozen=True)
class RetryPolicy:
    """How often an idempotent request is tried, and the pause before the first retry (doubling)."""

    attempts: int = 1
    backoff_s: float = 0.2

    def pause(self, retry: int) -> float:
        return self.backoff_s * (2 ** (retry - 1))


@dataclass(frozen=True)
class Credentials:
    """Where a secret goes on every request: an ``Authorization: Bearer`` header, a named header, a
    query parameter, or nowhere."""

    scheme: str = "none"  # bearer | header | query | none
    name: str | None = None  # the header or query parameter, for header and query
    secret: str | None = None

    def apply(self, headers: dict[str, str], params: dict[str, str]) -> None:
        if self.secret is None or self.scheme == "none":
            return
        if self.scheme == "bearer":
            headers["Authorization"] = f"Bearer {self.secret}"
        elif self.scheme == "header":
            headers[self.name or "Authorization"] = self.secret
        elif self.scheme == "query":
            params[self.name or "token"] = self.secret

    def replaced(self, secret: str | None) -> Credentials:
        return Credentials(self.scheme, self.name, secret)


@dataclass(frozen=True)
class HttpAnswer:
    """What the provider answered: status, headers, the body as bytes, and the body as JSON when it is."""

    method: str
    url: str
    status: int
    headers: Mapping[str, str]
    body: bytes
    elapsed_s: float

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON; ``None`` for an empty body. Raises ``ValueError`` when it is not JSON."""
        if not self.body.strip():
            return None
        return json.loads(self.body)


class HttpTransport:
    """A REST provider at ``base_url``. Thread-safe: httpx clients may be shared between threads."""

    def __init__(self, base_url: str, credentials: Credentials | None = None, timeout_s: float = 30.0,
                 retries: RetryPolicy | None = None, channel: str = "http",
                 transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES) -> None:
        self.base_url = base_url.rstrip("/")
        self.credentials = credentials or Credentials()
        self.timeout_s = timeout_s
        self.retries = retries or RetryPolicy()
        self.channel = channel
        self.max_answer_bytes = max_answer_bytes
        self._sleep = sleep
        # No keep-alive: every request has a connection of its own, which the deadline's watchdog can end
        # (a pooled one is not seen connecting), and a server that trickled one answer cannot stall the next.
        self._client = httpx.Client(transport=transport, follow_redirects=False,
                                    limits=httpx.Limits(max_keepalive_connections=0))
        self._owns_client = True
        self._observers: list[Observer] = []
        self._lock = threading.Lock()

    def with_credentials(self, credentials: Credentials, channel: str | None = None) -> HttpTransport:
        """The same provider and connection pool, other credentials (the pool stays with this transport)."""
        other = HttpTransport.__new__(HttpTransport)
        other.base_url = self.base_url
        other.credentials = credentials
        other.timeout_s = self.timeout_s
        other.retries = self.retries
        other.channel = channel or self.channel
        other.max_answer_bytes = self.max_answer_bytes
        other._sleep = self._sleep
        other._client = self._client
        other._owns_client = False
        other._observers = []
        other._lock = threading.Lock()
        return other

    # -- observation -----------------------------------------------------------------------------

    def add_observer(self, observer: Observer) -> None:
        with self._lock:
            self._observers.append(observer)

    def _emit(self, direction: str, text: str) -> None:
        with self._lock:
            observers = list(self._observers)
        for observer in observers:
            observer(self.channel, direction, text)

    # -- requests --------------------------------------------------------------------------------

    def url(self, path: str) -> str:
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def request(self, method: str, path: str, body: Any = None, *, timeout_s: float | None = None,
                idempotent: bool = False) -> HttpAnswer:
        """Send one request (``body`` as JSON when not ``None``) and return the answer, whatever its status.

        Raises ``CallTimeout`` when the whole answer (headers and body) has not come within the deadline,
        ``WireViolation`` when its body is longer than ``max_answer_bytes``, and ``ProviderCrashed`` when
        the provider cannot be reached. Only an ``idempotent`` request is tried again, and only after a
        connect error or a 5xx answer.
        """
        deadline = self.timeout_s if timeout_s is None else timeout_s
        headers: dict[str, str] = {"Accept": "application/json"}
        params: dict[str, str] = {}
        self.credentials.apply(headers, params)
        content = None
        if body is not None:
            content = json.dumps(body, separators=(",", ":")).encode("utf-8")
            headers["Content-Type"] = "application/json"
        url = self.url(path)
        # A query-parameter secret travels in ``params``, never in ``url``: what observers see has no secret.
        shown = f"{method} {url}"
        attempts = self.retries.attempts if idempotent else 1
        for attempt in range(1, attempts + 1):
            self._emit("sent", shown + (f" {content.decode('utf-8')}" if content is not None else ""))
            started = time.monotonic()
            watchdog = _Watchdog(started + deadline)
            reading = _BodyRead()
            try:
                # The socket read timeout is the whole deadline too: a silent server is cut off by it or by
                # the watchdog, whichever comes first.
                with self._client.stream(
                    method, url, params=params or None, content=content, headers=headers,
                    timeout=httpx.Timeout(deadline, connect=min(deadline, 10.0)),
                    extensions={"trace": watchdog.trace},
                ) as response:
                    reading.headers_came = True
                    data = self._read_body(response, reading, watchdog.ends_at, shown)
            except httpx.TimeoutException as exc:
                if isinstance(exc, httpx.ConnectTimeout) and attempt < attempts:
                    self._retry(shown, attempt, attempts, f"connect timeout: {exc}")
                    continue
                raise self._late(shown, deadline, reading) from None
            except httpx.TransportError as exc:
                if watchdog.fired:  # the watchdog ended the connection at the deadline
                    raise self._late(shown, deadline, reading) from None
                if isinstance(exc, httpx.ConnectError) and attempt < attempts:
                    self._retry(shown, attempt, attempts, f"cannot connect: {exc}")
                    continue
                self._emit("note", f"{shown}: {_transport_problem(exc)}")
                raise ProviderCrashed(f"{shown}: {_transport_problem(exc)}") from None
            finally:
                watchdog.stop()
            answer = HttpAnswer(method, url, response.status_code, dict(response.headers), data,
                                time.monotonic() - started)
            self._emit("received", _describe_answer(answer))
            if answer.status >= 500 and attempt < attempts:
                self._retry(shown, attempt, attempts, f"HTTP {answer.status}")
                continue
            return answer
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def _read_body(self, response: httpx.Response, reading: _BodyRead, ends_at: float, shown: str) -> bytes:
        """The body, chunk by chunk as it comes: never more than ``max_answer_bytes`` (and one chunk) held,
        and the deadline checked after every chunk (each read alone comes in time from a trickling server)."""
        cap = self.max_answer_bytes
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > cap:
            raise self._too_long(shown, f" (its Content-Length says {int(declared)})")
        chunks: list[bytes] = []
        for chunk in response.iter_bytes():
            reading.size += len(chunk)
            if reading.size > cap:
                raise self._too_long(shown, "")
            chunks.append(chunk)
            if time.monotonic() > ends_at:
                raise httpx.ReadTimeout("the deadline of the whole answer passed")
        return b"".join(chunks)

    def _too_long(self, shown: str, detail: str) -> WireViolation:
        problem = f"the answer body exceeded {self.max_answer_bytes} bytes{detail} (the profile's max_answer_bytes)"
        self._emit("note", f"{shown}: {problem}")
        return WireViolation(f"{shown}: {problem}")

    def _late(self, shown: str, deadline: float, reading: _BodyRead) -> CallTimeout:
        if not reading.headers_came:
            problem = f"got no answer within {deadline:.1f}s"
        else:
            problem = (f"got no whole answer within {deadline:.1f}s, the deadline of the answer's headers and "
                       f"body together ({reading.size} bytes of its body had come)")
        self._emit("note", f"{shown}: {problem}")
        return CallTimeout(f"{shown} {problem}")

    def _retry(self, shown: str, attempt: int, attempts: int, why: str) -> None:
        pause = self.retries.pause(attempt)
        self._emit("note", f"{shown}: {why}; retrying in {pause:.2f}s (attempt {attempt + 1} of {attempts})")
        self._sleep(pause)

    def close(self) -> None:
        if self._owns_client:
            self._client.close()


@dataclass
class _BodyRead:
    """How far the reading of one answer got, for the message when it stops short."""

    headers_came: bool = False
    size: int = 0


class _Watchdog:
    """Ends one request's connection when its deadline passes (``socket.shutdown`` wakes a blocked read):
    the socket read timeout alone never fires while a server trickles a byte at a time, in the headers
    as in the body. It learns the socket from httpcore's ``trace`` extension as the connection opens; a
    transport that opens none (``httpx.MockTransport``) has no socket to end, and no watchdog thread."""

    def __init__(self, ends_at: float) -> None:
        self.ends_at = ends_at
        self.fired = False
        self._lock = threading.Lock()
        self._stopped = False
        self._timer: threading.Timer | None = None
        self._socket: socket.socket | None = None

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if not event.startswith("connection.connect_") or not event.endswith(".complete"):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            if self._stopped or self._timer is not None:
                return
            self._socket = sock
            self._timer = threading.Timer(max(0.0, self.ends_at - time.monotonic()), self._fire)
            self._timer.daemon = True
            self._timer.name = WATCHDOG_THREAD
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._stopped or self._socket is None:
                return
            self.fired = True
            try:
                self._socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed: the request ended meanwhile

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            timer.join()


def _describe_answer(answer: HttpAnswer) -> str:
    text = answer.text
    if len(text) > BODY_PREVIEW_CHARS:
        text = f"{text[:BODY_PREVIEW_CHARS]}… [{len(answer.body)} bytes]"
    return f"{answer.status} ({answer.elapsed_s * 1000:.0f} ms) {text}".rstrip()


def _transport_problem(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect: {exc}" if str(exc) else "cannot connect"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def valid_base_url(url: str) -> str | None:
    """Why ``url`` cannot be a provider's base URL, or ``None`` when it can."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return str(exc)
    if parts.scheme not in ("http", "https"):
        return "it must start with http:// or https://"
    if not parts.hostname:
        return "it names no host"
    if parts.query or parts.fragment:
        return "it must not carry a query or a fragment"
    if port == 0:
        return "port 0 cannot be reached"
    return None
