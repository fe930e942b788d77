"""Steps for the handshake and JSON-RPC envelope scenarios."""

from __future__ import annotations

import json
import re

from pytest_bdd import parsers, then, when

from conformance.errors import ApplicationErrorAnswer

from ._shared import Attempt, World, answered_error_code, attempt, expect
from ._state import RawReply

KIND_RULE = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")


def _fresh(world: World):
    expect(world.fresh is not None, "the scenario has no freshly started provider")
    return world.fresh


def _wire(world: World):
    """The freshly started provider's wire facet (its handshake record and raw channel)."""
    return world.wire(_fresh(world))


@when("the host initializes it")
def _(world: World) -> None:
    world.last = attempt(lambda: _fresh(world).handshake(strict=False))


@when(parsers.parse("the host initializes it asking for protocol version {version:d}"))
def _(world: World, version: int) -> None:
    world.handshake.asked_version = version
    world.last = attempt(lambda: _fresh(world).handshake(protocol_version=version, strict=False))


@when("the host initializes it with an extra field the provider does not know")
def _(world: World) -> None:
    wire = _wire(world)
    params = {**wire.vocabulary.initialize_params(), "conformance_unknown_field": {"ignored": True}}
    world.last = attempt(lambda: wire.call(wire.vocabulary.methods["initialize"], params))


@then("the provider answered that initialize with its own protocol version")
def _(world: World) -> None:
    answer = world.last.expect_success("initialize with a field the provider does not know")
    vocabulary = _wire(world).vocabulary
    field, version = vocabulary.version_field, vocabulary.protocol_version
    found = answer.get(field) if isinstance(answer, dict) else None
    expect(found == version, f"an unknown field must be ignored: initialize should answer {field} {version}; "
                             f"it answered {answer!r}")


@then("the answer follows the protocol's schema")
def _(world: World) -> None:
    world.last.expect_success("initialize")
    problems = _wire(world).handshake_problems
    expect(not problems, "the initialize answer violates its schema " + "; ".join(str(p) for p in problems))


@then("the answer names the protocol version the host speaks")
def _(world: World) -> None:
    # The dialect's own version, not a literal: the scenario holds for every JSON-RPC dialect (v1, v2, the sketch).
    identity = _fresh(world).identity
    spoken = _wire(world).vocabulary.protocol_version
    expect(identity.protocol_version == spoken,
           f"the provider answered protocol version {identity.protocol_version!r}, but the host speaks {spoken!r}")


@then("the answer names the provider kind and version")
def _(world: World) -> None:
    identity = _fresh(world).identity
    expect(bool(identity.kind), "the initialize answer names no provider kind")
    expect(bool(identity.version), "the initialize answer names no provider version")


@then("the provider kind is lowercase letters, digits and inner hyphens, at most 64 bytes")
def _(world: World) -> None:
    kind = _fresh(world).identity.kind
    expect(len(kind.encode("utf-8")) <= 64, f"provider kind {kind!r} is longer than 64 bytes")
    expect(KIND_RULE.fullmatch(kind) is not None, f"provider kind {kind!r} is not lowercase letters, digits and inner hyphens")


@then("the answer carries a capability declaration")
def _(world: World) -> None:
    capabilities = _fresh(world).capabilities
    expect(isinstance(capabilities.raw, dict) and bool(capabilities.flags),
           f"the initialize answer carries no capability declaration: {capabilities.raw!r}")


@then("the handshake is refused with an application error")
def _(world: World) -> None:
    asked = world.require(world.handshake.asked_version, "protocol version asked for")
    world.last.expect_application_error(f"initialize asking for protocol version {asked}")


@then(parsers.parse("the refusal message names version {asked:d} and the provider's own version"))
def _(world: World, asked: int) -> None:
    own = _wire(world).vocabulary.protocol_version  # the version the host speaks, which the provider was started for
    error = world.last.error
    assert isinstance(error, ApplicationErrorAnswer)
    text = " ".join([error.message, str(error.detail.get("reason", ""))])
    for version in (asked, own):
        expect(re.search(rf"(?<![0-9.]){version}(?![0-9])", text) is not None,
               f"the refusal should name version {version} in words a person can read; it says {text!r}")


@when(parsers.parse('the host calls the method "{method}"'))
def _(world: World, method: str) -> None:
    wire = _wire(world)
    world.last = attempt(lambda: wire.call(method, {}))


@when("the host sends a line that is not JSON")
def _(world: World) -> None:
    wire = _wire(world)
    vocabulary = wire.vocabulary
    # A request cut off in the middle of its params: not JSON at all.
    cut = json.dumps({"jsonrpc": vocabulary.jsonrpc, "id": 7, "method": vocabulary.method("initialize")})
    wire.send_line(cut[:-1].encode("utf-8") + b', "params": {')
    world.common.raw_reply = RawReply(_next_response(wire, timeout_s=5.0))


def _next_response(raw, timeout_s: float):
    message = raw.next_message(timeout_s)
    while isinstance(message, dict) and "method" in message and "id" not in message:
        message = raw.next_message(timeout_s)  # skip notifications
    return message


@then(parsers.parse('the answer is the JSON-RPC error {code:d} "{meaning}"'))
def _(world: World, code: int, meaning: str) -> None:
    answered = answered_error_code(world)
    expect(answered == code, f"expected JSON-RPC error {code} ({meaning}), the provider answered code {answered}",
           world.last.error if world.common.raw_reply is None else None)


@then("the provider still answers requests")
def _(world: World) -> None:
    follow_up: Attempt = attempt(lambda: _fresh(world).handshake(strict=False))
    follow_up.expect_success("an initialize sent after the bad line")


# -- the capability declaration --------------------------------------------------------------------

ISOLATIONS = ("none", "container", "vm")
KIND_FLAGS = ("container", "virtual_machine")
# Every group of a version 1 declaration with its boolean flags (snapshots also nests two groups of kinds).
ALWAYS_PRESENT_GROUPS: dict[str, tuple[str, ...]] = {
    "lifecycle": ("pause", "archive", "fork", "resize", "recover", "undelete", "refresh_activity", "timers",
                  "labels", "update_network", "snapshot_sandbox"),
    "exec": ("live_streaming", "streams_separated", "stdin", "cancel", "stdio_process", "stdin_stream", "environment"),
    "fs": ("native", "upload", "download", "permissions"),
    "search": ("supported", "native"),
    "git": ("supported", "native"),
    "services": ("supported", "native"),
    "access": ("preview_urls", "signed_preview_urls", "ssh", "ssh_ttl", "ssh_revoke", "shell_command",
               "web_terminal", "vnc", "vpn"),
    "network": ("allow_all", "block_all", "cidr_allow_list", "domain_allow_list", "outbound_proxy"),
}
NULLABLE_GROUPS: dict[str, tuple[str, ...]] = {
    "pty": ("resize",),
    "logs": ("provision", "entrypoint"),
    "snapshots": ("from_image", "from_dockerfile", "filesystem_from_sandbox", "live_process_state_from_sandbox",
                  "build_logs", "activation"),
    "volumes": ("create_time_attach",),
}
NESTED_FLAG_GROUPS = {"snapshots": ("from_image_kinds", "from_dockerfile_kinds")}


def _declaration(world: World) -> dict:
    answer = world.wire(world.provider).initialize_result
    capabilities = answer.get("capabilities") if isinstance(answer, dict) else None
    expect(isinstance(capabilities, dict), f"the initialize answer carries no capabilities object: {answer!r}")
    return capabilities


@then("the provider's capability declaration has every group: isolation, lifecycle, exec, fs, search, git, "
      "services, pty, logs, access, network, snapshots and volumes")
def _(world: World) -> None:
    capabilities = _declaration(world)
    expected = ["isolation", *ALWAYS_PRESENT_GROUPS, *NULLABLE_GROUPS]
    missing = [group for group in expected if group not in capabilities]
    expect(not missing, f"the capability declaration lacks the group(s) {', '.join(missing)}; a current writer sends "
                        "every group (pty, logs, snapshots and volumes as null when unsupported)")


@then("its isolation is none, container or vm")
def _(world: World) -> None:
    isolation = _declaration(world).get("isolation")
    expect(isolation in ISOLATIONS, f"isolation is {isolation!r}; expected one of {', '.join(ISOLATIONS)}")


@then("its pty, logs, snapshots and volumes groups are each null or an object")
def _(world: World) -> None:
    capabilities = _declaration(world)
    for group in NULLABLE_GROUPS:
        value = capabilities.get(group)
        expect(value is None or isinstance(value, dict),
               f"capabilities.{group} must be null (unsupported) or an object of flags; it is {value!r}")


def _flag_problems(group: str, value: dict, flags: tuple[str, ...]) -> list[str]:
    problems = []
    for flag in flags:
        if flag not in value:
            problems.append(f"{group}.{flag} is missing")
        elif not isinstance(value[flag], bool):
            problems.append(f"{group}.{flag} is {value[flag]!r}, not a boolean")
    return problems


@then("every flag of every group it declares is present and a boolean")
def _(world: World) -> None:
    capabilities = _declaration(world)
    problems: list[str] = []
    for group, flags in {**ALWAYS_PRESENT_GROUPS, **NULLABLE_GROUPS}.items():
        value = capabilities.get(group)
        if not isinstance(value, dict):
            if group in ALWAYS_PRESENT_GROUPS and group in capabilities:
                problems.append(f"{group} is {value!r}, not an object of flags")
            continue
        problems += _flag_problems(group, value, flags)
        for nested in NESTED_FLAG_GROUPS.get(group, ()):
            inner = value.get(nested)
            if isinstance(inner, dict):
                problems += _flag_problems(f"{group}.{nested}", inner, KIND_FLAGS)
            else:
                problems.append(f"{group}.{nested} is {inner!r}, not an object of flags")
    expect(not problems, "the capability declaration is incomplete or mistyped: " + "; ".join(problems[:8]))


@when("the host initializes it again")
def _(world: World) -> None:
    world.last = attempt(lambda: _fresh(world).handshake(strict=False))


@then("the capabilities are exactly those of the first answer")
def _(world: World) -> None:
    again = world.last.expect_success("a second initialize")
    first = _wire(world).initialize_result
    first_caps = first.get("capabilities") if isinstance(first, dict) else None
    again_caps = again.get("capabilities") if isinstance(again, dict) else None
    if again_caps != first_caps:
        differences = sorted(_differences(first_caps, again_caps))
        raise AssertionError("capabilities are settled once per connection, but a second initialize answered "
                             "different ones: " + "; ".join(differences[:8]))


def _differences(first, again, path: str = "capabilities") -> list[str]:
    if isinstance(first, dict) and isinstance(again, dict):
        found = []
        for key in sorted(set(first) | set(again)):
            found += _differences(first.get(key), again.get(key), f"{path}.{key}")
        return found
    return [] if first == again else [f"{path} was {first!r}, now {again!r}"]


@then("access.vpn is false in the provider's declaration and in the sandbox's own")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    declarations = {"the provider's declaration": _declaration(world)}
    if sandbox.capabilities is not None:
        declarations["the sandbox's declaration"] = sandbox.capabilities.raw
    for whose, capabilities in declarations.items():
        access = capabilities.get("access") if isinstance(capabilities, dict) else None
        vpn = access.get("vpn", False) if isinstance(access, dict) else False
        expect(vpn is False, f"access.vpn is a retired flag and must be false; {whose} says {vpn!r}")


@then("whenever a from_image_kinds flag is true, from_image is true, and whenever a from_dockerfile_kinds flag is "
      "true, from_dockerfile is true")
def _(world: World) -> None:
    snapshots = _declaration(world).get("snapshots")
    expect(isinstance(snapshots, dict), f"snapshots is declared but is not an object: {snapshots!r}")
    for aggregate in ("from_image", "from_dockerfile"):
        kinds = snapshots.get(f"{aggregate}_kinds")
        kinds = kinds if isinstance(kinds, dict) else {}
        exact = [kind for kind in KIND_FLAGS if kinds.get(kind) is True]
        expect(not exact or snapshots.get(aggregate) is True,
               f"snapshots.{aggregate}_kinds declares {', '.join(exact)}, so snapshots.{aggregate} must be true; "
               f"it is {snapshots.get(aggregate)!r}")
