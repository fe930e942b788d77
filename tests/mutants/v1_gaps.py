"""Broken variants (and controls) of the v1 host plugin for the three gaps."""

from __future__ import annotations

import copy
from typing import Any

from conformance.reference.host_plugin import BASE_CAPABILITIES, HostPlugin, application_error
from tests.mutants import mutant


@mutant("resources-accepted-and-ignored")
class ResourcesAcceptedAndIgnored(HostPlugin):
    """Accepts memory and CPU sizes, then runs without any limit (forkd's 512 MiB guest)."""

    def validate_spec(self, spec: dict[str, Any]) -> None:
        super().validate_spec({key: value for key, value in spec.items() if key != "resources"})


@mutant("timeout-as-exit-124")
class TimeoutAsExit124(HostPlugin):
    """Reports a timed-out command as if it had exited with code 124, like coreutils timeout."""

    def exec_result(self, run: Any) -> dict[str, Any]:
        result = super().exec_result(run)
        if result["termination"] == "timed_out":
            result.update(termination="exited", exit_code=124, signal=None)
        return result


@mutant("unknown-sandbox-exit-127")
class UnknownSandboxExit127(HostPlugin):
    """Answers a command for a sandbox it never created with exit code 127, as a shell would."""

    def m_exec_run(self, params: dict[str, Any]) -> Any:
        with self.backend._lock:
            known = params["sandbox_id"] in self.backend._sandboxes
        if not known:
            return {"stdout_b64": "", "stderr_b64": "", "exit_code": 127, "signal": None,
                    "termination": "exited", "duration_ms": 0}
        return super().m_exec_run(params)


@mutant("deleted-sandbox-exit-127")
class DeletedSandboxExit127(HostPlugin):
    """Answers a command for a deleted sandbox with exit code 127."""

    def m_exec_run(self, params: dict[str, Any]) -> Any:
        try:
            sandbox = self.backend.get(params["sandbox_id"], include_deleted=True)
        except Exception:
            return super().m_exec_run(params)
        if sandbox.state == "deleted":
            return {"stdout_b64": "", "stderr_b64": "", "exit_code": 127, "signal": None,
                    "termination": "exited", "duration_ms": 0}
        return super().m_exec_run(params)


@mutant("snapshot-shares-state")
class SnapshotSharesState(HostPlugin):
    """'Branches' from a snapshot by pointing the new sandbox at its source's own workspace."""

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        source = params["spec"].get("source")
        if not isinstance(source, dict) or "snapshot" not in source:
            return super().m_sandbox_create(params)
        record = self.backend.find_snapshot(source["snapshot"]["name"])
        original = self.backend.get(record["source"])
        branch = self.backend.create(None, params["spec"].get("labels") or {}, {})
        branch.workspace = original.workspace
        return self.handle_info(branch)


@mutant("unknown-snapshot-boots-empty")
class UnknownSnapshotBootsEmpty(HostPlugin):
    """Starts an empty sandbox when asked for a snapshot that does not exist."""

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        source = params["spec"].get("source")
        if isinstance(source, dict) and "snapshot" in source:
            try:
                self.backend.find_snapshot(source["snapshot"]["name"])
            except Exception:
                spec = {**params["spec"], "source": "host_directory"}
                return super().m_sandbox_create({**params, "spec": spec})
        return super().m_sandbox_create(params)


def _missing_snapshot(backend: Any, params: dict[str, Any]) -> str | None:
    """The snapshot name a create asks for, when no such snapshot exists."""
    source = params["spec"].get("source")
    if isinstance(source, dict) and "snapshot" in source:
        name = source["snapshot"]["name"]
        if not any(name in (record["id"], record["name"]) for record in backend.snapshots()):
            return name
    return None


@mutant("unknown-snapshot-internal-error")
class UnknownSnapshotInternalError(HostPlugin):
    """Fails a create from a missing snapshot with an internal provider error relaying its backend's 404."""

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        name = _missing_snapshot(self.backend, params)
        if name is not None:
            raise self.internal_error("sandbox/create", RuntimeError(f"image service answered 404 for snapshot {name}"))
        return super().m_sandbox_create(params)


@mutant("unknown-snapshot-invalid-spec")
class UnknownSnapshotInvalidSpec(HostPlugin):
    """Control: refuses a create from a missing snapshot as invalid_spec naming source.snapshot.name."""

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        name = _missing_snapshot(self.backend, params)
        if name is not None:
            raise application_error("invalid_spec", f"invalid spec: source.snapshot.name: no snapshot {name}",
                                    {"field": "source.snapshot.name", "reason": f"no snapshot named {name}"})
        return super().m_sandbox_create(params)


class _WithoutSnapshots(HostPlugin):
    """Declares neither sandbox snapshots nor a snapshot service."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = copy.deepcopy(BASE_CAPABILITIES)
        capabilities["lifecycle"]["snapshot_sandbox"] = False
        capabilities["snapshots"] = None
        return capabilities


@mutant("snapshots-not-offered")
class SnapshotsNotOffered(_WithoutSnapshots):
    """Control: a provider without snapshots, refusing them honestly as unsupported."""


@mutant("snapshots-undeclared-misrefused")
class SnapshotsUndeclaredMisrefused(_WithoutSnapshots):
    """Offers no snapshots, but refuses one as an invalid state instead of unsupported."""

    def unsupported(self, method: str, capability: str) -> Any:
        if method == "sandbox/snapshot":
            return application_error("invalid_state", "cannot snapshot a sandbox in state Running",
                                     {"current": "running", "action": "snapshot"})
        return super().unsupported(method, capability)


