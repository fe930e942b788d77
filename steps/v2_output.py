"""Steps for version 2 command output: every byte on the channel whatever the retained output limit, the
provider's own capture accounting, drains after the main process exited, and stops sent the moment a
command's channel opens."""

from __future__ import annotations

import time
from contextlib import nullcontext

import pytest
from pytest_bdd import given, parsers, then, when

from conformance.adapter import CaptureStats, ExecRequest, HostChannelFaults, RunningExec, StreamOutcome
from conformance.errors import ApplicationErrorAnswer, CallTimeout

from ._shared import (
    Attempt,
    World,
    attempt,
    await_printed,
    cleanup,
    expect,
    fresh_provider,
    how_it_ended,
    stream_refusal,
)

STREAMS = ("stdout", "stderr")
# Files in the sandbox's working directory through which a leftover process shows it is alive.
LEFTOVER_PID = "conformance-leftover.pid"
LEFTOVER_BEAT = "conformance-leftover.beat"
# A leftover process beats every 0.1 s for at most this many beats (15 s), so one no stop reaches ends anyway.
LEFTOVER_BEATS = 150
# Long enough that a beating process has beaten twice; a stopped one has not beaten at all.
BEAT_WINDOW_S = 0.5
READY_WAIT_S = 10.0
OPEN_WAIT_S = 10.0


def _count(spelled: str) -> int:
    return int(spelled.replace(",", ""))


# -- every byte crosses the channel, and the provider's counts --------------------------------------------


@when(parsers.re(r"I stream a command writing (?P<out>[\d,]+) bytes to stdout and (?P<err>[\d,]+) bytes to "
                 r"stderr, with retained output limit (?P<limit>none|[\d,]+ bytes)$"))
def _(world: World, out: str, err: str, limit: str) -> None:
    sizes = {"stdout": _count(out), "stderr": _count(err)}
    fills = {"stdout": "o", "stderr": "e"}
    world.channels_state.moved = {stream: fills[stream].encode() * size for stream, size in sizes.items()}
    command = (f"head -c {sizes['stdout']} /dev/zero | tr '\\0' {fills['stdout']}; "
               f"head -c {sizes['stderr']} /dev/zero | tr '\\0' {fills['stderr']} >&2")
    retained = None if limit == "none" else _count(limit.removesuffix(" bytes"))
    world.channels_state.retained_limit = retained
    streams = world.streams("streaming exec")
    sandbox_id = world.require_sandbox().id
    world.channels_state.stream_outcome = attempt(
        lambda: streams.exec(sandbox_id, ExecRequest(command), retained_limit=retained))


def _streamed(world: World) -> StreamOutcome:
    outcome = world.require(world.channels_state.stream_outcome, "streamed command")
    refusal = stream_refusal(outcome)
    expect(refusal is None, f"the streamed command should run; it was refused: {refusal}", refusal)
    streamed: StreamOutcome = outcome.answer
    expect(streamed.result.termination == "exited" and streamed.result.exit_code == 0,
           f"the command writing the output should exit 0; it ended {streamed.result.describe()}")
    return streamed


@then(parsers.re(r"the channel carried all (?P<out>[\d,]+) stdout bytes and all (?P<err>[\d,]+) stderr bytes$"))
def _(world: World, out: str, err: str) -> None:
    streamed = _streamed(world)
    limit = world.channels_state.retained_limit
    for stream in STREAMS:
        carried = streamed.streamed(stream)
        expected = world.channels_state.moved[stream]
        expect(carried == expected,
               f"every byte of the command's {stream} crosses its channel whatever the retained output limit "
               f"({'none' if limit is None else f'{limit} bytes'}); the channel carried {len(carried)} of the "
               f"{len(expected)} bytes the command wrote")


def _capture(streamed: StreamOutcome, stream: str) -> CaptureStats:
    capture = streamed.stdout_capture if stream == "stdout" else streamed.stderr_capture
    expect(capture is not None, f"the result carries no {stream}_capture: the provider's own accounting of it")
    assert capture is not None
    return capture


@then("for each stream, the provider counted every byte it sent as observed, and what it kept plus what it left "
      "out as what it observed")
def _(world: World) -> None:
    streamed = _streamed(world)
    limit = world.channels_state.retained_limit
    for stream in STREAMS:
        capture = _capture(streamed, stream)
        sent = len(streamed.streamed(stream))
        expect(capture.observed_bytes == sent,
               f"{stream}_capture.observed_bytes counts every byte the provider sent of that stream; it says "
               f"{capture.observed_bytes}, and the channel carried {sent}")
        expect(capture.retained_bytes + capture.omitted_bytes == capture.observed_bytes,
               f"{stream}_capture must add up, retained plus omitted equal to observed; it says retained "
               f"{capture.retained_bytes} + omitted {capture.omitted_bytes} and observed {capture.observed_bytes}")
        if limit is not None:
            expect(capture.retained_bytes <= limit,
                   f"{stream}_capture says {capture.retained_bytes} bytes were retained, more than the "
                   f"{limit} bytes the host asked it to retain at most")


@then("neither stream is said to be truncated")
def _(world: World) -> None:
    streamed = _streamed(world)
    claimed = [stream for stream in STREAMS if _capture(streamed, stream).truncated]
    expect(not claimed, "truncated means bytes were lost beyond what the counts account for; every byte of "
                        f"the command's output reached the host, yet the capture of {' and '.join(claimed)} says "
                        "truncated")


# -- drains after the main process exited ---------------------------------------------------------------


def _start_until_ready(world: World, command: str, request: pytest.FixtureRequest) -> None:
    """Stream ``command`` on the shared provider and wait for its "ready"; whatever it leaves behind is
    ended after the scenario, even when the provider's stop did not reach it."""
    sandbox_id = world.require_sandbox().id
    world.channels_state.leftover = (LEFTOVER_PID, LEFTOVER_BEAT)
    cleanup(request, lambda: world.provider.exec(
        sandbox_id, ExecRequest(f"kill -9 \"$(cat {LEFTOVER_PID})\" 2>/dev/null; true", timeout_s=10.0)))
    running = world.streams("streaming exec").start_exec(sandbox_id, ExecRequest(command, timeout_s=60.0))
    world.channels_state.running = running
    await_printed(running, b"ready", READY_WAIT_S, "the command")


def _beats(count: int, also: str = "") -> str:
    """A loop that beats (writes its count to the heartbeat file) every 0.1 s, ``count`` times, doing ``also``
    (shell source) at each beat."""
    return (f"i=0; while [ $i -lt {count} ]; do {also}echo $i > {LEFTOVER_BEAT}; i=$((i+1)); sleep 0.1; done")


@when("I start streaming a command that exits at once, leaving behind a process that keeps writing to its output, "
      "and that process has printed \"ready\"")
def _(world: World, request: pytest.FixtureRequest) -> None:
    # The leftover runs in the command's own process group; the main process is gone well before "ready".
    leftover = f"sleep 0.3; printf ready; {_beats(LEFTOVER_BEATS, also='printf .; ')}"
    _start_until_ready(world, f"({leftover}) & echo $! > {LEFTOVER_PID}; exit 0", request)


@given("the sandbox can start a process in a session of its own, with setsid")
def _(world: World) -> None:
    found = world.provider.exec(world.require_sandbox().id, ExecRequest("command -v setsid"))
    if found.outcome != "ran" or found.exit_code != 0:
        pytest.skip("the sandbox has no setsid, so no command there can leave its own process group")


@when("I start streaming a command that starts a process in a session of its own holding the command's output "
      "open, then sleeps, and it has printed \"ready\"")
def _(world: World, request: pytest.FixtureRequest) -> None:
    # Outside the command's process group, no signal to that group reaches it: only its pipes tie it to the command.
    # "ready" only once the holder has beaten: by then it runs in its own session, so a stop sent after "ready"
    # cannot end it as part of the command's group (a loaded machine may not have run setsid yet otherwise)
    holder = f"echo $$ > {LEFTOVER_PID}; {_beats(LEFTOVER_BEATS)}"
    _start_until_ready(world, f"setsid sh -c '{holder}' & until [ -s {LEFTOVER_BEAT} ]; do sleep 0.05; done; "
                              "printf ready; sleep 30", request)


def _running(world: World) -> RunningExec:
    return world.require(world.channels_state.running, "streamed command started by an earlier step")


def _wait_after_stop(world: World, seconds: int) -> tuple[Attempt, float]:
    """How the stopped command's call ended, and how long after the stop; fails once ``seconds`` passed."""
    stopped_at = world.require(world.channels_state.stopped_at, "stop the host sent")
    try:
        waited = attempt(lambda: _running(world).wait(max(0.0, stopped_at + seconds - time.monotonic())))
    except CallTimeout:
        expect(False, f"after the hard stop the command's call should end within {seconds}s; it had not: a "
                      "provider ends a killed command instead of waiting for whatever holds its output open")
        raise
    return waited, time.monotonic() - stopped_at


@then(parsers.parse("the command's call ended within {seconds:d} seconds of the stop"))
def _(world: World, seconds: int) -> None:
    waited, took = _wait_after_stop(world, seconds)
    expect(took <= seconds, f"the command's call ended {took:.1f}s after the hard stop; expected at most {seconds}s")
    world.channels_state.stream_outcome = waited


def _beat(world: World) -> bytes | None:
    outcome = attempt(lambda: world.files("read a file").read(world.require_sandbox().id, LEFTOVER_BEAT))
    return outcome.answer if outcome.error is None else None


def _still_beating(world: World) -> bool:
    first = _beat(world)
    time.sleep(BEAT_WINDOW_S)
    return _beat(world) != first


@then("the leftover process is no longer running")
def _(world: World) -> None:
    expect(not _still_beating(world),
           "the process the command left behind was still running after the hard stop: stops stay in force while "
           "a command's output drains after its main process exited, and a kill ends the whole process group")


@then(parsers.parse("the command's call ended within {seconds:d} seconds of the stop, reported as killed or "
                    "refused as an incomplete transfer"))
def _(world: World, seconds: int) -> None:
    waited, took = _wait_after_stop(world, seconds)
    expect(took <= seconds, f"the command's call ended {took:.1f}s after the hard stop; a kill must not wait for a "
                            f"process that holds the output open (expected at most {seconds}s)")
    world.channels_state.stream_outcome = waited
    refusal = stream_refusal(waited)
    if refusal is not None:
        expect(isinstance(refusal, ApplicationErrorAnswer) and refusal.kind == "incomplete",
               f"a killed command whose output could not be drained ends as killed, or as an incomplete "
               f"transfer; the call failed with {refusal}")
        return
    result = waited.answer.result
    expect(result.termination == "killed", f"a command ended by a hard stop is reported as killed; it was "
                                           f"reported as {result.describe()}")


@then("if that process still holds the output open, the answer says the output was truncated")
def _(world: World) -> None:
    outcome = world.require(world.channels_state.stream_outcome, "stopped command's answer")
    if stream_refusal(outcome) is not None or not _still_beating(world):
        return  # an incomplete transfer says it itself; and a provider that ended the holder abandoned nothing
    streamed: StreamOutcome = outcome.answer
    captures = [c for c in (streamed.stdout_capture, streamed.stderr_capture) if c is not None]
    expect(any(capture.truncated for capture in captures),
           "the provider answered while a process still held the command's output open, so it gave up on output "
           "it never drained; abandoned output sets the capture's truncated flag, and neither capture says so "
           f"({streamed.stdout_capture}, {streamed.stderr_capture})")


# -- a stop the moment the channel opens -----------------------------------------------------------------


@when(parsers.re(r"I start streaming `(?P<command>.+)` through that provider and stop it hard as soon as its "
                 r"channel is open$"))
def _(world: World, command: str) -> None:
    _stop_once_open(world, command, world.require_sandbox().id, ack_delay_s=0.0)


@when(parsers.re(r"I start streaming `(?P<command>.+)` through that provider, acknowledging its channel's open "
                 r"(?P<seconds>\d+) seconds? late, and stop it hard before the acknowledgement$"))
def _(world: World, command: str, seconds: str) -> None:
    channels = world.channels(fresh_provider(world))
    expect(channels.offer_open_ack, "this step needs a provider offered open acknowledgements (a Given step is missing)")
    sandbox = world.require(world.common.fresh_sandbox, "sandbox created through the freshly started provider")
    _stop_once_open(world, command, sandbox.id, ack_delay_s=float(seconds))
    record = channels.records()[-1]
    expect(record.acknowledge_asked,
           "offered open acknowledgements, the provider asks for one in its open frame; it did not, so no stop "
           f"could arrive before an acknowledgement ({record})")
    stopped_at = world.require(world.channels_state.stopped_at, "stop the host sent")
    assert record.ack_sent_at is None or record.ack_sent_at > stopped_at, \
        "the suite's own timing: the stop was meant to go out before the acknowledgement"


def _stop_once_open(world: World, command: str, sandbox_id: str, ack_delay_s: float) -> None:
    """Start ``command``, and send a hard stop the moment its channel's open frame has arrived: with a delayed
    acknowledgement, the command cannot have started yet (a plugin asks for the acknowledgement before it
    sends or starts anything), so only a stop registered before the open can take effect."""
    fresh = fresh_provider(world)
    channels = world.channels(fresh)
    streams = world.streams("streaming exec", fresh)
    before = len(channels.records())
    late_ack = channels.faults(HostChannelFaults(ack_delay_s=ack_delay_s)) if ack_delay_s else nullcontext()
    with late_ack:
        running = streams.start_exec(sandbox_id, ExecRequest(command, timeout_s=60.0))
    world.channels_state.running = running
    deadline = time.monotonic() + OPEN_WAIT_S
    while True:
        records = channels.records()[before:]
        if records and records[0].opened:
            break
        if running.done():
            raise AssertionError(f"`{command}` ended before its channel opened: {how_it_ended(running)}")
        expect(time.monotonic() < deadline, f"the channel of `{command}` did not open within {OPEN_WAIT_S:.0f}s")
        time.sleep(0.002)
    world.channels_state.stopped_at = time.monotonic()  # deadlines run from the request (steps/_subject.py)
    streams.stop_exec(running.exec_id, "kill")
    world.channels_state.stop_answered_at = time.monotonic()
