"""Steps for capability honesty: declared operations work, undeclared ones say `unsupported`."""

from __future__ import annotations

import pytest
from pytest_bdd import parsers, then, when

from conformance.adapter import SnapshotRef
from conformance.errors import (
    ApplicationErrorAnswer,
    CapabilityNotDeclared,
    NotExpressible,
    NotOptional,
    ProtocolErrorAnswer,
)

from ._shared import World, attempt, expect
from ._subject import METHOD_NOT_FOUND


@when(parsers.parse("I ask the provider to {operation}"))
def _(world: World, operation: str) -> None:
    operations = world.operations(operation)
    info = operations.catalogue.get(operation)
    if info is None:
        where = operations.core_here.get(operation)
        if where is not None:
            raise NotOptional(world.provider.dialect, operation, where)
        flag = {what: name for name, what in world.provider.capabilities_without_method.items()}.get(operation)
        if flag is not None and not world.provider.capabilities.declares(flag):
            raise CapabilityNotDeclared(flag)  # the flag exists, false: truer than "cannot express"
        raise NotExpressible(world.provider.dialect, operation)
    sandbox_id = world.require_sandbox().id if info.needs_sandbox else None
    world.capability.operation = operation
    world.last = attempt(lambda: operations.invoke(operation, sandbox_id))
    snapshot = world.last.answer.id if isinstance(world.last.answer, SnapshotRef) else None
    if snapshot:  # a snapshot is not a sandbox: the cleanup registry does not know it
        attempt(lambda: operations.invoke("delete a snapshot", None, snapshot_id=snapshot))


def _operation(world: World) -> str:
    """The optional operation the scenario asked for, by its neutral name."""
    return world.require(world.capability.operation, "optional operation asked for")


def _declared(world: World, capability: str) -> bool:
    """Per-sandbox declarations are authoritative for sandbox operations; the provider's for the rest."""
    operation = _operation(world)
    info = world.operations(operation).catalogue[operation]
    sandbox = world.sandbox
    if info.needs_sandbox and sandbox is not None and sandbox.capabilities is not None:
        return sandbox.capabilities.declares(capability)
    return world.provider.capabilities.declares(capability)


def _acceptable_names(world: World, capability: str) -> set[str]:
    """The named capability, or an undeclared capability that holds it (``snapshots`` for
    ``snapshots.activation`` when the snapshot service itself is null) or that the operation is served
    through, in any of its spellings.

    A group holds a capability when every spelling of it lies inside the group: ``access.ssh`` does not
    hold ``access.ssh.revoke``, whose flag is ``access.ssh_revoke`` beside it, so a refused revoke names
    access.ssh.revoke (v1 section 8.7: ssh_revoke "is available only when access.ssh.revoke is true")."""
    declared = world.provider.capabilities
    spellings = declared.names_of(capability)
    names = {capability}
    parts = capability.split(".")
    for end in range(1, len(parts)):
        parent = ".".join(parts[:end])
        holds = all(spelling.startswith(parent + ".") for spelling in spellings)
        if holds and declared.known(parent) and not _declared(world, parent):
            names.add(parent)
    operation = _operation(world)
    for through in world.operations(operation).catalogue[operation].served_through:
        if declared.known(through) and not _declared(world, through):
            names.add(through)
    # Each name in every spelling the dialect knows for it (v1: access.ssh.revoke and access.ssh_revoke).
    return {spelling for name in names for spelling in declared.names_of(name)}


@then(parsers.parse("the answer matches whether {capability} is declared for the sandbox"))
def _(world: World, capability: str) -> None:
    operation = _operation(world)
    error = world.last.error
    if _declared(world, capability):
        # A declared capability may still be narrowed by a more specific, undeclared one (a snapshot
        # service without filesystem snapshots); refusing it in the name of the declared one is a lie, and so
        # is naming a narrower capability the provider has no flag for (nothing it declares says so).
        refused = isinstance(error, ApplicationErrorAnswer) and error.kind == "unsupported"
        named = error.detail.get("capability") if refused else None
        flags = world.provider.capabilities
        narrower = (isinstance(named, str) and named.startswith(capability + ".") and not _declared(world, named)
                    and any(flags.known(name) for name in flags.names_of(named)))
        expect(not refused or narrower,
               f"{capability} is declared, but '{operation}' was refused as unsupported: {error}")
        # A method the provider does not know at all was never served, whatever else it may answer.
        expect(not (isinstance(error, ProtocolErrorAnswer) and error.code == METHOD_NOT_FOUND),
               f"{capability} is declared, but the provider does not know the method of '{operation}': {error}", error)
        return
    expect(error is not None,
           f"{capability} is not declared, but '{operation}' succeeded with {world.last.answer!r}")
    expect(isinstance(error, ApplicationErrorAnswer) and error.kind == "unsupported",
           f"{capability} is not declared, so '{operation}' must fail with kind unsupported; it answered: {error}",
           error, "unsupported")
    assert isinstance(error, ApplicationErrorAnswer)
    if world.operations(operation).refusal_names_capability:
        named = error.detail.get("capability")
        acceptable = _acceptable_names(world, capability)
        expect(named in acceptable,
               f"the unsupported answer to '{operation}' names capability {named!r}; expected "
               f"{' or '.join(sorted(acceptable))}")


@then(parsers.parse('unless {capability} is declared, the refusal has code {code:d} and says "{sentence}"'))
def _(world: World, capability: str, code: int, sentence: str) -> None:
    if _declared(world, capability):
        pytest.skip(f"capability {capability} is declared, so its refusal cannot be observed")
    error = world.last.error
    expect(error is not None, f"{capability} is not declared, but the operation succeeded with {world.last.answer!r}")
    assert error is not None
    expect(error.code == code and error.message == sentence,
           f"an undeclared operation must be refused with code {code} and exactly {sentence!r}; "
           f"it answered code {error.code} with {error.message!r}")
