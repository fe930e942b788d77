#!/usr/bin/env python3
"""A minimal sandbox-driver protocol v1 plugin: a starting point, not a product.

JSON-RPC 2.0 over stdio, one message per line; bytes travel base64-encoded inside JSON (v1 §2, §6).
Sandboxes are directories under a temporary root; commands run as ``bash -c`` with ``subprocess``.
Standard library only.

It serves the v1 core: the handshake, health and shutdown, sandbox create/attach/list/describe/
platform_info/start/stop/delete, exec/run and exec/stream (live and separated output), the file methods,
control-plane events for calls that ask for them, and output sanitization. Every optional capability
is declared false and its methods are refused as ``unsupported`` (v1 §5), which is what the suite
expects of an undeclared capability.

Run the suite against it from the repository root:

    .venv/bin/sandbox-conformance run --plugin "python3 examples/v1/plugin.py"
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import os
import platform
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from events import Events, timestamp
from sanitize import Sanitizer

PROTOCOL_VERSION = 1
KIND = "example-v1"  # lowercase letters, digits and interior hyphens, at most 64 bytes (v1 §4)
INVALID_REQUEST, METHOD_NOT_FOUND, APPLICATION_ERROR = -32600, -32601, -32000



def flags(*names: str) -> dict[str, bool]:
    return dict.fromkeys(names, False)


# Every group and every flag is present (v1 §5); a flag is true only where this file does the work.
CAPABILITIES: dict[str, Any] = {
    "isolation": "none",  # commands run as the plugin's user, on this machine: say so
    "lifecycle": flags("pause", "archive", "fork", "resize", "recover", "undelete", "refresh_activity",
                       "timers", "labels", "update_network", "snapshot_sandbox"),
    "exec": {**flags("stdin", "stdio_process", "stdin_stream", "environment"),
             "live_streaming": True, "streams_separated": True,  # output is sent as it is read, per stream
             "cancel": True},  # see m_exec_cancel for why even a minimal plugin needs exec/cancel
    "fs": {"native": True, "upload": True, "download": True, "permissions": False},
    "search": flags("supported", "native"), "git": flags("supported", "native"),
    "services": flags("supported", "native"),
    "pty": None, "logs": None, "snapshots": None, "volumes": None,  # null: the whole group is absent
    "access": flags("preview_urls", "signed_preview_urls", "ssh", "ssh_ttl", "ssh_revoke", "shell_command",
                    "web_terminal", "vnc", "vpn"),
    "network": flags("allow_all", "block_all", "cidr_allow_list", "domain_allow_list", "outbound_proxy"),
}

# Methods behind an undeclared capability, with the dotted name the refusal must carry (v1 §5, §7).
# A method that is in neither this table nor the class is unknown: -32601.
UNSUPPORTED = {
    **dict.fromkeys(("sandbox/pause", "sandbox/resume"), "lifecycle.pause"),
    **{f"sandbox/{verb}": f"lifecycle.{verb}" for verb in (
        "archive", "recover", "refresh_activity", "undelete", "fork", "resize", "update_network")},
    "sandbox/snapshot": "lifecycle.snapshot_sandbox", "sandbox/set_timers": "lifecycle.timers",
    "sandbox/set_labels": "lifecycle.labels",
    **dict.fromkeys([f"exec/stdio_{verb}" for verb in ("open", "input", "close_input", "output", "terminate",
                                                        "wait")], "exec.stdio_process"),
    **dict.fromkeys([f"pty/{verb}" for verb in ("open", "input", "output", "resize", "close")], "pty"),
    "logs/follow": "logs", "fs/set_permissions": "fs.permissions",
    **dict.fromkeys([f"snapshot/{verb}" for verb in ("create", "get", "list", "delete", "build_logs")],
                    "snapshots"),
    "snapshot/activate": "snapshots.activation", "snapshot/deactivate": "snapshots.activation",
    **dict.fromkeys([f"volume/{verb}" for verb in ("create", "get", "list", "delete")], "volumes"),
    "access/preview_url": "access.preview_urls", "access/signed_preview_url": "access.preview_urls.signed",
    "access/ssh_create": "access.ssh", "access/ssh_revoke": "access.ssh.revoke",
    "access/web_terminal": "access.web_terminal", "access/vnc": "access.vnc",
}
# Creation-spec fields this plugin cannot honour, with the value that means "not asked for". Anything
# else is refused as invalid_spec naming the field: never silently ignored (v1 §8.2).
UNHONOURED = {"user": None, "sandbox_kind": None, "region": None, "public": None, "provider_config": None,
              "ephemeral": False, "volumes": [], "workspace_ownership": None, "working_directory": None,
              "network": "provider_default"}
EVENT_ACTIONS = {"sandbox/create": "create", "sandbox/attach": "attach", "sandbox/start": "start",
                 "sandbox/stop": "stop", "sandbox/delete": "delete"}


class Failure(Exception):
    """A JSON-RPC error answer."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.error = {"code": code, "message": message, **({"data": data} if data else {})}


def app_error(kind: str, message: str, **detail: Any) -> Failure:
    """An application failure: -32000 with a typed report (v1 §7). Hosts branch on report.kind and
    detail, never on the message; retrying fixes none of the kinds this plugin raises."""
    report = {"kind": kind, "message": message, "retryable": False, "causes": []}
    return Failure(APPLICATION_ERROR, message, {"report": report, **({"detail": detail} if detail else {})})


def invalid_spec(field: str, reason: str) -> Failure:
    return app_error("invalid_spec", f"invalid spec: {field}: {reason}", field=field, reason=reason)


def not_found(resource: str, resource_id: str) -> Failure:
    return app_error("not_found", f'{resource.capitalize()} "{resource_id}" was not found',
                     resource=resource, id=resource_id)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")  # standard alphabet, with padding (v1 §6)


class Capture:
    """The retained copy of one stream: all of it, or a head of limit/2 bytes plus a rolling tail (v1 §9)."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.head, self.tail, self.observed = limit, bytearray(), bytearray(), 0

    def add(self, chunk: bytes) -> None:
        self.observed += len(chunk)
        if self.limit is None:
            self.head += chunk
            return
        room = self.limit // 2 - len(self.head)
        self.head += chunk[:max(room, 0)]
        self.tail += chunk[max(room, 0):]
        del self.tail[:max(len(self.tail) - (self.limit - self.limit // 2), 0)]

    def stats(self, truncated: bool) -> dict[str, Any]:
        kept = len(self.head) + len(self.tail)  # retained + omitted == observed, always
        return {"observed_bytes": self.observed, "retained_bytes": kept, "omitted_bytes": self.observed - kept,
                "truncated": truncated}  # true: output was abandoned, so the counts undercount


class Plugin:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="example-v1-"))
        self.sandboxes: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.out_lock = threading.Lock()
        self.events = Events(KIND, self.send)
        self.cancels: dict[str, threading.Event] = {}  # exec id -> its cancel request, while it runs

    # -- the wire (v1 §2, §3) --------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        # stdout carries protocol messages only, one per line (json.dumps escapes every newline);
        # diagnostics go to stderr.
        line = json.dumps(message, separators=(",", ":")) + "\n"
        with self.out_lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    def serve(self) -> None:
        for line in sys.stdin.buffer:
            if not line.strip():
                continue  # blank lines are skipped, never answered
            try:
                request = json.loads(line)
            except ValueError:
                request = None
            request_id = request.get("id") if isinstance(request, dict) else None
            if (not isinstance(request, dict) or request.get("jsonrpc") != "2.0"
                    or not isinstance(request.get("method", ""), str)
                    or ("id" in request and (type(request_id) is not int or request_id < 0))):
                # Not a request this protocol defines (a batch, no jsonrpc, an id that is no unsigned
                # integer): one error object under id 0, which is why a host numbers its requests from 1.
                self.send({"jsonrpc": "2.0", "id": 0,
                           "error": {"code": INVALID_REQUEST, "message": "malformed message"}})
                continue
            if "id" not in request or "method" not in request:
                continue  # a notification (or a stray response) is never answered
            if request["method"] == "shutdown":
                self.send({"jsonrpc": "2.0", "id": request_id, "result": None})
                break  # answer first, then stop reading and exit (v1 §8.9)
            # One thread per request: a slow command never holds up an unrelated quick request (v1 §2).
            threading.Thread(target=self.answer, args=(request,), daemon=True).start()
        self.close()

    def close(self) -> None:
        # Shutdown, or the host closed our stdin: end every sandbox's processes and files, then exit.
        with self.lock:
            for sandbox in self.sandboxes.values():
                end_processes(sandbox)
        shutil.rmtree(self.root, ignore_errors=True)

    def answer(self, request: dict[str, Any]) -> None:
        method, params = request["method"], request.get("params")
        params = params if isinstance(params, dict) else {}
        route = params.get("events") if method in EVENT_ACTIONS else None
        operation = self.events.start(route, EVENT_ACTIONS[method], params) if isinstance(route, dict) else None
        try:
            if method in UNSUPPORTED:
                capability = UNSUPPORTED[method]
                raise app_error("unsupported", f"capability {capability} is not supported by this provider",
                                capability=capability)
            handler = getattr(self, "m_" + method.replace("/", "_"), None)
            if handler is None:
                raise Failure(METHOD_NOT_FOUND, f"unknown method {method}")
            try:
                result = handler(params)
            except (KeyError, TypeError, AttributeError) as exc:  # params that do not decode (v1 §7)
                raise Failure(INVALID_REQUEST, f"invalid params for {method}: {exc!r}") from None
            reply: dict[str, Any] = {"result": result}
        except Failure as failure:
            reply = {"error": failure.error}
        if operation is not None:  # the terminal event goes out before the answer (v1 §10)
            self.events.end(operation, reply)
        self.send({"jsonrpc": "2.0", "id": request["id"], **reply})

    # -- session ---------------------------------------------------------------------------------

    def m_initialize(self, params: dict[str, Any]) -> Any:
        asked = params["protocol_version"]
        if asked != PROTOCOL_VERSION:
            # Refuse by name, both versions in the words, never a decode error (v1 §4).
            raise invalid_spec("protocol_version", f"plugin speaks protocol version {PROTOCOL_VERSION} "
                                                   f"but the host asked for {asked}")
        return {"protocol_version": PROTOCOL_VERSION, "provider": {"kind": KIND, "version": "0.1.0"},
                "capabilities": CAPABILITIES}

    def m_provider_health(self, params: dict[str, Any]) -> Any:
        return {"health": {"status": "ok", "message": None, "missing_permissions": []}}

    # -- sandboxes (v1 §8.1-8.3) -----------------------------------------------------------------

    def sandbox(self, sandbox_id: str) -> dict[str, Any]:
        with self.lock:
            found = self.sandboxes.get(sandbox_id)
        if found is None:
            raise not_found("sandbox", sandbox_id)
        return found

    def status(self, sandbox: dict[str, Any]) -> dict[str, Any]:
        return {"id": sandbox["id"], "name": sandbox["name"], "state": sandbox["state"],
                "provider_state": sandbox["state"], "error_reason": None, "resources": None, "sandbox_kind": None,
                "region": None, "labels": sandbox["labels"], "image": None, "snapshot": None, "network": None,
                "web_url": None, "created_at": timestamp(sandbox["created_at"]), "updated_at": None}

    def handle(self, sandbox: dict[str, Any]) -> dict[str, Any]:
        return {"status": self.status(sandbox), "capabilities": CAPABILITIES,
                "working_directory": str(sandbox["dir"]), "runtime_directory": None}

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        if spec["source"] != "host_directory":
            raise invalid_spec("source", "only host_directory is supported")
        for field, unset in UNHONOURED.items():
            if spec.get(field, unset) != unset:
                raise invalid_spec(field, "not supported by this plugin")
        for group in ("resources", "timers"):
            for key, value in (spec.get(group) or {}).items():
                if value is not None:
                    raise invalid_spec(f"{group}.{key}", "not supported by this plugin")
        sandbox_id = "sb-" + uuid.uuid4().hex[:16]  # non-empty, <= 256 bytes, no whitespace (v1 §6)
        sandbox = {"id": sandbox_id, "name": spec.get("name"), "labels": dict(spec.get("labels") or {}),
                   "env": dict(spec.get("env") or {}), "dir": self.root / sandbox_id, "state": "running",
                   "created_at": time.time(), "groups": set()}
        sandbox["dir"].mkdir()
        with self.lock:
            self.sandboxes[sandbox_id] = sandbox
        return self.handle(sandbox)

    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        return self.handle(self.sandbox(params["sandbox_id"]))

    def m_sandbox_describe(self, params: dict[str, Any]) -> Any:
        return {"status": self.status(self.sandbox(params["sandbox_id"]))}

    def m_sandbox_list(self, params: dict[str, Any]) -> Any:
        wanted = (params.get("filter") or {}).get("labels") or {}  # a sandbox carrying all of them
        with self.lock:
            found = list(self.sandboxes.values())
        return {"sandboxes": [self.status(s) for s in found if wanted.items() <= s["labels"].items()]}

    def m_sandbox_platform_info(self, params: dict[str, Any]) -> Any:
        self.sandbox(params["sandbox_id"])
        return {"platform": {"os": sys.platform, "arch": platform.machine(), "version": platform.release()}}

    def m_sandbox_start(self, params: dict[str, Any]) -> Any:
        self.sandbox(params["sandbox_id"])["state"] = "running"
        return None  # an empty result: null, as upstream writes it ({} is read the same)

    def m_sandbox_stop(self, params: dict[str, Any]) -> Any:
        sandbox = self.sandbox(params["sandbox_id"])
        sandbox["state"] = "stopped"
        end_processes(sandbox)  # a stopped sandbox runs nothing; its files stay
        return None

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        with self.lock:
            sandbox = self.sandboxes.pop(params["sandbox_id"], None)
        if sandbox is not None:
            end_processes(sandbox)
            shutil.rmtree(sandbox["dir"], ignore_errors=True)
        return None  # idempotent: an unknown or already-deleted id succeeds (v1 §8.3)

    def m_stream_cancel(self, params: dict[str, Any]) -> Any:
        params["stream_id"]  # required; this plugin has no streams (no logs), so there is nothing to end
        return None

    # -- exec (v1 §8.4, §9) ----------------------------------------------------------------------

    def run(self, params: dict[str, Any], on_output: Any = None, retain: int | None = None,
            cancel: threading.Event | None = None) -> dict[str, Any]:
        spec = params["spec"]
        command, spec_env = spec["command"], spec["env"]  # env is required, even when empty
        mode = spec.get("output_sanitization") or "raw"
        if mode not in ("raw", "strip_ansi", "strip_all"):
            raise Failure(INVALID_REQUEST, f"invalid params: unknown output_sanitization {mode!r}")
        if spec.get("stdin_b64") is not None:
            raise app_error("unsupported", "capability exec.stdin is not supported by this provider",
                            capability="exec.stdin")
        sandbox = self.sandbox(params["sandbox_id"])
        if sandbox["state"] != "running":
            raise app_error("invalid_state", f"cannot run a command in a sandbox in state {sandbox['state']}",
                            current=sandbox["state"], action="unknown")
        cwd = sandbox["dir"] / (spec.get("working_dir") or "")  # relative paths resolve in the sandbox
        if not cwd.is_dir():
            raise invalid_spec("working_dir", f"{spec.get('working_dir')} is not a directory")
        # The command's environment: ours, then the sandbox's, then the command's; BASH_ENV never, as bash
        # would source that file before the command (v1 §8.4).
        env = {**os.environ, **sandbox["env"], **spec_env}
        env.pop("BASH_ENV", None)
        timeout_ms = spec.get("timeout_ms")
        timeout_s = 3600.0 if timeout_ms is None else timeout_ms / 1000  # v1: null means the 3600 s default
        started = time.monotonic()
        try:
            # bash -c: non-login, no errexit or pipefail, never sh. start_new_session: the command leads its
            # own process group, so a timeout ends it together with its children.
            proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise app_error("io", f"could not start the command: {exc}", io_context="spawn") from None
        sandbox["groups"].add(proc.pid)
        captures = {"stdout": Capture(retain), "stderr": Capture(retain)}

        def pump(stream: str, pipe: Any) -> None:
            sanitizer = Sanitizer(mode)  # one per stream: a sequence open on stdout takes nothing from stderr
            for chunk in itertools.chain(iter(lambda: pipe.read1(65536), b""), [None]):
                data = sanitizer.feed(chunk) if chunk is not None else sanitizer.finish()
                if data:
                    captures[stream].add(data)
                    if on_output is not None:
                        on_output(stream, data)

        readers = [threading.Thread(target=pump, args=(name, pipe), daemon=True)
                   for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr))]
        for reader in readers:
            reader.start()
        termination = "exited"
        while proc.poll() is None:
            if time.monotonic() - started >= timeout_s or (cancel is not None and cancel.is_set()):
                # A timeout or a cancel is an outcome, answered normally with its termination, never an
                # error (v1 §8.4). TERM first, so the command's handlers run; KILL if it lingers.
                termination = "timed_out" if time.monotonic() - started >= timeout_s else "cancelled"
                stop_group(proc)
            time.sleep(0.02)
        truncated = drain(readers, captures)
        code = proc.returncode
        return {"result": {"stdout_b64": b64(bytes(captures["stdout"].head + captures["stdout"].tail)),
                           "stderr_b64": b64(bytes(captures["stderr"].head + captures["stderr"].tail)),
                           # a command ended by signal N has no exit code; it has a signal
                           "exit_code": code if code >= 0 else None, "signal": -code if code < 0 else None,
                           "termination": termination,
                           "duration_ms": int((time.monotonic() - started) * 1000)},
                "stdout_capture": captures["stdout"].stats(truncated),
                "stderr_capture": captures["stderr"].stats(truncated)}

    def m_exec_run(self, params: dict[str, Any]) -> Any:
        return self.run(params)["result"]

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        exec_id = params["exec_id"]

        def forward(stream: str, data: bytes) -> None:
            # Every exec/output goes out before the exec/stream answer, in the order it was read (v1 §9).
            self.send({"jsonrpc": "2.0", "method": "exec/output",
                       "params": {"exec_id": exec_id, "stream": stream, "data_b64": b64(data)}})

        cancel = threading.Event()
        with self.lock:
            self.cancels[exec_id] = cancel  # before the command starts: a cancel may come at once
        try:
            # retained_output_limit bounds only the copy in the answer; every byte is still sent as output.
            run = self.run(params, on_output=forward, retain=params.get("retained_output_limit"), cancel=cancel)
        finally:
            with self.lock:
                self.cancels.pop(exec_id, None)
        return {**run, "streams_separated": True, "live_streaming": True}  # both as declared, both true

    def m_exec_cancel(self, params: dict[str, Any]) -> Any:
        # v1 §9: cancelling an exec id that is unknown or already finished succeeds and changes nothing —
        # a rule with no capability attached, so a plugin must answer exec/cancel whatever it declares
        # (the suite checks it: stream-cancel-idle). Declaring exec.cancel, and cancelling for real, is
        # the honest way to have the method at all.
        with self.lock:
            cancel = self.cancels.get(params["exec_id"])
        if cancel is not None:
            cancel.set()
        return None

    # -- files (v1 §8.5) -------------------------------------------------------------------------

    def path(self, params: dict[str, Any], key: str = "path") -> Path:
        return self.sandbox(params["sandbox_id"])["dir"] / params[key]  # relative: in the sandbox's directory

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        path = self.path(params)
        try:
            with path.open("rb") as handle:
                handle.seek(params.get("offset") or 0)  # offset defaults to 0, length to the end of the file
                data = handle.read() if params.get("length") is None else handle.read(params["length"])
        except FileNotFoundError:
            raise not_found("file", params["path"]) from None
        except OSError as exc:
            raise app_error("io", f"read: {exc.strerror}", io_context="read") from None
        return {"content_b64": b64(data)}

    def m_fs_write(self, params: dict[str, Any]) -> Any:
        path = self.path(params)
        try:
            data = base64.b64decode(params["content_b64"], validate=True)
        except binascii.Error:
            raise invalid_spec("content_b64", "not valid base64") from None
        path.parent.mkdir(parents=True, exist_ok=True)  # a write creates missing parents
        with path.open("ab" if params.get("append") else "wb") as handle:
            handle.write(data)
        return None

    def m_fs_exists(self, params: dict[str, Any]) -> Any:
        return {"exists": os.path.lexists(self.path(params))}

    def m_fs_metadata(self, params: dict[str, Any]) -> Any:
        try:
            info = self.path(params).lstat()  # lstat: a symlink is described as one, not as its target
        except FileNotFoundError:
            raise not_found("file", params["path"]) from None
        return {"metadata": {"kind": kind(info.st_mode), "size": info.st_size, "mode": stat.S_IMODE(info.st_mode),
                             "modified_at": timestamp(info.st_mtime)}}

    def m_fs_list_dir(self, params: dict[str, Any]) -> Any:
        root, depth = self.path(params), params["depth"]
        if not root.is_dir():
            raise not_found("file", params["path"])
        entries = []

        def walk(directory: Path, level: int) -> None:
            for child in sorted(directory.iterdir()):
                info = child.lstat()
                entries.append({"path": str(child.relative_to(root)), "kind": kind(info.st_mode),
                                "size": info.st_size if stat.S_ISREG(info.st_mode) else None})
                if stat.S_ISDIR(info.st_mode) and level < depth:  # depth 1: the immediate children
                    walk(child, level + 1)

        if depth > 0:
            walk(root, 1)
        return {"entries": entries}

    def m_fs_create_dir(self, params: dict[str, Any]) -> Any:
        self.path(params).mkdir(parents=True, exist_ok=True)
        return None

    def m_fs_rename(self, params: dict[str, Any]) -> Any:
        source, target = self.path(params, "from"), self.path(params, "to")
        if not os.path.lexists(source):
            raise not_found("file", params["from"])
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
        return None

    def m_fs_delete(self, params: dict[str, Any]) -> Any:
        path, recursive = self.path(params), params["recursive"]
        if path.is_dir() and not path.is_symlink():  # a link to a directory is removed, never followed
            if recursive:
                shutil.rmtree(path)
            elif any(path.iterdir()):
                raise invalid_spec("recursive", f"{params['path']} is a non-empty directory")
            else:
                path.rmdir()
        elif os.path.lexists(path):
            path.unlink()
        return None


def kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    return "directory" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = 2.0) -> None:
    """SIGTERM to the command's process group, then SIGKILL if it still runs after the grace."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace_s)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)


def drain(readers: list[threading.Thread], captures: dict[str, Capture], idle_s: float = 5.0) -> bool:
    """Let the readers finish the output after the command ended; whether output was abandoned. A
    background job (`sleep 300 &`) may hold the pipes open forever: give up once no byte came for
    ``idle_s``, but never while output still flows (a large backlog is not a hang)."""
    seen, quiet_since = -1, time.monotonic()
    while any(reader.is_alive() for reader in readers):
        observed = sum(capture.observed for capture in captures.values())
        if observed != seen:
            seen, quiet_since = observed, time.monotonic()
        elif time.monotonic() - quiet_since > idle_s:
            return True
        for reader in readers:
            reader.join(timeout=0.05)
    return False


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # already gone


def end_processes(sandbox: dict[str, Any]) -> None:
    """End every process group a command of this sandbox started, background jobs included."""
    for pgid in list(sandbox["groups"]):
        kill_group(pgid)


if __name__ == "__main__":
    Plugin().serve()
