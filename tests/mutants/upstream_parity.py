"""Broken variants, and controls, for the scenarios that bring upstream's conformance battery into the suite
(conformance/data/upstream-parity.yaml): the working directory after an attach, the private runtime directory,
the filesystem snapshot mode, volumes that outlive their sandboxes, and v2's stop grace after a term.

The v1 variants are also composed onto the v2 reference (``on_v2``) where their fault lies in code v2 inherits.
"""

from __future__ import annotations

import dataclasses
import shutil
import threading
from pathlib import Path
from typing import Any

from conformance.reference.host_backend import HostBackend, HostSandbox, invalid_spec, not_found
from conformance.reference.host_plugin import HostPlugin, application_error, unsupported
from conformance.reference.host_plugin_v2 import ExecSpecV2, ExecStops, HostPluginV2
from tests.mutants import mutant
from tests.mutants.v1_lifecycle import VolumesHostDirectories
from tests.mutants.v2_carried import on_v2

# -- the working directory, before and after an attach --------------------------------------------------


class _ForgetsWorkspaceOnAttach(HostBackend):
    """Starts a command given no working directory in the sandbox's registry directory, once the sandbox was
    attached: the record an attach rebuilt the sandbox from lacked the workspace."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.attached: set[str] = set()

    def resolve(self, sandbox: HostSandbox, path: str | None) -> Path:
        if not path and sandbox.id in self.attached:
            return sandbox.workspace.parent
        return super().resolve(sandbox, path)


@mutant("attach-commands-leave-workspace")
class AttachCommandsLeaveWorkspace(HostPlugin):
    """After an attach, commands given no working directory start in the registry directory, not the
    workspace the handle names."""

    def make_backend(self) -> HostBackend:
        return _ForgetsWorkspaceOnAttach(environ=self.environ)

    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_attach(params)
        self.backend.attached.add(params["sandbox_id"])  # type: ignore[attr-defined]
        return info


# -- the runtime directory -------------------------------------------------------------------------------


@mutant("runtime-directory-none")
class RuntimeDirectoryNone(HostPlugin):
    """Control: names no runtime directory (runtime_directory null, as upstream's host does). Legal; the
    runtime-directory scenario then has nothing to judge (tests/test_upstream_parity.py checks its skip)."""

    def handle_info(self, sandbox: HostSandbox) -> dict[str, Any]:
        return {**super().handle_info(sandbox), "runtime_directory": None}


@mutant("runtime-directory-world-readable")
class RuntimeDirectoryWorldReadable(HostPlugin):
    """Names a runtime directory of mode 0755: everyone on the machine reads what is kept there."""

    def handle_info(self, sandbox: HostSandbox) -> dict[str, Any]:
        info = super().handle_info(sandbox)
        Path(info["runtime_directory"]).chmod(0o755)
        return info


@mutant("runtime-directory-in-workspace")
class RuntimeDirectoryInWorkspace(HostPlugin):
    """Keeps the runtime directory inside the working directory, where commands and file methods reach it."""

    def handle_info(self, sandbox: HostSandbox) -> dict[str, Any]:
        info = super().handle_info(sandbox)
        inside = sandbox.workspace / ".runtime"
        inside.mkdir(mode=0o700, exist_ok=True)
        return {**info, "runtime_directory": str(inside)}


@mutant("runtime-directory-new-on-attach")
class RuntimeDirectoryNewOnAttach(HostPlugin):
    """Answers an attach with a runtime directory of its own, not the one the create named."""

    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_attach(params)
        attached = Path(info["runtime_directory"]).with_name("runtime-attached")
        attached.mkdir(mode=0o700, exist_ok=True)
        return {**info, "runtime_directory": str(attached)}


# -- the filesystem snapshot mode ------------------------------------------------------------------------


@mutant("filesystem-snapshots-undeclared")
class FilesystemSnapshotsUndeclared(HostPlugin):
    """Control: declares sandbox snapshots but not their filesystem mode, and refuses a snapshot with
    include_memory false as unsupported naming snapshots.filesystem."""

    refusal_names = "snapshots.filesystem"

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["snapshots"]["filesystem_from_sandbox"] = False
        return capabilities

    def snapshot_of(self, sandbox_id: str, options: dict[str, Any]) -> dict[str, Any]:
        if not options.get("include_memory", False):
            raise unsupported(self.refusal_names)
        return super().snapshot_of(sandbox_id, options)


@mutant("filesystem-snapshot-refusal-names-lifecycle")
class FilesystemSnapshotRefusalNamesLifecycle(FilesystemSnapshotsUndeclared):
    """Refuses the undeclared filesystem snapshot mode naming lifecycle.snapshot_sandbox, the verb's capability,
    instead of the mode's snapshots.filesystem."""

    refusal_names = "lifecycle.snapshot_sandbox"


@mutant("filesystem-snapshot-undeclared-taken")
class FilesystemSnapshotUndeclaredTaken(HostPlugin):
    """Declares no filesystem snapshot mode, yet takes a snapshot with include_memory false."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["snapshots"]["filesystem_from_sandbox"] = False
        return capabilities


# -- volumes that outlive their sandboxes ----------------------------------------------------------------


@mutant("volumes-mounted-at-create")
class VolumesMountedAtCreate(VolumesHostDirectories):
    """Control: volumes with create-time attach. A mount is a symbolic link at its (absolute) mount path to the
    volume's directory, made with the sandbox and removed with it; the volume's bytes stay with the volume.
    (Making a link at an absolute path like /mnt/... needs the rights to write there, as a mount does.)"""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mounts: dict[str, list[Path]] = {}  # sandbox id -> the links its mounts made
        self.mounts_lock = threading.Lock()

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["volumes"] = {"create_time_attach": True}
        return capabilities

    def validate_spec(self, spec: dict[str, Any]) -> None:
        super().validate_spec({**spec, "volumes": []})
        for mount in spec.get("volumes") or []:
            with self.volumes_lock:
                known = mount.get("volume") in self.volumes
            if not known:
                raise not_found("volume", str(mount.get("volume")))
            if not str(mount.get("mount_path", "")).startswith("/"):
                raise invalid_spec("volumes", "mount_path must be an absolute path")

    def mount_source(self, sandbox_id: str, volume_id: str) -> Path:
        """The directory a sandbox's mount of ``volume_id`` shows: the volume's own."""
        return self.volume_dir(volume_id)

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_create(params)
        sandbox_id = info["status"]["id"]
        links = []
        for mount in params["spec"].get("volumes") or []:
            link = Path(mount["mount_path"])
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(self.mount_source(sandbox_id, mount["volume"]), target_is_directory=True)
            links.append(link)
        with self.mounts_lock:
            self.mounts[sandbox_id] = links
        return info

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        answer = super().m_sandbox_delete(params)
        with self.mounts_lock:
            links = self.mounts.pop(params["sandbox_id"], [])
        for link in links:
            link.unlink(missing_ok=True)
        return answer


@mutant("volume-mount-per-sandbox-copy")
class VolumeMountPerSandboxCopy(VolumesMountedAtCreate):
    """Mounts a copy of the volume made for each sandbox: what a sandbox writes to the volume never reaches the
    volume, and the next sandbox mounting it starts from the volume as it was."""

    def mount_source(self, sandbox_id: str, volume_id: str) -> Path:
        copy = self.backend.root / sandbox_id / f"volume-{volume_id}"
        shutil.copytree(self.volume_dir(volume_id), copy)
        return copy


@mutant("volume-create-refused-for-credential")
class VolumeCreateRefusedForCredential(VolumesMountedAtCreate):
    """Control: a volume service whose credential lacks the permission to create volumes: volume/create fails
    with kind auth (listing still works). Upstream's rule makes the volume scenario a skip against it
    (tests/test_upstream_parity.py checks the skip; the catalogue, that listing stays honest)."""

    def m_volume_create(self, params: dict[str, Any]) -> Any:
        raise application_error("auth", "authentication with host failed: the token may not create volumes",
                                {"auth": {"provider": "host", "reason": "the token may not create volumes"}})


# -- v2: a stop grace after the host's term --------------------------------------------------------------


class _StopsPlugin(HostPluginV2):
    """The v2 reference with its stop requests made of ``stops_class``."""

    stops_class: type[ExecStops] = ExecStops

    def register_exec(self, exec_id: str, grace_s: float | None) -> ExecStops:
        stops = super().register_exec(exec_id, grace_s)
        stops.__class__ = self.stops_class
        return stops


class _TermGraceIgnoredStops(ExecStops):
    """The grace applies to the plugin's own stops only: once the host's term came, none is seen."""

    @property  # type: ignore[override]
    def grace_s(self) -> float | None:
        # the grace ExecStops.__init__ stored before the class was swapped (a property reads past it otherwise)
        return None if self.term.is_set() else self.__dict__.get("grace_s")


@mutant("term-grace-ignored")
class TermGraceIgnored(_StopsPlugin):
    """Runs the stop grace's ladder for its own stops only: a command that ignores the host's term runs on."""

    stops_class = _TermGraceIgnoredStops


class _TermKillsAtOnceStops(ExecStops):
    """A term on a command given a stop grace is taken as a kill."""

    def request(self, level: str) -> None:
        super().request("kill" if level == "term" and self.grace_s is not None else level)


@mutant("term-grace-kills-at-once")
class TermGraceKillsAtOnce(_StopsPlugin):
    """Kills a command given a stop grace at the host's term, without waiting for the grace."""

    stops_class = _TermKillsAtOnceStops


@mutant("term-grace-reports-killed")
class TermGraceReportsKilled(HostPluginV2):
    """Control: reports a command the grace's kill ended after the host's term as killed (the reference says
    cancelled, for the term that began it)."""

    def stream_exec(self, sandbox: HostSandbox, spec: ExecSpecV2, channel: Any, stops: ExecStops,
                    wants_stdin: bool) -> Any:
        run = super().stream_exec(sandbox, spec, channel, stops, wants_stdin)
        if stops.term.is_set() and spec.grace_s is not None and run.termination == "cancelled" and run.signal == 9:
            return dataclasses.replace(run, termination="killed")
        return run


class _TermEndsAtOnceStops(ExecStops):
    def request(self, level: str) -> None:
        super().request(level)
        if level == "term":
            self.kill.set()


@mutant("term-ends-at-once-unsignalled")
class TermEndsAtOnceUnsignalled(_StopsPlugin):
    """Control: a backend that cannot signal: it ends a command at the host's term, whatever the grace, and
    reports it cancelled with no signal (SDP2-140's note)."""

    stops_class = _TermEndsAtOnceStops

    def stream_exec(self, sandbox: HostSandbox, spec: ExecSpecV2, channel: Any, stops: ExecStops,
                    wants_stdin: bool) -> Any:
        run = super().stream_exec(sandbox, spec, channel, stops, wants_stdin)
        if stops.term.is_set():
            return dataclasses.replace(run, termination="cancelled", signal=None)
        return run


# The faults above that lie in code the v2 reference inherits, on v2 too.
for _name in ("attach-commands-leave-workspace", "runtime-directory-world-readable",
              "filesystem-snapshot-refusal-names-lifecycle", "volumes-mounted-at-create",
              "volume-mount-per-sandbox-copy"):
    on_v2(_name)
