"""Steps for provider health and for how a session ends: shutdown, and the end of the provider's input."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
from pytest_bdd import parsers, then, when

from conformance.adapter import ExecRequest, ProviderAdapter, SandboxRequest
from conformance.errors import ProviderCallError, ProviderViolation

from ._shared import (
    Attempt,
    World,
    attempt,
    await_printed,
    expect,
    fresh_provider,
    printed_so_far,
    raw_channel,
)
from ._state import Background
from ._subject import Asked, UnderWay, expect_none_refused, expect_under_way

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
                          f"{error}", error)
    health = world.last.answer
    expect(isinstance(health.status, str) and health.status != "",
           f"the health answer carries no status: {health.raw!r}")


@when("the host asks the provider to shut down")
def _(world: World) -> None:
    raw_channel(world)  # the exit is observed through the raw channel
    fresh = fresh_provider(world)
    asked = Asked.now()  # the exit deadline runs from here, not from the answer
    try:
        world.last = attempt(fresh.shutdown)
    except ProviderViolation as violation:  # no answer: it crashed or went silent
        world.last = Attempt()
        world.session.shutdown_violation = violation
    world.session.asked = asked.answered()


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
    # The provider ends while it runs (that is the point): its error is kept, not raised, and read only to
    # tell a refusal from a command cut short.
    running = Background(lambda: fresh.exec(sandbox_id, ExecRequest(f"sleep {seconds}", timeout_s=seconds + 30.0)))
    # The request goes out on that thread at some point after this: a health call sent now could overtake it,
    # so only time says it is on the wire; then the provider must have taken it in and still be running it.
    time.sleep(0.3)
    expect_under_way(UnderWay(f"the command `sleep {seconds}`", fresh, running.done, lambda: _ended(running)),
                     world.common.under_way)


def _ended(call: Background) -> Attempt:
    """How a call run in the background ended: its answer, or the provider's error; a crash, a silence or a
    wire fault is raised (``UnderWay`` reads it as how the call ended, never as a refusal)."""
    if isinstance(call.error, ProviderViolation):
        raise call.error
    return Attempt(error=call.error) if isinstance(call.error, ProviderCallError) else Attempt(answer=call.result)


@when(parsers.parse("a streamed command that sleeps for {seconds:d} seconds is running on that provider"))
def _(world: World, seconds: int) -> None:
    fresh, sandbox_id = _sandbox_on_fresh_provider(world)
    running = world.streams("streaming exec", fresh).start_exec(sandbox_id, ExecRequest(f"sleep {seconds}",
                                                                                        timeout_s=seconds + 30.0))
    # the request went out above: once the provider has taken it in, the command must be running
    expect_under_way(UnderWay(f"the streamed command `sleep {seconds}`", fresh, running.done,
                              lambda: attempt(lambda: running.wait(1.0))), world.common.under_way)


# What the command below prints before it becomes the sleep: its shell's pid, which `exec` keeps.
PID_PRINTED = re.compile(rb"pid=(\d+);")


def _process(pid: int) -> tuple[str, str, bytes] | None:
    """The host process ``pid``: its state, its start time (in clock ticks since boot, which a later process
    reusing the pid does not share) and its command line; None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after the name, which may hold spaces and parentheses
    return fields[0], fields[19], cmdline


def _still_runs(pid: int, started: str) -> bool:
    """The process seen running as ``pid`` since ``started`` runs still (a zombie has ended: it only awaits
    its parent)."""
    found = _process(pid)
    return found is not None and found[1] == started and found[0] not in ("Z", "X")


@when(parsers.parse("a streamed command that prints its process id, then sleeps for {seconds:d} seconds, "
                    "is running on that provider"))
def _(world: World, request: pytest.FixtureRequest, seconds: int) -> None:
    """A command whose host process the suite watches: only where the provider runs commands as processes of
    this host (isolation none) can the host see whether one outlives the provider."""
    isolation = fresh_provider(world).capabilities.isolation
    if isolation != "none":
        pytest.skip(f"the provider declares isolation {isolation!r}: its commands run isolated from this host, "
                    "so the host cannot see whether their processes outlive the provider")
    fresh, sandbox_id = _sandbox_on_fresh_provider(world)
    running = world.streams("streaming exec", fresh).start_exec(
        sandbox_id, ExecRequest(f"printf 'pid=%s;' $$; exec sleep {seconds}", timeout_s=seconds + 30.0))
    await_printed(running, b";", 10.0, "the command")
    printed = PID_PRINTED.search(printed_so_far(running))
    expect(printed is not None, "the command `printf 'pid=%s;' $$` should print its process id as pid=N; it printed "
                                f"{printed_so_far(running)!r}")
    assert printed is not None
    pid = int(printed.group(1))
    deadline = time.monotonic() + 5.0
    while (found := _process(pid)) is None or not found[2].startswith(b"sleep\0"):  # exec has not happened yet
        if time.monotonic() >= deadline:
            seen = "no process" if found is None else f"the process {found[2].replace(bytes(1), b' ')!r}"
            pytest.skip(f"the command printed its process id {pid}, but this host sees {seen} there, not the "
                        "command's sleep: the id is not the command's process as this host sees it, so the host "
                        "cannot see whether the command outlives the provider")
        time.sleep(0.02)
    started = found[1]
    world.session.command_process = (pid, started)

    def end_it() -> None:  # a command the provider left running is not left to this host for 30 s
        if _still_runs(pid, started):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    request.addfinalizer(end_it)


@then(parsers.parse("the command's process has ended within {seconds:d} seconds of the provider's exit"))
def _(world: World, seconds: int) -> None:
    pid, started = world.require(world.session.command_process, "command process seen running")
    deadline = time.monotonic() + seconds
    while _still_runs(pid, started):
        expect(time.monotonic() < deadline,
               f"the command (pid {pid}) was still running {seconds} s after the provider exited: on shutdown a "
               "provider cancels the commands still running, it does not leave them to finish on their own")
        time.sleep(0.05)


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
    world.session.asked = Asked.now()
    raw_channel(world).close_input()


def _exit_code(world: World, seconds: int) -> int:
    """The provider's exit status, once it exited within ``seconds`` of the host's request to end (a shutdown,
    or the end of its input), counted from the request; fails otherwise. The operations the scenario is
    about must not have been refused meanwhile."""
    expect_none_refused(world.common.under_way)
    # Every step that ends a session notes when it asked; were one not to, the exit would be timed from this
    # step: later than the request, so more lenient, never a false failure.
    asked = world.session.asked or Asked.now()
    asked.expect_answered_within(seconds, "the provider exits")
    code = raw_channel(world).wait_exit(asked.left(seconds))
    expect(code is not None, f"the provider was still running {asked.since():.1f} s after it was asked to end "
                             f"(it exits within {seconds} s of the request)")
    assert code is not None
    return code


@then(parsers.parse("the provider process exits with status 0 within {seconds:d} seconds"))
def _(world: World, seconds: int) -> None:
    code = _exit_code(world, seconds)
    expect(code == 0, f"the provider exited with status {code} after an orderly shutdown; a host reads a non-zero "
                      "status as a crash")


@then(parsers.parse("the provider process exits within {seconds:d} seconds"))
def _(world: World, seconds: int) -> None:
    _exit_code(world, seconds)
