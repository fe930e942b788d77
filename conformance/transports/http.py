"""HTTP to a REST provider (httpx): one request, one answer, each recorded for the scenario's transcript.

Bytes only, like the process transport: what a path means, which statuses are success and how a body is
read is the REST dialect's business. This module adds per-call deadlines, retries for idempotent
requests (a connect error or a 5xx answer, with exponential backoff) and credentials that never appear
in what observers see.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from conformance.errors import CallTimeout, ProviderCrashed

Observer = Callable[[str, str, str], None]  # (channel, direction, text), as JsonRpcConnection's observers
BODY_PREVIEW_CHARS = 2000


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
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.base_url = base_url.rstrip("/")
        self.credentials = credentials or Credentials()
        self.timeout_s = timeout_s
        self.retries = retries or RetryPolicy()
        self.channel = channel
        self._sleep = sleep
        self._client = httpx.Client(transport=transport, follow_redirects=False)
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

        Raises ``CallTimeout`` when no answer comes within the deadline and ``ProviderCrashed`` when the
        provider cannot be reached. Only an ``idempotent`` request is tried again, and only after a
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
            try:
                response = self._client.request(
                    method, url, params=params or None, content=content, headers=headers,
                    timeout=httpx.Timeout(deadline, connect=min(deadline, 10.0)),
                )
            except httpx.TimeoutException as exc:
                if isinstance(exc, httpx.ConnectTimeout) and attempt < attempts:
                    self._retry(shown, attempt, attempts, f"connect timeout: {exc}")
                    continue
                self._emit("note", f"{shown}: no answer within {deadline:.1f}s")
                raise CallTimeout(f"{shown} got no answer within {deadline:.1f}s") from None
            except httpx.TransportError as exc:
                if isinstance(exc, httpx.ConnectError) and attempt < attempts:
                    self._retry(shown, attempt, attempts, f"cannot connect: {exc}")
                    continue
                self._emit("note", f"{shown}: {_transport_problem(exc)}")
                raise ProviderCrashed(f"{shown}: {_transport_problem(exc)}") from None
            answer = HttpAnswer(method, url, response.status_code, dict(response.headers), response.content,
                                time.monotonic() - started)
            self._emit("received", _describe_answer(answer))
            if answer.status >= 500 and attempt < attempts:
                self._retry(shown, attempt, attempts, f"HTTP {answer.status}")
                continue
            return answer
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def _retry(self, shown: str, attempt: int, attempts: int, why: str) -> None:
        pause = self.retries.pause(attempt)
        self._emit("note", f"{shown}: {why}; retrying in {pause:.2f}s (attempt {attempt + 1} of {attempts})")
        self._sleep(pause)

    def close(self) -> None:
        if self._owns_client:
            self._client.close()


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
