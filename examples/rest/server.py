#!/usr/bin/env python3
"""A minimal REST sandbox server: a starting point, not a product. ``profile.yaml`` beside it maps the
suite's operations onto these routes.

Sandboxes are directories under a temporary root; commands are argument vectors run with ``subprocess``.
Standard library only. Every route but ``/health`` needs ``Authorization: Bearer <token>``, the token
read from the environment variable EXAMPLE_REST_TOKEN (never from the command line: it would show in
``ps``).

    GET    /health                    200 {"status": "ok"}              (no credential: a liveness probe)
    POST   /sandboxes                 201 {"id", "state"}
    GET    /sandboxes                 200 {"sandboxes": [{"id", "state"}, ...]}
    GET    /sandboxes/{id}            200 {"id", "state"} | 404
    DELETE /sandboxes/{id}            204 | 404 (already gone: the profile counts it as deleted)
    POST   /sandboxes/{id}/exec       200 {"exit_code", "signal", "stdout", "stderr"} | 404 | 408 on timeout
           body {"argv": [...], "cwd": str?, "env": {...}?, "timeout_ms": int}

Every error answer is {"error": "<what went wrong>"}. Run it, then the suite, from the repository root:

    EXAMPLE_REST_TOKEN=local-secret python3 examples/rest/server.py --port 8890
    EXAMPLE_REST_TOKEN=local-secret .venv/bin/sandbox-conformance run --rest http://127.0.0.1:8890 \
        --profile examples/rest/profile.yaml
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

TOKEN = os.environ.get("EXAMPLE_REST_TOKEN", "")
ROOT = Path(tempfile.mkdtemp(prefix="example-rest-"))
SANDBOXES: dict[str, dict[str, Any]] = {}  # id -> {"dir": Path, "groups": set of process group ids}
LOCK = threading.Lock()
# What a command's environment starts from: a few harmless variables of the server's, never all of them
# (the server's own token is in there, and a sandbox must not be able to read it).
BASE_ENV = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "TZ")
            if name in os.environ}


class Answer(Exception):
    """An error answer: its status and the sentence for the body's error field."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def end_processes(sandbox: dict[str, Any]) -> None:
    """Kill every process group a command of this sandbox started (background jobs included)."""
    for pgid in list(sandbox["groups"]):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run(sandbox: dict[str, Any], body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    argv, cwd, env = body.get("argv"), body.get("cwd"), body.get("env") or {}
    timeout_ms = body.get("timeout_ms")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise Answer(400, "argv must be a non-empty list of strings")
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise Answer(400, "env must be an object of strings")
    if not isinstance(timeout_ms, int) or timeout_ms <= 0:
        raise Answer(400, "timeout_ms must be a positive integer")
    # A relative cwd is relative to the sandbox's directory (an absolute one is taken as given).
    directory = sandbox["dir"] / cwd if isinstance(cwd, str) else sandbox["dir"]
    try:
        # start_new_session: the command leads its own process group, so a timeout or a delete can end it
        # together with whatever it started.
        proc = subprocess.Popen(argv, cwd=directory, env={**BASE_ENV, **env}, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise Answer(500, f"the command could not start: {exc}") from None
    sandbox["groups"].add(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_ms / 1000)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        # A timeout is its own answer (408, matched by the profile's exec.timed_out), never an exit code: a
        # host must not read a killed command as one that exited.
        raise Answer(408, f"deadline exceeded after {timeout_ms} ms; the command was killed") from None
    # Popen's returncode is -N for a command ended by signal N: that is no exit code, so say which signal.
    code = proc.returncode
    return 200, {"exit_code": code if code >= 0 else None, "signal": -code if code < 0 else None,
                 # JSON strings carry text: bytes that are not UTF-8 are replaced, not sent raw.
                 "stdout": stdout.decode("utf-8", errors="replace"),
                 "stderr": stderr.decode("utf-8", errors="replace")}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every answer carries its Content-Length

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write("example-rest: " + format % args + "\n")  # logs to stderr, never into an answer

    def do_GET(self) -> None:
        self.route("GET")

    def do_POST(self) -> None:
        self.route("POST")

    def do_DELETE(self) -> None:
        self.route("DELETE")

    def route(self, method: str) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        parts = [part for part in self.path.split("?")[0].split("/") if part]
        try:
            if method == "GET" and parts == ["health"]:
                status, answer = 200, {"status": "ok"}
            else:
                self.authorize()
                status, answer = self.serve(method, parts, body)
        except Answer as error:
            status, answer = error.status, {"error": error.message}
        self.reply(status, answer)

    def authorize(self) -> None:
        given = self.headers.get("Authorization", "")
        # compare_digest: constant time, so the answer's timing does not reveal how much of a guess was right.
        # An empty server token would accept "Bearer " from anyone: refuse everything instead.
        if not TOKEN or not hmac.compare_digest(given.encode(), f"Bearer {TOKEN}".encode()):
            raise Answer(401, "missing or wrong bearer token")

    def serve(self, method: str, parts: list[str], raw: bytes) -> tuple[int, Any]:
        if parts == ["sandboxes"] and method == "POST":
            sandbox_id = "sb-" + uuid.uuid4().hex[:16]
            directory = ROOT / sandbox_id
            directory.mkdir()
            with LOCK:
                SANDBOXES[sandbox_id] = {"dir": directory, "groups": set()}
            return 201, {"id": sandbox_id, "state": "running"}
        if parts == ["sandboxes"] and method == "GET":
            with LOCK:
                return 200, {"sandboxes": [{"id": sid, "state": "running"} for sid in SANDBOXES]}
        if len(parts) < 2 or parts[0] != "sandboxes":
            raise Answer(404, f"no route {method} {self.path}")
        sandbox_id = parts[1]
        if len(parts) == 2 and method == "DELETE":
            with LOCK:
                sandbox = SANDBOXES.pop(sandbox_id, None)
            if sandbox is None:
                raise Answer(404, f"no sandbox {sandbox_id}")  # the profile lists 404 as "already gone"
            end_processes(sandbox)
            shutil.rmtree(sandbox["dir"], ignore_errors=True)
            return 204, None
        with LOCK:
            sandbox = SANDBOXES.get(sandbox_id)
        if sandbox is None:
            raise Answer(404, f"no sandbox {sandbox_id}")  # missing is 404, never an exit code
        if len(parts) == 2 and method == "GET":
            return 200, {"id": sandbox_id, "state": "running"}
        if parts[2:] == ["exec"] and method == "POST":
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                raise Answer(400, "the body is not JSON") from None
            if not isinstance(body, dict):
                raise Answer(400, "the body must be a JSON object")
            return run(sandbox, body)
        raise Answer(404, f"no route {method} {self.path}")

    def reply(self, status: int, answer: Any) -> None:
        data = b"" if answer is None else json.dumps(answer).encode()
        self.send_response(status)
        if answer is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8890, help="0: any free port (the one taken is printed)")
    port = parser.parse_args().port
    if not TOKEN:
        sys.exit("example-rest: set EXAMPLE_REST_TOKEN to the token clients must send")
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)  # loopback only: this runs commands
    server.daemon_threads = True
    # SIGTERM ends the server like Ctrl-C does, so the cleanup below runs either way.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        with LOCK:
            for sandbox in SANDBOXES.values():  # stopping ends every sandbox's processes and files
                end_processes(sandbox)
        shutil.rmtree(ROOT, ignore_errors=True)


if __name__ == "__main__":
    main()
