"""Steps for creating, describing and deleting sandboxes."""

from __future__ import annotations

import concurrent.futures
import unicodedata

from pytest_bdd import then, when

from conformance.errors import ApplicationErrorAnswer

from ._world import World, attempt, expect

KNOWN_STATES = {
    "creating", "starting", "running", "stopping", "stopped", "pausing", "paused", "resuming", "archiving",
    "archived", "restoring", "resizing", "forking", "snapshotting", "deleting", "deleted", "error", "unknown",
}


@when("I create a sandbox")
def _(world: World) -> None:
    world.create_sandbox()


@when("I describe the sandbox")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    world.last = attempt(lambda: world.provider.describe(sandbox.id))


@when("I delete the sandbox")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    world.last = attempt(lambda: world.provider.delete(sandbox.id))
    world.attempts.append(world.last)


@when("I delete the sandbox again")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    world.last = attempt(lambda: world.provider.delete(sandbox.id))
    world.attempts.append(world.last)


@when("I delete the sandbox twice at the same time")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(attempt, lambda: world.provider.delete(sandbox.id)) for _ in range(2)]
        world.attempts.extend(f.result() for f in futures)


@when("I delete a sandbox id that was never issued")
def _(world: World) -> None:
    never_issued = world.token("conformance-never-issued")
    world.last = attempt(lambda: world.provider.delete(never_issued))
    world.attempts.append(world.last)


@then("the delete succeeds")
def _(world: World) -> None:
    world.last.expect_success("sandbox delete")


@then("both deletes succeed")
def _(world: World) -> None:
    expect(len(world.attempts) == 2, f"expected two deletes, saw {len(world.attempts)}")
    for number, outcome in enumerate(world.attempts, start=1):
        outcome.expect_success(f"delete number {number} of the same sandbox")


@then("the description names the same sandbox")
def _(world: World) -> None:
    status = world.last.expect_success("describe")
    expect(status.id == world.require_sandbox().id,
           f"describe of {world.require_sandbox().id!r} answered a status for {status.id!r}")


@then("the description reports a known sandbox state")
def _(world: World) -> None:
    state = world.last.answer.state
    expect(state in KNOWN_STATES, f"state {state!r} is not one of the protocol's sandbox states")


@then("the sandbox is reported not found, or in state deleting or deleted")
def _(world: World) -> None:
    if world.last.error is not None:
        error = world.last.error
        expect(isinstance(error, ApplicationErrorAnswer) and error.kind == "not_found",
               f"describe of a deleted sandbox should be not_found (or report it deleted); it answered: {error}")
        return
    state = world.last.answer.state
    expect(state in ("deleting", "deleted"),
           f"describe of a deleted sandbox reported state {state!r}; expected not_found, deleting or deleted")


@then("the handle carries the sandbox's status, with its id and state")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    expect(bool(sandbox.status.id), "the handle's status has no id")
    expect(sandbox.status.id == sandbox.id, "the handle's status id differs from the handle's id")
    expect(sandbox.status.state in KNOWN_STATES, f"the handle reports unknown state {sandbox.status.state!r}")


@then("the handle carries the sandbox's own capability declaration")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    expect(sandbox.capabilities is not None and isinstance(sandbox.capabilities.raw, dict),
           "the handle carries no per-sandbox capability declaration")


@then("the handle names a non-empty working directory")
def _(world: World) -> None:
    directory = world.require_sandbox().working_directory
    expect(isinstance(directory, str) and directory != "", f"the handle's working directory is {directory!r}")


@then("the sandbox id is non-empty, at most 256 bytes, without whitespace or control characters")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    expect(sandbox_id != "", "the sandbox id is empty")
    expect(len(sandbox_id.encode("utf-8")) <= 256, f"the sandbox id is {len(sandbox_id.encode())} bytes long")
    bad = [c for c in sandbox_id if c.isspace() or unicodedata.category(c) == "Cc"]
    expect(not bad, f"the sandbox id {sandbox_id!r} contains whitespace or control characters {bad!r}")
