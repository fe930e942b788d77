"""The v1 optional operations by their neutral names: method, gating capability, and how to build
the params from a sandbox id and neutral arguments (which override the defaults)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conformance.adapter import (
    AccessUrl,
    Done,
    OperationResult,
    PreviewUrl,
    SnapshotInfo,
    SnapshotList,
    SnapshotRef,
    SshAccess,
    VolumeInfo,
    VolumeList,
    VolumeRef,
)
from conformance.dialects.sandbox_driver_v1.rules import network_policy

Params = dict[str, Any]
Builder = Callable[[Any, "str | None", dict[str, Any]], Params]
Reader = Callable[[Any], OperationResult]


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _snapshot_status(status: Any) -> SnapshotInfo:
    status = _obj(status)
    regions = status.get("regions")
    return SnapshotInfo(status, id=_text(status.get("id")), state=_text(status.get("state")),
                        regions=tuple(r for r in regions if isinstance(r, str)) if isinstance(regions, list) else None)


def _volume_status(status: Any) -> VolumeInfo:
    status = _obj(status)
    return VolumeInfo(status, id=_text(status.get("id")), state=_text(status.get("state")))


def _done(result: Any) -> OperationResult:
    return Done(result)


def _snapshot_ref(result: Any) -> OperationResult:
    return SnapshotRef(result, id=_text(_obj(result).get("snapshot_id")))


def _snapshot_get(result: Any) -> OperationResult:
    info = _snapshot_status(_obj(result).get("status"))
    return SnapshotInfo(result, id=info.id, state=info.state, regions=info.regions)


def _snapshot_list(result: Any) -> OperationResult:
    items = _obj(result).get("snapshots")
    return SnapshotList(result, snapshots=tuple(_snapshot_status(s) for s in items) if isinstance(items, list) else ())


def _volume_ref(result: Any) -> OperationResult:
    return VolumeRef(result, id=_text(_obj(result).get("volume_id")))


def _volume_get(result: Any) -> OperationResult:
    info = _volume_status(_obj(result).get("status"))
    return VolumeInfo(result, id=info.id, state=info.state)


def _volume_list(result: Any) -> OperationResult:
    items = _obj(result).get("volumes")
    return VolumeList(result, volumes=tuple(_volume_status(v) for v in items) if isinstance(items, list) else ())


def _preview(result: Any) -> OperationResult:
    preview = _obj(_obj(result).get("preview"))
    headers = {k: v for k, v in _obj(preview.get("headers")).items() if isinstance(v, str)}
    return PreviewUrl(result, url=_text(preview.get("url")), headers=headers)


def _ssh(result: Any) -> OperationResult:
    access = _obj(_obj(result).get("access"))
    return SshAccess(result, command=_text(access.get("command")), token=_text(access.get("token")),
                     expires_at=access.get("expires_at"))


def _web_terminal(result: Any) -> OperationResult:
    return AccessUrl(result, url=_text(_obj(result).get("url")))


def _vnc(result: Any) -> OperationResult:
    connection = _obj(_obj(result).get("connection"))
    return AccessUrl(result, url=_text(connection.get("url")), password=_text(connection.get("password")))


@dataclass(frozen=True)
class V1Operation:
    method: str
    capability: str
    build: Builder
    provider_level: bool = False
    read: Reader = _done  # the answer as a typed result (fork and undelete answer handles instead)
    served_through: tuple[str, ...] = ()  # see OperationInfo.served_through

    @property
    def takes_events(self) -> bool:
        """Whether the method's request may carry `events` (late v1)."""
        return self.method in EVENTED_METHODS


EVENTED_METHODS = frozenset({"sandbox/undelete", "snapshot/create", "snapshot/delete", "snapshot/activate",
                             "snapshot/deactivate", "volume/create", "volume/delete"})


def _sid(adapter: Any, sandbox_id: str | None, args: dict[str, Any]) -> Params:
    return {"sandbox_id": sandbox_id}


def _memory_options(default: bool) -> Builder:
    def build(adapter: Any, sandbox_id: str | None, args: dict[str, Any]) -> Params:
        options: dict[str, Any] = {"include_memory": args.get("include_memory", default)}
        if args.get("name") is not None:
            options["name"] = args["name"]
        return {"sandbox_id": sandbox_id, "options": options}

    return build


_NO_SNAPSHOT = "conformance-no-such-snapshot"
_NO_VOLUME = "conformance-no-such-volume"

OPERATIONS: dict[str, V1Operation] = {
    "pause": V1Operation("sandbox/pause", "lifecycle.pause", _sid),
    "resume": V1Operation("sandbox/resume", "lifecycle.pause", _sid),
    "archive": V1Operation("sandbox/archive", "lifecycle.archive", _sid),
    "recover": V1Operation("sandbox/recover", "lifecycle.recover", _sid),
    "refresh activity": V1Operation("sandbox/refresh_activity", "lifecycle.refresh_activity", _sid),
    "undelete": V1Operation("sandbox/undelete", "lifecycle.undelete", _sid),
    "fork": V1Operation("sandbox/fork", "lifecycle.fork", _memory_options(True)),
    "resize": V1Operation("sandbox/resize", "lifecycle.resize", lambda a, s, args: {
        "sandbox_id": s, "resources": {"cpu_cores": args.get("cpu_cores", 1)}}),
    "snapshot": V1Operation("sandbox/snapshot", "lifecycle.snapshot_sandbox", _memory_options(False), read=_snapshot_ref),
    "set timers": V1Operation("sandbox/set_timers", "lifecycle.timers", lambda a, s, args: {
        "sandbox_id": s, "timers": args.get("timers", {})}),
    "set labels": V1Operation("sandbox/set_labels", "lifecycle.labels", lambda a, s, args: {
        "sandbox_id": s, "labels": args.get("labels", dict(a.run_labels))}),
    "update network": V1Operation("sandbox/update_network", "lifecycle.update_network", lambda a, s, args: {
        "sandbox_id": s, "network": network_policy(args.get("network", "allow_all"))}),
    "run with stdin": V1Operation("exec/run", "exec.stdin", lambda a, s, args: {
        "sandbox_id": s, "spec": {"command": "cat", "env": {}, "timeout_ms": 10_000,
                                  "stdin_b64": base64.b64encode(b"conformance").decode()}}),
    # exec/cancel takes an exec id only; cancelling one that is unknown or finished succeeds (SDP1-110).
    "cancel a command": V1Operation("exec/cancel", "exec.cancel", lambda a, s, args: {
        "exec_id": args.get("exec_id", "conformance-no-such-exec")}, True),
    "open a stdio process": V1Operation("exec/stdio_open", "exec.stdio_process", lambda a, s, args: {
        "sandbox_id": s, "process_id": a.next_token("stdio"), "spec": {"command": "true", "env": {}}}),
    "open a terminal": V1Operation("pty/open", "pty", lambda a, s, args: {
        "sandbox_id": s, "pty_id": a.next_token("pty"), "options": {"size": {"rows": 24, "cols": 80}, "env": {}}}),
    "follow logs": V1Operation("logs/follow", "logs", lambda a, s, args: {
        "sandbox_id": s, "stream_id": a.next_token("logs"), "source": args.get("source", "provision")}),
    "set permissions": V1Operation("fs/set_permissions", "fs.permissions", lambda a, s, args: {
        "sandbox_id": s, "path": args.get("path", "."), "mode": args.get("mode", 0o755)}),
    "create a snapshot": V1Operation("snapshot/create", "snapshots", lambda a, s, args: {
        "spec": {"name": args.get("name", a.next_token("conformance-snapshot")),
                 "source": args.get("source", {"sandbox": {"id": s, "include_memory": False}}),
                 **{key: args[key] for key in ("sandbox_kind", "region", "resources") if key in args}}}, read=_snapshot_ref),
    "list snapshots": V1Operation("snapshot/list", "snapshots", lambda a, s, args: {
        "filter": {"name": args["name"]} if args.get("name") else {}}, True, read=_snapshot_list),
    "get a snapshot": V1Operation("snapshot/get", "snapshots", lambda a, s, args: {
        "snapshot_id": args.get("snapshot_id", _NO_SNAPSHOT)}, True, read=_snapshot_get),
    "delete a snapshot": V1Operation("snapshot/delete", "snapshots", lambda a, s, args: {
        "snapshot_id": args.get("snapshot_id", _NO_SNAPSHOT)}, True),
    "activate a snapshot": V1Operation("snapshot/activate", "snapshots.activation", lambda a, s, args: {
        "snapshot_id": args.get("snapshot_id", _NO_SNAPSHOT)}, True),
    "deactivate a snapshot": V1Operation("snapshot/deactivate", "snapshots.activation", lambda a, s, args: {
        "snapshot_id": args.get("snapshot_id", _NO_SNAPSHOT)}, True),
    "create a volume": V1Operation("volume/create", "volumes", lambda a, s, args: {
        "spec": {"name": args.get("name", a.next_token("conformance-volume"))}}, True, read=_volume_ref),
    "list volumes": V1Operation("volume/list", "volumes", lambda a, s, args: {}, True, read=_volume_list),
    "get a volume": V1Operation("volume/get", "volumes", lambda a, s, args: {
        "volume_id": args.get("volume_id", _NO_VOLUME)}, True, read=_volume_get),
    "delete a volume": V1Operation("volume/delete", "volumes", lambda a, s, args: {
        "volume_id": args.get("volume_id", _NO_VOLUME)}, True),
    "get a preview url": V1Operation("access/preview_url", "access.preview_urls", lambda a, s, args: {
        "sandbox_id": s, "port": args.get("port", 8080)}, read=_preview),
    "get a signed preview url": V1Operation("access/signed_preview_url", "access.preview_urls.signed",
                                            lambda a, s, args: {"sandbox_id": s, "port": args.get("port", 8080),
                                                                "expires_in_ms": args.get("expires_in_ms", 60_000)}, read=_preview,
                                            served_through=("access.preview_urls",)),
    "create ssh access": V1Operation("access/ssh_create", "access.ssh", lambda a, s, args: {
        "sandbox_id": s, "ttl_ms": args.get("ttl_ms")}, read=_ssh),
    "revoke ssh access": V1Operation("access/ssh_revoke", "access.ssh.revoke", lambda a, s, args: {
        "sandbox_id": s, "token": args.get("token", "conformance-no-such-token")}),
    "open a web terminal": V1Operation("access/web_terminal", "access.web_terminal", _sid, read=_web_terminal),
    "open a vnc connection": V1Operation("access/vnc", "access.vnc", _sid, read=_vnc),
}
