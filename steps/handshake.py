"""Steps for the handshake and JSON-RPC envelope scenarios."""

from __future__ import annotations

import re

from pytest_bdd import parsers, then, when

from conformance.errors import ApplicationErrorAnswer, ProtocolErrorAnswer

from ._world import Attempt, World, attempt, expect

KIND_RULE = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")


def _fresh(world: World):
    expect(world.fresh is not None, "the scenario has no freshly started provider")
    return world.fresh


@when("the host initializes it")
def _(world: World) -> None:
    world.last = attempt(lambda: _fresh(world).handshake(strict=False))


@when(parsers.parse("the host initializes it asking for protocol version {version:d}"))
def _(world: World, version: int) -> None:
    world.values["asked_version"] = version
    world.last = attempt(lambda: _fresh(world).handshake(protocol_version=version, strict=False))


@then("the answer follows the protocol's schema")
def _(world: World) -> None:
    world.last.expect_success("initialize")
    problems = _fresh(world).handshake_problems
    expect(not problems, "the initialize answer violates its schema " + "; ".join(str(p) for p in problems))


@then(parsers.parse("the answer names protocol version {version:d}"))
def _(world: World, version: int) -> None:
    identity = _fresh(world).identity
    expect(identity.protocol_version == version,
           f"the provider answered protocol version {identity.protocol_version!r}, expected {version}")


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
    world.last.expect_application_error(f"initialize asking for protocol version {world.values['asked_version']}")


@then(parsers.parse("the refusal message names version {asked:d} and the provider's own version {own:d}"))
def _(world: World, asked: int, own: int) -> None:
    error = world.last.error
    assert isinstance(error, ApplicationErrorAnswer)
    text = " ".join([error.message, str(error.detail.get("reason", ""))])
    for version in (asked, own):
        expect(re.search(rf"(?<![0-9.]){version}(?![0-9])", text) is not None,
               f"the refusal should name version {version} in words a person can read; it says {text!r}")


@when(parsers.parse('the host calls the method "{method}"'))
def _(world: World, method: str) -> None:
    raw = _fresh(world).raw
    expect(raw is not None, "this dialect has no wire-level channel")
    world.last = attempt(lambda: raw.call(method, {}))


@when("the host sends a line that is not JSON")
def _(world: World) -> None:
    raw = _fresh(world).raw
    raw.send_line(b'{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {')
    world.values["reply"] = _next_response(raw, timeout_s=5.0)


def _next_response(raw, timeout_s: float):
    message = raw.next_message(timeout_s)
    while isinstance(message, dict) and "method" in message and "id" not in message:
        message = raw.next_message(timeout_s)  # skip notifications
    return message


def _error_code(world: World) -> int | None:
    if "reply" in world.values:
        reply = world.values["reply"]
        expect(reply is not None, "the provider did not answer at all")
        expect(isinstance(reply, dict) and isinstance(reply.get("error"), dict),
               f"the provider should answer with an error object, it sent {reply!r}")
        return reply["error"].get("code")
    error = world.last.error
    expect(error is not None, f"the call should fail, but it succeeded with {world.last.answer!r}")
    expect(isinstance(error, ProtocolErrorAnswer | ApplicationErrorAnswer), f"unexpected answer {error}")
    return error.code


@then(parsers.parse('the answer is the JSON-RPC error {code:d} "{meaning}"'))
def _(world: World, code: int, meaning: str) -> None:
    answered = _error_code(world)
    expect(answered == code, f"expected JSON-RPC error {code} ({meaning}), the provider answered code {answered}")


@then("the provider still answers requests")
def _(world: World) -> None:
    follow_up: Attempt = attempt(lambda: _fresh(world).handshake(strict=False))
    follow_up.expect_success("an initialize sent after the bad line")
