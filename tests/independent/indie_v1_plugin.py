#!/usr/bin/env python3
"""indie: an independent sandbox-driver protocol v1 plugin (Python stdlib only).

Sandboxes are directories on the host; commands run through `bash -c` as the
calling user (isolation "none").  Written from the v1 protocol text only.
See CHOICES.md next to this file for every free choice made.

Environment:
  INDIE_SANDBOX_ROOT  registry/workspace root (default: $TMPDIR/indie-v1-sandboxes-<uid>)
  INDIE_LOG           set to 1 to log requests to stderr
"""

import base64
import binascii
import fcntl
import json
import os
import platform
import queue
import re
import secrets
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time

KIND = "indie"
PLUGIN_VERSION = "0.3.1"
PROTOCOL_VERSION = 1

TERM_GRACE = 2.0          # cancel/timeout ladder: SIGTERM, grace, SIGKILL
DRAIN_GRACE = 5.0         # after the shell exits, wait this long for pipe EOF
DEFAULT_TIMEOUT_MS = 3600 * 1000
STDIO_CHUNK = 32 * 1024
PTY_CHUNK = 32 * 1024
STDERR_TAIL = 8 * 1024
READ_CHUNK = 64 * 1024
U64_MAX = 2 ** 64 - 1

BASH = shutil.which("bash") or "/bin/bash"
LOG = os.environ.get("INDIE_LOG") == "1"


def log(*parts):
    if LOG:
        print("[indie]", *parts, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# errors


class RpcError(Exception):
    """Envelope-level error (-32600 / -32601), carries no data."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class AppError(Exception):
    """Application failure, answered as -32000 with data.report/detail."""

    RETRYABLE = {"timeout", "rate_limited", "transport"}

    def __init__(self, kind, message, detail=None, causes=None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.detail = detail
        self.causes = causes or []

    def report(self):
        return {
            "kind": self.kind,
            "message": self.message,
            "retryable": self.kind in self.RETRYABLE,
            "causes": [c[:500] for c in self.causes[:8]],
        }

    def to_error(self):
        data = {"report": self.report()}
        if self.detail is not None:
            data["detail"] = self.detail
        return {"code": -32000, "message": self.message, "data": data}


def unsupported(cap):
    return AppError("unsupported", f"capability {cap} is not supported by this provider",
                    {"capability": cap})


def not_found(resource, ident):
    return AppError("not_found", f"{resource} {json.dumps(ident)} was not found",
                    {"resource": resource, "id": ident})


def invalid_spec(field, reason):
    return AppError("invalid_spec", f"invalid spec: {field}: {reason}",
                    {"field": field, "reason": reason})


def invalid_state(current, action):
    return AppError("invalid_state", f"cannot {action} a sandbox in state {current}",
                    {"current": current, "action": action})


def io_error(context, exc):
    msg = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return AppError("io", f"{context}: {msg}", {"io_context": context}, causes=[str(exc)])


def bad_params(method, why):
    return RpcError(-32600, f"invalid params for {method}: {why}")


# --------------------------------------------------------------------------
# wire


class Wire:
    def __init__(self):
        self.lock = threading.Lock()
        self.out = sys.stdout.buffer
        self.broken = False

    def send(self, obj):
        try:
            data = json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            data = json.dumps(obj, ensure_ascii=True).encode("utf-8")
        data += b"\n"
        with self.lock:
            if self.broken:
                return
            try:
                self.out.write(data)
                self.out.flush()
            except (BrokenPipeError, OSError, ValueError):
                self.broken = True

    def respond(self, rid, result):
        self.send({"id": rid, "result": result, "jsonrpc": "2.0"})

    def error(self, rid, err):
        self.send({"id": rid, "error": err, "jsonrpc": "2.0"})

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})


def b64e(data):
    return base64.b64encode(bytes(data)).decode("ascii")


def b64d(text, field):
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise invalid_spec(field, "not valid padded standard base64")


def now_ts():
    ns = time.time_ns()
    return {"secs_since_epoch": ns // 1_000_000_000, "nanos_since_epoch": ns % 1_000_000_000}


def dur(seconds):
    ns = max(0, int(seconds * 1_000_000_000))
    return {"secs": ns // 1_000_000_000, "nanos": ns % 1_000_000_000}


# --------------------------------------------------------------------------
# params


class Params:
    def __init__(self, method, params):
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise bad_params(method, "params must be an object")
        self.m = method
        self.p = params

    def _get(self, key, required):
        if key not in self.p or self.p[key] is None:
            if required:
                raise bad_params(self.m, f"missing field `{key}`")
            return None
        return self.p[key]

    def str(self, key, required=True):
        v = self._get(key, required)
        if v is None:
            return None
        if not isinstance(v, str):
            raise bad_params(self.m, f"`{key}` must be a string")
        return v

    def uint(self, key, required=True, maxv=U64_MAX):
        v = self._get(key, required)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > maxv:
            raise bad_params(self.m, f"`{key}` must be an unsigned integer <= {maxv}")
        return v

    def bool(self, key, required=True, default=False):
        v = self._get(key, required)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise bad_params(self.m, f"`{key}` must be a boolean")
        return v

    def obj(self, key, required=True):
        v = self._get(key, required)
        if v is None:
            return None
        if not isinstance(v, dict):
            raise bad_params(self.m, f"`{key}` must be an object")
        return v

    def strmap(self, key, required=True):
        v = self._get(key, required)
        if v is None:
            return {}
        return check_strmap(self.m, key, v)

    def sub(self, key, required=True):
        v = self.obj(key, required)
        return Params(self.m, v if v is not None else {})


def check_strmap(method, key, v):
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise bad_params(method, f"`{key}` must be an object of strings")
    return dict(v)


def check_id(field, value):
    if value == "":
        raise invalid_spec(field, f"invalid {field.replace('_', ' ')} \"\": must not be empty")
    if len(value.encode("utf-8")) > 256:
        raise invalid_spec(field, f"invalid {field.replace('_', ' ')}: exceeds 256 bytes")
    if any(c.isspace() or ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in value):
        raise invalid_spec(field, f"invalid {field.replace('_', ' ')} {json.dumps(value)}: "
                                  "must not contain whitespace or control characters")
    return value


# --------------------------------------------------------------------------
# output sanitization (stateful across chunks)

_G, _ESC, _ESCI, _CSI, _STR, _STRESC, _STRC2, _C2 = range(8)


class Sanitizer:
    def __init__(self, mode):
        self.mode = mode
        self.state = _G
        self.osc = False
        if mode == "strip_all":
            self.fast = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x1b\xc2]")
        else:
            self.fast = re.compile(rb"[\x1b\xc2]")

    def feed(self, data):
        if self.mode == "raw":
            return data
        if self.state == _G and not self.fast.search(data):
            return data
        out = bytearray()
        i = 0
        n = len(data)
        strip_all = self.mode == "strip_all"
        while i < n:
            b = data[i]
            st = self.state
            if st == _G:
                if b == 0x1B:
                    self.state = _ESC
                elif b == 0xC2:
                    self.state = _C2
                elif strip_all and b < 0x20 and b not in (9, 10, 13):
                    pass
                else:
                    out.append(b)
                i += 1
            elif st == _C2:
                if 0x80 <= b <= 0x9F:
                    if b == 0x9B:
                        self.state = _CSI
                    elif b == 0x9D:
                        self.state, self.osc = _STR, True
                    elif b in (0x90, 0x98, 0x9E, 0x9F):
                        self.state, self.osc = _STR, False
                    else:
                        if not strip_all:
                            out += bytes((0xC2, b))
                        self.state = _G
                    i += 1
                else:
                    out.append(0xC2)
                    self.state = _G  # reprocess b in ground
            elif st == _ESC:
                if b == 0x5B:
                    self.state = _CSI
                elif b == 0x5D:
                    self.state, self.osc = _STR, True
                elif b in (0x50, 0x58, 0x5E, 0x5F):
                    self.state, self.osc = _STR, False
                elif 0x20 <= b <= 0x2F:
                    self.state = _ESCI
                elif 0x30 <= b <= 0x7E:
                    self.state = _G
                elif b == 0x1B:
                    self.state = _ESC
                else:
                    self.state = _G
                    continue  # lone ESC dropped, reprocess b
                i += 1
            elif st == _ESCI:
                if 0x20 <= b <= 0x2F:
                    i += 1
                elif 0x30 <= b <= 0x7E:
                    self.state = _G
                    i += 1
                else:
                    self.state = _G
            elif st == _CSI:
                if 0x20 <= b <= 0x3F:
                    i += 1
                elif 0x40 <= b <= 0x7E:
                    self.state = _G
                    i += 1
                else:
                    self.state = _G  # aborted sequence, reprocess b
            elif st == _STR:
                if b == 0x07 and self.osc:
                    self.state = _G
                elif b == 0x1B:
                    self.state = _STRESC
                elif b == 0xC2:
                    self.state = _STRC2
                i += 1
            elif st == _STRESC:
                if b == 0x5C:
                    self.state = _G
                    i += 1
                else:
                    self.state = _ESC  # a new escape ends the string
            elif st == _STRC2:
                if b == 0x9C:
                    self.state = _G
                    i += 1
                else:
                    self.state = _STR
        return bytes(out)

    def finish(self):
        if self.mode != "raw" and self.state == _C2:
            self.state = _G
            return b"\xc2"
        self.state = _G
        return b""


class Capture:
    def __init__(self, limit):
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.observed = 0
        self.truncated = False

    def add(self, data):
        self.observed += len(data)
        if self.limit is None:
            self.head += data
            return
        hl = self.limit // 2
        tl = self.limit - hl
        if len(self.head) < hl:
            take = min(hl - len(self.head), len(data))
            self.head += data[:take]
            data = data[take:]
        if data and tl > 0:
            self.tail += data
            if len(self.tail) > tl:
                del self.tail[: len(self.tail) - tl]

    def retained(self):
        return bytes(self.head) + bytes(self.tail)

    def stats(self):
        kept = len(self.head) + len(self.tail)
        out = {"observed_bytes": self.observed, "retained_bytes": kept,
               "omitted_bytes": self.observed - kept}
        if self.truncated:
            out["truncated"] = True  # optional member, omitted while false
        return out


# --------------------------------------------------------------------------
# registry (persistent, shared by every plugin process using the same root)


class Registry:
    def __init__(self):
        root = os.environ.get("INDIE_SANDBOX_ROOT")
        if not root:
            root = os.path.join(tempfile.gettempdir(), f"indie-v1-sandboxes-{os.getuid()}")
        self.root = os.path.abspath(root)
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        self.lock = threading.RLock()

    def _meta_path(self, sid):
        return os.path.join(self.root, sid, "meta.json")

    def mint(self):
        alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
        while True:
            sid = "indie:" + "".join(secrets.choice(alphabet) for _ in range(20))
            try:
                os.makedirs(os.path.join(self.root, sid), mode=0o700)
                return sid
            except FileExistsError:
                continue

    def load(self, sid):
        if "/" in sid or sid in (".", ".."):
            return None
        try:
            with open(self._meta_path(sid), "r", encoding="utf-8") as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return None

    def save(self, meta):
        with self.lock:
            path = self._meta_path(meta["id"])
            tmp = path + f".tmp{os.getpid()}.{threading.get_ident()}"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(meta, fh)
            os.replace(tmp, path)

    def all(self):
        out = []
        try:
            names = os.listdir(self.root)
        except OSError:
            return out
        for name in names:
            meta = self.load(name)
            if meta and meta.get("state") != "deleted":
                out.append(meta)
        out.sort(key=lambda m: (m.get("created_ns", 0), m["id"]))
        return out


def status_of(meta):
    st = {
        "id": meta["id"],
        "state": meta["state"],
        "provider_state": {"running": "dir-live", "stopped": "dir-halted"}.get(meta["state"], meta["state"]),
        "workspace_ownership": meta["ownership"],
        "created_at": ns_ts(meta["created_ns"]),
        "updated_at": ns_ts(meta["updated_ns"]),
    }
    if meta.get("name") is not None:
        st["name"] = meta["name"]
    if meta.get("labels"):
        st["labels"] = dict(meta["labels"])  # omitted while empty (reader default {})
    return st


def ns_ts(ns):
    return {"secs_since_epoch": ns // 1_000_000_000, "nanos_since_epoch": ns % 1_000_000_000}


def capabilities():
    have = lambda *names: all(shutil.which(n) for n in names)  # noqa: E731
    return {
        "isolation": "none",
        "lifecycle": {"pause": False, "archive": False, "fork": False, "resize": False,
                      "recover": False, "undelete": False, "refresh_activity": False,
                      "timers": False, "labels": True, "update_network": False,
                      "snapshot_sandbox": False},
        "exec": {"live_streaming": True, "streams_separated": True, "stdin": True,
                 "cancel": True, "stdio_process": True, "stdin_stream": False,
                 "environment": False},
        "fs": {"native": True, "upload": True, "download": True, "permissions": True},
        "search": {"supported": have("find", "grep", "head"), "native": False},
        "git": {"supported": have("git"), "native": False},
        "services": {"supported": False, "native": False},
        "pty": {"resize": True},
        "logs": None,
        "access": {"preview_urls": True, "signed_preview_urls": False, "ssh": False,
                   "ssh_ttl": False, "ssh_revoke": False, "shell_command": False,
                   "web_terminal": False, "vnc": False, "vpn": False},
        "network": {"allow_all": False, "block_all": False, "cidr_allow_list": False,
                    "domain_allow_list": False, "outbound_proxy": False},
        "snapshots": None,
        "volumes": None,
    }


CAPS = capabilities()


# --------------------------------------------------------------------------
# events


class EventSource:
    def __init__(self, wire):
        self.wire = wire
        self.source_id = "src-" + secrets.token_hex(8)
        self.seq = 0
        self.lock = threading.Lock()

    def emit(self, route_id, body):
        with self.lock:
            self.seq += 1
            ev = {"id": {"source_id": self.source_id, "sequence": self.seq},
                  "occurred_at": now_ts(), "provider": KIND}
            ev.update(body)
            self.wire.notify("host/event", {"route_id": route_id, "event": ev})


class Route:
    def __init__(self, wire, route_id, correlation_id):
        self.route_id = route_id
        self.correlation_id = correlation_id
        self.source = EventSource(wire)


class Operation:
    """One control-plane operation's events.

    Wire order chosen here: operation_started, [operation_progress],
    operation_completed | operation_failed, then any state_observed events
    (which are state events, not operation lifecycle events, so they carry
    no operation_id).  All of them precede the operation's response.
    """

    def __init__(self, route, action, subject):
        self.route = route
        self.action = action
        self.subject = dict(subject)
        self.op_id = "op-" + secrets.token_hex(10)
        self.t0 = time.monotonic()
        self.done = False
        self.pending = []

    def _emit(self, typ, extra, with_op=True):
        if self.route is None:
            return
        body = {"type": typ, "subject": dict(self.subject)}
        if with_op:
            body["operation_id"] = self.op_id
        if self.route.correlation_id is not None:
            body["correlation_id"] = self.route.correlation_id
        body.update(extra)
        self.route.source.emit(self.route.route_id, body)

    def started(self):
        self._emit("operation_started", {"action": self.action})
        return self

    def progress(self, code, message, completed=None, total=None, unit=None):
        prog = {"code": code, "message": message}
        if completed is not None:
            prog["completed"] = completed
        if total is not None:
            prog["total"] = total
        if unit is not None:
            prog["unit"] = unit
        self._emit("operation_progress", {"action": self.action, "progress": prog})

    def observed(self, previous, current):
        extra = {"current": {"resource": "sandbox", "state": current}}
        if previous is not None:
            extra["previous"] = {"resource": "sandbox", "state": previous}
        self.pending.append(extra)

    def _flush(self):
        for extra in self.pending:
            self._emit("state_observed", extra, with_op=False)
        self.pending = []

    def completed(self):
        if not self.done:
            self.done = True
            self._emit("operation_completed", {"action": self.action,
                                               "duration": dur(time.monotonic() - self.t0)})
            self._flush()

    def failed(self, err):
        if not self.done:
            self.done = True
            self._emit("operation_failed", {"action": self.action,
                                            "duration": dur(time.monotonic() - self.t0),
                                            "error": err.report()})
            self.pending = []


def parse_events(method, params):
    ev = params.p.get("events")
    if ev is None:
        return None
    if not isinstance(ev, dict):
        raise bad_params(method, "`events` must be an object")
    rid = ev.get("route_id")
    cid = ev.get("correlation_id")
    if not isinstance(rid, str):
        raise bad_params(method, "`events.route_id` must be a string")
    if cid is not None and not isinstance(cid, str):
        raise bad_params(method, "`events.correlation_id` must be a string")
    return rid, cid


# --------------------------------------------------------------------------
# process helpers


def killpg(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def exec_env(meta, spec_env):
    env = dict(os.environ)
    for k in ("BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "POSIXLY_CORRECT", "PWD", "OLDPWD"):
        env.pop(k, None)
    env.update(meta.get("env") or {})
    env.update(spec_env or {})
    for k in ("BASH_ENV", "SHELLOPTS", "BASHOPTS", "POSIXLY_CORRECT"):
        env.pop(k, None)
    return env


def code_and_signal(rc):
    """(exit_code, signal) for a Popen return code.

    A process ended by a signal has no exit status (WIFSIGNALED): it is
    reported with exit_code null and the observed signal number.
    """
    if rc is None:
        return None, None
    if rc < 0:
        return None, -rc
    return rc, None


class ExecRun:
    """One `bash -c` execution for exec/run and exec/stream."""

    def __init__(self, conn, meta, spec, exec_id=None, limit=None, notify=False):
        self.conn = conn
        self.meta = meta
        self.spec = spec
        self.exec_id = exec_id
        self.notify = notify
        self.reason = None            # "cancelled" | "timed_out" | "killed"
        self.reason_lock = threading.Lock()
        self.wake = threading.Event()
        self.emit_lock = threading.Lock()
        self.abandoned = False
        self.caps = {"stdout": Capture(limit), "stderr": Capture(limit)}
        self.proc = None

    # called from other threads
    def stop(self, reason):
        with self.reason_lock:
            if self.reason is None:
                self.reason = reason
        self.wake.set()

    def kill_now(self, reason="killed"):
        self.stop(reason)
        if self.proc is not None:
            killpg(self.proc.pid, signal.SIGKILL)

    def _reader(self, name, fd):
        san = Sanitizer(self.spec["output_sanitization"])
        cap = self.caps[name]
        try:
            while True:
                try:
                    chunk = os.read(fd, READ_CHUNK)
                except InterruptedError:
                    continue
                except OSError:
                    break
                if not chunk:
                    break
                self._deliver(name, cap, san.feed(chunk))
            self._deliver(name, cap, san.finish())
            cap.eof = True
        finally:
            try:
                os.close(fd)
            except OSError:
                pass

    def _deliver(self, name, cap, data):
        if not data:
            return
        with self.emit_lock:
            if self.abandoned:
                return
            cap.add(data)
            if self.notify:
                self.conn.wire.notify("exec/output", {"exec_id": self.exec_id, "stream": name,
                                                      "data_b64": b64e(data)})

    def _stdin_writer(self, fd, data):
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                os.close(fd)
            except OSError:
                pass

    def run(self):
        spec = self.spec
        cwd = resolve_dir(self.meta, spec["working_dir"], "working_dir")
        env = exec_env(self.meta, spec["env"])
        stdin = spec["stdin"]
        timeout = spec["timeout_ms"]
        if timeout is None:
            timeout = DEFAULT_TIMEOUT_MS
        t0 = time.monotonic()
        deadline = t0 + timeout / 1000.0
        try:
            self.proc = subprocess.Popen(
                [BASH, "-c", spec["command"]], cwd=cwd, env=env,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, close_fds=True)
        except OSError as exc:
            raise io_error("spawn bash", exc)
        proc = self.proc
        self.conn.track(self.meta["id"], self, proc.pid)
        readers = []
        for name, f in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            fd = os.dup(f.fileno())
            f.close()
            self.caps[name].eof = False
            th = threading.Thread(target=self._reader, args=(name, fd), daemon=True)
            th.start()
            readers.append(th)
        if stdin is not None:
            fd = os.dup(proc.stdin.fileno())
            proc.stdin.close()
            threading.Thread(target=self._stdin_writer, args=(fd, stdin), daemon=True).start()
        if self.reason is not None:  # cancelled before the spawn finished
            self.wake.set()
        laddered = False
        while True:
            rc = proc.poll()
            if rc is not None:
                break
            if self.reason is None and time.monotonic() >= deadline:
                self.stop("timed_out")
            if self.reason is not None and not laddered:
                laddered = True
                if self.reason == "killed":
                    killpg(proc.pid, signal.SIGKILL)
                else:
                    threading.Thread(target=self._ladder, args=(proc,), daemon=True).start()
            wait = 0.05 if self.reason is None else 0.02
            wait = min(wait, max(0.0, deadline - time.monotonic())) if self.reason is None else wait
            self.wake.wait(max(wait, 0.005))
            self.wake.clear()
        t_exit = time.monotonic()
        if self.reason is not None:
            killpg(proc.pid, signal.SIGKILL)
            drain_until = t_exit + 2.0
        else:
            drain_until = t_exit + DRAIN_GRACE
        for th in readers:
            th.join(max(0.0, drain_until - time.monotonic()))
        if any(th.is_alive() for th in readers):
            # descendants still hold the pipes: end the process group, then give up
            killpg(proc.pid, signal.SIGKILL)
            for th in readers:
                th.join(1.0)
        with self.emit_lock:
            self.abandoned = True
            for name, th in zip(("stdout", "stderr"), readers):
                if th.is_alive():
                    self.caps[name].truncated = True
        self.conn.untrack(self.meta["id"], self)
        exit_code, sig = code_and_signal(rc)
        if self.reason is None:
            termination = "exited"
        else:
            termination = self.reason
            if rc < 0:
                exit_code = None
        result = {
            "stdout_b64": b64e(self.caps["stdout"].retained()),
            "stderr_b64": b64e(self.caps["stderr"].retained()),
            "exit_code": exit_code,
            "termination": termination,
            "duration_ms": int((t_exit - t0) * 1000),
        }
        if sig is not None:
            result["signal"] = sig
        return result

    def _ladder(self, proc):
        killpg(proc.pid, signal.SIGTERM)
        end = time.monotonic() + TERM_GRACE
        while time.monotonic() < end:
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        killpg(proc.pid, signal.SIGKILL)


def resolve_path(meta, path, field="path"):
    if path == "":
        raise invalid_spec(field, "must not be empty")
    if "\x00" in path:
        raise invalid_spec(field, "must not contain NUL")
    return os.path.join(meta["workspace"], path)


def resolve_dir(meta, working_dir, field):
    ws = meta["workspace"]
    if meta["ownership"] == "managed" and not os.path.isdir(ws):
        os.makedirs(ws, exist_ok=True)
    if working_dir is None:
        return ws
    d = resolve_path(meta, working_dir, field)
    if not os.path.isdir(d):
        raise invalid_spec(field, f"{d} is not an existing directory")
    return d


class StdioProc:
    def __init__(self, conn, meta, pid_name, spec):
        self.conn = conn
        self.meta = meta
        self.name = pid_name
        cwd = resolve_dir(meta, spec["working_dir"], "working_dir")
        env = exec_env(meta, spec["env"])
        try:
            self.proc = subprocess.Popen([BASH, "-c", spec["command"]], cwd=cwd, env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True,
                                         close_fds=True)
        except OSError as exc:
            raise io_error("spawn bash", exc)
        self.stdin_fd = os.dup(self.proc.stdin.fileno())
        self.proc.stdin.close()
        out_fd = os.dup(self.proc.stdout.fileno())
        self.proc.stdout.close()
        err_fd = os.dup(self.proc.stderr.fileno())
        self.proc.stderr.close()
        self.in_lock = threading.Lock()
        self.out_q = queue.Queue(maxsize=8)
        self.out_lock = threading.Lock()
        self.eof = False
        self.tail = bytearray()
        self.tail_dropped = False
        self.terminated = False
        self.out_t = threading.Thread(target=self._out, args=(out_fd,), daemon=True)
        self.err_t = threading.Thread(target=self._err, args=(err_fd,), daemon=True)
        self.out_t.start()
        self.err_t.start()

    def _out(self, fd):
        try:
            while True:
                try:
                    chunk = os.read(fd, STDIO_CHUNK)
                except InterruptedError:
                    continue
                except OSError:
                    break
                if not chunk:
                    break
                self.out_q.put(chunk)
        finally:
            os.close(fd)
            self.out_q.put(None)

    def _err(self, fd):
        try:
            while True:
                try:
                    chunk = os.read(fd, READ_CHUNK)
                except InterruptedError:
                    continue
                except OSError:
                    break
                if not chunk:
                    break
                self.tail += chunk
                if len(self.tail) > STDERR_TAIL:
                    del self.tail[: len(self.tail) - STDERR_TAIL]
                    self.tail_dropped = True
        finally:
            os.close(fd)

    def write(self, data):
        with self.in_lock:
            if self.stdin_fd is None:
                raise AppError("io", "exec/stdio_input: stdin is already closed",
                               {"io_context": "exec/stdio_input"})
            try:
                view = memoryview(data)
                while view:
                    n = os.write(self.stdin_fd, view)
                    view = view[n:]
            except OSError as exc:
                raise io_error("exec/stdio_input", exc)

    def close_input(self):
        with self.in_lock:
            if self.stdin_fd is not None:
                try:
                    os.close(self.stdin_fd)
                except OSError:
                    pass
                self.stdin_fd = None

    def read(self):
        with self.out_lock:
            if self.eof:
                return None
            item = self.out_q.get()
            if item is None:
                self.eof = True
                return None
            return item

    def kill_now(self, reason="killed"):
        self.terminated = True
        killpg(self.proc.pid, signal.SIGKILL)

    def wait(self):
        rc = self.proc.wait()
        self.err_t.join(2.0)
        self.close_input()
        self.conn.untrack(self.meta["id"], self)
        exit_code, _sig = code_and_signal(rc)
        if self.terminated:
            termination = "killed"
            if rc < 0:
                exit_code = None
        else:
            termination = "exited"
        tail = bytes(self.tail).decode("utf-8", errors="replace")
        if self.tail_dropped:
            tail = "\u2026" + tail
        return {"termination": termination, "exit_code": exit_code, "stderr_tail": tail}


def _make_ctty():
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class PtySession:
    def __init__(self, conn, meta, pty_id, options):
        self.conn = conn
        self.meta = meta
        self.name = pty_id
        rows, cols = options["rows"], options["cols"]
        cwd = resolve_dir(meta, options["working_dir"], "working_dir")
        env = exec_env(meta, options["env"])
        env.setdefault("TERM", "xterm-256color")
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        try:
            self.proc = subprocess.Popen([BASH, "--noprofile", "--norc", "-i"], cwd=cwd, env=env,
                                         stdin=slave, stdout=slave, stderr=slave,
                                         start_new_session=True, preexec_fn=_make_ctty,
                                         close_fds=True)
        except OSError as exc:
            os.close(master)
            os.close(slave)
            raise io_error("spawn pty shell", exc)
        os.close(slave)
        self.master = master
        self.closed = False
        self.read_lock = threading.Lock()
        self.write_lock = threading.Lock()
        self.ended = False

    def read(self):
        with self.read_lock:
            while True:
                if self.closed or self.ended:
                    return None
                try:
                    r, _, _ = __import__("select").select([self.master], [], [], 0.2)
                except (OSError, ValueError):
                    return None
                if not r:
                    continue
                try:
                    data = os.read(self.master, PTY_CHUNK)
                except OSError:
                    self.ended = True
                    return None
                if not data:
                    self.ended = True
                    return None
                return data

    def write(self, data):
        with self.write_lock:
            if self.closed:
                raise invalid_spec("pty_id", "unknown PTY id")
            try:
                view = memoryview(data)
                while view:
                    n = os.write(self.master, view)
                    view = view[n:]
            except OSError as exc:
                raise io_error("pty/input", exc)

    def resize(self, rows, cols):
        try:
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        except OSError as exc:
            raise io_error("pty/resize", exc)

    def kill_now(self, reason="killed"):
        self.close()

    def close(self):
        if self.closed:
            return
        self.closed = True
        killpg(self.proc.pid, signal.SIGHUP)
        killpg(self.proc.pid, signal.SIGKILL)
        with self.read_lock:
            try:
                os.close(self.master)
            except OSError:
                pass
        try:
            self.proc.wait(2.0)
        except subprocess.TimeoutExpired:
            pass
        self.conn.untrack(self.meta["id"], self)


# --------------------------------------------------------------------------
# the connection


def parse_exec_spec(method, raw):
    if not isinstance(raw, dict):
        raise bad_params(method, "`spec` must be an object")
    p = Params(method, raw)
    spec = {
        "command": p.str("command"),
        "timeout_ms": p.uint("timeout_ms", required=False),
        "working_dir": p.str("working_dir", required=False),
        "env": p.strmap("env"),
    }
    stdin = p.str("stdin_b64", required=False)
    spec["stdin"] = None if stdin is None else stdin
    san = raw.get("output_sanitization")
    if san is None:
        san = "raw"
    if san not in ("raw", "strip_ansi", "strip_all"):
        raise bad_params(method, f"unknown output_sanitization {json.dumps(san)}")
    spec["output_sanitization"] = san
    return spec


class Connection:
    def __init__(self):
        self.wire = Wire()
        self.reg = Registry()
        self.lock = threading.RLock()
        self.handles = {}      # sandbox_id -> Route (from create/attach with events)
        self.execs = {}        # exec_id -> ExecRun (in flight)
        self.stdios = {}       # process_id -> StdioProc
        self.ptys = {}         # pty_id -> PtySession
        self.live = {}         # sandbox_id -> set of live objects
        self.pgids = {}        # sandbox_id -> set of process groups ever started
        self.threads = set()
        self.closing = False
        self.methods = self._methods()

    # ----- bookkeeping
    def track(self, sid, obj, pgid):
        with self.lock:
            self.live.setdefault(sid, set()).add(obj)
            self.pgids.setdefault(sid, set()).add(pgid)

    def untrack(self, sid, obj):
        with self.lock:
            self.live.get(sid, set()).discard(obj)

    def end_processes(self, sid):
        with self.lock:
            objs = list(self.live.get(sid, ()))
            groups = list(self.pgids.get(sid, ()))
        for o in objs:
            o.kill_now("killed")
        for g in groups:
            killpg(g, signal.SIGKILL)

    def sandbox(self, sid, running=False):
        check_id("sandbox_id", sid)
        meta = self.reg.load(sid)
        if meta is None or meta.get("state") == "deleted":
            raise not_found("sandbox", sid)
        if running and meta["state"] != "running":
            raise invalid_state(meta["state"], "unknown")
        return meta

    def handle_info(self, meta):
        return {"status": status_of(meta), "capabilities": CAPS,
                "working_directory": meta["workspace"], "runtime_directory": self.runtime_dir(meta)}

    def runtime_dir(self, meta):
        path = os.path.join(self.reg.root, meta["id"], "runtime")
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)
        return path

    def route_for(self, method, params, sid):
        ev = parse_events(method, params)
        if ev is not None:
            return Route(self.wire, ev[0], ev[1])
        with self.lock:
            return self.handles.get(sid)

    # ----- dispatch
    def _methods(self):
        m = {
            "provider/health": self.m_health,
            "sandbox/create": self.m_create,
            "sandbox/attach": self.m_attach,
            "sandbox/list": self.m_list,
            "sandbox/describe": self.m_describe,
            "sandbox/platform_info": self.m_platform,
            "sandbox/start": self.m_start,
            "sandbox/stop": self.m_stop,
            "sandbox/delete": self.m_delete,
            "sandbox/set_labels": self.m_set_labels,
            "exec/run": self.m_exec_run,
            "exec/stream": self.m_exec_stream,
            "exec/cancel": self.m_exec_cancel,
            "exec/stdio_open": self.m_stdio_open,
            "exec/stdio_input": self.m_stdio_input,
            "exec/stdio_close_input": self.m_stdio_close_input,
            "exec/stdio_output": self.m_stdio_output,
            "exec/stdio_terminate": self.m_stdio_terminate,
            "exec/stdio_wait": self.m_stdio_wait,
            "pty/open": self.m_pty_open,
            "pty/input": self.m_pty_input,
            "pty/output": self.m_pty_output,
            "pty/resize": self.m_pty_resize,
            "pty/close": self.m_pty_close,
            "stream/cancel": self.m_stream_cancel,
            "fs/read": self.m_fs_read,
            "fs/write": self.m_fs_write,
            "fs/delete": self.m_fs_delete,
            "fs/exists": self.m_fs_exists,
            "fs/metadata": self.m_fs_metadata,
            "fs/list_dir": self.m_fs_list_dir,
            "fs/create_dir": self.m_fs_create_dir,
            "fs/rename": self.m_fs_rename,
            "fs/set_permissions": self.m_fs_set_permissions,
            "access/preview_url": self.m_preview_url,
        }
        gated = {
            "sandbox/pause": "lifecycle.pause",
            "sandbox/resume": "lifecycle.pause",
            "sandbox/archive": "lifecycle.archive",
            "sandbox/recover": "lifecycle.recover",
            "sandbox/undelete": "lifecycle.undelete",
            "sandbox/refresh_activity": "lifecycle.refresh_activity",
            "sandbox/fork": "lifecycle.fork",
            "sandbox/resize": "lifecycle.resize",
            "sandbox/snapshot": "lifecycle.snapshot_sandbox",
            "sandbox/set_timers": "lifecycle.timers",
            "sandbox/update_network": "lifecycle.update_network",
            "logs/follow": "logs",
            "snapshot/create": "snapshots",
            "snapshot/get": "snapshots",
            "snapshot/list": "snapshots",
            "snapshot/delete": "snapshots",
            "snapshot/activate": "snapshots",
            "snapshot/deactivate": "snapshots",
            "snapshot/build_logs": "snapshots",
            "volume/create": "volumes",
            "volume/get": "volumes",
            "volume/list": "volumes",
            "volume/delete": "volumes",
            "access/signed_preview_url": "access.preview_urls.signed",
            "access/ssh_create": "access.ssh",
            "access/ssh_revoke": "access.ssh.revoke",
            "access/web_terminal": "access.web_terminal",
            "access/vnc": "access.vnc",
        }
        for name, cap in gated.items():
            m[name] = self._gate(cap)
        return m

    @staticmethod
    def _gate(cap):
        def handler(method, params):
            raise unsupported(cap)
        return handler

    def dispatch(self, rid, method, params):
        try:
            fn = self.methods.get(method)
            if fn is None:
                raise RpcError(-32601, f"unknown method {method}")
            result = fn(method, params)
            self.wire.respond(rid, {} if result is None else result)
        except RpcError as e:
            self.wire.error(rid, {"code": e.code, "message": e.message})
        except AppError as e:
            self.wire.error(rid, e.to_error())
        except Exception as e:  # noqa: BLE001 - a plugin bug must still answer
            log("internal error in", method, repr(e))
            err = AppError("provider", f"{KIND} error [internal]: {e}",
                           {"provider": {"provider": KIND, "code": "internal", "message": str(e),
                                         "retryable": False, "detail": None}})
            self.wire.error(rid, err.to_error())

    def spawn(self, rid, method, params):
        th = threading.Thread(target=self._run, args=(rid, method, params), daemon=True)
        with self.lock:
            self.threads.add(th)
        th.start()

    def _run(self, rid, method, params):
        try:
            self.dispatch(rid, method, params)
        finally:
            with self.lock:
                self.threads.discard(threading.current_thread())

    # ----- session
    def initialize(self, rid, params):
        try:
            p = Params("initialize", params)
            version = p.uint("protocol_version", maxv=2 ** 32 - 1)
            if version != PROTOCOL_VERSION:
                raise invalid_spec("protocol_version",
                                   f"plugin speaks protocol version {PROTOCOL_VERSION} "
                                   f"but the host asked for {version}")
            self.wire.respond(rid, {"protocol_version": PROTOCOL_VERSION,
                                    "provider": {"kind": KIND, "version": PLUGIN_VERSION,
                                                 "implementation": "python-stdlib"},
                                    "capabilities": CAPS})
        except RpcError as e:
            self.wire.error(rid, {"code": e.code, "message": e.message})
        except AppError as e:
            self.wire.error(rid, e.to_error())

    def m_health(self, method, params):
        return {"health": {"status": "ok", "message": None, "missing_permissions": []}}

    # ----- handles
    def m_create(self, method, params):
        p = Params(method, params)
        spec = p.obj("spec")
        ev = parse_events(method, p)
        route = Route(self.wire, ev[0], ev[1]) if ev else None
        name = spec.get("name")
        if name is not None and not isinstance(name, str):
            raise bad_params(method, "`spec.name` must be a string")
        subject = {"type": "sandbox"}
        if name is not None:
            subject["name"] = name
        try:
            checked = self._validate(method, spec)
        except AppError as e:
            op = Operation(route, "create", subject).started()
            op.failed(e)
            raise
        op = Operation(route, "create", subject).started()
        try:
            meta = self._provision(name, checked)
        except AppError as e:
            op.failed(e)
            raise
        op.subject["id"] = meta["id"]
        op.progress("workspace.ready", "workspace directory prepared", 1, 1, "steps")
        op.observed(None, "running")
        op.completed()
        if route is not None:
            with self.lock:
                self.handles[meta["id"]] = route
        return self.handle_info(meta)

    def _validate(self, method, spec):
        src = spec.get("source")
        if src is None:
            raise bad_params(method, "missing field `spec.source`")
        if src != "host_directory":
            if isinstance(src, dict) and len(src) == 1 and next(iter(src)) in ("image", "dockerfile", "snapshot"):
                raise invalid_spec("source", f"{next(iter(src))} sources are not supported; "
                                             "this provider only accepts \"host_directory\"")
            raise invalid_spec("source", "unknown source; this provider only accepts \"host_directory\"")
        res = spec.get("resources")
        if res is not None:
            if not isinstance(res, dict):
                raise bad_params(method, "`spec.resources` must be an object")
            for k in ("cpu_cores", "memory_mb", "disk_mb", "gpus"):
                if res.get(k) is not None:
                    raise invalid_spec("resources", f"{k} cannot be honored by a host directory sandbox")
        kind = spec.get("sandbox_kind")
        if kind is not None:
            if kind not in ("container", "virtual_machine"):
                raise invalid_spec("sandbox_kind", "unknown sandbox kind")
            raise invalid_spec("sandbox_kind", f"this provider cannot provision a {kind}")
        env = check_strmap(method, "spec.env", spec.get("env") if spec.get("env") is not None else {})
        labels = check_strmap(method, "spec.labels",
                              spec.get("labels") if spec.get("labels") is not None else {})
        if spec.get("user") is not None:
            raise invalid_spec("user", "this provider runs commands as the plugin's own user only")
        wd = spec.get("working_directory")
        if wd is not None and not isinstance(wd, str):
            raise bad_params(method, "`spec.working_directory` must be a string")
        if wd == "":
            raise invalid_spec("working_directory", "must not be empty")
        own = spec.get("workspace_ownership")
        if own not in (None, "designated", "managed"):
            raise invalid_spec("workspace_ownership", "unknown workspace ownership")
        if own == "designated" and wd is None:
            raise invalid_spec("working_directory", "a designated workspace needs a directory")
        net = spec.get("network", "provider_default")
        if net is None:
            net = "provider_default"
        if net != "provider_default":
            if isinstance(net, dict) and any(isinstance(v, dict) and not (v.get("cidrs") or v.get("domains"))
                                             for v in net.values()):
                raise invalid_spec("network", "an allow list must not be empty")
            raise invalid_spec("network", "only provider_default networking is available")
        vols = spec.get("volumes")
        if vols:
            raise invalid_spec("volumes", "volumes are not supported")
        timers = spec.get("timers")
        if timers is not None:
            if not isinstance(timers, dict):
                raise bad_params(method, "`spec.timers` must be an object")
            for k, v in timers.items():
                if v is None:
                    continue
                if not isinstance(v, dict):
                    raise bad_params(method, f"`spec.timers.{k}` must be a duration")
                if v.get("secs", 0) != 0 or v.get("nanos", 0) != 0:
                    raise invalid_spec("timers", f"{k}: lifecycle timers are not supported "
                                                 "(only the zero duration, \"never\", can be honored)")
        if spec.get("ephemeral") is True:
            raise invalid_spec("ephemeral", "ephemeral sandboxes are not supported")
        if spec.get("public") is True:
            raise invalid_spec("public", "public sandboxes are not supported")
        region = spec.get("region")
        if region is not None:
            if region == "":
                raise invalid_spec("region", "must not be empty")
            raise invalid_spec("region", "regions are not supported")
        pc = spec.get("provider_config")
        if pc is not None:
            if not isinstance(pc, dict):
                raise invalid_spec("provider_config", "expected an object")
            if pc:
                raise invalid_spec("provider_config", f"unknown option {sorted(pc)[0]}")
        if wd is not None and not os.path.isabs(wd):
            raise invalid_spec("working_directory", "must be an absolute path")
        if wd is not None and (own or "designated") == "designated" and not os.path.isdir(wd):
            raise invalid_spec("working_directory", f"{wd} is not an existing directory")
        return {"env": env, "labels": labels, "wd": wd, "own": own}

    def _provision(self, name, checked):
        env, labels, wd, own = checked["env"], checked["labels"], checked["wd"], checked["own"]
        sid = self.reg.mint()
        base = os.path.join(self.reg.root, sid)
        if wd is None:
            workspace = os.path.join(base, "workspace")
            ownership = "managed"
            os.makedirs(workspace, mode=0o755, exist_ok=True)
        else:
            ownership = own or "designated"
            if ownership == "managed":
                try:
                    os.makedirs(wd, exist_ok=True)
                except OSError as exc:
                    shutil.rmtree(base, ignore_errors=True)
                    raise io_error(f"create {wd}", exc)
            if not os.path.isdir(wd):
                shutil.rmtree(base, ignore_errors=True)
                raise invalid_spec("working_directory", f"{wd} is not an existing directory")
            workspace = os.path.realpath(wd)
        ns = time.time_ns()
        meta = {"id": sid, "name": name, "state": "running", "labels": labels, "env": env,
                "workspace": os.path.realpath(workspace), "ownership": ownership,
                "created_ns": ns, "updated_ns": ns}
        self.reg.save(meta)
        return meta

    def m_attach(self, method, params):
        p = Params(method, params)
        sid = p.str("sandbox_id")
        ev = parse_events(method, p)
        route = Route(self.wire, ev[0], ev[1]) if ev else None
        op = Operation(route, "attach", {"type": "sandbox", "id": sid}).started()
        try:
            meta = self.sandbox(sid)
        except AppError as e:
            op.failed(e)
            raise
        if meta.get("name") is not None:
            op.subject["name"] = meta["name"]
        op.completed()
        if route is not None:
            with self.lock:
                self.handles[sid] = route
        return self.handle_info(meta)

    def m_list(self, method, params):
        p = Params(method, params)
        flt = p.sub("filter")
        want = flt.strmap("labels", required=False)
        out = []
        for meta in self.reg.all():
            labels = meta.get("labels") or {}
            if all(labels.get(k) == v for k, v in want.items()):
                out.append(status_of(meta))
        return {"sandboxes": out}

    def m_describe(self, method, params):
        p = Params(method, params)
        return {"status": status_of(self.sandbox(p.str("sandbox_id")))}

    def m_platform(self, method, params):
        p = Params(method, params)
        self.sandbox(p.str("sandbox_id"))
        osname = {"darwin": "macos"}.get(sys.platform, sys.platform)
        if osname.startswith("linux"):
            osname = "linux"
        arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(),
                                                          platform.machine().lower())
        return {"platform": {"os": osname, "arch": arch, "version": platform.release()}}

    def _lifecycle(self, method, params, action, fn):
        p = Params(method, params)
        sid = p.str("sandbox_id")
        check_id("sandbox_id", sid)
        route = self.route_for(method, p, sid)
        meta = self.reg.load(sid)
        subject = {"type": "sandbox", "id": sid}
        if meta and meta.get("name") is not None:
            subject["name"] = meta["name"]
        op = Operation(route, action, subject).started()
        try:
            fn(sid, meta, op, p)
        except AppError as e:
            op.failed(e)
            raise
        op.completed()
        return {}

    def m_start(self, method, params):
        def go(sid, meta, op, p):
            meta = self.sandbox(sid)
            if meta["state"] != "running":
                prev = meta["state"]
                meta["state"] = "running"
                meta["updated_ns"] = time.time_ns()
                self.reg.save(meta)
                op.observed(prev, "running")
        return self._lifecycle(method, params, "start", go)

    def m_stop(self, method, params):
        def go(sid, meta, op, p):
            meta = self.sandbox(sid)
            self.end_processes(sid)
            if meta["state"] != "stopped":
                prev = meta["state"]
                meta["state"] = "stopped"
                meta["updated_ns"] = time.time_ns()
                self.reg.save(meta)
                op.observed(prev, "stopped")
        return self._lifecycle(method, params, "stop", go)

    def m_delete(self, method, params):
        def go(sid, meta, op, p):
            if meta is None or meta.get("state") == "deleted":
                return  # idempotent
            self.end_processes(sid)
            prev = meta["state"]
            if meta["ownership"] == "managed":
                shutil.rmtree(meta["workspace"], ignore_errors=True)
            shutil.rmtree(os.path.join(self.reg.root, sid, "runtime"), ignore_errors=True)
            meta["state"] = "deleted"
            meta["updated_ns"] = time.time_ns()
            self.reg.save(meta)
            op.observed(prev, "deleted")
            with self.lock:
                self.handles.pop(sid, None)
                self.pgids.pop(sid, None)
        return self._lifecycle(method, params, "delete", go)

    def m_set_labels(self, method, params):
        p0 = Params(method, params)
        labels = p0.strmap("labels")

        def go(sid, meta, op, p):
            meta = self.sandbox(sid)
            meta["labels"] = labels
            meta["updated_ns"] = time.time_ns()
            self.reg.save(meta)
        return self._lifecycle(method, params, "set_labels", go)

    # ----- exec
    def m_exec_run(self, method, params):
        p = Params(method, params)
        sid = p.str("sandbox_id")
        spec = parse_exec_spec(method, p.obj("spec"))
        meta = self.sandbox(sid, running=True)
        if spec["stdin"] is not None:
            spec["stdin"] = b64d(spec["stdin"], "stdin_b64")
        return ExecRun(self, meta, spec).run()

    def m_exec_stream(self, method, params):
        p = Params(method, params)
        sid = p.str("sandbox_id")
        exec_id = p.str("exec_id")
        spec = parse_exec_spec(method, p.obj("spec"))
        limit = p.uint("retained_output_limit", required=False)
        meta = self.sandbox(sid, running=True)
        if spec["stdin"] is not None:
            spec["stdin"] = b64d(spec["stdin"], "stdin_b64")
        run = ExecRun(self, meta, spec, exec_id=exec_id, limit=limit, notify=True)
        with self.lock:
            if exec_id in self.execs:
                raise invalid_spec("exec_id", "an execution with this id is still running")
            self.execs[exec_id] = run
        try:
            result = run.run()
        finally:
            with self.lock:
                if self.execs.get(exec_id) is run:
                    del self.execs[exec_id]
        return {"result": result, "streams_separated": True, "live_streaming": True,
                "stdout_capture": run.caps["stdout"].stats(),
                "stderr_capture": run.caps["stderr"].stats()}

    def m_exec_cancel(self, method, params):
        p = Params(method, params)
        exec_id = p.str("exec_id")
        with self.lock:
            run = self.execs.get(exec_id)
        if run is not None:
            run.stop("cancelled")
        return {}

    # ----- stdio processes
    def _stdio(self, p):
        pid = p.str("process_id")
        with self.lock:
            proc = self.stdios.get(pid)
        if proc is None:
            raise invalid_spec("process_id", "unknown stdio process id")
        return proc

    def m_stdio_open(self, method, params):
        p = Params(method, params)
        sid = p.str("sandbox_id")
        pid = p.str("process_id")
        raw = p.obj("spec")
        sp = Params(method, raw)
        spec = {"command": sp.str("command"), "working_dir": sp.str("working_dir", required=False),
                "env": sp.strmap("env")}
        meta = self.sandbox(sid, running=True)
        with self.lock:
            if pid in self.stdios:
                raise invalid_spec("process_id", "duplicate stdio process id")
            self.stdios[pid] = None  # reserve
        try:
            proc = StdioProc(self, meta, pid, spec)
        except BaseException:
            with self.lock:
                self.stdios.pop(pid, None)
            raise
        with self.lock:
            self.stdios[pid] = proc
        self.track(sid, proc, proc.proc.pid)
        return {}

    def m_stdio_input(self, method, params):
        p = Params(method, params)
        data = p.str("data_b64")
        proc = self._stdio(p)
        proc.write(b64d(data, "data_b64"))
        return {}

    def m_stdio_close_input(self, method, params):
        self._stdio(Params(method, params)).close_input()
        return {}

    def m_stdio_output(self, method, params):
        data = self._stdio(Params(method, params)).read()
        return {"data_b64": None if data is None else b64e(data)}

    def m_stdio_terminate(self, method, params):
        self._stdio(Params(method, params)).kill_now()
        return {}

    def m_stdio_wait(self, method, params):
        return self._stdio(Params(method, params)).wait()

    # ----- pty
    def _pty(self, p):
        pid = p.str("pty_id")
        with self.lock:
            sess = self.ptys.get(pid)
        if sess is None:
            raise invalid_spec("pty_id", "unknown PTY id")
        return sess

    @staticmethod
    def _size(method, raw):
        if not isinstance(raw, dict):
            raise bad_params(method, "`size` must be an object")
        sp = Params(method, raw)
        return sp.uint("rows", maxv=65535), sp.uint("cols", maxv=65535)

    def m_pty_open(self, method, params):
        p = Params(method, params)
        sid = p.str("sandbox_id")
        pty_id = p.str("pty_id")
        op = p.sub("options")
        rows, cols = self._size(method, op.obj("size"))
        options = {"rows": rows, "cols": cols, "working_dir": op.str("working_dir", required=False),
                   "env": op.strmap("env")}
        meta = self.sandbox(sid, running=True)
        with self.lock:
            if pty_id in self.ptys:
                raise invalid_spec("pty_id", "duplicate PTY id")
            self.ptys[pty_id] = None
        try:
            sess = PtySession(self, meta, pty_id, options)
        except BaseException:
            with self.lock:
                self.ptys.pop(pty_id, None)
            raise
        with self.lock:
            self.ptys[pty_id] = sess
        self.track(sid, sess, sess.proc.pid)
        return {}

    def m_pty_input(self, method, params):
        p = Params(method, params)
        data = p.str("data_b64")
        self._pty(p).write(b64d(data, "data_b64"))
        return {}

    def m_pty_output(self, method, params):
        data = self._pty(Params(method, params)).read()
        return {"data_b64": None if data is None else b64e(data)}

    def m_pty_resize(self, method, params):
        p = Params(method, params)
        rows, cols = self._size(method, p.obj("size"))
        self._pty(p).resize(rows, cols)
        return {}

    def m_pty_close(self, method, params):
        p = Params(method, params)
        pty_id = p.str("pty_id")
        with self.lock:
            sess = self.ptys.pop(pty_id, None)
        if sess is not None:
            sess.close()
        return {}

    def m_stream_cancel(self, method, params):
        Params(method, params).str("stream_id")
        return {}

    # ----- fs
    def _fs(self, method, params):
        p = Params(method, params)
        sid = p.str("sandbox_id")
        return p, self.sandbox(sid, running=True)

    def m_fs_read(self, method, params):
        p, meta = self._fs(method, params)
        path = resolve_path(meta, p.str("path"))
        offset = p.uint("offset", required=False) or 0
        length = p.uint("length", required=False)
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                data = fh.read() if length is None else fh.read(length)
        except OSError as exc:
            raise io_error(f"fs/read {path}", exc)
        return {"content_b64": b64e(data)}

    def m_fs_write(self, method, params):
        p, meta = self._fs(method, params)
        path = resolve_path(meta, p.str("path"))
        content = b64d(p.str("content_b64"), "content_b64")
        append = p.bool("append", required=False)
        try:
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            with open(path, "ab" if append else "wb") as fh:
                fh.write(content)
        except OSError as exc:
            raise io_error(f"fs/write {path}", exc)
        return {}

    def m_fs_delete(self, method, params):
        p, meta = self._fs(method, params)
        path = resolve_path(meta, p.str("path"))
        recursive = p.bool("recursive")
        try:
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                if recursive:
                    shutil.rmtree(path)
                else:
                    os.rmdir(path)
            else:
                os.unlink(path)
        except OSError as exc:
            raise io_error(f"fs/delete {path}", exc)
        return {}

    def m_fs_exists(self, method, params):
        p, meta = self._fs(method, params)
        return {"exists": os.path.lexists(resolve_path(meta, p.str("path")))}

    @staticmethod
    def _kind(mode):
        if stat.S_ISREG(mode):
            return "file"
        if stat.S_ISDIR(mode):
            return "directory"
        if stat.S_ISLNK(mode):
            return "symlink"
        return "other"

    def m_fs_metadata(self, method, params):
        p, meta = self._fs(method, params)
        path = resolve_path(meta, p.str("path"))
        try:
            st = os.lstat(path)
        except OSError as exc:
            raise io_error(f"fs/metadata {path}", exc)
        return {"metadata": {"kind": self._kind(st.st_mode), "size": st.st_size,
                             "mode": stat.S_IMODE(st.st_mode), "modified_at": ns_ts(st.st_mtime_ns)}}

    def m_fs_list_dir(self, method, params):
        p, meta = self._fs(method, params)
        root = resolve_path(meta, p.str("path"))
        depth = p.uint("depth")
        if not os.path.isdir(root):
            try:
                os.lstat(root)
                raise AppError("io", f"fs/list_dir {root}: Not a directory",
                               {"io_context": f"fs/list_dir {root}"})
            except OSError as exc:
                raise io_error(f"fs/list_dir {root}", exc)
        entries = []

        def walk(rel, level):
            here = os.path.join(root, rel) if rel else root
            try:
                names = sorted(os.listdir(here))
            except OSError as exc:
                raise io_error(f"fs/list_dir {here}", exc)
            for name in names:
                relp = f"{rel}/{name}" if rel else name
                try:
                    st = os.lstat(os.path.join(here, name))
                except OSError:
                    continue
                kind = self._kind(st.st_mode)
                entries.append({"path": relp, "kind": kind,
                                "size": st.st_size if kind == "file" else None})
                if kind == "directory" and level < depth:
                    walk(relp, level + 1)

        if depth >= 1:
            walk("", 1)
        return {"entries": entries}

    def m_fs_create_dir(self, method, params):
        p, meta = self._fs(method, params)
        path = resolve_path(meta, p.str("path"))
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise io_error(f"fs/create_dir {path}", exc)
        return {}

    def m_fs_rename(self, method, params):
        p, meta = self._fs(method, params)
        src = resolve_path(meta, p.str("from"), "from")
        dst = resolve_path(meta, p.str("to"), "to")
        try:
            os.rename(src, dst)
        except OSError as exc:
            raise io_error(f"fs/rename {src} -> {dst}", exc)
        return {}

    def m_fs_set_permissions(self, method, params):
        p, meta = self._fs(method, params)
        path = resolve_path(meta, p.str("path"))
        mode = p.uint("mode", maxv=2 ** 32 - 1)
        if mode > 0o7777:
            raise invalid_spec("mode", "must be a POSIX permission value (at most 0o7777)")
        try:
            os.chmod(path, mode)
        except OSError as exc:
            raise io_error(f"fs/set_permissions {path}", exc)
        return {}

    # ----- access
    def m_preview_url(self, method, params):
        p = Params(method, params)
        sid = p.str("sandbox_id")
        port = p.uint("port", maxv=65535)
        self.sandbox(sid, running=True)
        if port == 0:
            raise invalid_spec("port", "must be between 1 and 65535")
        return {"preview": {"url": f"http://127.0.0.1:{port}", "headers": {}, "expires_at": None}}

    # ----- teardown
    def close_all(self):
        self.closing = True
        with self.lock:
            runs = list(self.execs.values())
            stdios = [s for s in self.stdios.values() if s is not None]
            ptys = [s for s in self.ptys.values() if s is not None]
            objs = [o for objs in self.live.values() for o in objs]
        for r in runs:
            r.kill_now("cancelled")
        for o in objs:
            if o not in runs:
                o.kill_now("killed")
        for s in stdios:
            s.kill_now()
        for s in ptys:
            s.close()
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            with self.lock:
                alive = [t for t in self.threads if t.is_alive()]
            if not alive:
                break
            time.sleep(0.02)


def valid_id(v):
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= U64_MAX


def serve():
    conn = Connection()
    stdin = sys.stdin.buffer
    while True:
        try:
            line = stdin.readline()
        except (OSError, ValueError):
            break
        if not line:
            break  # EOF
        if not line.strip():
            continue
        try:
            msg = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            conn.wire.error(None, {"code": -32600, "message": f"malformed message: {exc}"})
            continue
        if not isinstance(msg, dict):
            conn.wire.error(None, {"code": -32600, "message": "malformed message: not a JSON object"})
            continue
        has_id = "id" in msg
        rid = msg.get("id")
        if "method" not in msg:
            if has_id and ("result" in msg or "error" in msg):
                continue  # a stray response; the host never owes us one
            conn.wire.error(rid if valid_id(rid) else None,
                            {"code": -32600, "message": "malformed message: no method"})
            continue
        if not has_id:
            continue  # a notification from the host: never answered
        if not valid_id(rid):
            conn.wire.error(None, {"code": -32600,
                                   "message": "malformed message: id must be an unsigned integer"})
            continue
        method = msg.get("method")
        if msg.get("jsonrpc") != "2.0":
            conn.wire.error(rid, {"code": -32600, "message": "malformed message: jsonrpc must be \"2.0\""})
            continue
        if not isinstance(method, str):
            conn.wire.error(rid, {"code": -32600, "message": "malformed message: method must be a string"})
            continue
        params = msg.get("params")
        log("<-", rid, method)
        if method == "initialize":
            conn.initialize(rid, params)
            continue
        if method == "shutdown":
            conn.wire.respond(rid, {})
            break
        conn.spawn(rid, method, params)
    conn.close_all()
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass
    os._exit(0)


if __name__ == "__main__":
    serve()
