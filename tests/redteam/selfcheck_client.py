"""The client and helpers the red-team self-checks share: a plugin process spoken to over its real stdio,
and small readers of its answers. ``python -m tests.redteam.selfcheck_N`` runs set N's checks with them."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

PY = sys.executable
HONEST = [PY, "-m", "conformance.reference.host_plugin"]
INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":1}}\n'


def mutant_cmd(name: str) -> list[str]:
    return [PY, "-m", "tests.redteam.serve", name]


class Client:
    def __init__(self, cmd: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, **(env or {})})
        self.log: list[dict[str, Any]] = []
        self.cond = threading.Condition()
        self.next_id = 10
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                msg = {"unparsable": line.decode("utf-8", "replace")}
            with self.cond:
                self.log.append(msg)
                self.cond.notify_all()

    def raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, method: str, params: Any = None, request_id: int | None = None) -> int:
        if request_id is None:
            request_id = self.next_id
            self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.raw(json.dumps(msg).encode() + b"\n")
        return request_id

    def wait_for(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 10.0) -> tuple[int, dict] | None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i, msg in enumerate(self.log):
                    if pred(msg):
                        return i, msg
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def response(self, request_id: int, timeout: float = 10.0) -> dict[str, Any] | None:
        found = self.wait_for(lambda m: "method" not in m and m.get("id") == request_id, timeout)
        return found[1] if found else None

    def call(self, method: str, params: Any = None, timeout: float = 10.0) -> dict[str, Any] | None:
        return self.response(self.send(method, params), timeout)

    def before(self, request_id: int) -> list[dict[str, Any]]:
        """Notifications that arrived before the response to ``request_id``."""
        found = self.wait_for(lambda m: "method" not in m and m.get("id") == request_id, 10)
        end = found[0] if found else len(self.log)
        return [m for m in self.log[:end] if "method" in m]

    def init(self) -> dict[str, Any] | None:
        return self.call("initialize", {"protocol_version": 1})

    def create(self, **spec: Any) -> dict[str, Any]:
        events = spec.pop("events", None)
        params: dict[str, Any] = {"spec": {"source": "host_directory", **spec}}
        if events:
            params["events"] = events
        return self.call("sandbox/create", params)["result"]

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def err(resp: dict | None) -> dict:
    return (resp or {}).get("error") or {}


def kind(resp: dict | None) -> str | None:
    return ((err(resp).get("data") or {}).get("report") or {}).get("kind")


def ok(resp: dict | None) -> bool:
    return resp is not None and "result" in resp


def d64(text: str | None) -> bytes:
    return base64.b64decode(text or "")


def e64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def run(cl: Client, sid: str, command: str, **spec: Any) -> dict:
    return cl.call("exec/run", {"sandbox_id": sid, "spec": {"command": command, "env": spec.pop("env", {}), **spec}})


def stream(cl: Client, sid: str, command: str, limit: int | None = None, **spec: Any) -> tuple[dict, list[dict]]:
    params: dict[str, Any] = {"sandbox_id": sid, "exec_id": "x1", "spec": {"command": command, "env": {}, **spec}}
    if limit is not None:
        params["retained_output_limit"] = limit
    rid = cl.send("exec/stream", params)
    resp = cl.response(rid, 20)
    time.sleep(0.3)
    outputs_before = [m for m in cl.before(rid) if m["method"] == "exec/output"]
    return resp, outputs_before


def sid_of(info: dict) -> str:
    return info["status"]["id"]


# ---------------------------------------------------------------- helpers



def setup(cl: Client, **spec: Any) -> tuple[str, dict]:
    cl.init()
    info = cl.create(**spec)
    return sid_of(info), info


def detail(resp: dict | None) -> dict:
    return (err(resp).get("data") or {}).get("detail") or {}


def stream_id(cl: Client, sid: str, exec_id: str, command: str, limit: int | None = None, **spec: Any) -> int:
    params: dict[str, Any] = {"sandbox_id": sid, "exec_id": exec_id,
                              "spec": {"command": command, "env": spec.pop("env", {}), "timeout_ms": 30000, **spec}}
    if limit is not None:
        params["retained_output_limit"] = limit
    return cl.send("exec/stream", params)


def outputs(cl: Client, exec_id: str, stream_name: str | None = None) -> bytes:
    return b"".join(d64(m["params"]["data_b64"]) for m in list(cl.log)
                    if m.get("method") == "exec/output" and m["params"].get("exec_id") == exec_id
                    and (stream_name is None or m["params"].get("stream") == stream_name))


def events(cl: Client) -> list[dict]:
    return [m["params"]["event"] for m in list(cl.log) if m.get("method") == "host/event"]


def pty_session(cl: Client, sid: str, text: bytes, pattern: bytes, **options: Any) -> bytes:
    opts = {"size": {"rows": 24, "cols": 80}, "env": {"PS1": "$ "}, **options}
    if not ok(cl.call("pty/open", {"sandbox_id": sid, "pty_id": "t1", "options": opts})):
        return b""
    cl.call("pty/input", {"pty_id": "t1", "data_b64": e64(text)})
    got = b""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        resp = cl.call("pty/output", {"pty_id": "t1"}, timeout=5)
        data = (resp or {}).get("result", {}).get("data_b64")
        if data is None:
            break
        got += d64(data)
        if re.search(pattern, got):
            break
    return got


def stdio_all(cl: Client, process_id: str, limit: int = 50) -> bytes:
    got = b""
    for _ in range(limit):
        resp = cl.call("exec/stdio_output", {"process_id": process_id}, timeout=5)
        data = (resp or {}).get("result", {}).get("data_b64")
        if data is None:
            break
        got += d64(data)
    return got


ROUTE = {"route_id": "route-1", "correlation_id": "corr-1"}


# -- the driver every set's self-check runs -------------------------------------------------------------


def starts(name: str) -> bool:
    """Does the mutant ``name`` start and answer initialize for version 1?"""
    try:
        out = subprocess.run(mutant_cmd(name), input=INIT, capture_output=True, timeout=15, check=False).stdout
    except subprocess.TimeoutExpired:
        return False
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    return any(m.get("id") == 1 and m.get("result", {}).get("protocol_version") == 1 for m in lines)


def conforms(cmd: list[str], fn: Callable[[Client], bool], env: dict[str, str] | None = None) -> bool | str:
    """The check ``fn`` against the plugin ``cmd``: True when it behaves as the protocol says."""
    cl = Client(cmd, env)
    try:
        return bool(fn(cl))
    except Exception as exc:  # noqa: BLE001 - a mutant may answer garbage
        return f"error: {exc!r}"
    finally:
        cl.close()


def drive(prefix: str, checks: dict[str, Callable[[Client], bool]], argv: list[str] | None,
          env: dict[str, dict[str, str]] | None = None, workers: int = 8, missing_fails: bool = True) -> int:
    """Run a set's self-check: every mutant named ``prefix*`` (or only those in ``argv``) starts, and each
    check passes against the honest plugin and fails against its mutant. Exit status 1 on any failure."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.redteam import load

    env = env or {}
    only = set(argv if argv is not None else sys.argv[1:])
    names = sorted(n for n in load() if n.startswith(prefix) and (not only or n in only))
    failures = 0
    with ThreadPoolExecutor(workers) as pool:
        started = dict(zip(names, pool.map(starts, names)))
        for name in names:
            if not started[name]:
                failures += 1
                print(f"FAIL start {name}")
        print(f"{sum(started.values())}/{len(names)} mutants start and answer initialize")
        for name in (n for n in names if n not in checks):
            failures += missing_fails
            print(f"{'FAIL' if missing_fails else 'note:'} no reachability check for {name}")
        jobs = {name: (pool.submit(conforms, HONEST, fn, env.get(name)),
                       pool.submit(conforms, mutant_cmd(name), fn, env.get(name)))
                for name, fn in checks.items() if name in names}
        reached = 0
        for name, (honest, mutant) in jobs.items():
            h, m = honest.result(), mutant.result()
            good = h is True and m is not True
            reached += good
            failures += not good
            print(f"{'ok  ' if good else 'FAIL'} reach {name}: honest={h} mutant={m}", flush=True)
    print(f"{reached}/{len(jobs)} faults reached (honest conforms, mutant does not)")
    return 1 if failures else 0
