"""What the v2 dialect knows about its messages: schemas, notification routing, error normalization,
capability names, the wire vocabulary, and the channel rules a data-channel problem breaks.

v2 keeps v1's envelope and its application errors (``-32000`` with ``data.report.kind``); it adds the
kinds ``not_owned``, ``overloaded``, ``limit_exceeded``, ``git`` and ``incomplete``, renames the
capability ``exec.cancel`` to ``exec.stop`` (the old name is still read as an alias), adds the nullable
``one_shot`` group, and moves every byte stream onto per-operation data channels.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from conformance import schemas
from conformance.adapter import TIMESTAMP_RFC3339_UTC, TIMESTAMP_SINCE_EPOCH
from conformance.dialects.sandbox_driver_v1.rules import CAPABILITY_SPELLINGS as V1_CAPABILITY_SPELLINGS
from conformance.dialects.sandbox_driver_v1.rules import ERROR_KINDS as V1_ERROR_KINDS
from conformance.dialects.sandbox_driver_v1.rules import VOCABULARY as V1_VOCABULARY
from conformance.dialects.sandbox_driver_v1.rules import V1Rules
from conformance.dialects.sandbox_driver_v1.rules import capability_flags as v1_capability_flags
from conformance.errors import ApplicationErrorAnswer, ProviderCallError
from conformance.schemas import SchemaProblem
from conformance.transports.channels import MAX_FRAME_BYTES

NAME = "sandbox-driver-v2"
PROTOCOL_VERSION = 2
FOLDER = "sandbox-driver-v2"

NOTIFICATIONS = ("host/event", "host/log", "host/event_failed")
# v1's stable error kinds and the five v2 adds (§7).
ERROR_KINDS = V1_ERROR_KINDS | {"not_owned", "overloaded", "limit_exceeded", "git", "incomplete"}

# v1's methods v2 removed (§2.5: no buffered exec, stdio and terminal bytes ride channels).
V1_ONLY_METHODS = frozenset({"exec/run", "exec/cancel", "exec/stdio_input", "exec/stdio_close_input",
                             "exec/stdio_output", "pty/input", "pty/output"})

# v1's words, but for what v2 changed: its exec method, its notifications, error kinds and timestamp forms.
VOCABULARY = dataclasses.replace(
    V1_VOCABULARY,
    protocol_version=PROTOCOL_VERSION,
    methods={**{name: method for name, method in V1_VOCABULARY.methods.items() if method not in V1_ONLY_METHODS},
             "exec": "exec/stream", "run a command": "exec/stream", "cancel a command": "exec/stop",
             "get the sandbox's environment": "sandbox/environment", "release a preview url": "access/preview_release",
             "clone a repository": "git/clone", "run a one-shot container": "one_shot/run",
             "read the transport diagnostics": "transport/diagnostics"},
    notifications=NOTIFICATIONS,
    error_kinds=ERROR_KINDS,
    # v2 readers decode both (Errata): v2-era writers send the string, the protocol text shows the structure.
    timestamp_forms=(TIMESTAMP_RFC3339_UTC, TIMESTAMP_SINCE_EPOCH),
)

# The v1 spellings, plus v2's rename: a refusal may name the stop capability by either name.
CAPABILITY_SPELLINGS: dict[str, tuple[str, ...]] = {**V1_CAPABILITY_SPELLINGS, "exec.stop": ("exec.cancel",)}


def capability_flags(raw: Any) -> dict[str, bool]:
    """Canonical dotted names → declared, for a v2 capabilities object."""
    flags = v1_capability_flags(raw)
    if not isinstance(raw, dict):
        return flags
    flags["one_shot"] = isinstance(raw.get("one_shot"), dict)
    # The v2 reader accepts the v1 name as an alias of the renamed flag; either name gates the same stop.
    stop = flags.get("exec.stop", False) or flags.get("exec.cancel", False)
    flags["exec.stop"] = flags["exec.cancel"] = stop
    return flags


# The channel rules a plugin can break, by the key the dialect files a finding under.
CHANNEL_RULES = {
    "open": "SDP2-130",  # it connects itself and its first frame is one open naming the channel and its token
    "opened": "SDP2-129",  # the channel is open before the work starts, so before the response
    "eof": "SDP2-129",  # its eof ends the channel before the response
    "ack": "SDP2-133",  # offered open_ack: it asks for it and sends nothing before the host's acknowledgment
    "unoffered ack": "SDP2-S30",  # not offered: it neither asks for an acknowledgment nor waits for one
    "kinds": "SDP2-S26",  # only open (first), stdout, stderr and eof; never stdin, a second open, kinds past 4
    "frame": "SDP2-131",  # frames within the limit, one empty eof, nothing after it
    "incomplete": "SDP2-S27",  # a successful operation's channel ends with its eof before the connection closes
}


def channel_rule(problem: str) -> str:
    """The rule (a ``CHANNEL_RULES`` key) a bound channel's problem, as the channel server words it, breaks."""
    if "acknowledgement" in problem:
        return "ack"
    if "before its eof" in problem or "inside a frame" in problem:
        return "incomplete"
    if "unknown kind" in problem or "stdin frame" in problem or "second open" in problem:
        return "kinds"
    return "frame"


def server_rule(problem: str) -> str:
    """The rule a connection that never bound a channel broke."""
    return "frame" if "frame limit" in problem else "open"


_LATE_OPEN = re.compile(r"for channel (\d+) after the host stopped waiting")


def late_open_channel(problem: str) -> int | None:
    """The channel an open frame came too late for (the host had let it go), if that is the problem."""
    found = _LATE_OPEN.search(problem)
    return int(found.group(1)) if found else None


def common_ref(name: str) -> str:
    return schemas.schema_path(FOLDER, "common.json") + f"#/$defs/{name}"


def data_transport(socket_path: str, open_ack: bool) -> dict[str, Any]:
    """The ``data_transport`` member of a v2 initialize."""
    return {"socket_path": socket_path, "max_frame_bytes": MAX_FRAME_BYTES, "open_ack": open_ack}


def initialize_params(socket_path: str, open_ack: bool, version: Any = PROTOCOL_VERSION) -> dict[str, Any]:
    return {"protocol_version": version, "data_transport": data_transport(socket_path, open_ack)}


class V2Rules(V1Rules):
    """Schema checks, notification routing and error normalization for v2 messages."""

    folder = FOLDER

    # The protocol's own control-line cap (TransportLimits.control_message_bytes, 1 MiB including the
    # newline): a longer line ends the connection.
    max_message_bytes = 1024 * 1024 - 1

    def notification_problems(self, method: str, params: Any) -> list[SchemaProblem]:
        return self.checked_notification(method, params)[0]

    def checked_notification(self, method: str, params: Any) -> tuple[list[SchemaProblem], bytes | None]:
        ref = schemas.schema_path(FOLDER, "notifications", f"{method.replace('/', '.')}.json") + "#/$defs/params"
        if method not in NOTIFICATIONS or not schemas.exists(ref):
            return [], None  # the envelope check already flags unknown notification methods
        return schemas.problems(ref, params), None

    def notification_route(self, method: str, params: Any) -> tuple[str, str] | None:
        if method == "host/event" and isinstance(params, dict) and isinstance(params.get("route_id"), str):
            return (method, params["route_id"])
        return None

    def error_answer(self, method: str, error: dict[str, Any]) -> ProviderCallError:
        answer = super().error_answer(method, error)
        nested = answer.detail.get("incomplete") if isinstance(answer, ApplicationErrorAnswer) else None
        if isinstance(nested, dict):
            # The protocol text lists an incomplete failure's fields flat; upstream's writer nests them
            # under detail.incomplete. Both read alike.
            answer.detail = {**nested, **answer.detail}
        return answer


def looks_like(initialize_result: Any) -> bool:
    """Does an ``initialize`` answer come from a v2 plugin? It names version 2 and its capabilities are
    written the v2 way (a v2 writer always writes the ``one_shot`` group and ``exec.stop``, which no v1
    writer has): a v1 plugin that echoes the version it was asked for is not taken at its word."""
    if not isinstance(initialize_result, dict) or initialize_result.get("protocol_version") != PROTOCOL_VERSION:
        return False
    capabilities = initialize_result.get("capabilities")
    if not isinstance(capabilities, dict):
        return False
    exec_group = capabilities.get("exec")
    return "one_shot" in capabilities or (isinstance(exec_group, dict) and "stop" in exec_group)


def is_version_refusal(error: ApplicationErrorAnswer) -> bool:
    """Is ``error`` an initialize refused for its protocol version (report kind and field, not wording)?"""
    return error.kind == "invalid_spec" and error.detail.get("field") == "protocol_version"


def refusal_versions(error: ApplicationErrorAnswer) -> set[int]:
    """The numbers a version refusal's message and reason mention: the versions it names, whatever the
    wording (the asked one among them, if it says so)."""
    return {int(number) for number in re.findall(r"\d+", f"{error.message} {error.detail.get('reason', '')}")}


def refusal_names_version(error: ApplicationErrorAnswer, version: int) -> bool:
    """Is ``error`` an initialize refused for its protocol version by a plugin that names ``version`` (the
    suite never asks for that one in the same request, so naming it means speaking it)?"""
    return is_version_refusal(error) and version in refusal_versions(error)
