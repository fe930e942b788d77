"""The reference REST provider: forkd's API over the host-directory backend.

    python3 -m conformance.reference.rest_server --port 8889 --token-env FORKD_TOKEN

Routes (JSON bodies; every error is ``{"error": "..."}``):

    GET    /healthz                    200 {"ok": true}, without credentials
    POST   /v1/sandboxes               {snapshot_tag?, memory_limit_mib?} → 201 [SandboxInfo]
    GET    /v1/sandboxes               200 [SandboxInfo, ...]
    GET    /v1/sandboxes/{id}          200 SandboxInfo | 404
    DELETE /v1/sandboxes/{id}          204 | 404 (unknown or already deleted)
    POST   /v1/sandboxes/{id}/exec     {args, timeout_secs=30} → 200 {stdout, stderr, exit_code}
                                       | 400 empty args | 404 no such sandbox | 408 deadline exceeded

That is the proposed controller patch (``--compat patched``, the default). ``--compat forkd-0.5.2`` (or
the environment variable FORKD_COMPAT) serves forkd 0.5.2 as fabro runs it instead: see ``Forkd052App``.

Every route but /healthz needs ``Authorization: Bearer <token>`` (401 otherwise); the token is read
from the environment variable named by ``--token-env``. One line per request goes to stderr, never
the token. This module imports only the standard library and stdlib-only reference modules, so it runs
in an image that has nothing but python3.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from conformance.reference.host_backend import BackendError, HostBackend, HostSandbox

DEFAULT_TIMEOUT_SECS = 30
DEFAULT_SNAPSHOT_TAG = "default"
MAX_BODY_BYTES = 4 * 1024 * 1024
SANDBOX_PATH = re.compile(r"^/v1/sandboxes/([^/]+)$")
EXEC_PATH = re.compile(r"^/v1/sandboxes/([^/]+)/exec$")
PROG = "sandbox-conformance-rest-server"


class Answer(Exception):
    """An HTTP answer; raised with an error status to end a request early."""

    def __init__(self, status: int, body: Any = None) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


def error(status: int, message: str) -> Answer:
    return Answer(status, {"error": message})


class PlainText(str):
    """An answer body sent as text/plain, not JSON (axum's own rejections of a body it cannot decode)."""


class ForkdApp:
    """What each route does, independent of HTTP framing. A variant subclasses it and overrides one thing.

    Seams: ``__init__(token, backend=None, environ=None)`` (``environ``, default ``os.environ``, is what
    the backend reads and commands inherit), ``authorized``/``requires_auth``/``unauthorized``,
    ``route``, one method per route (``create``, ``list``, ``get``, ``delete``, ``exec``),
    ``info``, ``exec_result``, ``timed_out``, ``log`` (where the one line per request goes: stderr) and
    ``close``. ``serve(..., app_class=)`` serves a subclass.
    """

    def __init__(self, token: str, backend: HostBackend | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        self.token = token
        self.backend = backend if backend is not None else HostBackend(environ=environ)
        self.snapshot_tags: dict[str, str] = {}  # sandbox id → the tag it was created from

    # -- authentication --------------------------------------------------------------------------

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries the token (compared in constant time)."""
        scheme, _, presented = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not presented:
            return False
        return hmac.compare_digest(presented.strip().encode("utf-8"), self.token.encode("utf-8"))

    def requires_auth(self, method: str, path: str) -> bool:
        return path != "/healthz"

    # -- routing ---------------------------------------------------------------------------------

    def handle(self, method: str, path: str, authorization: str | None, body: Any) -> Answer:
        if self.requires_auth(method, path) and not self.authorized(authorization):
            return self.unauthorized(method, path, body)
        try:
            return self.route(method, path, body)
        except Answer as answer:
            return answer
        except BackendError as failure:
            status = {"not_found": 404, "invalid_spec": 400, "invalid_state": 409}.get(failure.kind, 500)
            return error(status, failure.message)

    def unauthorized(self, method: str, path: str, body: Any) -> Answer:
        return error(401, "unauthorized")

    def route(self, method: str, path: str, body: Any) -> Answer:
        if path == "/healthz":
            self.allow(method, "GET")
            return Answer(200, {"ok": True})
        if path == "/v1/sandboxes":
            self.allow(method, "GET", "POST")
            return self.create(body) if method == "POST" else self.list()
        match = EXEC_PATH.match(path)
        if match:
            self.allow(method, "POST")
            return self.exec(match.group(1), body)
        match = SANDBOX_PATH.match(path)
        if match:
            self.allow(method, "GET", "DELETE")
            return self.get(match.group(1)) if method == "GET" else self.delete(match.group(1))
        raise error(404, f"no route for {method} {path}")

    @staticmethod
    def allow(method: str, *methods: str) -> None:
        if method not in methods:
            raise error(405, f"method {method} is not allowed here (allowed: {', '.join(methods)})")

    # -- sandboxes -------------------------------------------------------------------------------

    def info(self, sandbox: HostSandbox) -> dict[str, Any]:
        return {
            "id": sandbox.id,
            "snapshot_tag": self.snapshot_tags.get(sandbox.id, DEFAULT_SNAPSHOT_TAG),
            "created_at_unix": int(sandbox.created_at),
            "memory_limit_mib": None,
            "state": sandbox.state,
        }

    def live(self, sandbox_id: str) -> HostSandbox:
        """A sandbox that exists and is not deleted; 404 otherwise."""
        try:
            return self.backend.get(sandbox_id)
        except BackendError:
            raise error(404, f"sandbox {sandbox_id} not found") from None

    def create(self, body: Any) -> Answer:
        body = self.object_body(body)
        memory = body.get("memory_limit_mib")
        if memory is not None:
            # A host-directory sandbox shares the host's memory: a limit would be a promise not kept (GAP 2).
            raise error(400, f"memory_limit_mib is not supported: this provider cannot limit memory (asked {memory})")
        tag = body.get("snapshot_tag")
        if tag is not None and not isinstance(tag, str):
            raise error(400, "snapshot_tag must be a string")
        from_snapshot = None
        if tag not in (None, DEFAULT_SNAPSHOT_TAG):
            if not any(tag == record.get("name") for record in self.backend.snapshots()):
                raise error(404, f"snapshot {tag} not found")
            from_snapshot = tag
        sandbox = self.backend.create(None, {}, {}, from_snapshot=from_snapshot)
        self.snapshot_tags[sandbox.id] = tag or DEFAULT_SNAPSHOT_TAG
        return Answer(201, [self.info(sandbox)])

    def list(self) -> Answer:
        return Answer(200, [self.info(sandbox) for sandbox in self.backend.list()])

    def get(self, sandbox_id: str) -> Answer:
        return Answer(200, self.info(self.live(sandbox_id)))

    def delete(self, sandbox_id: str) -> Answer:
        self.live(sandbox_id)
        self.backend.delete(sandbox_id)
        return Answer(204)

    def exec(self, sandbox_id: str, body: Any) -> Answer:
        body = self.object_body(body)
        args = body.get("args")
        if not isinstance(args, list) or not args or not all(isinstance(a, str) for a in args):
            raise error(400, "args must be a non-empty array of strings")
        timeout = body.get("timeout_secs", DEFAULT_TIMEOUT_SECS)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise error(400, "timeout_secs must be a positive number")
        sandbox = self.live(sandbox_id)
        started = time.monotonic()
        run = self.backend.run(sandbox, "", {}, argv=args, timeout_s=float(timeout))
        if run.termination == "timed_out":
            return self.timed_out(run, time.monotonic() - started, timeout)
        return Answer(200, self.exec_result(run))

    def exec_result(self, run: Any) -> dict[str, Any]:
        result: dict[str, Any] = {
            "stdout": run.stdout.decode("utf-8", errors="replace"),
            "stderr": run.stderr.decode("utf-8", errors="replace"),
            "exit_code": run.exit_code,
        }
        if run.signal is not None:
            result["signal"] = run.signal  # killed by a signal: no exit code to report
        return result

    def timed_out(self, run: Any, elapsed_s: float, timeout: float) -> Answer:
        return error(408, f"exec deadline exceeded after {elapsed_s:.1f}s (requested timeout_secs={timeout:g})")

    @staticmethod
    def object_body(body: Any) -> dict[str, Any]:
        if body is None:
            return {}
        if not isinstance(body, dict):
            raise error(400, "the request body must be a JSON object")
        return body

    def log(self, line: str) -> None:
        """One line of the server's log (a request line, never a header)."""
        print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        self.backend.close()


# forkd 0.5.2's answer when the guest agent's reply did not come within timeout_secs + 5 s: the controller's
# one blocking read of the agent's socket fails with EAGAIN, and the HTTP layer answers 500 with it.
EAGAIN_MESSAGE = "exec: read response: Resource temporarily unavailable (os error 11)"
READ_WINDOW_EXTRA_S = 5.0


class Forkd052App(ForkdApp):
    """forkd 0.5.2 as fabro runs it (``--compat forkd-0.5.2``), where the default app follows the proposed
    controller patch:

    - a command that outlives ``timeout_secs`` is killed, and the answer is HTTP 500
      ``{"error": "exec: read response: Resource temporarily unavailable (os error 11)"}`` about
      ``timeout_secs + 5`` s after the request (the controller's read window), not 408;
    - a command a signal ended answers an integer ``exit_code``: ``-N`` for signal N (the guest agent's
      ``subprocess.run`` returncode), with no ``signal`` field;
    - ``SandboxInfo`` has no ``state``; it carries ``memory_limit_mib`` as asked;
    - ``memory_limit_mib`` is accepted and enforced (here: every command's address space is limited to it,
      where forkd sizes the microVM);
    - a create from a snapshot tag still being written answers 409 (see ``writing``); an unknown tag 404;
    - a create without a ``snapshot_tag`` is refused 422 in text (the field is required there).
    """

    compat = "forkd-0.5.2"

    def __init__(self, token: str, backend: HostBackend | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        super().__init__(token, backend, environ)
        self.memory_limits: dict[str, int] = {}  # sandbox id → memory_limit_mib asked at create
        self.writing: dict[str, float] = {}  # snapshot tag → time.monotonic() when it is written and ready
        self._closing = threading.Event()

    def info(self, sandbox: HostSandbox) -> dict[str, Any]:
        info = super().info(sandbox)
        del info["state"]
        info["memory_limit_mib"] = self.memory_limits.get(sandbox.id)
        return info

    def write_snapshot(self, tag: str, seconds: float) -> None:
        """Register ``tag`` as a snapshot whose writing finishes ``seconds`` from now: until then a create
        from it answers 409, afterwards it starts sandboxes like the default snapshot."""
        self.writing[tag] = time.monotonic() + seconds

    def create(self, body: Any) -> Answer:
        body = self.object_body(body)
        if not isinstance(body.get("snapshot_tag"), str):
            # CreateSandboxRequest.snapshot_tag is a required String: axum's Json extractor refuses the body
            problem = "missing field `snapshot_tag`" if "snapshot_tag" not in body else "invalid type for `snapshot_tag`"
            raise Answer(422, PlainText(f"Failed to deserialize the JSON body into the target type: {problem}"))
        memory = body.get("memory_limit_mib")
        if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0):
            raise error(400, "memory_limit_mib must be a positive integer")
        tag = body["snapshot_tag"]
        if tag in self.writing:
            if time.monotonic() < self.writing[tag]:
                raise error(409, f"snapshot {tag} is still being written; retry once it is ready")
            body = {**body, "snapshot_tag": DEFAULT_SNAPSHOT_TAG}  # written: it starts sandboxes as the default does
        answer = super().create({key: value for key, value in body.items() if key != "memory_limit_mib"})
        (info,) = answer.body
        if tag in self.writing:
            self.snapshot_tags[info["id"]] = tag
        if memory is not None:
            self.memory_limits[info["id"]] = memory
        return Answer(answer.status, [self.info(self.live(info["id"]))])

    def exec(self, sandbox_id: str, body: Any) -> Answer:
        limit = self.memory_limits.get(sandbox_id)
        if limit is not None and isinstance(body, dict) and isinstance(body.get("args"), list) and body["args"]:
            # The limit wraps the command (then replaced by it, so its exit and signals are the command's).
            wrapper = ["bash", "-c", f'ulimit -v {limit * 1024} && exec "$@"', "forkd-memory-limit"]
            body = {**body, "args": wrapper + list(body["args"])}
        return super().exec(sandbox_id, body)

    def exec_result(self, run: Any) -> dict[str, Any]:
        result = super().exec_result(run)
        signal_number = result.pop("signal", None)
        if signal_number is not None:
            result["exit_code"] = -signal_number  # Popen's returncode for a command a signal ended
        return result

    def timed_out(self, run: Any, elapsed_s: float, timeout: float) -> Answer:
        # The command is already killed; the answer waits out the controller's read window.
        self._closing.wait(max(0.0, timeout + READ_WINDOW_EXTRA_S - elapsed_s))
        return error(500, EAGAIN_MESSAGE)

    def close(self) -> None:
        self._closing.set()
        super().close()


# What `--compat` names: the proposed controller patch (the default) and forkd 0.5.2.
COMPAT = {"patched": ForkdApp, "forkd-0.5.2": Forkd052App}
DEFAULT_COMPAT = "patched"


def compat_app(name: str) -> type[ForkdApp]:
    """The app class ``--compat NAME`` serves; ``ValueError`` (one line) for an unknown name."""
    if name not in COMPAT:
        raise ValueError(f"unknown --compat {name!r}: choose {' or '.join(COMPAT)}")
    return COMPAT[name]


class Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 framing around ``ForkdApp``: read a JSON body, answer JSON with a Content-Length."""

    protocol_version = "HTTP/1.1"
    server_version = "sandbox-conformance-forkd"
    app: ForkdApp  # set on the subclass the server builds

    def do_GET(self) -> None:
        self.dispatch()

    def do_POST(self) -> None:
        self.dispatch()

    def do_DELETE(self) -> None:
        self.dispatch()

    def do_PUT(self) -> None:
        self.dispatch()

    def do_PATCH(self) -> None:
        self.dispatch()

    def dispatch(self) -> None:
        started = time.monotonic()
        path = self.path.split("?", 1)[0]
        try:
            body = self.read_body()
        except Answer as answer:
            self.close_connection = True
            self.answer(answer, path, started)
            return
        try:
            answer = self.app.handle(self.command, path, self.headers.get("Authorization"), body)
        except Exception as exc:  # noqa: BLE001 - the server must answer, whatever broke
            answer = error(500, f"internal error: {type(exc).__name__}: {exc}")
        self.answer(answer, path, started)

    def read_body(self) -> Any:
        length_header = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raise error(411, "send the body with a Content-Length")
        length = int(length_header) if length_header and length_header.isdigit() else 0
        if length > MAX_BODY_BYTES:
            raise error(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
        raw = self.rfile.read(length) if length else b""
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise error(400, f"the body is not JSON: {exc}") from None

    def answer(self, answer: Answer, path: str, started: float) -> None:
        text = isinstance(answer.body, PlainText)
        payload = (b"" if answer.body is None else str(answer.body).encode("utf-8") if text
                   else json.dumps(answer.body).encode("utf-8"))
        try:
            self.send_response(answer.status)
            if answer.body is not None:
                self.send_header("Content-Type", "text/plain; charset=utf-8" if text else "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if payload:
                self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass
        elapsed_ms = (time.monotonic() - started) * 1000
        # The request line only: headers (and so the token) never reach the log.
        self.app.log(f"{PROG}: {self.command} {path} {answer.status} {elapsed_ms:.0f}ms")

    def log_message(self, format: str, *args: Any) -> None:
        """Silence http.server's own log (it would print the client address and raw request line)."""


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def in_container() -> bool:
    """Inside a container a server must listen on every interface for a published port to reach it."""
    return Path("/.dockerenv").exists() or Path("/run/.containerenv").exists()


def build_server(app: ForkdApp, host: str, port: int) -> Server:
    handler = type("BoundHandler", (Handler,), {"app": app})
    return Server((host, port), handler)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="The forkd-compatible reference REST provider.")
    parser.add_argument("--host", default=None,
                        help="interface to listen on (default: 127.0.0.1, or 0.0.0.0 inside a container)")
    parser.add_argument("--port", type=int, default=8889, help="port to listen on; 0 picks a free one (default 8889)")
    parser.add_argument("--token-env", default="FORKD_TOKEN", metavar="NAME",
                        help="environment variable holding the bearer token (default FORKD_TOKEN)")
    parser.add_argument("--compat", default=os.environ.get("FORKD_COMPAT", DEFAULT_COMPAT), metavar="MODE",
                        help=f"whose behaviour to reproduce: {' or '.join(COMPAT)} (default {DEFAULT_COMPAT}, "
                             "or the environment variable FORKD_COMPAT)")
    return parser


def serve(host: str | None, port: int, token_env: str, app_class: type[ForkdApp] = ForkdApp) -> int:
    """Run the server (an instance of ``app_class``) in the foreground until interrupted; the exit code
    of the command."""
    if not 0 <= port <= 65535:  # checked first: a bad port is the problem even where the token is missing too
        print(f"{PROG}: --port must be from 0 to 65535, not {port}", file=sys.stderr)
        return 2
    token = os.environ.get(token_env, "")
    if not token:
        print(f"{PROG}: the token variable {token_env} is not set or empty; refusing to serve without one",
              file=sys.stderr)
        return 2
    host = host or ("0.0.0.0" if in_container() else "127.0.0.1")
    environ = {name: value for name, value in os.environ.items() if name != "BASH_ENV"}
    app = app_class(token, environ=environ)
    try:
        server = build_server(app, host, port)
    except OSError as exc:
        app.close()
        print(f"{PROG}: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    bound_host, bound_port = server.server_address[:2]
    shown = f"[{bound_host}]" if ":" in str(bound_host) else bound_host
    print(f"listening on http://{shown}:{bound_port}", flush=True)
    if threading.current_thread() is threading.main_thread():
        # A container's stop (SIGTERM) ends the server like Ctrl-C does, so its sandboxes are cleaned up.
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        app.close()
    return 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        app_class = compat_app(args.compat)
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    return serve(args.host, args.port, args.token_env, app_class)


if __name__ == "__main__":
    # Run the importable module, not this __main__ copy, so subclasses of the very ForkdApp are served.
    from conformance.reference import rest_server

    sys.exit(rest_server.main())
