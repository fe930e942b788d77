#!/usr/bin/env python3
"""A minimal sandbox-driver protocol v2 plugin: a starting point, not a product.

JSON-RPC 2.0 over stdio carries control only; every byte a command or a file moves rides a data
channel of its own (``channel.py``, v2 §2.1). Sandboxes are directories under one root shared by every
process of this plugin (v2 §8.1: a delete names only the sandbox's id, whichever process receives it);
commands are argument vectors run with ``subprocess``, no shell. Standard library only.

It serves the v2 core: the handshake (with the data transport), health and shutdown, sandbox
create/attach/list/describe/platform_info/start/stop/delete, exec/stream, the file methods, control-plane
events for calls that ask for them, output sanitization and the transport limits a peer enforces.
Every optional capability is declared false and its methods are refused as ``unsupported`` (v2 §5),
which is what the suite expects of an undeclared capability.

Run the suite against it from the repository root:

    .venv/bin/sandbox-conformance run --plugin "python3 examples/v2/plugin.py"

The sandboxes' root is $EXAMPLE_PLUGIN_ROOT (default: example-v2-sandboxes in the temporary directory).
"""

from __future__ import annotations

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

from channel import STDERR, STDOUT, Channel, ChannelError
from events import Events, timestamp
from sanitize import Sanitizer

PROTOCOL_VERSION = 2
KIND = "example-v2"  # lowercase letters, digits and interior hyphens, at most 64 bytes (v2 §4)
INVALID_REQUEST, METHOD_NOT_FOUND, APPLICATION_ERROR = -32600, -32601, -32000
CONTROL_MESSAGE_BYTES = 1024 * 1024  # the longest control line either side reads or writes (v2 §6.2)
ROOT = Path(os.environ.get("EXAMPLE_PLUGIN_ROOT") or Path(tempfile.gettempdir(), "example-v2-sandboxes"))


def flags(*names: str) -> dict[str, bool]:
    return dict.fromkeys(names, False)


# Every group and every flag is present (v2 §5); a flag is true only where this file does the work.
CAPABILITIES: dict[str, Any] = {
    "isolation": "none",  # commands run as the plugin's user, on this machine: say so
    "lifecycle": flags("pause", "archive", "fork", "resize", "recover", "undelete", "refresh_activity",
                       "timers", "labels", "update_network", "snapshot_sandbox"),
    # v2 renamed v1's exec.cancel to exec.stop: name it once, never both.
    "exec": {**flags("stdin", "stop", "stdio_process", "stdin_stream", "environment"),
             "live_streaming": True, "streams_separated": True},  # output is sent as it is read, per stream
    "fs": {"native": True, "upload": True, "download": True, "permissions": False},
    "search": flags("supported", "native"), "git": flags("supported", "native"),
    "services": flags("supported", "native"),
    "pty": None, "logs": None, "snapshots": None, "volumes": None, "one_shot": None,  # null: group absent
    "access": flags("preview_urls", "signed_preview_urls", "ssh", "ssh_ttl", "ssh_revoke", "shell_command",
                    "web_terminal", "vnc", "vpn"),
    "network": flags("allow_all", "block_all", "cidr_allow_list", "domain_allow_list", "outbound_proxy"),
}

# Methods behind an undeclared capability, with the dotted name the refusal must carry (v2 §5, §7). A
# method in neither this table nor the class is unknown: -32601, as are the v1 methods v2 removed
# (exec/run, exec/cancel, exec/stdio_input, ...).
UNSUPPORTED = {
    **dict.fromkeys(("sandbox/pause", "sandbox/resume"), "lifecycle.pause"),
    **{f"sandbox/{verb}": f"lifecycle.{verb}" for verb in (
        "archive", "recover", "refresh_activity", "undelete", "fork", "resize", "update_network")},
    "sandbox/snapshot": "lifecycle.snapshot_sandbox", "sandbox/set_timers": "lifecycle.timers",
    "sandbox/set_labels": "lifecycle.labels", "exec/stop": "exec.stop", "sandbox/environment": "exec.environment",
    **dict.fromkeys(("exec/stdio_open", "exec/stdio_terminate", "exec/stdio_wait"), "exec.stdio_process"),
    **dict.fromkeys(("pty/open", "pty/resize", "pty/close"), "pty"),
    "logs/follow": "logs", "fs/set_permissions": "fs.permissions", "one_shot/run": "one_shot", "git/clone": "git",
    **dict.fromkeys([f"snapshot/{verb}" for verb in ("create", "get", "list", "delete", "build_logs")],
                    "snapshots"),
    "snapshot/activate": "snapshots.activation", "snapshot/deactivate": "snapshots.activation",
    **dict.fromkeys([f"volume/{verb}" for verb in ("create", "get", "list", "delete")], "volumes"),
    **dict.fromkeys(("access/preview_url", "access/preview_release"), "access.preview_urls"),
    "access/signed_preview_url": "access.preview_urls.signed",
    "access/ssh_create": "access.ssh", "access/ssh_revoke": "access.ssh.revoke",
    "access/web_terminal": "access.web_terminal", "access/vnc": "access.vnc",
}
# Creation-spec fields this plugin cannot honour, with the value that means "not asked for". Anything
# else is refused as invalid_spec naming the field: never silently ignored (v2 §8.2).
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
    """An application failure: -32000 with a typed report (v2 §7). Hosts branch on report.kind and
    detail, never on the message; only a transport failure may go away when retried."""
    report = {"kind": kind, "message": message, "retryable": kind == "transport", "causes": []}
    return Failure(APPLICATION_ERROR, message, {"report": report, **({"detail": detail} if detail else {})})


def invalid_spec(field: str, reason: str) -> Failure:
    return app_error("invalid_spec", f"invalid spec: {field}: {reason}", field=field, reason=reason)


def not_found(resource: str, resource_id: str) -> Failure:
    return app_error("not_found", f'{resource.capitalize()} "{resource_id}" was not found',
                     resource=resource, id=resource_id)




class Plugin:
    def __init__(self) -> None:
        ROOT.mkdir(parents=True, exist_ok=True)
        self.transport: dict[str, Any] | None = None  # the data transport of the first initialize
        self.groups: dict[str, set[int]] = {}  # sandbox id -> process groups this process started in it
        self.execs: set[str] = set()  # exec ids running now, in any sandbox
        self.lock = threading.Lock()
        self.execs_ended = threading.Condition(self.lock)  # notified whenever a running exec has answered
        self.out_lock = threading.Lock()
        self.events = Events(KIND, self.send)

    # -- the wire (v2 §2, §3) --------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        # stdout carries protocol messages only, one per line (json.dumps escapes every newline).
        line = json.dumps(message, separators=(",", ":")) + "\n"
        if len(line.encode()) > CONTROL_MESSAGE_BYTES and "id" in message:
            # An answer too long for the peer to read is replaced by a refusal that names the limit.
            error = app_error("limit_exceeded", f"control_message_bytes exceeds the {CONTROL_MESSAGE_BYTES} "
                              "byte buffer limit", limit="control_message_bytes", max_bytes=CONTROL_MESSAGE_BYTES)
            line = json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error.error}) + "\n"
        with self.out_lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    def serve(self) -> int:
        while line := sys.stdin.buffer.readline(CONTROL_MESSAGE_BYTES + 1):
            if len(line) > CONTROL_MESSAGE_BYTES:
                # A line past the limit cannot be read safely, nor skipped: the connection ends (v2 §6.2).
                print("example-v2: control message limit exceeded; closing", file=sys.stderr)
                self.close()
                return 1
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
                break  # answer first, then stop reading and exit (v2 §8.9)
            # One thread per request: a slow command never holds up an unrelated quick request (v2 §2).
            threading.Thread(target=self.answer, args=(request,), daemon=True).start()
        self.close()
        return 0

    def close(self) -> None:
        # Shutdown, or the host closed our stdin: end every command this process started (v2 §8.9 — a
        # shutdown cancels running commands, it does not wait for them). Sandboxes stay: they belong to
        # the provider, not to this process, and the host deletes them.
        with self.lock:
            for groups in self.groups.values():
                kill_groups(groups)
            # The killed commands' last output and eof follow within moments: let each channel end whole
            # (its eof sent) before exiting, rather than cut it short as an incomplete transfer.
            self.execs_ended.wait_for(lambda: not self.execs, timeout=2.0)

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
            except (KeyError, TypeError, AttributeError) as exc:  # params that do not decode (v2 §7)
                raise Failure(INVALID_REQUEST, f"invalid params for {method}: {exc!r}") from None
            except ChannelError as exc:
                raise app_error(exc.kind, exc.message, **exc.detail) from None
            reply: dict[str, Any] = {"result": result}
        except Failure as failure:
            reply = {"error": failure.error}
        if operation is not None:  # its terminal event before the answer (v2 allows either order)
            self.events.end(operation, reply)
        self.send({"jsonrpc": "2.0", "id": request["id"], **reply})

    # -- session ---------------------------------------------------------------------------------

    def m_initialize(self, params: dict[str, Any]) -> Any:
        asked = params["protocol_version"]
        if asked != PROTOCOL_VERSION:
            # Refuse by name, both versions in the words, never a decode error (v2 §4): a host that also
            # speaks version 1 reads this and starts over in it.
            raise invalid_spec("protocol_version", f"plugin speaks protocol version {PROTOCOL_VERSION} "
                                                   f"but the host asked for {asked}")
        transport = params["data_transport"]  # required in v2: without it, an invalid request
        if not isinstance(transport["socket_path"], str) or type(transport["max_frame_bytes"]) is not int:
            raise KeyError("data_transport")
        if transport["max_frame_bytes"] != 65536:
            raise invalid_spec("data_transport.max_frame_bytes", "must be 65536")
        if self.transport is None:  # a second initialize keeps the first transport: channels name it
            self.transport = transport
        return {"protocol_version": PROTOCOL_VERSION, "provider": {"kind": KIND, "version": "0.1.0"},
                "capabilities": CAPABILITIES}

    def m_provider_health(self, params: dict[str, Any]) -> Any:
        return {"health": {"status": "ok", "message": None, "missing_permissions": []}}

    def channel(self, params: dict[str, Any]) -> Channel:
        """Open the data channel a request names, before any of the operation's work."""
        if self.transport is None:
            raise app_error("transport", "a data channel was requested before initialize",
                            transport_context="no data transport")
        return Channel(self.transport, params["channel"])

    # -- sandboxes (v2 §8.1-8.3): one JSON record per sandbox beside its directory ---------------

    def sandbox(self, sandbox_id: str) -> dict[str, Any]:
        if not isinstance(sandbox_id, str) or not sandbox_id or "/" in sandbox_id or sandbox_id.startswith("."):
            raise not_found("sandbox", str(sandbox_id))  # never a path outside the root
        try:
            return json.loads((ROOT / f"{sandbox_id}.json").read_text())
        except (FileNotFoundError, ValueError):
            raise not_found("sandbox", sandbox_id) from None

    def save(self, sandbox: dict[str, Any]) -> None:
        record = ROOT / f"{sandbox['id']}.json"
        temporary = record.with_suffix(f".{uuid.uuid4().hex}.tmp")
        temporary.write_text(json.dumps(sandbox))
        temporary.replace(record)  # atomic: another process never reads half a record

    def status(self, sandbox: dict[str, Any]) -> dict[str, Any]:
        return {"id": sandbox["id"], "name": sandbox["name"], "state": sandbox["state"],
                "provider_state": sandbox["state"], "error_reason": None, "resources": None, "sandbox_kind": None,
                "region": None, "labels": sandbox["labels"], "image": None, "snapshot": None, "network": None,
                "web_url": None, "created_at": timestamp(sandbox["created_at"]), "updated_at": None}

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
        sandbox_id = "sb-" + uuid.uuid4().hex[:16]  # non-empty, <= 256 bytes, no whitespace (v2 §6)
        sandbox = {"id": sandbox_id, "name": spec.get("name"), "labels": dict(spec.get("labels") or {}),
                   "env": dict(spec.get("env") or {}), "state": "running", "created_at": time.time()}
        (ROOT / sandbox_id).mkdir()
        self.save(sandbox)
        return self.m_sandbox_attach({"sandbox_id": sandbox_id})

    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        sandbox = self.sandbox(params["sandbox_id"])
        return {"status": self.status(sandbox), "capabilities": CAPABILITIES,
                "working_directory": str(ROOT / sandbox["id"]), "runtime_directory": None}

    def m_sandbox_describe(self, params: dict[str, Any]) -> Any:
        return {"status": self.status(self.sandbox(params["sandbox_id"]))}

    def m_sandbox_list(self, params: dict[str, Any]) -> Any:
        wanted = (params.get("filter") or {}).get("labels") or {}  # a sandbox carrying all of them
        found = []
        for record in ROOT.glob("*.json"):
            try:
                sandbox = self.sandbox(record.stem)
            except Failure:
                continue  # deleted meanwhile
            if wanted.items() <= sandbox["labels"].items():
                found.append(self.status(sandbox))
        return {"sandboxes": found}

    def m_sandbox_platform_info(self, params: dict[str, Any]) -> Any:
        self.sandbox(params["sandbox_id"])
        return {"platform": {"os": sys.platform, "arch": platform.machine(), "version": platform.release()}}

    def m_sandbox_start(self, params: dict[str, Any]) -> Any:
        self.save({**self.sandbox(params["sandbox_id"]), "state": "running"})
        return None  # an empty result: null, as upstream writes it ({} is read the same)

    def m_sandbox_stop(self, params: dict[str, Any]) -> Any:
        self.save({**self.sandbox(params["sandbox_id"]), "state": "stopped"})
        kill_groups(self.groups.get(params["sandbox_id"], set()))  # a stopped sandbox runs nothing
        return None

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        sandbox_id = params["sandbox_id"]
        try:
            self.sandbox(sandbox_id)
        except Failure:
            return None  # idempotent: an unknown or already-deleted id succeeds (v2 §8.3)
        kill_groups(self.groups.pop(sandbox_id, set()))
        (ROOT / f"{sandbox_id}.json").unlink(missing_ok=True)
        shutil.rmtree(ROOT / sandbox_id, ignore_errors=True)
        return None

    def m_stream_cancel(self, params: dict[str, Any]) -> Any:
        params["stream_id"]  # required; this plugin has no streams (no logs), so there is nothing to end
        return None

    # -- exec (v2 §8.4, §9) ----------------------------------------------------------------------

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        exec_id, spec = params["exec_id"], params["spec"]
        argv, spec_env = [spec["program"], *spec.get("args", [])], spec["env"]  # env is required, even empty
        if not all(isinstance(arg, str) for arg in argv) or not isinstance(spec_env, dict):
            raise KeyError("spec")
        mode = spec.get("output_sanitization") or "raw"
        if mode not in ("raw", "strip_ansi", "strip_all"):
            raise Failure(INVALID_REQUEST, f"invalid params: unknown output_sanitization {mode!r}")
        if params.get("stdin"):
            # Input needs exec.stdin (collected whole) or exec.stdin_stream (live); neither is declared.
            raise app_error("unsupported", "capability exec.stdin is not supported by this provider",
                            capability="exec.stdin")
        sandbox = self.sandbox(params["sandbox_id"])
        if sandbox["state"] != "running":
            raise app_error("invalid_state", f"cannot run a command in a sandbox in state {sandbox['state']}",
                            current=sandbox["state"], action="unknown")
        cwd = ROOT / sandbox["id"] / (spec.get("working_dir") or "")  # relative: in the sandbox's directory
        if not cwd.is_dir():
            raise invalid_spec("working_dir", f"{spec.get('working_dir')} is not a directory")
        with self.lock:
            if exec_id in self.execs:  # exec ids are unique per connection, across sandboxes
                raise invalid_spec("exec_id", "duplicate execution id")
            self.execs.add(exec_id)
        try:
            channel = self.channel(params)
            try:
                return self.run(sandbox, argv, spec, cwd, mode, channel)
            finally:
                channel.finish()  # this side's eof, before the answer, whatever the outcome
                channel.close()
        finally:
            with self.lock:
                self.execs.discard(exec_id)
                self.execs_ended.notify_all()

    def run(self, sandbox: dict[str, Any], argv: list[str], spec: dict[str, Any], cwd: Path, mode: str,
            channel: Channel) -> dict[str, Any]:
        # The environment reaches the program unchanged, BASH_ENV included: no shell runs unless the host
        # asks for `bash -c` itself (v2 §8.4 — unlike v1, which ran bash and stripped BASH_ENV).
        env = {**{k: v for k, v in os.environ.items() if k != "BASH_ENV"}, **sandbox["env"], **spec["env"]}
        timeout_ms = spec.get("timeout_ms")  # v2: null or absent means no timeout
        started = time.monotonic()
        try:
            # execvp semantics: a name is looked up on the PATH of `env`, a path is relative to cwd.
            # start_new_session: the command leads its own process group, which a timeout ends whole.
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            # A program that cannot start is a failure of the call, never a shell's exit code 127.
            raise app_error("io", f"could not start {argv[0]!r}: {exc.strerror}", io_context="spawn") from None
        with self.lock:
            self.groups.setdefault(sandbox["id"], set()).add(proc.pid)
        observed = {"stdout": 0, "stderr": 0}
        failures: list[ChannelError] = []
        abandoned = threading.Event()  # set: nothing more may go on the channel (its eof is next)

        def pump(stream: str, pipe: Any) -> None:
            sanitizer = Sanitizer(mode)  # one per stream: a sequence open on stdout takes nothing from stderr
            for chunk in itertools.chain(iter(lambda: pipe.read1(65536), b""), [None]):
                data = sanitizer.feed(chunk) if chunk is not None else sanitizer.finish()
                observed[stream] += len(data)
                if data and not failures and not abandoned.is_set():
                    try:
                        channel.send(STDOUT if stream == "stdout" else STDERR, data)
                    except ChannelError as exc:  # the host stopped reading: stop the command (below)
                        failures.append(exc)

        readers = [threading.Thread(target=pump, args=(name, pipe), daemon=True)
                   for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr))]
        for reader in readers:
            reader.start()
        termination = "exited"
        while proc.poll() is None:
            if timeout_ms is not None and time.monotonic() - started >= timeout_ms / 1000:
                termination = "timed_out"  # an outcome, answered normally; the plugin's own stop is a kill
                kill_groups({proc.pid})
            elif failures:
                termination = "cancelled"
                kill_groups({proc.pid})
            time.sleep(0.02)
        truncated = drain(readers, observed)
        abandoned.set()
        if failures:
            raise failures[0]
        code = proc.returncode
        result = {"exit_code": code if code >= 0 else None, "termination": termination,
                  "duration_ms": int((time.monotonic() - started) * 1000)}
        if code < 0:
            result["signal"] = -code  # ended by signal N: no exit code, and the signal says so
        # A v2 host keeps the retained copy from the frames; the plugin retains nothing and counts it all.
        captures = {f"{name}_capture": {"observed_bytes": count, "retained_bytes": 0, "omitted_bytes": count,
                                        "truncated": truncated} for name, count in observed.items()}
        return {"result": result, "streams_separated": True, "live_streaming": True, **captures}

    # -- files (v2 §8.5): contents ride the channel ----------------------------------------------

    def path(self, params: dict[str, Any], key: str = "path") -> Path:
        sandbox = self.sandbox(params["sandbox_id"])
        return ROOT / sandbox["id"] / params[key]  # relative paths resolve in the sandbox's directory

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        path = self.path(params)
        params["channel"]  # a request in v1's shape (no channel) is malformed: refused before any work
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            raise not_found("file", params["path"]) from None
        except OSError as exc:
            raise app_error("io", f"read: {exc.strerror}", io_context="read") from None
        with handle:
            handle.seek(params.get("offset") or 0)  # offset defaults to 0, length to the end of the file
            left = params.get("length")
            channel = self.channel(params)
            try:
                while chunk := handle.read(65536 if left is None else min(65536, left)):
                    channel.send(STDOUT, chunk)
                    left = None if left is None else left - len(chunk)
            finally:
                channel.finish()
                channel.close()
        return None

    def m_fs_write(self, params: dict[str, Any]) -> Any:
        path, expected = self.path(params), params.get("content_length")
        content = bytearray()
        channel = self.channel(params)
        try:
            # The whole content first, up to the host's eof: a frame rule broken on the way fails the write
            # before a byte reaches the file.
            channel.read_input(content.extend)
        finally:
            channel.finish()
            channel.close()
        if expected is not None and len(content) > expected:
            raise invalid_spec("content_length", f"{len(content)} bytes arrived, more than {expected}")
        if expected is not None and len(content) < expected:
            raise app_error("io", f"write: {len(content)} of {expected} bytes arrived", io_context="write")
        path.parent.mkdir(parents=True, exist_ok=True)  # a write creates missing parents
        with path.open("ab" if params.get("append") else "wb") as handle:
            handle.write(content)
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


def drain(readers: list[threading.Thread], observed: dict[str, int], idle_s: float = 5.0) -> bool:
    """Let the readers send the rest of the output after the command ended; whether output was
    abandoned. A background job (`sleep 300 &`) may hold the pipes open forever: give up once no byte
    came for ``idle_s``, but never while output still flows (a large backlog is not a hang)."""
    seen, quiet_since = -1, time.monotonic()
    while any(reader.is_alive() for reader in readers):
        if sum(observed.values()) != seen:
            seen, quiet_since = sum(observed.values()), time.monotonic()
        elif time.monotonic() - quiet_since > idle_s:
            return True
        for reader in readers:
            reader.join(timeout=0.05)
    return False


def kill_groups(groups: set[int]) -> None:
    """End these process groups (a command and whatever it started, background jobs included)."""
    for pgid in list(groups):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # already gone


if __name__ == "__main__":
    sys.exit(Plugin().serve())
