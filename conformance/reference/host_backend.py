"""The host-directory backend of the reference providers: a sandbox is a directory, a command is
``bash -c`` in its own process group. Isolation: none. Protocol-neutral; the plugins and the REST
server map their wire shapes onto it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.reference.sanitize import Sanitizer

TERM_GRACE_S = 2.0
ROOT_PREFIX = "sandbox-conformance-host-"
OWNER_FILE = "owner"  # in a private registry: "pid start-time pid-namespace" of the plugin process that made it
SNAPSHOT_ID = re.compile(r"snap-[0-9a-f]{20}")
DRAIN_GRACE_S = 2.0
SAFE_ENVIRONMENT = {"PATH", "HOME", "USER", "SHELL", "LANG", "TERM", "TMPDIR", "GOPATH", "CARGO_HOME", "NVM_DIR"}
_SECRET_SUFFIXES = ("_api_key", "_secret", "_token", "_password", "_credential")


class BackendError(Exception):
    """A failure with a protocol-neutral kind; each plugin encodes it in its own dialect."""

    def __init__(self, kind: str, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.detail = detail


def not_found(resource: str, resource_id: str) -> BackendError:
    return BackendError("not_found", f'{resource.capitalize()} "{resource_id}" was not found', resource=resource, id=resource_id)


def invalid_spec(field_name: str, reason: str) -> BackendError:
    return BackendError("invalid_spec", f"invalid spec: {field_name}: {reason}", field=field_name, reason=reason)


def invalid_state(current: str, action: str) -> BackendError:
    return BackendError("invalid_state", f"cannot {action} a sandbox in state {current}", current=current, action=action)


@dataclass
class ExecRun:
    """What happened to one command."""

    stdout: bytes
    stderr: bytes
    exit_code: int | None
    signal: int | None
    termination: str
    duration_ms: int
    stdout_capture: dict[str, Any] = field(default_factory=dict)
    stderr_capture: dict[str, Any] = field(default_factory=dict)


class Capture:
    """A retained copy of one output stream: everything, or a stable head plus a rolling tail."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.observed = 0

    def add(self, chunk: bytes) -> None:
        self.observed += len(chunk)
        if self.limit is None:
            self.head.extend(chunk)
            return
        head_room = self.limit // 2 - len(self.head)
        if head_room > 0:
            self.head.extend(chunk[:head_room])
            chunk = chunk[head_room:]
        tail_limit = self.limit - self.limit // 2
        if tail_limit <= 0 or not chunk:
            return
        self.tail.extend(chunk)
        if len(self.tail) > tail_limit:
            del self.tail[: len(self.tail) - tail_limit]

    @property
    def retained(self) -> bytes:
        return bytes(self.head + self.tail)

    def stats(self, truncated: bool) -> dict[str, Any]:
        retained = len(self.head) + len(self.tail)
        return {"observed_bytes": self.observed, "retained_bytes": retained,
                "omitted_bytes": self.observed - retained, "truncated": truncated}


@dataclass
class HostSandbox:
    id: str
    name: str | None
    labels: dict[str, str]
    env: dict[str, str]
    workspace: Path
    state: str = "running"
    created_at: float = field(default_factory=time.time)
    processes: set[subprocess.Popen[bytes]] = field(default_factory=set)
    # Process groups of finished commands that still have members (what a command left running in the
    # background): ended with the sandbox, like the commands still running.
    leftover_groups: set[int] = field(default_factory=set)
    provision_log: list[str] = field(default_factory=list)
    # What the sandbox's entrypoint wrote. A host sandbox runs no entrypoint process of its own, so its
    # entrypoint log records its start: a log that is declared (logs.entrypoint) has something to show, and
    # a follower (upstream's battery among them) sees the log replayed from its beginning, then held open.
    entrypoint_log: list[str] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "labels": self.labels, "env": self.env,
                "workspace": str(self.workspace), "state": self.state, "created_at": self.created_at}


def _bash() -> str:
    found = shutil.which("bash")
    if not found:
        raise RuntimeError("bash is not on PATH")
    return found


class HostBackend:
    """Sandboxes in a registry directory. With ``SANDBOX_CONFORMANCE_HOST_REGISTRY`` set, records
    persist there and any process can attach to them; otherwise a private temporary registry is used
    and removed when the backend closes.

    ``environ`` (default ``os.environ``) is the provider's environment: where the registry variable is
    read and what commands inherit (minus secrets, ``BASH_ENV`` and the registry variable)."""

    sanitizer_class: type[Sanitizer] = Sanitizer  # how a command's output is sanitized, one per stream

    def __init__(self, registry: str | None = None, environ: Mapping[str, str] | None = None) -> None:
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        configured = registry or self.environ.get("SANDBOX_CONFORMANCE_HOST_REGISTRY")
        self.persistent = bool(configured)
        if not configured:
            sweep_dead_registries(Path(tempfile.gettempdir()))
        self.root = Path(configured) if configured else Path(tempfile.mkdtemp(prefix=ROOT_PREFIX))
        self.root.mkdir(parents=True, exist_ok=True)
        if not configured:
            (self.root / OWNER_FILE).write_text(f"{_process_identity(os.getpid()) or ''} {_pid_namespace()}")
        self.bash = _bash()
        self._lock = threading.RLock()
        self._sandboxes: dict[str, HostSandbox] = {}
        self._deleting: dict[str, threading.Event] = {}
        self._load()

    # -- registry --------------------------------------------------------------------------------

    def _record_path(self, sandbox_id: str) -> Path:
        return self.root / sandbox_id / "record.json"

    def _load(self) -> None:
        """The records of a persistent registry this process does not know yet. The registry is shared by every
        plugin process using it, as a real provider's state is: a listing shows what others created since."""
        if not self.persistent:
            return
        for record_file in self.root.glob("*/record.json"):
            if record_file.parent.name in self._sandboxes:
                continue
            try:
                data = json.loads(record_file.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            with self._lock:  # a record written meanwhile by this process is known by now: keep that one
                self._sandboxes.setdefault(data["id"], HostSandbox(
                    id=data["id"], name=data.get("name"), labels=data.get("labels", {}), env=data.get("env", {}),
                    workspace=Path(data["workspace"]), state=data.get("state", "running"),
                    created_at=data.get("created_at", time.time()),
                ))

    def _save(self, sandbox: HostSandbox) -> None:
        path = self._record_path(sandbox.id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(sandbox.record()))
        tmp.replace(path)

    def close(self) -> None:
        with self._lock:
            sandboxes = list(self._sandboxes.values())
        for sandbox in sandboxes:
            self._kill_processes(sandbox)
        if not self.persistent:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- sandboxes -------------------------------------------------------------------------------

    def create(self, name: str | None, labels: Mapping[str, str], env: Mapping[str, str],
               from_snapshot: str | None = None) -> HostSandbox:
        sandbox_id = f"host-{uuid.uuid4().hex[:20]}"
        workspace = self.root / sandbox_id / "workspace"
        if from_snapshot is not None:
            source = self._snapshot_dir(self.find_snapshot(from_snapshot)["id"]) / "files"
            workspace.parent.mkdir(parents=True)
            shutil.copytree(source, workspace, symlinks=True)
        else:
            workspace.mkdir(parents=True)
        sandbox = HostSandbox(sandbox_id, name, dict(labels), dict(env), workspace.resolve())
        sandbox.provision_log = [f"created workspace {sandbox.workspace}", f"sandbox {sandbox_id} is running"]
        sandbox.entrypoint_log = [f"sandbox {sandbox_id} started: no entrypoint process, commands run on request"]
        with self._lock:
            self._sandboxes[sandbox_id] = sandbox
            self._save(sandbox)
        return sandbox

    def get(self, sandbox_id: str, include_deleted: bool = False) -> HostSandbox:
        with self._lock:
            sandbox = self._sandboxes.get(sandbox_id)
        if sandbox is None or (sandbox.state == "deleted" and not include_deleted):
            raise not_found("sandbox", sandbox_id)
        return sandbox

    def list(self, labels: Mapping[str, str] | None = None) -> list[HostSandbox]:
        self._load()  # a persistent registry is shared: what other processes created since is listed too
        with self._lock:
            sandboxes = [s for s in self._sandboxes.values() if s.state != "deleted"]
        wanted = dict(labels or {})
        return [s for s in sandboxes if all(s.labels.get(k) == v for k, v in wanted.items())]

    def delete(self, sandbox_id: str) -> None:
        """Idempotent: unknown, deleted and being-deleted sandboxes all succeed."""
        with self._lock:
            sandbox = self._sandboxes.get(sandbox_id)
            if sandbox is None or sandbox.state == "deleted":
                return
            in_progress = self._deleting.get(sandbox_id)
            if in_progress is None:
                self._deleting[sandbox_id] = threading.Event()
                sandbox.state = "deleting"
        if in_progress is not None:
            in_progress.wait(timeout=30)
            return
        self._dispose(sandbox)
        with self._lock:
            sandbox.state = "deleted"
            self._save(sandbox)
            self._deleting.pop(sandbox_id).set()

    def _dispose(self, sandbox: HostSandbox) -> None:
        """End the sandbox's processes and put its files away (a hook for backends that run elsewhere)."""
        self._kill_processes(sandbox)
        trash = self._trash(sandbox)
        shutil.rmtree(trash, ignore_errors=True)
        try:
            sandbox.workspace.rename(trash)  # kept so undelete can restore it
        except OSError:
            shutil.rmtree(sandbox.workspace, ignore_errors=True)

    def _set_state(self, sandbox: HostSandbox, state: str) -> None:
        """Move a sandbox to ``state`` and persist its record."""
        with self._lock:
            sandbox.state = state
            self._save(sandbox)

    def _trash(self, sandbox: HostSandbox) -> Path:
        return self.root / sandbox.id / "deleted-workspace"

    def runtime_directory(self, sandbox: HostSandbox) -> Path:
        """The sandbox's runtime directory: beside its workspace, never inside it (a command's files cannot reach
        it by a relative path), mode 0700 whatever the umask (only its owner reads what is kept there).
        Made when first asked for, so a sandbox loaded from another process's registry has one too."""
        directory = self.root / sandbox.id / "runtime"
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.chmod(0o700)
        return directory

    def undelete(self, sandbox_id: str) -> HostSandbox:
        """Restore a deleted sandbox and its files."""
        with self._lock:
            sandbox = self._sandboxes.get(sandbox_id)
            if sandbox is None or sandbox.state != "deleted" or not self._trash(sandbox).is_dir():
                raise not_found("sandbox", sandbox_id)
            self._trash(sandbox).rename(sandbox.workspace)
            sandbox.state = "running"
            self._save(sandbox)
        return sandbox

    def archive(self, sandbox: HostSandbox) -> None:
        """Stop every process and keep the files; start brings the sandbox back."""
        if sandbox.state not in ("running", "stopped", "archived"):
            raise invalid_state(sandbox.state, "archive")
        self._kill_processes(sandbox)
        self._set_state(sandbox, "archived")

    # -- filesystem snapshots --------------------------------------------------------------------

    def _snapshot_dir(self, snapshot_id: str) -> Path:
        # Ids come from the wire: only ids this backend could have minted may name a directory.
        if not SNAPSHOT_ID.fullmatch(snapshot_id):
            raise not_found("snapshot", snapshot_id)
        return self.root / "_snapshots" / snapshot_id

    def create_snapshot(self, sandbox: HostSandbox, name: str | None) -> dict[str, Any]:
        snapshot_id = f"snap-{uuid.uuid4().hex[:20]}"
        directory = self._snapshot_dir(snapshot_id)
        shutil.copytree(sandbox.workspace, directory / "files", symlinks=True)
        size = sum(p.stat().st_size for p in (directory / "files").rglob("*") if p.is_file() and not p.is_symlink())
        record = {"id": snapshot_id, "name": name or snapshot_id, "state": "active", "source": sandbox.id,
                  "size_bytes": size, "created_at": time.time()}
        (directory / "record.json").write_text(json.dumps(record))
        return record

    def snapshots(self) -> list[dict[str, Any]]:
        records = []
        for path in sorted((self.root / "_snapshots").glob("*/record.json")):
            try:
                records.append(json.loads(path.read_text()))
            except (OSError, json.JSONDecodeError):
                continue
        return records

    def find_snapshot(self, key: str) -> dict[str, Any]:
        """A snapshot by id or by name (creation specs name it)."""
        for record in self.snapshots():
            if key in (record["id"], record["name"]):
                return record
        raise not_found("snapshot", key)

    def delete_snapshot(self, snapshot_id: str) -> None:
        """Idempotent: an unknown id (even one this backend could never have minted) is already gone."""
        if SNAPSHOT_ID.fullmatch(snapshot_id):
            shutil.rmtree(self._snapshot_dir(snapshot_id), ignore_errors=True)

    def stop(self, sandbox: HostSandbox) -> None:
        self._kill_processes(sandbox)
        self._set_state(sandbox, "stopped")

    def start(self, sandbox: HostSandbox) -> None:
        if sandbox.state not in ("running", "stopped", "archived"):
            raise invalid_state(sandbox.state, "start")
        self._set_state(sandbox, "running")

    def pause(self, sandbox: HostSandbox) -> None:
        """Freeze every process of the sandbox; its files stay as they are."""
        if sandbox.state not in ("running", "paused"):
            raise invalid_state(sandbox.state, "pause")
        for proc in list(sandbox.processes):
            _signal_group(proc, signal.SIGSTOP)
        self._set_state(sandbox, "paused")

    def resume(self, sandbox: HostSandbox) -> None:
        if sandbox.state not in ("running", "paused"):
            raise invalid_state(sandbox.state, "resume")
        for proc in list(sandbox.processes):
            _signal_group(proc, signal.SIGCONT)
        self._set_state(sandbox, "running")

    def set_labels(self, sandbox: HostSandbox, labels: Mapping[str, str]) -> None:
        with self._lock:
            sandbox.labels = dict(labels)
            self._save(sandbox)

    def _kill_processes(self, sandbox: HostSandbox) -> None:
        groups = {proc.pid for proc in list(sandbox.processes)} | sandbox.leftover_groups
        for group in groups:
            _signal_group_id(group, signal.SIGKILL)
            _signal_group_id(group, signal.SIGCONT)  # a paused group must run to die
        sandbox.leftover_groups.clear()

    def _keep_leftovers(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes]) -> None:
        """After a command ended: keep its group while something it started still runs in it, and forget
        groups that emptied meanwhile (a group id names nothing once its last member is gone)."""
        sandbox.leftover_groups.add(proc.pid)
        sandbox.leftover_groups = {group for group in sandbox.leftover_groups if _group_alive(group)}

    # -- exec ------------------------------------------------------------------------------------

    def environment(self, sandbox: HostSandbox, spec_env: Mapping[str, str]) -> dict[str, str]:
        """The plugin's environment minus secrets and BASH_ENV, then the sandbox's, then the command's."""
        env = {
            name: value for name, value in self.environ.items()
            if name in SAFE_ENVIRONMENT or not name.lower().endswith(_SECRET_SUFFIXES)
        }
        env.update(sandbox.env)
        env.update(spec_env)
        env.pop("BASH_ENV", None)
        env.pop("SANDBOX_CONFORMANCE_HOST_REGISTRY", None)
        return env

    def resolve(self, sandbox: HostSandbox, path: str | None) -> Path:
        if not path:
            return sandbox.workspace
        candidate = Path(path)
        return candidate if candidate.is_absolute() else sandbox.workspace / candidate

    def run(
        self,
        sandbox: HostSandbox,
        command: str,
        env: Mapping[str, str],
        working_dir: str | None = None,
        stdin: bytes | None = None,
        timeout_s: float | None = 3600.0,
        sanitization: str = "raw",
        on_output: Callable[[str, bytes], None] | None = None,
        cancel: Any = None,
        retain_limit: int | None = None,
        argv: list[str] | None = None,
    ) -> ExecRun:
        """Run Bash source (or ``argv`` as given); a timeout or cancellation ends normally with the
        matching termination. ``cancel`` is what ``await_exit`` watches (here a ``threading.Event``) and
        ``stdin`` what ``feed_stdin`` feeds (here the whole input as bytes)."""
        if sandbox.state != "running":
            raise invalid_state(sandbox.state, "unknown")  # the protocol's Action set has no "exec"
        started = time.monotonic()
        proc = self.start_process(sandbox, command, env, working_dir, stdin is not None, argv)
        sandbox.processes.add(proc)
        captures = {"stdout": Capture(retain_limit), "stderr": Capture(retain_limit)}
        sanitizers = {"stdout": self.sanitizer_class(sanitization), "stderr": self.sanitizer_class(sanitization)}

        def emit(stream: str, chunk: bytes) -> None:
            if chunk:
                captures[stream].add(chunk)
                if on_output is not None:
                    on_output(stream, chunk)

        def pump(stream: str, pipe: Any) -> None:
            try:
                for chunk in iter(lambda: pipe.read1(8192), b""):
                    emit(stream, sanitizers[stream].feed(chunk))
            except (OSError, ValueError):
                pass
            emit(stream, sanitizers[stream].finish())

        readers = [
            threading.Thread(target=pump, args=("stdout", proc.stdout), daemon=True),
            threading.Thread(target=pump, args=("stderr", proc.stderr), daemon=True),
        ]
        for reader in readers:
            reader.start()
        if stdin is not None:
            threading.Thread(target=self.feed_stdin, args=(proc, stdin), daemon=True).start()

        deadline = started + timeout_s if timeout_s is not None else None
        termination = self.await_exit(sandbox, proc, cancel, deadline)
        proc.wait()
        sandbox.processes.discard(proc)
        self._keep_leftovers(sandbox, proc)
        truncated = self.drain_output(proc, readers, cancel, deadline)
        exit_code, sig = self.exit_status(sandbox, proc)
        return ExecRun(
            stdout=captures["stdout"].retained,
            stderr=captures["stderr"].retained,
            exit_code=exit_code,
            signal=sig,
            termination=termination,
            duration_ms=int((time.monotonic() - started) * 1000),
            stdout_capture=captures["stdout"].stats(truncated),
            stderr_capture=captures["stderr"].stats(truncated),
        )

    def await_exit(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes], cancel: Any,
                   deadline: float | None) -> str:
        """Wait for the command to end, stopping it when ``cancel`` (a ``threading.Event``) is set or the
        deadline passes; the termination to report."""
        while proc.poll() is None:
            if cancel is not None and cancel.is_set():
                self.stop_process(sandbox, proc)
                return "cancelled"
            if deadline is not None and time.monotonic() >= deadline:
                self.stop_process(sandbox, proc)
                return "timed_out"
            try:
                proc.wait(timeout=0.02)
            except subprocess.TimeoutExpired:
                pass
        return "exited"

    def drain_output(self, proc: subprocess.Popen[bytes], readers: list[threading.Thread], cancel: Any,
                     deadline: float | None) -> bool:
        """Let the output readers finish after the command ended (a descendant may still hold a pipe);
        whether output was abandoned."""
        truncated = False
        drain_deadline = time.monotonic() + DRAIN_GRACE_S
        for reader in readers:
            reader.join(timeout=max(0.0, drain_deadline - time.monotonic()))
            truncated = truncated or reader.is_alive()
        return truncated

    # -- how a command runs: hooks for backends whose commands run elsewhere (e.g. in a container) --

    def start_process(self, sandbox: HostSandbox, command: str, env: Mapping[str, str], working_dir: str | None,
                      stdin_piped: bool, argv: list[str] | None) -> subprocess.Popen[bytes]:
        """Start one command (Bash source, or ``argv`` as given) with stdout and stderr piped."""
        cwd = self.resolve(sandbox, working_dir)
        if not cwd.is_dir():
            raise invalid_spec("working_dir", f"{working_dir} is not a directory in the sandbox")
        try:
            return subprocess.Popen(
                argv if argv is not None else [self.bash, "-c", command],
                cwd=cwd,
                env=self.environment(sandbox, env),
                stdin=subprocess.PIPE if stdin_piped else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise BackendError("io", f"could not start the command: {exc}", io_context="spawn") from None

    def stop_process(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes]) -> None:
        """End a command that timed out or was cancelled: SIGTERM to its group, a grace period, SIGKILL."""
        _stop_ladder(proc)

    def feed_stdin(self, proc: subprocess.Popen[bytes], data: bytes) -> None:
        """Write a command's whole stdin and close it (on a thread of its own)."""
        _feed_stdin(proc, data)

    def exit_status(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes]) -> tuple[int | None, int | None]:
        """(exit code, signal) of a finished command."""
        code = proc.returncode
        return (code, None) if code >= 0 else (None, -code)


def _feed_stdin(proc: subprocess.Popen[bytes], data: bytes) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write(data)
        proc.stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass  # a command that stops reading early is not an error


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    _signal_group_id(proc.pid, sig)


def _signal_group_id(group: int, sig: signal.Signals) -> None:
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _process_identity(pid: int) -> str | None:
    """"pid start-time" (clock ticks since boot, /proc/PID/stat field 22): names one process, never a
    later one that got the same pid; None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    return f"{pid} {stat.rsplit(')', 1)[1].split()[19]}"


def _pid_namespace() -> str:
    """This process's pid namespace ("pid:[inode]"): a pid names a process only within one."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "pid:[unknown]"


def sweep_dead_registries(directory: Path) -> None:
    """Remove the private registries of reference plugins that died without cleaning up (killed, or
    crashed): their sandboxes' files, and the processes still working in them (found by their working
    directory). A registry whose owner still runs, or that names no owner yet, is left alone."""
    dead = []
    for candidate in directory.glob(f"{ROOT_PREFIX}*"):
        try:
            owner = (candidate / OWNER_FILE).read_text().strip()
        except OSError:
            continue
        fields = owner.split()
        if len(fields) != 3 or not fields[0].isdigit() or fields[2] != _pid_namespace():
            continue  # no owner yet, or one in another pid namespace (its pid means nothing here): not ours to judge
        if _process_identity(int(fields[0])) == " ".join(fields[:2]):
            continue
        dead.append(candidate.resolve())
    if not dead:
        return
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(f"/proc/{entry.name}/cwd"))
        except OSError:
            continue
        if any(cwd == root or root in cwd.parents for root in dead):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for root in dead:
        shutil.rmtree(root, ignore_errors=True)


def _stop_ladder(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group, a grace period, then SIGKILL."""
    _signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGKILL)
    _signal_group(proc, signal.SIGKILL)

