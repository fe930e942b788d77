"""Broken variants of the v1 host plugin's lifecycle (listing, attaching, the optional verbs, snapshots,
volumes, creation specs, SSH access), and control variants: small doubles that honestly offer a verb
the reference does not declare, so the scenarios gated on it are proven able to pass."""

from __future__ import annotations

import atexit
import json
import os
import platform
import secrets
import shlex
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conformance.reference.host_backend import BackendError, HostBackend, HostSandbox, invalid_spec, not_found
from conformance.reference.host_plugin import UNHONOURED_SPEC_FIELDS, HostPlugin, RpcFailure, unsupported
from tests.mutants import mutant


def _empty_workspace(sandbox: HostSandbox) -> None:
    shutil.rmtree(sandbox.workspace, ignore_errors=True)
    sandbox.workspace.mkdir(parents=True)


def _share_workspace(sandbox: HostSandbox, origin: HostSandbox) -> None:
    """Make ``sandbox`` work in ``origin``'s files instead of its own copy."""
    shutil.rmtree(sandbox.workspace, ignore_errors=True)
    os.symlink(origin.workspace, sandbox.workspace)


def _seconds(duration: Any) -> float | None:
    if not isinstance(duration, dict):
        return None
    return duration.get("secs", 0) + duration.get("nanos", 0) / 1e9


def _timestamp(seconds: float) -> dict[str, int]:
    return {"secs_since_epoch": int(seconds), "nanos_since_epoch": int((seconds % 1) * 1e9)}


# -- listing and attaching -------------------------------------------------------------------------


@mutant("list-filter-matches-any-label")
class ListFilterMatchesAnyLabel(HostPlugin):
    """A label filter lists sandboxes carrying any of the labels instead of all of them."""

    def m_sandbox_list(self, params: dict[str, Any]) -> Any:
        wanted = (params["filter"] or {}).get("labels") or {}
        sandboxes = self.backend.list()
        if wanted:
            sandboxes = [s for s in sandboxes if any(s.labels.get(k) == v for k, v in wanted.items())]
        return {"sandboxes": [self.status(s) for s in sandboxes]}


@mutant("attach-reports-registry-directory")
class AttachReportsRegistryDirectory(HostPlugin):
    """attach rebuilds the handle from the registry record and names the record's directory as the
    working directory instead of the workspace."""

    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_attach(params)
        info["working_directory"] = str(Path(info["working_directory"]).parent)
        return info


@mutant("attach-unknown-provider-error")
class AttachUnknownProviderError(HostPlugin):
    """attach to an id it never issued fails as a provider error instead of not_found."""

    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        try:
            return super().m_sandbox_attach(params)
        except BackendError as error:
            lookup = RuntimeError(f"lookup failed: {error.message}")
            raise self.internal_error("sandbox/attach", lookup) from None


# -- states and the lifecycle verbs ----------------------------------------------------------------


@mutant("start-leaves-stopped-sandbox")
class StartLeavesStoppedSandbox(HostPlugin):
    """start only restores archived sandboxes; a stopped one stays stopped, though start answers."""

    def m_sandbox_start(self, params: dict[str, Any]) -> Any:
        if self.backend.get(params["sandbox_id"]).state == "stopped":
            return None
        return super().m_sandbox_start(params)


@mutant("stopped-state-exited")
class StoppedStateExited(HostPlugin):
    """Reports a stopped sandbox in its backend's own word, "exited", which is not a protocol state."""

    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        status = super().status(sandbox)
        if status["state"] == "stopped":
            status["state"] = "exited"
        return status


@mutant("pause-not-recorded")
class PauseNotRecorded(HostPlugin):
    """pause freezes the sandbox's processes but keeps describing it as running."""

    def m_sandbox_pause(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        for proc in list(sandbox.processes):
            try:
                os.killpg(proc.pid, signal.SIGSTOP)
            except (ProcessLookupError, PermissionError):
                pass
        return None


@mutant("archive-discards-files")
class ArchiveDiscardsFiles(HostPlugin):
    """archive frees the disk by emptying the workspace; start brings back an empty sandbox."""

    def m_sandbox_archive(self, params: dict[str, Any]) -> Any:
        result = super().m_sandbox_archive(params)
        _empty_workspace(self.backend.get(params["sandbox_id"]))
        return result


@mutant("refresh-activity-unknown-ok")
class RefreshActivityUnknownOk(HostPlugin):
    """refresh_activity succeeds for a sandbox id it never issued."""

    def m_sandbox_refresh_activity(self, params: dict[str, Any]) -> Any:
        return None


@mutant("start-stop-unknown-ok")
class StartStopUnknownOk(HostPlugin):
    """start and stop answer {} for a sandbox id they never issued ("nothing to start or stop")."""

    def m_sandbox_start(self, params: dict[str, Any]) -> Any:
        try:
            return super().m_sandbox_start(params)
        except BackendError:
            return None

    def m_sandbox_stop(self, params: dict[str, Any]) -> Any:
        try:
            return super().m_sandbox_stop(params)
        except BackendError:
            return None


@mutant("set-labels-merges")
class SetLabelsMerges(HostPlugin):
    """set_labels merges the new labels into the old ones instead of replacing them."""

    def m_sandbox_set_labels(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        self.backend.set_labels(sandbox, {**sandbox.labels, **params["labels"]})
        return None


_SHARED_REGISTRY: list[str] = []


def _shared_registry() -> str:
    """One registry directory for every plugin served in this (test) process, removed when it exits."""
    if not _SHARED_REGISTRY:
        path = tempfile.mkdtemp(prefix="sandbox-conformance-shared-registry-")
        atexit.register(shutil.rmtree, path, True)
        _SHARED_REGISTRY.append(path)
    return _SHARED_REGISTRY[0]


@mutant("registry-shared-by-processes")
class RegistrySharedByProcesses(HostPlugin):
    """Control: sandboxes outlive the plugin process. Every plugin served in the test process keeps its records
    in one registry directory (what SANDBOX_CONFORMANCE_HOST_REGISTRY does for real processes), so a provider
    started later attaches by id to a sandbox an earlier one made."""

    backend_kind: type[HostBackend] = HostBackend

    def make_backend(self) -> HostBackend:
        return self.backend_kind(registry=_shared_registry(), environ=self.environ)


class _LabelsInMemoryBackend(HostBackend):
    def set_labels(self, sandbox: HostSandbox, labels: Mapping[str, str]) -> None:
        with self._lock:
            sandbox.labels = dict(labels)  # the record in the registry keeps the old labels


@mutant("durable-labels-unsaved")
class DurableLabelsUnsaved(RegistrySharedByProcesses):
    """Sandboxes outlive the process, but set_labels changes only the process's own copy: a provider started
    later attaches and sees the labels from before."""

    backend_kind = _LabelsInMemoryBackend


@mutant("undelete-empty-workspace")
class UndeleteEmptyWorkspace(HostPlugin):
    """undelete brings the sandbox's record back but gives it a fresh, empty workspace."""

    def m_sandbox_undelete(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_undelete(params)
        _empty_workspace(self.backend.get(params["sandbox_id"]))
        return info


@mutant("platform-os-capitalized")
class PlatformOsCapitalized(HostPlugin):
    """platform_info names the operating system as platform.system() spells it ("Linux")."""

    def m_sandbox_platform_info(self, params: dict[str, Any]) -> Any:
        answer = super().m_sandbox_platform_info(params)
        answer["platform"]["os"] = platform.system()
        return answer


@mutant("platform-arch-kernel-release")
class PlatformArchKernelRelease(HostPlugin):
    """platform_info puts the kernel release where the architecture belongs."""

    def m_sandbox_platform_info(self, params: dict[str, Any]) -> Any:
        answer = super().m_sandbox_platform_info(params)
        answer["platform"]["arch"] = platform.release()
        return answer


@mutant("checkpoint-unsupported")
class CheckpointUnsupported(HostPlugin):
    """Answers the retired checkpoint methods as an unsupported capability instead of unknown methods."""

    def unknown_method(self, method: str) -> RpcFailure:
        if method in ("sandbox/checkpoint", "sandbox/restore_checkpoint"):
            return unsupported("lifecycle.checkpoint")
        return super().unknown_method(method)


# -- creation specs --------------------------------------------------------------------------------


@mutant("network-block-accepted")
class NetworkBlockAccepted(HostPlugin):
    """Accepts network "block" (network.block_all declared false) and runs the sandbox with the host's
    network as it is."""

    def validate_spec(self, spec: dict[str, Any]) -> None:
        if spec.get("network") == "block":
            spec = {**spec, "network": "provider_default"}
        super().validate_spec(spec)


@mutant("spec-extras-ignored")
class SpecExtrasIgnored(HostPlugin):
    """Creates a sandbox whatever sandbox_kind, region, user or resources the spec asks for."""

    def validate_spec(self, spec: dict[str, Any]) -> None:
        ignored = set(UNHONOURED_SPEC_FIELDS) | {"resources"}
        super().validate_spec({k: v for k, v in spec.items() if k not in ignored})


@mutant("sandbox-kind-substituted")
class SandboxKindSubstituted(HostPlugin):
    """Accepts any sandbox_kind and provisions (and reports) a virtual machine instead."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.substituted: set[str] = set()

    def validate_spec(self, spec: dict[str, Any]) -> None:
        super().validate_spec({k: v for k, v in spec.items() if k != "sandbox_kind"})

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_create(params)
        if params["spec"].get("sandbox_kind") is not None:
            self.substituted.add(info["status"]["id"])
            info = self.handle_info(self.backend.get(info["status"]["id"]))
        return info

    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        status = super().status(sandbox)
        if sandbox.id in self.substituted:
            status["sandbox_kind"] = "virtual_machine"
        return status


@mutant("create-name-dropped")
class CreateNameDropped(HostPlugin):
    """Never reports the name a sandbox was created with."""

    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        return {**super().status(sandbox), "name": None}


@mutant("timers-null-refused")
class TimersNullRefused(HostPlugin):
    """Refuses any creation spec that mentions timers, even when every timer is null (the defaults)."""

    def validate_spec(self, spec: dict[str, Any]) -> None:
        if "timers" in spec:
            raise invalid_spec("timers", "the host provider has no lifecycle timers")
        super().validate_spec(spec)


# -- snapshots -------------------------------------------------------------------------------------


def _snapshot_source(spec: dict[str, Any]) -> str | None:
    source = spec.get("source")
    return source["snapshot"]["name"] if isinstance(source, dict) and "snapshot" in source else None


@mutant("snapshot-source-ignored")
class SnapshotSourceIgnored(HostPlugin):
    """Checks that a snapshot source exists, then creates an empty sandbox instead of restoring it."""

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        name = _snapshot_source(spec)
        if name is not None:
            self.backend.find_snapshot(name)
            params = {**params, "spec": {**spec, "source": "host_directory"}}
        return super().m_sandbox_create(params)


@mutant("snapshot-by-reference")
class SnapshotByReference(HostPlugin):
    """A sandbox made from a snapshot works in the snapshotted sandbox's own files (a lazy snapshot
    that never copies), so its writes show up in the original."""

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_create(params)
        name = _snapshot_source(params["spec"])
        if name is not None:
            origin = self.backend.get(self.backend.find_snapshot(name)["source"])
            _share_workspace(self.backend.get(info["status"]["id"]), origin)
        return info


@mutant("snapshot-memory-silently-filesystem")
class SnapshotMemorySilentlyFilesystem(HostPlugin):
    """A snapshot asked to keep memory and processes quietly captures the filesystem only."""

    def snapshot_of(self, sandbox_id: str, options: dict[str, Any]) -> dict[str, Any]:
        return super().snapshot_of(sandbox_id, {**options, "include_memory": False})


@mutant("snapshot-delete-twice-not-found")
class SnapshotDeleteTwiceNotFound(HostPlugin):
    """Deleting a snapshot that is already gone fails with not_found."""

    def m_snapshot_delete(self, params: dict[str, Any]) -> Any:
        self.backend.find_snapshot(params["snapshot_id"])
        return super().m_snapshot_delete(params)


@mutant("snapshot-state-ready")
class SnapshotStateReady(HostPlugin):
    """Describes a usable snapshot as "ready" (a volume word) instead of "active"."""

    def snapshot_status(self, record: dict[str, Any]) -> dict[str, Any]:
        status = super().snapshot_status(record)
        if status["state"] == "active":
            status["state"] = "ready"
        return status


@mutant("snapshot-spec-overrides-ignored")
class SnapshotSpecOverridesIgnored(HostPlugin):
    """A snapshot of a sandbox silently ignores the sandbox_kind, region and resources it is asked for."""

    def m_snapshot_create(self, params: dict[str, Any]) -> Any:
        spec = {k: v for k, v in params["spec"].items() if k not in ("sandbox_kind", "region", "resources")}
        return super().m_snapshot_create({**params, "spec": spec})


@mutant("service-listing-ignores-gate")
class ServiceListingIgnoresGate(HostPlugin):
    """Declares no snapshot or volume service (both null) but still answers their list methods."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["snapshots"] = None
        return capabilities

    def dispatch(self, method: str, params: Any) -> Any:
        if method == "snapshot/list":
            return {"snapshots": []}
        if method == "volume/list":
            return {"volumes": []}
        return super().dispatch(method, params)


def _snapshot_record_path(plugin: HostPlugin, snapshot_id: str) -> Path:
    return plugin.backend.root / "_snapshots" / snapshot_id / "record.json"


@mutant("snapshot-activation-states")
class SnapshotActivationStates(HostPlugin):
    """Control: declares snapshots.activation. A deactivated snapshot is inactive and cannot be used
    to create sandboxes until it is activated again."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["snapshots"]["activation"] = True
        return capabilities

    def set_snapshot_state(self, snapshot_id: str, state: str) -> None:
        record = self.backend.find_snapshot(snapshot_id)
        record["state"] = state
        _snapshot_record_path(self, record["id"]).write_text(json.dumps(record))

    def m_snapshot_activate(self, params: dict[str, Any]) -> Any:
        self.set_snapshot_state(params["snapshot_id"], "active")
        return None

    def m_snapshot_deactivate(self, params: dict[str, Any]) -> Any:
        self.set_snapshot_state(params["snapshot_id"], "inactive")
        return None

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        name = _snapshot_source(params["spec"])
        if name is not None and self.backend.find_snapshot(name)["state"] != "active":
            raise invalid_spec("source.snapshot.name", f"snapshot {name} is not active")
        return super().m_sandbox_create(params)


@mutant("deactivate-ignored")
class DeactivateIgnored(SnapshotActivationStates):
    """Declares snapshots.activation, but deactivate answers without deactivating anything."""

    def m_snapshot_deactivate(self, params: dict[str, Any]) -> Any:
        self.backend.find_snapshot(params["snapshot_id"])
        return None


@mutant("activation-served-undeclared")
class ActivationServedUndeclared(HostPlugin):
    """Serves snapshot activation and deactivation without declaring snapshots.activation."""

    def dispatch(self, method: str, params: Any) -> Any:
        if method in ("snapshot/activate", "snapshot/deactivate"):
            self.backend.find_snapshot(params["snapshot_id"])
            return None
        return super().dispatch(method, params)


# -- fork ------------------------------------------------------------------------------------------


@mutant("fork-copies-workspace")
class ForkCopiesWorkspace(HostPlugin):
    """Control: declares lifecycle.fork. A fork copies the workspace into a new running sandbox with the
    same labels and environment; both keep running. (A host sandbox has no memory image or process
    tree of its own to carry over; the scenario checks what a fork makes visible: files and states.)"""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["lifecycle"]["fork"] = True
        return capabilities

    def m_sandbox_fork(self, params: dict[str, Any]) -> Any:
        source = self.backend.get(params["sandbox_id"])
        return self.handle_info(self.fork_of(source, (params.get("options") or {}).get("name")))

    def fork_of(self, source: HostSandbox, name: str | None) -> HostSandbox:
        copy = self.backend.create_snapshot(source, None)
        try:
            return self.backend.create(name, source.labels, source.env, from_snapshot=copy["id"])
        finally:
            self.backend.delete_snapshot(copy["id"])


@mutant("fork-stops-original")
class ForkStopsOriginal(ForkCopiesWorkspace):
    """Stops the original to copy it consistently, and leaves it stopped."""

    def fork_of(self, source: HostSandbox, name: str | None) -> HostSandbox:
        self.backend.stop(source)
        return super().fork_of(source, name)


@mutant("fork-shares-workspace")
class ForkSharesWorkspace(ForkCopiesWorkspace):
    """The fork works in the original's files instead of a copy of them."""

    def fork_of(self, source: HostSandbox, name: str | None) -> HostSandbox:
        fork = super().fork_of(source, name)
        _share_workspace(fork, source)
        return fork


@mutant("fork-accepts-without-memory")
class ForkAcceptsWithoutMemory(ForkCopiesWorkspace):
    """Declares lifecycle.fork and forks even when asked to leave memory behind (a filesystem copy)."""

    def check_fork_options(self, options: dict[str, Any]) -> None:
        return None


# -- resize ----------------------------------------------------------------------------------------


@mutant("resize-cpu-affinity")
class ResizeCpuAffinity(HostPlugin):
    """Control: declares lifecycle.resize for CPU cores. A resized sandbox's commands are pinned to that
    many CPUs (with taskset, where it exists) and its status reports the cores it has."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cores: dict[str, int] = {}

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["lifecycle"]["resize"] = True
        return capabilities

    def m_sandbox_resize(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        resources = params["resources"]
        for key, value in resources.items():
            if key != "cpu_cores" and value is not None:
                raise invalid_spec(f"resources.{key}", "the host provider can only pin CPU cores")
        cores = resources.get("cpu_cores")
        if cores is not None:
            if not 1 <= cores <= (os.cpu_count() or 1):
                raise invalid_spec("resources.cpu_cores", f"this host has {os.cpu_count()} CPU cores")
            self.record_cores(sandbox, cores)
        return None

    def record_cores(self, sandbox: HostSandbox, cores: int) -> None:
        self.cores[sandbox.id] = cores

    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        status = super().status(sandbox)
        if sandbox.id in self.cores:
            status["resources"] = {"cpu_cores": self.cores[sandbox.id], "memory_mb": None, "disk_mb": None,
                                   "gpus": None}
        return status

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        cores = self.cores.get(sandbox_id)
        if cores is not None and shutil.which("taskset"):
            cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0))[:cores])
            pinned = f"exec taskset -c {cpus} {self.backend.bash} -c {shlex.quote(spec['command'])}"
            spec = {**spec, "command": pinned}
        return super().run_spec(sandbox_id, spec, **kwargs)


@mutant("resize-not-reported")
class ResizeNotReported(ResizeCpuAffinity):
    """Declares lifecycle.resize and answers it, but the status never shows the new resources."""

    def record_cores(self, sandbox: HostSandbox, cores: int) -> None:
        return None


# -- timers ----------------------------------------------------------------------------------------


@mutant("timers-idle-auto-stop")
class TimersIdleAutoStop(HostPlugin):
    """Control: declares lifecycle.timers with an idle auto-stop timer. Null means the default (no
    timer), zero switches the timer off, a positive duration stops the sandbox after that long idle."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.idle_limits: dict[str, float] = {}
        self.idle_timers: dict[str, threading.Timer] = {}
        self.timers_lock = threading.Lock()

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["lifecycle"]["timers"] = True
        return capabilities

    def m_sandbox_set_timers(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        timers = params["timers"]
        for name, value in timers.items():
            if name != "auto_stop_after_idle" and _seconds(value):
                raise invalid_spec(f"timers.{name}", "the host provider only has an idle auto-stop timer")
        self.set_idle_limit(sandbox, _seconds(timers.get("auto_stop_after_idle")))
        return None

    def set_idle_limit(self, sandbox: HostSandbox, seconds: float | None) -> None:
        """None is the provider's default and zero switches the timer off: on this host both mean no timer."""
        with self.timers_lock:
            if seconds:
                self.idle_limits[sandbox.id] = seconds
            else:
                self.idle_limits.pop(sandbox.id, None)
        self.arm(sandbox)

    def arm(self, sandbox: HostSandbox) -> None:
        with self.timers_lock:
            previous = self.idle_timers.pop(sandbox.id, None)
            if previous is not None:
                previous.cancel()
            limit = self.idle_limits.get(sandbox.id)
            if limit is None:
                return
            timer = threading.Timer(limit, self.idle_stop, args=(sandbox,))
            timer.daemon = True
            self.idle_timers[sandbox.id] = timer
            timer.start()

    def idle_stop(self, sandbox: HostSandbox) -> None:
        if sandbox.state == "running":
            self.backend.stop(sandbox)

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        sandbox = self.backend.get(sandbox_id)
        self.arm(sandbox)  # a command is activity
        try:
            return super().run_spec(sandbox_id, spec, **kwargs)
        finally:
            self.arm(sandbox)

    def m_sandbox_refresh_activity(self, params: dict[str, Any]) -> Any:
        self.arm(self.backend.get(params["sandbox_id"]))
        return None


@mutant("timer-zero-stops-at-once")
class TimerZeroStopsAtOnce(TimersIdleAutoStop):
    """Takes a zero idle auto-stop timer to mean "stop after zero seconds" instead of "never"."""

    def set_idle_limit(self, sandbox: HostSandbox, seconds: float | None) -> None:
        if seconds == 0:
            with self.timers_lock:
                self.idle_limits[sandbox.id] = 0.0
            timer = threading.Timer(0.0, self.idle_stop, args=(sandbox,))
            timer.daemon = True
            timer.start()
            return
        super().set_idle_limit(sandbox, seconds)


# -- network ---------------------------------------------------------------------------------------


@mutant("network-updates-recorded")
class NetworkUpdatesRecorded(HostPlugin):
    """Control: declares lifecycle.update_network and network.allow_all. Host sandboxes share the
    host's network, which allows everything, so allow_all (and provider_default) are honoured and
    reported in the status; other policies are refused as invalid_spec."""

    HONOURED = ("provider_default", "allow_all")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policies: dict[str, str] = {}

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["lifecycle"]["update_network"] = True
        capabilities["network"]["allow_all"] = True
        return capabilities

    def validate_spec(self, spec: dict[str, Any]) -> None:
        if spec.get("network") in self.HONOURED:
            spec = {k: v for k, v in spec.items() if k != "network"}
        super().validate_spec(spec)

    def m_sandbox_update_network(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        if params["network"] not in self.HONOURED:
            raise invalid_spec("network", "host sandboxes share the host's network, which allows everything")
        self.record_policy(sandbox, params["network"])
        return None

    def record_policy(self, sandbox: HostSandbox, policy: str) -> None:
        self.policies[sandbox.id] = policy

    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        return {**super().status(sandbox), "network": self.policies.get(sandbox.id, "provider_default")}


@mutant("update-network-stale-status")
class UpdateNetworkStaleStatus(NetworkUpdatesRecorded):
    """Accepts a network update but keeps reporting the policy the sandbox was created with."""

    def record_policy(self, sandbox: HostSandbox, policy: str) -> None:
        return None


# -- volumes ---------------------------------------------------------------------------------------


@mutant("volumes-host-directories")
class VolumesHostDirectories(HostPlugin):
    """Control: declares a volume service (without create-time attach): a volume is a directory kept
    beside the sandboxes; delete is idempotent."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.volumes: dict[str, dict[str, Any]] = {}
        self.volumes_lock = threading.Lock()

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["volumes"] = {"create_time_attach": False}
        return capabilities

    def volume_dir(self, volume_id: str) -> Path:
        return self.backend.root / "_volumes" / volume_id

    def volume_status(self, record: dict[str, Any]) -> dict[str, Any]:
        return {"id": record["id"], "name": record["name"], "state": "ready", "error_reason": None,
                "created_at": _timestamp(record["created_at"])}

    def m_volume_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        if spec.get("size_mb") is not None:
            raise invalid_spec("size_mb", "a host directory has no size limit")
        volume_id = f"vol-{uuid.uuid4().hex[:20]}"
        self.volume_dir(volume_id).mkdir(parents=True)
        with self.volumes_lock:
            self.volumes[volume_id] = {"id": volume_id, "name": spec["name"], "created_at": time.time()}
        return {"volume_id": volume_id}

    def m_volume_get(self, params: dict[str, Any]) -> Any:
        with self.volumes_lock:
            record = self.volumes.get(params["volume_id"])
        if record is None:
            raise not_found("volume", params["volume_id"])
        return {"status": self.volume_status(record)}

    def m_volume_list(self, params: dict[str, Any]) -> Any:
        with self.volumes_lock:
            records = list(self.volumes.values())
        return {"volumes": [self.volume_status(r) for r in records]}

    def m_volume_delete(self, params: dict[str, Any]) -> Any:
        with self.volumes_lock:
            self.volumes.pop(params["volume_id"], None)
        shutil.rmtree(self.volume_dir(params["volume_id"]), ignore_errors=True)
        return None


@mutant("volume-delete-twice-not-found")
class VolumeDeleteTwiceNotFound(VolumesHostDirectories):
    """Deleting a volume that is already gone fails with not_found."""

    def m_volume_delete(self, params: dict[str, Any]) -> Any:
        self.m_volume_get(params)
        return super().m_volume_delete(params)


@mutant("volume-state-available")
class VolumeStateAvailable(VolumesHostDirectories):
    """Describes a usable volume as "available" (a cloud-API word) instead of "ready"."""

    def volume_status(self, record: dict[str, Any]) -> dict[str, Any]:
        return {**super().volume_status(record), "state": "available"}


# -- ssh access ------------------------------------------------------------------------------------


@mutant("ssh-access-tokens")
class SshAccessTokens(HostPlugin):
    """Control: declares access.ssh with lifetimes and revocation. Each access is a fresh token,
    valid for the lifetime asked (or until revoked), in a complete ssh command line. (Whether the
    command reaches a server cannot be seen from the protocol; a host has no sshd to offer.)"""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tokens: dict[str, tuple[str, float | None]] = {}
        self.tokens_lock = threading.Lock()

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["access"].update(ssh=True, ssh_ttl=True, ssh_revoke=True)
        return capabilities

    def ssh_command(self, sandbox: HostSandbox, token: str) -> str:
        return f"ssh -p 2222 -o StrictHostKeyChecking=accept-new {token}@127.0.0.1"

    def m_access_ssh_create(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        token = secrets.token_hex(16)
        ttl_ms = params.get("ttl_ms")
        expires = time.time() + ttl_ms / 1000 if ttl_ms is not None else None
        with self.tokens_lock:
            self.tokens[token] = (sandbox.id, expires)
        return {"access": self.access(sandbox, token, expires)}

    def access(self, sandbox: HostSandbox, token: str, expires: float | None) -> dict[str, Any]:
        return {"command": self.ssh_command(sandbox, token), "token": token,
                "expires_at": _timestamp(expires) if expires is not None else None}

    def m_access_ssh_revoke(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        with self.tokens_lock:
            owner = self.tokens.get(params["token"], (None, None))[0]
            if owner != sandbox.id:
                raise invalid_spec("token", "no such SSH access for this sandbox")
            del self.tokens[params["token"]]
        return None


@mutant("ssh-ttl-ignored")
class SshTtlIgnored(SshAccessTokens):
    """Declares access.ssh_ttl but hands out access that never expires, whatever lifetime is asked."""

    def access(self, sandbox: HostSandbox, token: str, expires: float | None) -> dict[str, Any]:
        return {**super().access(sandbox, token, expires), "expires_at": None}


@mutant("ssh-command-placeholder")
class SshCommandPlaceholder(SshAccessTokens):
    """Returns an ssh command template with placeholders still in it."""

    def ssh_command(self, sandbox: HostSandbox, token: str) -> str:
        return "ssh -p 2222 <user>@{host}"


@mutant("ssh-token-missing")
class SshTokenMissing(SshAccessTokens):
    """Declares access.ssh_revoke but hands out access without a token to revoke."""

    def access(self, sandbox: HostSandbox, token: str, expires: float | None) -> dict[str, Any]:
        return {**super().access(sandbox, token, expires), "token": None}
