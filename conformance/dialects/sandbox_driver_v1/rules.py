"""What the v1 dialect knows about its messages: schemas, notification routing, error normalization,
and the mapping of a capability declaration onto canonical dotted names."""

from __future__ import annotations

from typing import Any

from conformance import schemas
from conformance.adapter import TIMESTAMP_SINCE_EPOCH, NetworkPolicy, WireVocabulary
from conformance.dialects.jsonrpc_adapter import SchemaRules, boolean_leaves, protocol_error
from conformance.errors import ApplicationErrorAnswer, ProviderCallError
from conformance.schemas import SchemaProblem

NAME = "sandbox-driver-v1"
PROTOCOL_VERSION = 1
FOLDER = "sandbox-driver-v1"
DEFAULT_BASE_SPEC: dict[str, Any] = {"source": "host_directory"}

NOTIFICATIONS = ("exec/output", "logs/output", "host/event", "host/log")
APPLICATION_ERROR = -32000
# The stable kinds of an application failure (section 7); a receiver treats any other as opaque.
ERROR_KINDS = frozenset({"not_found", "unsupported", "invalid_state", "invalid_spec", "timeout", "auth",
                         "rate_limited", "exec", "provider", "transport", "io"})

# Every v1 method a request can name, by the words a scenario uses for it (method, words), so a scenario
# that asks the same of every method (errors.feature: params that cannot be decoded) reaches each one.
_CALLS = (
    ("sandbox/create", "create a sandbox"), ("sandbox/attach", "attach to a sandbox"),
    ("sandbox/describe", "describe a sandbox"),
    ("sandbox/platform_info", "read a sandbox's platform"), ("sandbox/start", "start a sandbox"),
    ("sandbox/stop", "stop a sandbox"), ("sandbox/delete", "delete a sandbox"),
    ("sandbox/pause", "pause"), ("sandbox/resume", "resume"), ("sandbox/archive", "archive"),
    ("sandbox/recover", "recover"), ("sandbox/refresh_activity", "refresh activity"),
    ("sandbox/undelete", "undelete"), ("sandbox/fork", "fork"), ("sandbox/resize", "resize"),
    ("sandbox/snapshot", "snapshot"), ("sandbox/set_timers", "set timers"), ("sandbox/set_labels", "set labels"),
    ("sandbox/update_network", "update network"),
    ("exec/run", "run a command"), ("exec/stream", "stream a command"), ("exec/cancel", "cancel a command"),
    ("exec/stdio_open", "open a stdio process"), ("exec/stdio_input", "write to a stdio process"),
    ("exec/stdio_close_input", "close a stdio process's input"),
    ("exec/stdio_output", "read a stdio process's output"), ("exec/stdio_terminate", "terminate a stdio process"),
    ("exec/stdio_wait", "wait for a stdio process"),
    ("pty/open", "open a terminal"), ("pty/input", "write to a terminal"), ("pty/output", "read a terminal"),
    ("pty/resize", "resize a terminal"), ("pty/close", "close a terminal"),
    ("logs/follow", "follow logs"), ("stream/cancel", "cancel a stream"),
    ("fs/read", "read a file"), ("fs/write", "write a file"), ("fs/exists", "ask whether a path exists"),
    ("fs/metadata", "read a path's metadata"), ("fs/list_dir", "list a directory"),
    ("fs/create_dir", "create a directory"), ("fs/rename", "rename a path"), ("fs/delete", "delete a path"),
    ("fs/set_permissions", "set permissions"),
    ("snapshot/create", "create a snapshot"), ("snapshot/get", "get a snapshot"), ("snapshot/list", "list snapshots"),
    ("snapshot/delete", "delete a snapshot"), ("snapshot/activate", "activate a snapshot"),
    ("snapshot/deactivate", "deactivate a snapshot"), ("snapshot/build_logs", "follow a snapshot's build logs"),
    ("volume/create", "create a volume"), ("volume/get", "get a volume"), ("volume/delete", "delete a volume"),
    ("volume/list", "list volumes"),
    ("access/preview_url", "get a preview url"), ("access/signed_preview_url", "get a signed preview url"),
    ("access/ssh_create", "create ssh access"), ("access/ssh_revoke", "revoke ssh access"),
    ("access/web_terminal", "open a web terminal"), ("access/vnc", "open a vnc connection"),
)

VOCABULARY = WireVocabulary(
    jsonrpc="2.0",
    version_field="protocol_version",
    protocol_version=PROTOCOL_VERSION,
    application_error_code=APPLICATION_ERROR,
    sandbox_field="sandbox_id",
    methods={"initialize": "initialize", "shutdown": "shutdown", "health": "provider/health",
             "describe": "sandbox/describe", "list": "sandbox/list", "exec": "exec/run", "read a file": "fs/read",
             "create a snapshot": "snapshot/create", **{name: method for method, name in _CALLS}},
    notifications=NOTIFICATIONS,
    event_notification="host/event",
    log_notification="host/log",
    error_kinds=ERROR_KINDS,
    # A v1 SystemTime is written in its structural form (sections 6 and 10); upstream's v1 host cannot
    # decode the RFC 3339 string of v2-era writers.
    timestamp_forms=(TIMESTAMP_SINCE_EPOCH,),
)

# Capability names whose wire field is spelled differently (protocol section 5.1).
_ALIASES = {
    "access.preview_urls.signed": "access.signed_preview_urls",
    "access.ssh.ttl": "access.ssh_ttl",
    "access.ssh.revoke": "access.ssh_revoke",
    "snapshots.filesystem": "snapshots.filesystem_from_sandbox",
    "snapshots.live_process_state": "snapshots.live_process_state_from_sandbox",
    "snapshots.from_image.container": "snapshots.from_image_kinds.container",
    "snapshots.from_image.virtual_machine": "snapshots.from_image_kinds.virtual_machine",
    "snapshots.from_dockerfile.container": "snapshots.from_dockerfile_kinds.container",
    "snapshots.from_dockerfile.virtual_machine": "snapshots.from_dockerfile_kinds.virtual_machine",
}
# Both spellings name the same flag, and upstream's own writers use both: the Capability enum names
# (access.ssh.revoke) and the capability object's field paths (access.ssh_revoke). Accepted alike wherever a
# plugin names a capability (data.detail.capability of an unsupported refusal).
CAPABILITY_SPELLINGS: dict[str, tuple[str, ...]] = {name: (wire,) for name, wire in _ALIASES.items()}
_NULLABLE_GROUPS = ("pty", "logs", "snapshots", "volumes")
_FACET_GROUPS = ("search", "git", "services")


def capability_flags(raw: Any) -> dict[str, bool]:
    """Canonical dotted names → declared, for a v1 capabilities object."""
    if not isinstance(raw, dict):
        return {}
    flags = boolean_leaves(raw)
    for group in _NULLABLE_GROUPS:
        flags[group] = isinstance(raw.get(group), dict)
    for group in _FACET_GROUPS:
        value = raw.get(group)
        # {"native": false} from older peers reads as supported; explicit supported:false is unavailable.
        flags[group] = isinstance(value, dict) and value.get("supported", True) is not False
    for name, wire in _ALIASES.items():
        flags[name] = flags.get(wire, False)
    flags["sessions"] = False  # reserved, never supported
    return flags


def isolation_of(raw: Any) -> str | None:
    """The declaration's isolation (none, container, vm), if it names one."""
    value = raw.get("isolation") if isinstance(raw, dict) else None
    return value if isinstance(value, str) else None


def method_ref(method: str, part: str) -> str:
    return schemas.schema_path(FOLDER, "methods", f"{method.replace('/', '.')}.json") + f"#/$defs/{part}"


def common_ref(name: str) -> str:
    return schemas.schema_path(FOLDER, "common.json") + f"#/$defs/{name}"


class V1Rules(SchemaRules):
    """Schema checks, notification routing and error normalization for v1 messages."""

    folder = FOLDER

    def notification_problems(self, method: str, params: Any) -> list[SchemaProblem]:
        return self.checked_notification(method, params)[0]

    def checked_notification(self, method: str, params: Any) -> tuple[list[SchemaProblem], bytes | None]:
        if method not in NOTIFICATIONS:
            return [], None  # the envelope check already flags unknown notification methods
        data = plain_output_data(method, params)
        if data is not None:
            return [], data
        ref = schemas.schema_path(FOLDER, "notifications", f"{method.replace('/', '.')}.json") + "#/$defs/params"
        return schemas.problems(ref, params), None

    def notification_route(self, method: str, params: Any) -> tuple[str, str] | None:
        if not isinstance(params, dict):
            return None
        key = {"exec/output": "exec_id", "logs/output": "stream_id", "host/event": "route_id"}.get(method)
        if key is None or not isinstance(params.get(key), str):
            return None
        return (method, params[key])

    def error_answer(self, method: str, error: dict[str, Any]) -> ProviderCallError:
        data = error.get("data")
        if error.get("code") == APPLICATION_ERROR and isinstance(data, dict) and isinstance(data.get("report"), dict):
            report = data["report"]
            detail = data.get("detail") if isinstance(data.get("detail"), dict) else {}
            return ApplicationErrorAnswer(
                method=method, code=APPLICATION_ERROR, message=str(error.get("message", "")), data=data,
                kind=str(report.get("kind", "unknown")), detail=detail,
                retryable=bool(report.get("retryable", False)),
            )
        return protocol_error(method, error)


# The member that names the stream of each output notification (besides data_b64).
_OUTPUT_KEYS = {"exec/output": "exec_id", "logs/output": "stream_id"}


def plain_output_data(method: str, params: Any) -> bytes | None:
    """The decoded bytes of an ``exec/output`` or ``logs/output`` notification that is plainly valid
    (what its schema accepts, checked by hand: these are most of a stream's lines); None when it is
    another method or not plainly valid, and the schema must decide and explain."""
    key = _OUTPUT_KEYS.get(method)
    if key is None or type(params) is not dict or type(params.get(key)) is not str:
        return None
    if method == "exec/output" and params.get("stream") not in ("stdout", "stderr"):
        return None
    encoded = params.get("data_b64")
    if type(encoded) is not str:
        return None
    try:
        return schemas.decoded_or_checked(encoded)
    except ValueError:  # binascii.Error is one
        return None


def looks_like(initialize_result: Any) -> bool:
    """Does an ``initialize`` answer come from a v1 plugin?"""
    return isinstance(initialize_result, dict) and "protocol_version" in initialize_result


# An allow-list's entries, by the policy's name (section 5.4: externally tagged, snake_case).
_ALLOW_LIST_KEYS = {"cidr_allow_list": "cidrs", "domain_allow_list": "domains"}


def network_policy(policy: Any) -> Any:
    """A NetworkPolicy as v1 writes it: a bare name, or ``{"cidr_allow_list": {"cidrs": [..]}}`` and the
    like. Anything but a ``NetworkPolicy`` (a scenario's own wire value) is sent as it is."""
    if not isinstance(policy, NetworkPolicy):
        return policy
    key = _ALLOW_LIST_KEYS.get(policy.kind)
    return {policy.kind: {key: list(policy.allowed)}} if key else policy.kind


def read_network_policy(value: Any) -> NetworkPolicy | None:
    """The policy a status reports (None where it reports none); a shape v1 does not define is kept as its
    text, so a comparison with what was asked fails and says what came."""
    if value is None:
        return None
    if isinstance(value, str):
        return NetworkPolicy(value)
    if isinstance(value, dict) and len(value) == 1:
        (kind, body), = value.items()
        entries = body.get(_ALLOW_LIST_KEYS.get(kind, "")) if isinstance(body, dict) else None
        if isinstance(entries, list) and all(isinstance(entry, str) for entry in entries):
            return NetworkPolicy(kind, tuple(entries))
    return NetworkPolicy(repr(value))
