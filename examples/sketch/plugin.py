#!/usr/bin/env python3
"""A minimal plugin in the fabro provider-plugin sketch dialect: a starting point, not a product.

JSON-RPC 2.0 over stdio, one message per line. Sandboxes are directories under a temporary root;
commands are argument vectors run with ``subprocess`` inside them. Standard library only.

What it declares: ``lifecycle.stop`` and nothing else. Every other sketch capability is declared
false, and the methods behind them are refused with the sketch's one refusal (code -32001 and its
fixed sentence), which is what the suite expects of an undeclared operation.

Run the suite against it from the repository root:

    .venv/bin/sandbox-conformance run --plugin "python3 examples/sketch/plugin.py"
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = 1
KIND = "example-sketch"  # lowercase letters, digits and interior hyphens: the host checks it

# The sketch's error codes. It has no "not found" code: a request naming a sandbox this plugin does not
# hold is a bad-params/state answer, -32602.
INVALID_REQUEST, METHOD_NOT_FOUND = -32600, -32601
INVALID_STATE, PROVIDER_FAILURE = -32602, -32603
UNSUPPORTED = -32001
# Hosts tell "not offered" from "broken" by this exact code and sentence: never reword it.
UNSUPPORTED_MESSAGE = "this sandbox provider does not support it"

# Every flag present, each one true only if this file serves it (a host believes what it reads here).
CAPABILITIES = {
    "exec": {"streaming": False, "cancel": False},
    "stdio": False,
    "fs": {"native": False, "upload": False, "download": False},
    "grep": False,
    "glob": False,
    "previewUrls": False,
    "snapshots": {"dockerfile": False},
    "network": {"modes": []},  # a mode listed here is a promise; the sketch's create cannot even ask for one
    "lifecycle": {"stop": True, "autoStop": False},
    "clone": {"github": False},
}

# Methods of the sketch whose capability is declared false above: refused, never half-served.
UNDECLARED = {"exec/stream", "fs/readFile", "fs/writeFile", "fs/listDirectory", "fs/grep", "fs/glob",
              "net/previewUrl", "sandbox/setAutostop"}


class Failure(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # already gone


def end_processes(sandbox: dict[str, Any]) -> None:
    """End every process group a command of this sandbox started, background jobs (`sleep 300 &`) included."""
    for pgid in list(sandbox["groups"]):
        kill_group(pgid)


class Plugin:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="example-sketch-"))
        self.sandboxes: dict[str, dict[str, Any]] = {}  # id -> {"dir": Path, "state": str}
        self.lock = threading.Lock()
        self.out_lock = threading.Lock()

    # -- the wire --------------------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        # stdout carries protocol messages only, one per line; logs go to stderr.
        line = json.dumps(message, separators=(",", ":")) + "\n"
        with self.out_lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    def serve(self) -> None:
        threads = []
        for line in sys.stdin:
            if not line.strip():
                continue  # blank lines are skipped, never answered
            try:
                request = json.loads(line)
            except ValueError:
                self.send({"jsonrpc": "2.0", "id": None,
                           "error": {"code": INVALID_REQUEST, "message": "malformed JSON-RPC request"}})
                continue
            if not isinstance(request, dict) or not isinstance(request.get("method"), str):
                # a batch (a JSON array) or anything else that is no request: one error object, never an array
                self.send({"jsonrpc": "2.0", "id": None,
                           "error": {"code": INVALID_REQUEST, "message": "not a JSON-RPC request"}})
                continue
            if "id" not in request:
                continue  # a notification is never answered
            if request["method"] == "shutdown":
                self.send({"jsonrpc": "2.0", "id": request["id"], "result": {}})
                break  # answer first, then stop reading and exit
            # One thread per request: a slow command must not hold up an unrelated quick request.
            thread = threading.Thread(target=self.answer, args=(request,), daemon=True)
            thread.start()
            threads.append(thread)
        self.close()

    def answer(self, request: dict[str, Any]) -> None:
        method, params = request["method"], request.get("params")
        params = params if isinstance(params, dict) else {}
        try:
            if method in UNDECLARED:
                raise Failure(UNSUPPORTED, UNSUPPORTED_MESSAGE)
            handler = getattr(self, "m_" + method.replace("/", "_"), None)
            if handler is None:
                raise Failure(METHOD_NOT_FOUND, f"unknown method: {method}")
            reply: dict[str, Any] = {"result": handler(params)}
        except Failure as failure:
            reply = {"error": {"code": failure.code, "message": failure.message}}
        except (KeyError, TypeError, ValueError) as exc:
            reply = {"error": {"code": INVALID_STATE, "message": f"missing or invalid params: {exc}"}}
        except Exception as exc:  # noqa: BLE001 - a bug here must still be an answer, not a hang
            reply = {"error": {"code": PROVIDER_FAILURE, "message": f"{method} failed: {exc}"}}
        self.send({"jsonrpc": "2.0", "id": request["id"], **reply})

    def close(self) -> None:
        # Exiting (shutdown, or the host closed stdin) ends every sandbox's processes: a plugin that
        # leaves them behind leaks them onto the host's machine.
        with self.lock:
            sandboxes = list(self.sandboxes.values())
        for found in sandboxes:
            end_processes(found)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- methods ---------------------------------------------------------------------------------

    def m_initialize(self, params: dict[str, Any]) -> Any:
        asked = params.get("protocolVersion", PROTOCOL_VERSION)
        if asked != PROTOCOL_VERSION:
            # Refuse a version this plugin does not speak, naming both, in words a person can read.
            raise Failure(INVALID_STATE, f"plugin speaks protocol version {PROTOCOL_VERSION} "
                                         f"but the host asked for {asked}")
        return {"protocolVersion": PROTOCOL_VERSION,
                "provider": {"kind": KIND, "version": "0.1.0", "displayName": "example sketch plugin"},
                "capabilities": CAPABILITIES}

    def sandbox(self, params: dict[str, Any]) -> dict[str, Any]:
        sandbox_id = params["id"]
        with self.lock:
            found = self.sandboxes.get(sandbox_id)
        if found is None:
            raise Failure(INVALID_STATE, f"no such sandbox: {sandbox_id}")
        return found

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        if params.get("snapshot_tag") is not None:
            # Never ignore what a request asks for: refuse what this plugin cannot honour.
            raise Failure(INVALID_STATE, f"snapshot_tag: no snapshot {params['snapshot_tag']!r}: this plugin keeps none")
        sandbox_id = "sb-" + uuid.uuid4().hex[:16]
        directory = self.root / sandbox_id
        directory.mkdir()
        with self.lock:
            self.sandboxes[sandbox_id] = {"dir": directory, "state": "running", "groups": set()}
        return {"id": sandbox_id, "state": "running", "snapshot_tag": None}

    def m_sandbox_describe(self, params: dict[str, Any]) -> Any:
        found = self.sandbox(params)
        return {"id": params["id"], "state": found["state"]}

    def m_sandbox_start(self, params: dict[str, Any]) -> Any:
        found = self.sandbox(params)
        found["state"] = "running"
        return {"id": params["id"], "state": "running"}

    def m_sandbox_stop(self, params: dict[str, Any]) -> Any:
        found = self.sandbox(params)
        found["state"] = "stopped"
        end_processes(found)  # a stopped sandbox runs nothing
        return {}

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        sandbox_id = params["id"]
        with self.lock:
            found = self.sandboxes.pop(sandbox_id, None)
        if found is not None:
            end_processes(found)  # deleting a sandbox ends what runs in it, then removes its files
            shutil.rmtree(found["dir"], ignore_errors=True)
        # Idempotent: an unknown or already-deleted id is already gone, and that is a success.
        return {"id": sandbox_id, "deleted": True}

    def m_sandbox_reclaim(self, params: dict[str, Any]) -> Any:
        return {}

    def m_exec(self, params: dict[str, Any]) -> Any:
        args = params["args"]
        if not isinstance(args, list) or not args or not all(isinstance(a, str) for a in args):
            raise Failure(INVALID_STATE, "args must be a non-empty list of strings")
        found = self.sandbox(params)
        if found["state"] != "running":
            raise Failure(INVALID_STATE, f"sandbox {params['id']} is {found['state']}")
        timeout = params.get("timeout_secs", 30)
        try:
            # An argument vector, no shell: the host folds cwd and env into it (`bash -c ...`) itself.
            # start_new_session: a timeout kills the command's whole process group, children too.
            proc = subprocess.Popen(args, cwd=found["dir"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            # The command could not start: the infrastructure failed, not the command.
            return {"exit_code": None, "stdout": "", "stderr": str(exc), "termination": "exited",
                    "stage": "exec", "outcome_kind": "infra"}
        found["groups"].add(proc.pid)  # its process group: the command's pid (start_new_session)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
            termination = "exited"
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            stdout, stderr = proc.communicate()
            termination = "timed_out"  # a timeout is an outcome of the command, not an error of the call
        # The sketch's stdout/stderr are JSON strings: bytes that are not UTF-8 cannot travel exactly.
        return {"exit_code": proc.returncode if proc.returncode >= 0 else None,
                "stdout": stdout.decode("utf-8", errors="replace"),
                "stderr": stderr.decode("utf-8", errors="replace"),
                "termination": termination, "stage": "exec", "outcome_kind": "ran"}


if __name__ == "__main__":
    Plugin().serve()
