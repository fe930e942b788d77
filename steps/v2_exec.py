"""Steps for version 2 commands: argument vectors run without a shell, stops, stop graces, input, exec ids and
what the provider retains."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pytest_bdd import given, parsers, then, when

from conformance.adapter import ExecRequest, RunningExec, SandboxRequest, StreamOutcome
from conformance.errors import ApplicationErrorAnswer, CallTimeout

from ._shared import (
    World,
    attempt,
    await_printed,
    cleanup,
    expect,
    expect_limit_exceeded,
    how_it_ended,
    patterned_bytes,
    printed_so_far,
    run_ok,
    stream_refusal,
)

READY_WAIT_S = 5.0
STOP_LEVELS = {"gently": "term", "hard": "kill"}
MIB = 1024 * 1024


def _argv(datatable: list[list[str]]) -> tuple[str, ...]:
    """The argument vector a one-column table spells, one row per argument, the program first."""
    return tuple(row[0] for row in datatable)


def _run_argv(world: World, argv: tuple[str, ...], **options: Any) -> None:
    sandbox_id = world.require_sandbox().id
    world.outcome = world.provider.exec(sandbox_id, ExecRequest(command="", argv=argv, **options))


@when("I run a program with exactly these arguments")
def _(world: World, datatable: list[list[str]]) -> None:
    _run_argv(world, _argv(datatable))


@when("I run a program with exactly these arguments, in the sandbox's working directory")
def _(world: World, datatable: list[list[str]]) -> None:
    _run_argv(world, _argv(datatable), working_dir=world.working_directory())


@when("I run a program with exactly these arguments, with BASH_ENV pointing at that startup file")
def _(world: World, datatable: list[list[str]]) -> None:
    startup = world.require(world.commands.startup_file, "Bash startup file")
    _run_argv(world, _argv(datatable), env={"BASH_ENV": startup})


@when(parsers.re(r'I run a program with exactly these arguments, with BASH_ENV set to "(?P<value>[^"]+)" and '
                 r'(?P<name>[A-Z_]+) set to an empty value$'))
def _(world: World, value: str, name: str, datatable: list[list[str]]) -> None:
    _run_argv(world, _argv(datatable), env={"BASH_ENV": value, name: ""})


@given(parsers.re(r'an executable "(?P<name>[^"/]+)" in the sandbox\'s working directory that prints '
                  r'"(?P<text>[^"]+)"$'))
def _(world: World, name: str, text: str) -> None:
    sandbox_id = world.require_sandbox().id
    script = f"#!/bin/sh\nprintf '%s' '{text}'\n".encode()
    world.files("write a file").write(sandbox_id, name, script)
    run_ok(world, sandbox_id, f"chmod +x './{name}'")


@then("the command could not be started, and the provider said so instead of reporting an exit code")
def _(world: World) -> None:
    outcome = world.require(world.outcome, "command's result")
    expect(outcome.outcome == "infra",
           "a program that does not exist cannot be started, and the provider answers that as a failure; it "
           f"reported a result instead, as a shell would: {outcome.describe()}")


# -- stops -------------------------------------------------------------------------------------------------


@when(parsers.re(r'I start streaming `(?P<command>.+)`(?: with a stop grace of (?P<grace>\d+) seconds?)? and it has '
                 r'printed "(?P<text>[^"]+)"$'))
def _(world: World, command: str, grace: str | None, text: str) -> None:
    streams = world.streams("streaming exec")
    stop_grace = None if grace is None else float(grace)
    running = streams.start_exec(world.require_sandbox().id,
                                 ExecRequest(command, timeout_s=60.0, stop_grace_s=stop_grace))
    world.channels_state.running = running
    await_printed(running, text.encode(), READY_WAIT_S, f"`{command}`")


def _running(world: World) -> RunningExec:
    return world.require(world.channels_state.running, "streamed command started by an earlier step")


@when(parsers.re(r"the host stops it (?P<how>gently|hard)$"))
def _(world: World, how: str) -> None:
    running = _running(world)
    streams = world.streams("stop a command")
    world.channels_state.stopped_at = time.monotonic()  # deadlines run from the request (steps/_subject.py)
    streams.stop_exec(running.exec_id, STOP_LEVELS[how])
    world.channels_state.stop_answered_at = time.monotonic()


@then(parsers.parse("the command ended within {seconds:d} seconds, reported as {termination}"))
def _(world: World, seconds: int, termination: str) -> None:
    running = _running(world)
    stopped_at = world.require(world.channels_state.stopped_at, "stop the host sent")
    try:
        waited = attempt(lambda: running.wait(seconds + 2.0))
    except CallTimeout:
        raise AssertionError(f"the command was still running {time.monotonic() - stopped_at:.0f}s after a "
                             f"{'gentle' if termination == 'cancelled' else 'hard'} stop: the provider did not "
                             "stop it (a stop must find the command however early it arrives)") from None
    expect(waited.error is None, f"the stopped command should end with a result; it ended with {waited.error}")
    outcome: StreamOutcome = waited.answer
    took = time.monotonic() - stopped_at
    expect(outcome.result.termination == termination,
           f"a command ended by a {'gentle' if termination == 'cancelled' else 'hard'} stop is reported as "
           f"{termination}; it was reported as {outcome.result.describe()}")
    expect(took <= seconds, f"the command ended {took:.1f}s after the stop; expected at most {seconds}s")


@then(parsers.parse("the command is still running {seconds:g} seconds later"))
def _(world: World, seconds: float) -> None:
    running = _running(world)
    stopped_at = world.require(world.channels_state.stop_answered_at, "stop the host sent")
    time.sleep(max(0.0, stopped_at + seconds - time.monotonic()))
    if running.done():
        raise AssertionError("a gentle stop sends one SIGTERM; a command that ignores it keeps running until a hard "
                             f"stop, but this one had already ended: {how_it_ended(running)}")


@then(parsers.re(r"the command ended at least (?P<low>\d+) and at most (?P<high>\d+) seconds after the stop, "
                 r"reported as cancelled or killed, unless it ended at once as cancelled with no signal$"))
def _(world: World, low: str, high: str) -> None:
    running = _running(world)
    # Timed from just before the stop was sent: the provider cannot start the grace sooner, so a kill that
    # honoured it is never seen early (the result only arrives later still).
    sent_at = world.require(world.channels_state.stopped_at, "stop the host sent")
    try:
        waited = attempt(lambda: running.wait(max(0.0, sent_at + float(high) - time.monotonic()) + 2.0))
    except CallTimeout:
        still = time.monotonic() - sent_at
        if _predates_stop_grace(world):
            pytest.skip("the provider predates stop_grace_ms: at a timeout with a stop grace it kills outright, sending "
                        "no TERM (section 8.4: a plugin built before the field ignores it and keeps raw stops), so a "
                        "gentle stop's grace cannot be asked of it")
        raise AssertionError(f"the command, which ignores TERM, was still running {still:.0f}s after a gentle stop "
                             f"with a stop grace of {low} s: the grace never ended in a kill (the provider honours "
                             "stop_grace_ms at a timeout, so it knows the field)") from None
    took = time.monotonic() - sent_at
    expect(waited.error is None, f"the stopped command should end with a result; it ended with {waited.error}")
    result = waited.answer.result
    expect(result.termination in ("cancelled", "killed"),
           f"a command the host stopped gently, ended by the grace's kill, is reported as killed or cancelled; it was "
           f"reported as {result.describe()}")
    if took < float(low):
        # SDP2-140's note: a backend that cannot signal ends the command on the term itself, and says so by
        # reporting the term's termination with no signal.
        expect(result.termination == "cancelled" and result.signal is None,
               f"the command ended {took:.1f}s after a gentle stop with a stop grace of {low} s, before the grace had "
               f"passed, reported as {result.describe()}: a command that ignores TERM is killed only once the grace "
               "has passed (only a backend that cannot signal ends it at once, as cancelled with no signal)")
    expect(took <= float(high), f"the command ended {took:.1f}s after the gentle stop; with a stop grace of {low} s "
                                f"the kill is due once the grace has passed, within {high} s")


# The probe of v2-exec-timeout-grace: a command that reports the TERM it gets, at a 1 s timeout with a 1 s grace.
GRACE_PROBE = "trap 'printf got-term' TERM; printf started; while :; do sleep 0.1; done"


def _predates_stop_grace(world: World) -> bool:
    """Does the provider ignore stop_grace_ms altogether, as one built before the field does? At a timeout
    with a grace it then kills outright: the command never prints that it got a TERM."""
    outcome = world.run(GRACE_PROBE, timeout_s=1.0, stop_grace_s=1.0)
    return outcome.termination == "timed_out" and outcome.stdout == b"started"


@when(parsers.re(r"the host stops (?P<which>a command it never started|a command that has ended) "
                 r"(?P<how>gently|hard)$"))
def _(world: World, which: str, how: str) -> None:
    streams = world.streams("stop a command")
    if which == "a command that has ended":
        running = streams.start_exec(world.require_sandbox().id, ExecRequest("true"))
        running.wait(10.0)
        exec_id = running.exec_id
    else:
        exec_id = world.token("conformance-never-started")
    world.last = attempt(lambda: streams.stop_exec(exec_id, STOP_LEVELS[how]))


@then("the stop succeeded")
def _(world: World) -> None:
    world.last.expect_success("stopping a command that is not running")


@when(parsers.re(r"I run `(?P<command>.+)` with a timeout of (?P<timeout>\d+) seconds? and a stop grace of "
                 r"(?P<grace>\d+) seconds?$"))
def _(world: World, command: str, timeout: str, grace: str) -> None:
    started = time.monotonic()
    world.run(command, timeout_s=float(timeout), stop_grace_s=float(grace))
    world.channels_state.ran_for_s = time.monotonic() - started


@then(parsers.parse("the result says the command timed out: asked to stop and killed after the grace, {low:g} to "
                    "{high:g} seconds after it started, or killed outright at the timeout, at most {raw:g} seconds "
                    "after it started"))
def _(world: World, low: float, high: float, raw: float) -> None:
    outcome = world.ran()
    expect(outcome.termination == "timed_out",
           f"the provider's own stop at a timeout is reported as timed_out, grace or not; got {outcome.describe()}")
    took = world.require(world.channels_state.ran_for_s, "command run with a stop grace")
    if outcome.stdout == b"started":
        # a plugin built before stop_grace_ms ignores it and keeps raw stops: the timeout kills
        expect(took <= raw, f"killed outright at its timeout, the command should end at most {raw:g}s after it "
                            f"started; it took {took:.1f}s")
        return
    expect(outcome.stdout == b"startedgot-term",
           f"the command prints 'started', then 'got-term' if asked to stop; it printed {outcome.stdout!r}")
    expect(low <= took <= high, f"asked to stop at its timeout, the command ignores it and is killed once the grace "
                                f"has passed: between {low:g}s and {high:g}s; it took {took:.1f}s")


# -- input ---------------------------------------------------------------------------------------------


@given("the provider takes a command's input whole rather than streamed")
def _(world: World) -> None:
    capabilities = world.require_sandbox().capabilities or world.provider.capabilities
    if capabilities.declares("exec.stdin_stream"):
        pytest.skip("the provider streams a command's input (it declares exec.stdin_stream), so it collects no "
                    "fixed input to bound")


@when(parsers.re(r"I start streaming `(?P<command>.+)`, feeding its input while it runs$"))
def _(world: World, command: str, request: pytest.FixtureRequest) -> None:
    streams = world.streams("streaming exec")
    running = streams.start_exec(world.require_sandbox().id, ExecRequest(command, timeout_s=30.0, live_stdin=True))
    world.channels_state.running = running
    # A scenario that fails while the input is open still ends it, so the command does not wait out its timeout.
    cleanup(request, running.close_stdin)


@when(parsers.re(r'I send it the line "(?P<text>[^"]+)", keeping its input open$'))
def _(world: World, text: str) -> None:
    data = f"{text}\n".encode()
    _running(world).write_stdin(data)
    world.channels_state.fed, world.channels_state.fed_at = data, time.monotonic()


@then(parsers.re(r'it prints "(?P<text>[^"]+)" within (?P<seconds>\d+) seconds, while its input is still open$'))
def _(world: World, text: str, seconds: str) -> None:
    running = _running(world)
    fed = world.require(world.channels_state.fed, "input sent to the command")
    fed_at = world.require(world.channels_state.fed_at, "input sent to the command")
    wanted, limit = text.encode(), float(seconds)
    line = fed.decode(errors="replace").rstrip("\n")
    while wanted not in printed_so_far(running):
        if running.done():
            raise AssertionError(f"the command should answer the line {line!r} it was sent and keep reading its "
                                 f"input; it ended before printing {text!r}, with its input still open: "
                                 f"{how_it_ended(running)}")
        if time.monotonic() - fed_at > limit:
            printed = printed_so_far(running)
            raise AssertionError(
                f"a provider that declares exec.stdin_stream feeds the host's stdin frames to the command as they "
                f"arrive; the command was sent the line {line!r} and, with the host's end of file not sent yet, "
                f"printed {repr(printed.decode(errors='replace')) if printed else 'nothing'} within {limit:g}s "
                f"instead of {text!r}: its input did not reach it while it ran (collecting the input up to the "
                f"host's end of file before starting the command is what a provider with only exec.stdin does)")
        time.sleep(0.02)


@when("I end its input")
def _(world: World) -> None:
    _running(world).close_stdin()


@then(parsers.re(r'the streamed command exits with code 0, having printed "(?P<text>[^"]+)"$'))
def _(world: World, text: str) -> None:
    waited = attempt(lambda: _running(world).wait(10.0))
    expect(waited.error is None, f"once the host ends its input the command reads end of file and exits; the "
                                 f"provider answered an error instead: {waited.error}")
    outcome: StreamOutcome = waited.answer
    expect(outcome.result.termination == "exited" and outcome.result.exit_code == 0,
           f"once the host ends its input the command reads end of file and exits with code 0; it ended "
           f"{outcome.result.describe()}")
    streamed = outcome.streamed("stdout")
    expect(streamed == text.encode(), f"the command should have printed {text!r} in all, its answer to the line "
                                      f"and then that it saw end of file; it printed {streamed!r}")


@when(parsers.re(r"I run `(?P<command>.+)` with 1 MiB and 1 byte of patterned bytes as its stdin$"))
def _(world: World, command: str) -> None:
    world.run(command, stdin=patterned_bytes(MIB + 1), timeout_s=30.0)


@when(parsers.re(r"I run `(?P<command>.+)` with (?P<mib>\d+) MiB(?P<extra> and 1 byte)? of zero bytes as its "
                 r"stdin$"))
def _(world: World, command: str, mib: str, extra: str | None) -> None:
    world.run(command, stdin=bytes(int(mib) * MIB + (1 if extra else 0)), timeout_s=60.0)


@then(parsers.re(r"the command is refused as exceeding the limit (?P<limit>[a-z_]+) of (?P<size>\d+) bytes$"))
def _(world: World, limit: str, size: str) -> None:
    outcome = world.require(world.outcome, "command's result")
    expect(outcome.outcome == "infra", f"an input beyond the provider's {limit} is refused; the command ran: "
                                       f"{outcome.describe()}")
    expect_limit_exceeded(outcome.error, limit, int(size))


# -- exec ids and retention ---------------------------------------------------------------------------------


@when("I start another streamed command under the same exec id")
def _(world: World) -> None:
    first = _running(world)
    streams = world.streams("streaming exec")
    sandbox_id = world.require_sandbox().id
    world.last = attempt(lambda: streams.start_exec(sandbox_id, ExecRequest("printf second"),
                                                    exec_id=first.exec_id).wait(10.0))


@when("I start another streamed command under the same exec id in another sandbox")
def _(world: World) -> None:
    # Exec ids are the connection's (section 8.4), not a sandbox's: another sandbox is no escape from the check.
    first = _running(world)
    streams = world.streams("streaming exec")
    other = world.provider.create(SandboxRequest())
    world.last = attempt(lambda: streams.start_exec(other.id, ExecRequest("printf second"),
                                                    exec_id=first.exec_id).wait(10.0))


@then("that second command is refused as an invalid spec naming exec_id")
def _(world: World) -> None:
    error = stream_refusal(world.last)
    expect(isinstance(error, ApplicationErrorAnswer),
           f"a command started under the exec id of one still running should be refused; it got {world.last.answer!r}")
    assert isinstance(error, ApplicationErrorAnswer)
    expect(error.kind == "invalid_spec" and error.detail.get("field") == "exec_id",
           f"a duplicate exec id is refused as invalid_spec naming exec_id; it was refused with {error}")


@then("the first command still ends normally")
def _(world: World) -> None:
    outcome = _running(world).wait(10.0)
    expect(outcome.result.termination == "exited" and outcome.result.exit_code == 0,
           f"the first command should be untouched by the refused duplicate; it ended {outcome.result.describe()}")


@when(parsers.re(r"I stream `(?P<command>.+)` without a retained output limit$"))
def _(world: World, command: str) -> None:
    streams = world.streams("streaming exec")
    world.channels_state.stream_outcome = attempt(lambda: streams.exec(world.require_sandbox().id,
                                                                       ExecRequest(command)))


@then(parsers.parse("the stdout capture counts {total:d} bytes observed, none retained, all omitted"))
def _(world: World, total: int) -> None:
    outcome = world.require(world.channels_state.stream_outcome, "streamed command")
    refusal = stream_refusal(outcome)
    expect(refusal is None, f"the streamed command should run; it was refused: {refusal}", refusal)
    streamed = outcome.answer
    capture = streamed.stdout_capture
    expect(capture is not None, "the result carries no stdout capture accounting")
    got = (capture.observed_bytes, capture.retained_bytes, capture.omitted_bytes)
    expect(got == (total, 0, total),
           f"with no retained output limit a version 2 provider keeps no copy: observed={total}, retained=0, "
           f"omitted={total}; it counts observed={got[0]}, retained={got[1]}, omitted={got[2]}")
