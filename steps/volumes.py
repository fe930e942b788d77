"""Steps for what a volume keeps (lifecycle.feature): bytes written to a volume mounted at create time outlive
the sandbox that wrote them and are read back by a new sandbox mounting the volume. Upstream's volume_round_trip,
including its rule that a volume create refused for the credential is a skip, not a failure."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pytest_bdd import then, when

from conformance.adapter import SandboxRequest
from conformance.errors import ApplicationErrorAnswer

from ._shared import World, attempt, cleanup, create_volume, expect

PERSISTED = bytes([0, 1, 2, 255, 254, ord("\n"), ord("\r"), 0])  # upstream's: NULs, high bytes, line ends
PERSISTED_FILE = "persisted.bin"
# Upstream waits this long for a volume to be ready, and for a deleted sandbox to be gone.
SETTLE_S = 120.0
POLL_S = 0.5


def _volume_id(world: World) -> str:
    return world.require(world.lifecycle.volume_id, "volume")


def _mounting(world: World) -> SandboxRequest:
    mount = world.require(world.lifecycle.volume_mount, "volume mount path")
    return SandboxRequest(extra={"volumes": [{"volume": _volume_id(world), "mount_path": mount}]})


def _path(world: World) -> str:
    return f"{world.require(world.lifecycle.volume_mount, 'volume mount path')}/{PERSISTED_FILE}"


@when("I create a volume, unless the credential lacks volume permissions")
def _(world: World, request: pytest.FixtureRequest) -> None:
    volume_id = create_volume(world, request)
    deadline = time.monotonic() + SETTLE_S
    state = world.invoke("get a volume", None, volume_id=volume_id).state
    while state == "creating" and time.monotonic() < deadline:
        time.sleep(POLL_S)
        state = world.invoke("get a volume", None, volume_id=volume_id).state
    expect(state == "ready", f"volume {volume_id} should become ready to mount; it is {state!r}")


def _gone(world: World, sandbox_id: str) -> str | None:
    """Describe a deleted sandbox until it is gone (not_found, or state deleted); None then, else its last state."""
    deadline = time.monotonic() + SETTLE_S
    state: Any = None
    while time.monotonic() < deadline:
        described = attempt(lambda: world.provider.describe(sandbox_id))
        if isinstance(described.error, ApplicationErrorAnswer) and described.error.kind == "not_found":
            return None
        state = described.expect_success(f"describing deleted sandbox {sandbox_id}").state
        if state == "deleted":
            return None
        time.sleep(POLL_S)
    return state


def _mounted_sandbox(world: World, request: pytest.FixtureRequest, what: str) -> str:
    """A new sandbox mounting the volume. Its deletion is registered after the volume's, so it runs first: a
    volume is deleted once no sandbox mounts it (the ledger's own cleanup would come after the volume's)."""
    created = attempt(lambda: world.provider.create(_mounting(world))).expect_success(
        f"creating {what} mounting volume {_volume_id(world)} at {world.lifecycle.volume_mount}")
    cleanup(request, lambda: (world.provider.delete(created.id), _gone(world, created.id)))
    return created.id


@when("I write the bytes 0 1 2 255 254 10 13 0 to a file on the volume, mounted in a new sandbox")
def _(world: World, request: pytest.FixtureRequest) -> None:
    world.lifecycle.volume_mount = f"/mnt/{world.token('conformance-volume-mount')}"
    first = _mounted_sandbox(world, request, "a sandbox")
    world.lifecycle.volume_sandboxes.append(first)
    world.files("write a file on a mounted volume").write(first, _path(world), PERSISTED)


@when("I delete that sandbox and wait until it is gone")
def _(world: World) -> None:
    expect(bool(world.lifecycle.volume_sandboxes), "no sandbox mounted the volume yet (a step is missing)")
    sandbox_id = world.lifecycle.volume_sandboxes[-1]
    attempt(lambda: world.provider.delete(sandbox_id)).expect_success(f"deleting sandbox {sandbox_id}")
    state = _gone(world, sandbox_id)
    expect(state is None, f"sandbox {sandbox_id} was deleted but is still described, in state {state!r}, "
                          f"{SETTLE_S:.0f}s later")


@when("I create another sandbox mounting the same volume")
def _(world: World, request: pytest.FixtureRequest) -> None:
    other = _mounted_sandbox(world, request, "another sandbox")
    expect(other not in world.lifecycle.volume_sandboxes,
           f"the second create answered the deleted sandbox's id {other}: a new sandbox has an id of its own")
    world.lifecycle.volume_sandboxes.append(other)


@then("the other sandbox reads exactly those bytes from the file on the volume")
def _(world: World) -> None:
    sandboxes = world.lifecycle.volume_sandboxes
    expect(len(sandboxes) == 2, f"expected a sandbox that wrote and another that reads; saw {sandboxes}")
    outcome = attempt(lambda: world.files("read a file on a mounted volume").read(sandboxes[1], _path(world)))
    read = outcome.expect_success(f"reading {_path(world)} in sandbox {sandboxes[1]}, which mounts volume "
                                  f"{_volume_id(world)}, written there by sandbox {sandboxes[0]} before its deletion")
    expect(read == PERSISTED, f"sandbox {sandboxes[1]} reads {read!r} from {_path(world)} on volume "
                              f"{_volume_id(world)}; sandbox {sandboxes[0]} wrote {PERSISTED!r} there before it was "
                              "deleted: a volume keeps its bytes beyond the sandboxes that mount it")
