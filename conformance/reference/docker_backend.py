"""The Docker backend of the reference providers: a sandbox is a container, a command is ``docker exec``.

It reuses the host-directory backend for everything that is not about where a command runs: the
registry and its locking, idempotent delete, output capture, sanitization and streaming. Each sandbox
is a container started from a local image with an idle PID 1, labelled ``sandbox-conformance.managed=1``
plus the sandbox's own labels, with a host directory bind-mounted at ``/workspace`` — the sandbox's
working directory, which the filesystem methods reach through the mount. Memory and CPU sizes become
the container's cgroup limits, so a command inside feels them.

Docker is the source of truth about which sandboxes exist: any process of this backend can describe,
list and delete a sandbox another (perhaps crashed) process created, which is how the suite's crash
recovery and sweep by run label remove the containers. Sandbox records (name, labels as set later,
since Docker labels are immutable) live next to each workspace, under one state directory.

Never pulls: an image that is not present locally is refused as an invalid spec.
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.reference.host_backend import (
    TERM_GRACE_S,
    BackendError,
    HostBackend,
    HostSandbox,
    invalid_spec,
    invalid_state,
    not_found,
)

MANAGED_LABEL = "sandbox-conformance.managed"
RUN_LABEL = "sandbox-conformance.run"
# The labels the sandbox was created with, as JSON: container labels also carry the image's.
LABELS_LABEL = "sandbox-conformance.labels"
NAME_LABEL = "sandbox-conformance.sandbox-name"
WORKSPACE = "/workspace"
PID_DIR = "/run/sandbox-conformance"
ID_PREFIX = "docker-"
DOCKER_TIMEOUT_S = 60.0
HEALTH_TIMEOUT_S = 10.0
SIGNAL_RETRY_S = 0.05

# PID 1 of every sandbox: makes the directory exec pid files go to, then idles. The shell is the
# entrypoint so an image's own ENTRYPOINT cannot replace it.
IDLE_COMMAND = f"mkdir -p {PID_DIR} && exec sleep infinity"

# Every command runs under this wrapper: `docker exec` makes it a session and process group leader,
# so its pid is the group a timeout or cancel signals; it records that pid under a token only the
# plugin knows, runs the command as a child (plain `bash -c` or the given argv), and passes the
# command's status on — 128+N when a signal N ended it. BASH_ENV never reaches the command's bash
# (whoever set it: the image, the sandbox or the command). Absolute paths: the env may replace PATH.
EXEC_WRAPPER = (
    f'unset BASH_ENV; t=$1; shift; printf %s "$$" > {PID_DIR}/"$t"; '
    f'"$@"; s=$?; /bin/rm -f {PID_DIR}/"$t" 2>/dev/null; exit $s'
)
# Signals the process group recorded under a token; exit 3 when the command has not started (or ended).
SIGNAL_SCRIPT = (
    f'p=$(cat {PID_DIR}/"$2" 2>/dev/null) || exit 3; kill -s "$1" -- -"$p" 2>/dev/null; '
    f'if [ "$1" = KILL ]; then /bin/rm -f {PID_DIR}/"$2"; fi; exit 0'
)

# Variables the docker CLI itself reads: a command's value for them goes on the command line instead
# of into the CLI's environment, where it would redirect the CLI.
CLI_VARIABLES = {"PATH", "HOME", "TMPDIR", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "SSL_CERT_FILE", "SSL_CERT_DIR",
                 "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}


def docker_failure(message: str, code: str | None = None) -> BackendError:
    return BackendError("provider", message, provider={"provider": "docker", "code": code, "message": message,
                                                        "retryable": False, "detail": None})


def default_state_root(environ: Mapping[str, str] | None = None) -> Path:
    """Where records live: ``SANDBOX_CONFORMANCE_DOCKER_STATE`` of ``environ`` (default ``os.environ``)."""
    configured = (os.environ if environ is None else environ).get("SANDBOX_CONFORMANCE_DOCKER_STATE")
    return Path(configured) if configured else Path(tempfile.gettempdir()) / "sandbox-conformance-docker"


@dataclass
class DockerSandbox(HostSandbox):
    image: str = ""
    memory_mb: int | None = None
    cpu_cores: int | None = None
    network: str | None = None  # the network policy asked for: "allow_all" or "block"; None for the default

    def record(self) -> dict[str, Any]:
        return {**super().record(), "image": self.image, "memory_mb": self.memory_mb, "cpu_cores": self.cpu_cores,
                "network": self.network}


def cli_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the docker CLI needs of the provider's environment (default ``os.environ``); commands'
    variables are added per call."""
    return {name: value for name, value in (os.environ if environ is None else environ).items()
            if name in CLI_VARIABLES or name.startswith("DOCKER_") or name in ("LANG", "LC_ALL", "USER")}


class DockerCli:
    """Runs the docker CLI; every failure becomes a BackendError naming what Docker said."""

    def __init__(self, executable: str | None = None, environment: Mapping[str, str] | None = None) -> None:
        """``environment`` is the CLI's whole environment (default: ``cli_environment()``)."""
        self.executable = executable or shutil.which("docker") or "docker"
        self.environment = dict(environment) if environment is not None else cli_environment()

    def argv(self, *args: str) -> list[str]:
        return [self.executable, *args]

    def run(self, *args: str, timeout: float = DOCKER_TIMEOUT_S, check: bool = True,
            extra_env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        env = {**self.environment, **(extra_env or {})}
        try:
            completed = subprocess.run(self.argv(*args), check=False, capture_output=True, text=True,
                                       timeout=timeout, env=env, stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise docker_failure(f"the docker CLI ({self.executable}) is not installed") from None
        except subprocess.TimeoutExpired:
            raise docker_failure(f"docker {args[0]} did not answer within {timeout:.0f} s") from None
        if check and completed.returncode != 0:
            raise docker_failure(f"docker {args[0]} failed: {what_docker_said(completed)}")
        return completed


def what_docker_said(completed: subprocess.CompletedProcess[str]) -> str:
    """What the docker CLI said went wrong, without its usage hints."""
    lines = [line.strip() for line in (completed.stderr or completed.stdout or "").splitlines()]
    said = [line for line in lines if line and not line.startswith(("Run '", "See '", "Usage:"))]
    return said[0].removeprefix("docker: ") if said else f"exit code {completed.returncode}"


class DockerBackend(HostBackend):
    """Container sandboxes behind the host backend's registry, exec and capture machinery."""

    def __init__(self, state_root: str | Path | None = None, cli: DockerCli | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        """``environ`` (default ``os.environ``) is the provider's environment: the state directory's
        variable and the docker CLI's variables are read there."""
        self.cli = cli or DockerCli(environment=cli_environment(environ))
        # Records persist in a shared state directory, so the registry root is never removed wholesale.
        super().__init__(registry=str(state_root or default_state_root(environ)), environ=environ)

    # -- registry --------------------------------------------------------------------------------

    def _load(self) -> None:
        """Nothing up front: sandboxes are adopted from Docker when a request names them."""

    def _save(self, sandbox: HostSandbox) -> None:
        if sandbox.state != "deleted" and (self.root / sandbox.id).is_dir():
            super()._save(sandbox)

    def _adopt(self, names: Sequence[str]) -> list[DockerSandbox]:
        """Records for containers another process (or an earlier run) created; unknown names are skipped."""
        names = [n for n in names if n.startswith(ID_PREFIX)]
        if not names:
            return []
        completed = self.cli.run("container", "inspect", *names, check=False)
        try:
            containers = json.loads(completed.stdout or "[]")
        except json.JSONDecodeError:
            containers = []
        adopted = []
        for container in containers:
            sandbox = self._from_container(container)
            if sandbox is None:
                continue
            with self._lock:
                adopted.append(self._sandboxes.setdefault(sandbox.id, sandbox))  # type: ignore[arg-type]
        return adopted

    def _from_container(self, container: dict[str, Any]) -> DockerSandbox | None:
        config = container.get("Config") or {}
        labels = config.get("Labels") or {}
        if labels.get(MANAGED_LABEL) != "1":
            return None
        sandbox_id = str(container.get("Name", "")).lstrip("/")
        workspace = next((Path(m["Source"]) for m in container.get("Mounts") or []
                          if m.get("Destination") == WORKSPACE), self.root / sandbox_id / "workspace")
        try:
            record = json.loads((workspace.parent / "record.json").read_text())
        except (OSError, json.JSONDecodeError):
            record = {}
        try:
            created_labels = json.loads(labels.get(LABELS_LABEL) or "{}")
        except json.JSONDecodeError:
            created_labels = {}
        host_config = container.get("HostConfig") or {}
        state = container.get("State") or {}
        docker_state = "paused" if state.get("Paused") else "running" if state.get("Running") else "stopped"
        memory = host_config.get("Memory") or 0
        nano_cpus = host_config.get("NanoCpus") or 0
        return DockerSandbox(
            id=sandbox_id, name=record.get("name", labels.get(NAME_LABEL) or None),
            labels=record.get("labels", created_labels), env=record.get("env", {}), workspace=workspace,
            state=docker_state, created_at=record.get("created_at", time.time()),
            image=record.get("image", config.get("Image", "")),
            memory_mb=memory // (1024 * 1024) if memory else None,
            cpu_cores=round(nano_cpus / 1e9) if nano_cpus else None,
            network=record.get("network"),
        )

    def get(self, sandbox_id: str, include_deleted: bool = False) -> HostSandbox:
        with self._lock:
            known = sandbox_id in self._sandboxes
        if not known:
            self._adopt([sandbox_id])
        return super().get(sandbox_id, include_deleted)

    def list(self, labels: Mapping[str, str] | None = None) -> list[HostSandbox]:
        present = set(self.cli.run("ps", "--all", "--filter", f"label={MANAGED_LABEL}=1",
                                   "--format", "{{.Names}}").stdout.split())
        with self._lock:
            unknown = sorted(present - set(self._sandboxes))
        self._adopt(unknown)
        return [s for s in super().list(labels) if s.id in present]

    # -- sandboxes -------------------------------------------------------------------------------

    def create(self, name: str | None, labels: Mapping[str, str], env: Mapping[str, str],  # type: ignore[override]
               from_snapshot: str | None = None, *, image: str, memory_mb: int | None = None,
               cpu_cores: int | None = None, network: str | None = None) -> DockerSandbox:
        if from_snapshot is not None:
            raise invalid_spec("source", "this provider cannot start a sandbox from a snapshot")
        sandbox_id = f"{ID_PREFIX}{uuid.uuid4().hex[:20]}"
        workspace = self.root / sandbox_id / "workspace"
        workspace.mkdir(parents=True)
        sandbox = DockerSandbox(sandbox_id, name, dict(labels), dict(env), workspace.resolve(), image=image,
                                memory_mb=memory_mb, cpu_cores=cpu_cores, network=network)
        self._save(sandbox)
        args = ["run", "--detach", "--pull", "never", "--name", sandbox_id, "--hostname", sandbox_id[:63],
                "--label", f"{MANAGED_LABEL}=1", "--label", f"{LABELS_LABEL}={json.dumps(dict(labels))}",
                "--label", f"{NAME_LABEL}={name or ''}",
                "--volume", f"{sandbox.workspace}:{WORKSPACE}", "--workdir", WORKSPACE,
                # PID 1 ignores SIGTERM; stopping a sandbox need not wait for a grace period.
                "--stop-signal", "SIGKILL", "--entrypoint", "/bin/sh"]
        for key, value in labels.items():
            args += ["--label", f"{key}={value}"]
        if memory_mb is not None:
            # Swap equal to memory: no swap to escape the limit into.
            args += ["--memory", f"{memory_mb}m", "--memory-swap", f"{memory_mb}m"]
        if cpu_cores is not None:
            args += ["--cpus", str(cpu_cores)]
        if network == "block":
            args += ["--network", "none"]  # a network namespace of its own holding only loopback
        cli_env, env_args = self._env_arguments(env)
        args += [*env_args, image, "-c", IDLE_COMMAND]
        completed = self.cli.run(*args, check=False, extra_env=cli_env)
        if completed.returncode != 0:
            self.cli.run("rm", "--force", "--volumes", sandbox_id, check=False)
            shutil.rmtree(workspace.parent, ignore_errors=True)
            raise self._create_failure(image, what_docker_said(completed))
        sandbox.provision_log = [f"started container {sandbox_id} from {image}",
                                 f"workspace {sandbox.workspace} mounted at {WORKSPACE}"]
        sandbox.entrypoint_log = [f"container {sandbox_id} started: {IDLE_COMMAND}"]
        with self._lock:
            self._sandboxes[sandbox_id] = sandbox
        return sandbox

    @staticmethod
    def _create_failure(image: str, said: str) -> BackendError:
        lowered = said.lower()
        if "no such image" in lowered or "pull access denied" in lowered:
            return invalid_spec("source", f"image {image} is not present locally, and this provider never pulls")
        if "invalid reference format" in lowered:
            return invalid_spec("source", f"{image!r} is not a valid image reference")
        if "cpu" in lowered:
            return invalid_spec("resources.cpu_cores", said)
        if "memory" in lowered:
            return invalid_spec("resources.memory_mb", said)
        return docker_failure(f"docker run failed: {said}")

    def _env_arguments(self, env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
        """``-e`` options for ``env``: values travel in the CLI's environment, never on a command line
        other users can read, except for the few variables the CLI itself reads."""
        cli_env: dict[str, str] = {}
        args: list[str] = []
        for key, value in env.items():
            if key in CLI_VARIABLES or key.startswith("DOCKER_") or "=" in key:
                args += ["--env", f"{key}={value}"]
            else:
                cli_env[key] = value
                args += ["--env", key]
        return cli_env, args

    def delete(self, sandbox_id: str) -> None:
        with self._lock:
            known = sandbox_id in self._sandboxes
        if not known:
            self._adopt([sandbox_id])  # a container a crashed process left must still go
        super().delete(sandbox_id)

    def _dispose(self, sandbox: HostSandbox) -> None:
        completed = self.cli.run("rm", "--force", "--volumes", sandbox.id, check=False)
        if completed.returncode != 0 and "no such container" not in completed.stderr.lower():
            with self._lock:  # the delete failed: the sandbox is as it was, and a retry may succeed
                sandbox.state = "running"
                self._deleting.pop(sandbox.id).set()
            raise docker_failure(f"docker rm failed: {what_docker_said(completed)}")
        for proc in list(sandbox.processes):
            _kill_local(proc)
        shutil.rmtree(sandbox.workspace.parent, ignore_errors=True)

    def set_network(self, sandbox: DockerSandbox, policy: str) -> None:
        """Attach the container to Docker's default bridge only ("allow_all"), or to no network ("block":
        loopback alone); it keeps running, and its processes see the change at once."""
        if sandbox.state == "deleted":
            raise invalid_state(sandbox.state, "update_network")
        inspected = self.cli.run("container", "inspect", "--format", "{{json .NetworkSettings.Networks}}", sandbox.id)
        try:
            attached = set(json.loads(inspected.stdout or "{}") or {})
        except json.JSONDecodeError:
            raise docker_failure(f"docker inspect answered no network list for {sandbox.id}") from None
        wanted = {"bridge"} if policy == "allow_all" else set()
        # "none" goes first when the bridge comes: a container on "none" can join no other network
        for network in sorted(attached - wanted, key=lambda name: name != "none"):
            if network != "none" or wanted:
                self.cli.run("network", "disconnect", network, sandbox.id)
        for network in sorted(wanted - attached):
            self.cli.run("network", "connect", network, sandbox.id)
        sandbox.network = policy
        self._save(sandbox)

    def stop(self, sandbox: HostSandbox) -> None:
        if sandbox.state not in ("running", "stopped", "paused"):
            raise invalid_state(sandbox.state, "stop")
        if sandbox.state == "paused":
            self.cli.run("unpause", sandbox.id, check=False)
        self.cli.run("stop", sandbox.id)
        self._set_state(sandbox, "stopped")

    def start(self, sandbox: HostSandbox) -> None:
        if sandbox.state not in ("running", "stopped"):
            raise invalid_state(sandbox.state, "start")
        self.cli.run("start", sandbox.id)
        self._set_state(sandbox, "running")

    def pause(self, sandbox: HostSandbox) -> None:
        """Freeze every process of the container (the cgroup freezer); its files stay as they are."""
        if sandbox.state not in ("running", "paused"):
            raise invalid_state(sandbox.state, "pause")
        if sandbox.state == "running":
            self.cli.run("pause", sandbox.id)
        self._set_state(sandbox, "paused")

    def resume(self, sandbox: HostSandbox) -> None:
        if sandbox.state not in ("running", "paused"):
            raise invalid_state(sandbox.state, "resume")
        if sandbox.state == "paused":
            self.cli.run("unpause", sandbox.id)
        self._set_state(sandbox, "running")

    def archive(self, sandbox: HostSandbox) -> None:
        raise invalid_state(sandbox.state, "archive")  # never reached: the plugin does not declare it

    def _kill_processes(self, sandbox: HostSandbox) -> None:
        """End the commands this process started in the sandbox (the backend is closing)."""
        for proc in list(sandbox.processes):
            self._signal_exec(sandbox, proc, "KILL")
            _kill_local(proc)

    # -- health ----------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """``ok`` when the engine answers; otherwise a status saying it cannot be reached."""
        try:
            completed = self.cli.run("version", "--format", "{{.Server.Version}}", timeout=HEALTH_TIMEOUT_S,
                                     check=False)
        except BackendError as error:
            return {"status": "unreachable", "message": error.message, "missing_permissions": []}
        if completed.returncode == 0 and completed.stdout.strip():
            return {"status": "ok", "message": None, "missing_permissions": []}
        said = what_docker_said(completed)
        status = "unauthorized" if "permission denied" in said.lower() else "unreachable"
        return {"status": status, "message": f"the Docker engine cannot be reached: {said}",
                "missing_permissions": []}

    # -- paths -----------------------------------------------------------------------------------

    def resolve(self, sandbox: HostSandbox, path: str | None) -> Path:
        """The host path of a sandbox path under /workspace (relative paths are relative to it)."""
        if not path:
            return sandbox.workspace
        container_path = posixpath.normpath(posixpath.join(WORKSPACE, path))
        relative = posixpath.relpath(container_path, WORKSPACE)
        if relative == ".." or relative.startswith("../"):
            raise invalid_spec("path", f"{path} is outside {WORKSPACE}, the part of the sandbox's filesystem "
                                       "this provider serves")
        if relative == ".":
            return sandbox.workspace
        candidate = sandbox.workspace / relative
        # A link the sandbox made must not lead the plugin, which runs on the host, out of the workspace.
        root = os.path.realpath(sandbox.workspace)
        for probe in (candidate.parent, candidate):
            real = os.path.realpath(probe)
            if real != root and not real.startswith(root + os.sep):
                raise invalid_spec("path", f"{path} leads outside {WORKSPACE} through a symbolic link")
        return candidate

    def container_directory(self, working_dir: str | None) -> str:
        return posixpath.normpath(posixpath.join(WORKSPACE, working_dir)) if working_dir else WORKSPACE

    # -- exec ------------------------------------------------------------------------------------

    def start_process(self, sandbox: HostSandbox, command: str, env: Mapping[str, str], working_dir: str | None,
                      stdin_piped: bool, argv: list[str] | None) -> subprocess.Popen[bytes]:
        directory = self.container_directory(working_dir)
        if not self._is_directory(sandbox, directory):
            raise invalid_spec("working_dir", f"{working_dir} is not a directory in the sandbox")
        token = uuid.uuid4().hex
        cli_env, env_args = self._env_arguments(env)
        args = ["exec", *(["--interactive"] if stdin_piped else []), "--workdir", directory, *env_args, sandbox.id,
                "/bin/sh", "-c", EXEC_WRAPPER, "sandbox-conformance-exec", token,
                *(argv if argv is not None else ["/bin/bash", "-c", command])]
        try:
            proc = subprocess.Popen(self.cli.argv(*args), env={**self.cli.environment, **cli_env},
                                    stdin=subprocess.PIPE if stdin_piped else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise BackendError("io", f"could not start docker exec: {exc}", io_context="spawn") from None
        proc.exec_token = token  # type: ignore[attr-defined]
        return proc

    def _is_directory(self, sandbox: HostSandbox, directory: str) -> bool:
        relative = posixpath.relpath(directory, WORKSPACE)
        if not (relative == ".." or relative.startswith("../")):
            try:
                return self.resolve(sandbox, directory).is_dir()
            except BackendError:
                return False
        return self.cli.run("exec", sandbox.id, "/bin/sh", "-c", 'test -d "$1"', "-", directory,
                            check=False).returncode == 0

    def _signal_exec(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes], signal_name: str) -> bool:
        """Signal a command's process group inside the container; False when it has not started (or is gone)."""
        token = getattr(proc, "exec_token", None)
        if token is None:
            return False
        try:
            completed = self.cli.run("exec", sandbox.id, "/bin/sh", "-c", SIGNAL_SCRIPT, "-", signal_name, token,
                                     check=False, timeout=10)
        except BackendError:
            return False
        return completed.returncode == 0

    def stop_process(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes]) -> None:
        """SIGTERM to the command's group inside the container, a grace period, then SIGKILL."""
        deadline = time.monotonic() + TERM_GRACE_S
        # A command stopped right after it was asked for may not have recorded its group yet.
        while not self._signal_exec(sandbox, proc, "TERM") and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(SIGNAL_RETRY_S)
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        # Always: whatever the command left running in its group goes too.
        self._signal_exec(sandbox, proc, "KILL")
        try:
            proc.wait(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            _kill_local(proc)  # the engine no longer answers; at least the client ends

    def exit_status(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes]) -> tuple[int | None, int | None]:
        code = proc.returncode
        if code < 0:
            return None, -code  # the docker client itself was killed
        if code in (1, 125, 126, 127):
            # Also what the docker CLI answers when it could not run the command at all: a container
            # that is gone or stopped is an infrastructure failure, never the command's exit code.
            self._require_running(sandbox)
        if 128 < code <= 128 + 64:
            return None, code - 128  # the wrapper passes "ended by signal N" on as 128+N
        return code, None

    def _require_running(self, sandbox: HostSandbox) -> None:
        completed = self.cli.run("container", "inspect", "--format", "{{.State.Status}}", sandbox.id, check=False)
        if completed.returncode != 0:
            raise not_found("sandbox", sandbox.id)
        status = completed.stdout.strip()
        if status != "running":
            raise invalid_state(status, "unknown")


def _kill_local(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.kill()
    except OSError:
        pass


def sweep(run_label: str | None = None, cli: DockerCli | None = None, state_root: Path | None = None) -> list[str]:
    """Remove every managed container (only those of one run, given its label value) and their state.

    The last line of defence after a crash: containers outlive the plugin process that made them.
    """
    cli = cli or DockerCli()
    filters = ["--filter", f"label={MANAGED_LABEL}=1"]
    if run_label is not None:
        filters += ["--filter", f"label={RUN_LABEL}={run_label}"]
    names = cli.run("ps", "--all", *filters, "--format", "{{.Names}}").stdout.split()
    workspaces: list[Path] = []
    if names:
        inspected = json.loads(cli.run("container", "inspect", *names, check=False).stdout or "[]")
        workspaces = [Path(m["Source"]) for c in inspected for m in c.get("Mounts") or []
                      if m.get("Destination") == WORKSPACE]
        cli.run("rm", "--force", "--volumes", *names, check=False)
    for workspace in workspaces:
        if workspace.name == "workspace" and (workspace.parent / "record.json").exists():
            shutil.rmtree(workspace.parent, ignore_errors=True)
    root = state_root or default_state_root()
    if run_label is None and root.is_dir():
        # With every managed container gone, any record left belongs to nothing.
        for leftover in root.glob(f"{ID_PREFIX}*"):
            shutil.rmtree(leftover, ignore_errors=True)
    return names
