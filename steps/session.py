"""Steps for provider health and for how a session ends: shutdown, and the end of the provider's input."""

from __future__ import annotations

import threading
import time

from pytest_bdd import parsers, then, when

from conformance.adapter import ExecRequest, ProviderAdapter, SandboxRequest
from conformance.errors import ProviderCallError, ProviderViolation

from ._shared import Attempt, World, attempt, expect, fresh_provider, raw_channel

HEALTH_STATUSES = ("ok", "unreachable", "unauthorized", "unknown")


@when("I ask the provider for its health")
def _(world: World) -> None:
    world.last = attempt(world.provider.health)


@then("the health status is one of ok, unreachable, unauthorized or unknown")
def _(world: World) -> None:
    health = world.last.expect_success("provider/health")
    expect(health.status in HEALTH_STATUSES,
           f"health status {health.status!r} is not one of {', '.join(HEALTH_STATUSES)}")


@then("the provider answered with its health rather than an error, whatever the status")
def _(world: World) -> None:
    error = world.last.error
    expect(error is None, "a provider reports being unhealthy with a successful health answer and a status "
                          "other than ok; an error means the check itself could not be made. It answered: "
                          f"{error}")
    health = world.last.answer
    expect(isinstance(health.status, str) and health.status != "",
           f"the health answer carries no status: {health.raw!r}")


@when("the host asks the provider to shut down")
def _(world: World) -> None:
    raw_channel(world)  # the exit is observed through the raw channel
    fresh = fresh_provider(world)
    try:
        world.last = attempt(fresh.shutdown)
    except ProviderViolation as violation:  # no answer: it crashed or went silent
        world.last = Attempt()
        world.session.shutdown_violation = violation


@then("the provider answered the shutdown")
def _(world: World) -> None:
    violation = world.session.shutdown_violation
    expect(violation is None, f"shutdown must be answered before the provider exits: {violation}")
    world.last.expect_success("shutdown")


def _sandbox_on_fresh_provider(world: World) -> tuple[ProviderAdapter, str]:
    """The freshly started provider (its exit watched on the raw channel) and a new sandbox of it, deleted by
    the scenario's cleanup."""
    raw_channel(world)
    fresh = fresh_provider(world)
    return fresh, fresh.create(SandboxRequest()).id


@when(parsers.parse("a command that sleeps for {seconds:d} seconds is running on that provider"))
def _(world: World, seconds: int) -> None:
    """Work in flight when the input ends: the exit must not wait for it (its sandbox is the fresh
    provider's, deleted by the scenario's cleanup)."""
    fresh, sandbox_id = _sandbox_on_fresh_provider(world)
    started = threading.Event()

    def run() -> None:
        started.set()
        try:
            fresh.exec(sandbox_id, ExecRequest(f"sleep {seconds}", timeout_s=seconds + 30.0))
        except (ProviderViolation, ProviderCallError):
            pass  # the provider ends while it runs: that is the point

    threading.Thread(target=run, name="running-command", daemon=True).start()
    started.wait(5.0)
    time.sleep(0.3)  # the request is on the wire and the command has begun


@when(parsers.parse("a streamed command that sleeps for {seconds:d} seconds is running on that provider"))
def _(world: World, seconds: int) -> None:
    fresh, sandbox_id = _sandbox_on_fresh_provider(world)
    world.streams("streaming exec", fresh).start_exec(sandbox_id, ExecRequest(f"sleep {seconds}",
                                                                              timeout_s=seconds + 30.0))
    time.sleep(0.3)  # the request is on the wire and the command has begun


@when("a stdio process waiting for its input is open on that provider")
def _(world: World) -> None:
    fresh, sandbox_id = _sandbox_on_fresh_provider(world)
    world.facet("processes", "open a stdio process", fresh).open(sandbox_id, "cat",
                                                                 process_id=world.token("conformance-stdio"))


@when("a terminal is open on that provider")
def _(world: World) -> None:
    fresh, sandbox_id = _sandbox_on_fresh_provider(world)
    world.facet("terminals", "open a terminal", fresh).open(sandbox_id, pty_id=world.token("conformance-pty"))


@when("the host closes the provider's input")
def _(world: World) -> None:
    raw_channel(world).close_input()


@then(parsers.parse("the provider process exits with status 0 within {seconds:d} seconds"))
def _(world: World, seconds: int) -> None:
    code = raw_channel(world).wait_exit(float(seconds))
    expect(code is not None, f"the provider was still running {seconds} seconds later")
    expect(code == 0, f"the provider exited with status {code} after an orderly shutdown; a host reads a non-zero "
                      "status as a crash")


@then(parsers.parse("the provider process exits within {seconds:d} seconds"))
def _(world: World, seconds: int) -> None:
    code = raw_channel(world).wait_exit(float(seconds))
    expect(code is not None, f"the provider was still running {seconds} seconds later")
