"""Steps for stdio processes when a connection has a second sandbox: process ids are the connection's, not a
sandbox's, and what is done to one sandbox leaves the other's processes alone."""

from __future__ import annotations

from pytest_bdd import when

from conformance.adapter import SandboxRequest

from ._shared import World, attempt


@when("I open a stdio process with the same id in another sandbox")
def _(world: World) -> None:
    process_id = world.require(world.interactive.process_id, "open stdio process")
    other = world.provider.create(SandboxRequest())
    processes = world.processes("open a stdio process")
    world.last = attempt(lambda: processes.open(other.id, "cat", process_id=process_id))


@when("I create another sandbox and delete it")
def _(world: World) -> None:
    other = world.provider.create(SandboxRequest())
    world.provider.delete(other.id)
