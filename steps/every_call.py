"""Steps that ask one error rule of every call that can break it (errors.feature): a request whose params
cannot be decoded, and a call naming a sandbox id the provider never issued.

A rule checked on one method and not on the others that produce it is the commonest gap a blind measurement
found; these steps take the call from an Examples row, so a rule reaches a method by one more row. Which
methods exist, and which rows cover them, is kept in ``tests/data/rule_coverage.yaml`` and checked by
``tests/test_rule_coverage.py`` against the schemas.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pytest_bdd import parsers, then, when

from conformance.adapter import EventRoute, ExecRequest, SandboxHandle, SandboxRequest
from conformance.errors import (
    ApplicationErrorAnswer,
    CapabilityNotDeclared,
    ProtocolErrorAnswer,
)

from ._shared import World, attempt, caught_up, expect, fresh_provider, preview, raw_channel
from ._subject import expect_not_refused

# The words of an Examples row for a call no capability gates.
CORE = "a core method"

# The arguments an optional operation cannot be sent without (neutral names, as Operations.invoke takes them).
ARGUMENTS: dict[str, dict[str, Any]] = {
    "clone a repository": {"url": "https://git.conformance.invalid/repository.git", "target_path": "repository"},
}

# Calls the protocol lets a provider lack, answering -32601 (method not found): v2 §8.8 "host treats -32601
# as released" (access/preview_release), §8.6 "older plugin -32601 → host runs exec-derived clone" (git/clone).
MAY_BE_MISSING = frozenset({"release a preview url", "clone a repository"})
METHOD_NOT_FOUND = -32601

# A path no call of these scenarios needs to exist: the sandbox is refused before any path is looked at.
SOME_PATH = "conformance-every-call.txt"


def _refusal_names(capabilities: Any, capability: str) -> set[str]:
    """What an ``unsupported`` refusal of a call gated by ``capability`` may name: the capability by any of its
    spellings, or a group it belongs to (the protocol's capability names have no ``snapshots.build_logs`` or
    ``pty.resize``: such a call is refused naming ``snapshots`` or ``pty``)."""
    parts = capability.split(".")
    names: set[str] = set()
    for end in range(1, len(parts) + 1):
        names |= capabilities.names_of(".".join(parts[:end]))
    return names


def _settled(outcome: Any) -> Any:
    """A command's outcome, or the refusal it carries: a dialect reports a refused exec inside its outcome
    (``ExecOutcome.error``, as "infra"), where the other calls raise it."""
    result = getattr(outcome, "result", outcome)  # a streamed command's outcome holds the command's
    error = getattr(result, "error", None)
    if error is not None:
        raise error
    return outcome


def _skip_other_version(dialect: str, call: str) -> None:
    """Skip a row naming a call this dialect's protocol does not have (a v2-only or v1-only method): the row is
    for the other version, and the summaries count it so (the skip says "applies to dialect ...")."""
    pytest.skip(f"applies to dialect versions that have the call; the {dialect} protocol has no request to {call}")


def _skip_if_missing(call: str, outcome: Any) -> None:
    """Skip, saying so, when a provider lacks a call the protocol lets it lack: nothing was refused to judge."""
    error = outcome.error
    if call in MAY_BE_MISSING and isinstance(error, ProtocolErrorAnswer) and error.code == METHOD_NOT_FOUND:
        pytest.skip(f'the provider has no "{call}" ({error.method} answered -32601), which the protocol lets a '
                    "provider lack; nothing it refused can be judged")


def _core_calls(world: World) -> dict[str, Callable[[str], Any]]:
    """The calls every provider has, by the words of the outline, each naming the sandbox ``sandbox_id``."""
    provider = world.provider

    def files() -> Any:
        return world.files("a file operation")

    return {
        "describe a sandbox": provider.describe,
        "attach to a sandbox": provider.attach,
        "read a sandbox's platform": provider.platform_info,
        "start a sandbox": provider.start,
        "stop a sandbox": provider.stop,
        "run a command": lambda sid: _settled(provider.exec(sid, ExecRequest("true"))),
        "stream a command": lambda sid: _settled(world.streams("a streamed command").exec(sid, ExecRequest("true"))),
        "read a file": lambda sid: files().read(sid, SOME_PATH),
        "write a file": lambda sid: files().write(sid, SOME_PATH, b"every call"),
        "ask whether a path exists": lambda sid: files().exists(sid, SOME_PATH),
        "read a path's metadata": lambda sid: files().metadata(sid, SOME_PATH),
        "list a directory": lambda sid: files().list_dir(sid, ".", 1),
        "create a directory": lambda sid: files().mkdir(sid, "conformance-every-call"),
        "rename a path": lambda sid: files().rename(sid, SOME_PATH, SOME_PATH + ".renamed"),
        "delete a path": lambda sid: files().delete_path(sid, SOME_PATH, False),
    }


# -- a sandbox id never issued ------------------------------------------------------------------------


@when(parsers.parse('I make the call "{call}" naming a sandbox id that was never issued'))
def _(world: World, call: str) -> None:
    never_issued = world.token("conformance-never-issued")
    world.errors.never_issued_id = never_issued
    core = _core_calls(world)
    if call in core:
        world.errors.every_call = (call, None)
        world.last = attempt(lambda: core[call](never_issued))
        return
    operations = world.operations(call)
    info = operations.catalogue.get(call)
    if info is None:
        _skip_other_version(world.provider.dialect, call)
    world.errors.every_call = (call, info.capability)
    world.last = attempt(lambda: operations.invoke(call, never_issued, **ARGUMENTS.get(call, {})))
    _skip_if_missing(call, world.last)


def _undeclared(world: World, capability: str | None) -> set[str]:
    """The names an ``unsupported`` refusal may give when ``capability`` (and what serves it) is undeclared."""
    if capability is None:
        return set()
    declared = world.provider.capabilities
    if any(declared.declares(name) for name in declared.names_of(capability)):
        return set()
    return _refusal_names(declared, capability)


@then("the call is refused as not_found naming the sandbox and that id, or as unsupported where its "
      "capability is not declared")
def _(world: World) -> None:
    call, capability = world.require(world.errors.every_call, "call naming a sandbox id never issued")
    asked = world.require(world.errors.never_issued_id, "never-issued sandbox id")
    refusable = _undeclared(world, capability)
    error = world.last.expect_application_error(f'"{call}" naming a sandbox id that was never issued',
                                                "unsupported" if refusable else "not_found")
    if refusable and world.provider.operations is not None and call in world.provider.operations.catalogue:
        refusable |= set(world.provider.operations.catalogue[call].served_through)
    if error.kind == "unsupported" and refusable:
        # The protocol orders no check before another: a provider that does not declare the call may refuse it
        # for that before it looks the sandbox up (upstream answers not_found first; both are honest).
        named = error.detail.get("capability")
        expect(named in refusable, f'"{call}" was refused as unsupported naming {named!r}; an unsupported refusal '
                                   f"names the capability it lacks, one of {sorted(refusable)}")
        return
    expect(error.kind == "not_found",
           f'"{call}" naming the sandbox id {asked!r}, which the provider never issued, must be refused as '
           f"not_found{' (or unsupported: ' + capability + ' is not declared)' if refusable else ''}; "
           f"it answered: {error}")
    detail = error.detail
    expect(detail.get("resource") == "sandbox" and detail.get("id") == asked,
           f'a not_found refusal of "{call}" names the resource sandbox and the id it was given ({asked!r}) in its '
           f"detail; it reads {preview(detail)}")


@then("the call was refused for that id, not as a call the provider does not make")
def _(world: World) -> None:
    """What a scenario about the refusal of a never-issued id judges must be that refusal: a call refused as
    one the provider does not make at all (-32601, unsupported) never looked the id up."""
    call, capability = world.require(world.errors.every_call, "call naming a sandbox id never issued")
    error = world.last.expect_application_error(f'"{call}" naming a sandbox id that was never issued') \
        if not isinstance(world.last.error, ProtocolErrorAnswer) else world.last.error
    expect_not_refused(world.provider, error, f'"{call}" naming a sandbox id that was never issued', capability)


# -- params that cannot be decoded ----------------------------------------------------------------------


@when(parsers.parse('the host asks to "{call}" with none of the params it requires'))
def _(world: World, call: str) -> None:
    wire = raw_channel(world)
    method = wire.vocabulary.methods.get(call)
    if method is None:
        _skip_other_version(fresh_provider(world).dialect, call)
    world.errors.every_call = (call, None)
    world.last = attempt(lambda: wire.call(method, {}))
    _skip_if_missing(call, world.last)


@then(parsers.parse('the answer is the JSON-RPC error -32600 "invalid request", or an unsupported refusal '
                    'where {capability} is not declared'))
def _(world: World, capability: str) -> None:
    call, _ = world.require(world.errors.every_call, "request without its params")
    error = world.last.error
    expect(error is not None, f'a request to "{call}" with none of the params it requires must be refused as '
                              f"-32600 (invalid request); it was answered {preview(world.last.answer)}")
    provider = fresh_provider(world)
    declared = provider.capabilities
    names = set() if capability == CORE else _refusal_names(declared, capability)
    if isinstance(error, ApplicationErrorAnswer) and error.kind == "unsupported" and names \
            and not any(declared.declares(name) for name in declared.names_of(capability)):
        # A provider may refuse a call it does not offer before decoding its params (the suite's reference
        # does); it must still name what it lacks.
        expect(error.detail.get("capability") in names,
               f'"{call}" was refused as unsupported naming {error.detail.get("capability")!r}, not {capability}')
        return
    undeclared = bool(names) and not any(declared.declares(name) for name in declared.names_of(capability))
    expect(isinstance(error, ProtocolErrorAnswer) and error.code == -32600,
           f'a request to "{call}" with none of the params it requires cannot be decoded, so it is answered with '
           f"the JSON-RPC error -32600 (invalid request); it was answered: {error}", error,
           "unsupported" if undeclared else "-32600 invalid request")


# -- a capability set on every path that answers a handle -------------------------------------------------


def _own_capabilities_within_provider(world: World, handle: Any, operation: str) -> None:
    expect(isinstance(handle, SandboxHandle), f"{operation} should answer a handle; it answered {handle!r}")
    own = handle.capabilities
    expect(own is not None and isinstance(own.raw, dict),
           f"the handle {operation} answered for {handle.id} carries no capability declaration of its own; every "
           "handle does, and it is authoritative for that sandbox")
    assert own is not None
    # As for a created sandbox (handle-capabilities-within-provider): flags that say how an operation is done
    # (native file access, separate streams) may differ for one sandbox; flags that grant one may not widen.
    wider = [name for name in own.declared() if not world.provider.capabilities.declares(name)
             and not name.endswith(".native") and name != "exec.streams_separated"]
    expect(not wider, f"the sandbox {operation} answered, {handle.id}, declares {', '.join(wider)}, which its "
                      "provider's declaration (the upper bound a sandbox's own may narrow) does not")


@then("the undeleted handle declares its own capabilities, and none its provider does not")
def _(world: World) -> None:
    _own_capabilities_within_provider(world, world.last.expect_success("undelete"), "undelete")


@then("the fork's handle declares its own capabilities, and none its provider does not")
def _(world: World) -> None:
    _own_capabilities_within_provider(world, world.require(world.lifecycle.new_sandbox, "fork's handle"), "fork")


# -- the events of a refused operation ----------------------------------------------------------------------

# How long a refused operation's events may take after its answer, at most: the wait ends as soon as the
# provider has answered a health call sent after it (caught_up), having written every event before that.
REFUSED_EVENTS_WAIT_S = 2.0


# The gated rows: the neutral operation each asks for, and the capability that gates it.
REFUSABLE = {"undelete a sandbox id that was never issued": ("undelete", "lifecycle.undelete"),
             "snapshot a sandbox id that was never issued": ("create a snapshot", "snapshots")}


def _refused(world: World, operation: str, route: EventRoute) -> Any:
    """Ask for ``operation`` (an outline row) with ``route`` so that the provider must refuse it."""
    provider = fresh_provider(world)
    never_issued = world.token("conformance-never-issued")
    if operation == "create a sandbox whose working directory is empty":
        # §5.4: working_directory "must not be empty" (every provider's spec validation refuses it).
        return provider.create(SandboxRequest(extra={"working_directory": ""}, events=route))
    expect(operation in REFUSABLE, f"the suite knows no refused operation {operation!r}")
    name, capability = REFUSABLE[operation]
    if not provider.capabilities.declares(capability):
        raise CapabilityNotDeclared(capability)
    return world.facet("operations", name, provider).invoke(name, never_issued, events=route)


@when(parsers.parse("I {operation} asking for events, which the provider refuses"))
def _(world: World, operation: str) -> None:
    route = EventRoute(route_id=world.token("conformance-route"), correlation_id=world.token("conformance-corr"))
    world.errors.route = route
    world.errors.every_call = (operation, None)
    world.last = attempt(lambda: _refused(world, operation, route))
    if world.last.error is None:
        pytest.skip(f"the provider did not refuse to {operation} (its own scenario judges that): no refused "
                    "operation's events to judge")
    # Refused as an operation it does not do at all (-32601, unsupported), the request never reached the
    # rule the scenario is about (an accepted-or-refused operation's events): no pass without that check.
    expect_not_refused(fresh_provider(world), world.last.error, f"to {operation}",
                       REFUSABLE.get(operation, (None, None))[1])
    caught_up(fresh_provider(world), REFUSED_EVENTS_WAIT_S)


@then("any events the refused operation emitted are operation_started and exactly one operation_failed, sharing "
      "one operation id")
def _(world: World) -> None:
    operation, _ = world.require(world.errors.every_call, "refused operation")
    route = world.require(world.errors.route, "event route of the refused operation")
    events = list(route.received)
    if not events:
        return  # refused before it was accepted: no operation, no events (§10 reports accepted operations)
    emitted = ", ".join(f"{e.type}/{e.action}" for e in events)
    started = [e for e in events if e.type == "operation_started"]
    terminal = [e for e in events if e.type in ("operation_completed", "operation_failed")]
    expect(len(started) == 1 and len(terminal) == 1,
           f"the refused request to {operation} emitted {emitted}: an operation that reports its start reports "
           "exactly one end (operation_started, then one operation_completed or operation_failed)")
    expect(terminal[0].type == "operation_failed",
           f"the request to {operation} was refused ({world.last.error}), yet its events end in "
           f"{terminal[0].type}: a failed operation's terminal event is operation_failed")
    operation_ids = {e.event.get("operation_id") for e in events if (e.type or "").startswith("operation_")}
    expect(len(operation_ids) == 1 and None not in operation_ids,
           f"the events of the refused request to {operation} carry operation ids {sorted(map(repr, operation_ids))}; "
           "one operation's events share one")
