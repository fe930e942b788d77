"""Steps for streamed commands: chunk order and tagging, honesty flags, retention, volume,
concurrency, sanitization and cancellation."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

from pytest_bdd import parsers, then, when

from conformance.adapter import ExecRequest, OutputChunk, RunningExec, StreamOutcome
from conformance.errors import CallTimeout, NotExpressible

from ._shared import (
    BlockComparison,
    World,
    attempt,
    await_file,
    expect,
    fitted_request,
    how_it_ended,
    sanitization_mode,
    stream_refusal,
    unescape,
)

# Generous: the machine is shared, and a large stream crosses two JSON codecs.
LARGE_STREAM_TIMEOUT_S = 300.0
SLOW_LINES = 30
# How long to wait for a command's first chunk to know it is running; a provider that does not
# stream live sends none before it ends, so the step goes on after this.
FIRST_CHUNK_WAIT_S = 0.5
# How long output a provider says it observed may take to arrive after its answer; an honest stream is
# complete when it answers, so nothing waits this long but a provider still sending.
LATE_OUTPUT_WAIT_S = 5.0


# -- helpers --------------------------------------------------------------------------------------


def _stream(world: World) -> StreamOutcome:
    return world.require(world.stream.outcome, "streamed command")


def _finish(world: World, running: RunningExec, timeout_s: float | None = None) -> StreamOutcome:
    stream = running.wait(timeout_s)
    world.stream.outcome = stream
    world.outcome = stream.result
    return stream


def _last_number(world: World) -> int:
    """The last number the streamed `seq 1 N` prints."""
    return world.require(world.stream.last_number, "streamed count of numbers")


def _start(world: World, request: ExecRequest, retained_limit: int | None = None,
           comparisons: dict[str, BlockComparison] | None = None) -> RunningExec:
    observers = tuple((comparisons or {}).values())
    return world.streams("streaming exec").start_exec(world.require_sandbox().id, request, retained_limit,
                                                      observers=observers)


def _compared_with_seq(world: World, last: int) -> dict[str, BlockComparison]:
    """Both tags compared, as they arrive, with `seq 1 <last>`: which one carries it is known only once the
    result says whether the streams are separated."""
    world.stream.last_number = last
    world.stream.comparisons = {tag: BlockComparison(tag, _seq_blocks(last)) for tag in ("stdout", "stderr")}
    return world.stream.comparisons


def _wait_for_first_chunk(running: RunningExec, limit_s: float = FIRST_CHUNK_WAIT_S) -> None:
    deadline = time.monotonic() + limit_s
    while not running.chunks_so_far() and not running.done() and time.monotonic() < deadline:
        time.sleep(0.01)


def _in_time(stream: StreamOutcome) -> list[OutputChunk]:
    """The chunks that arrived before the response: output sent after it does not count."""
    answered = stream.answer_sequence
    return [c for c in stream.chunks if answered is None or c.sequence < answered]


def _streamed(stream: StreamOutcome, tag: str | None = None) -> bytes:
    """The bytes that arrived before the response (output sent after it does not count)."""
    return stream.streamed(tag)


def _late_note(stream: StreamOutcome) -> str:
    late = stream.late_chunks
    return f" ({late} more chunks arrived after the response, where they do not count)" if late else ""


def _carrier(stream: StreamOutcome, name: str) -> str:
    """The tag a stream's bytes travel under: its own when the streams are separated, stdout when a
    combined backend says they are not."""
    return name if stream.streams_separated else "stdout"


def _result_bytes(stream: StreamOutcome, tag: str) -> bytes:
    return stream.result.stdout if tag == "stdout" else stream.result.stderr


def _ran(stream: StreamOutcome) -> None:
    expect(stream.result.outcome == "ran",
           f"the streamed command should have run, but the provider answered an error: {stream.result.error}")


def _seq_blocks(last: int, numbers_per_block: int = 200_000) -> Iterator[bytes]:
    """What `seq 1 <last>` prints, a block at a time."""
    for first in range(1, last + 1, numbers_per_block):
        end = min(first + numbers_per_block, last + 1)
        yield ("\n".join(map(str, range(first, end))) + "\n").encode("ascii")


def _seq_size(last: int) -> int:
    size, width, low = 0, 1, 1
    while low <= last:
        high = min(last, low * 10 - 1)
        size += (high - low + 1) * (width + 1)
        width, low = width + 1, low * 10
    return size


def _seq_last_for(minimum_bytes: int) -> int:
    """The smallest n such that `seq 1 n` prints at least ``minimum_bytes``."""
    low, high = 1, minimum_bytes
    while low < high:
        middle = (low + high) // 2
        if _seq_size(middle) >= minimum_bytes:
            high = middle
        else:
            low = middle + 1
    return low


# -- running --------------------------------------------------------------------------------------


@when(parsers.re(r"I stream `(?P<command>.+)`$"))
def _(world: World, command: str) -> None:
    _finish(world, _start(world, fitted_request(command)))


@when(parsers.re(r"I stream `(?P<command>.+)` with output sanitization (?P<mode>not given|[a-z_]+)$"))
def _(world: World, command: str, mode: str) -> None:
    _finish(world, _start(world, fitted_request(command, sanitization=sanitization_mode(mode))))


@when(parsers.re(r"I stream `(?P<command>.+)` with a timeout of (?P<seconds>\d+) seconds?$"))
def _(world: World, command: str, seconds: str) -> None:
    # Noted as a buffered run's timeout is, so the same verdict step reads it.
    world.common.command_timeout_s = float(seconds)
    started = time.monotonic()
    _finish(world, _start(world, ExecRequest(command=command, timeout_s=float(seconds))))
    world.common.command_answered_after_s = time.monotonic() - started


@when(parsers.re(r"I stream `(?P<command>.+)` with every byte value from 0 to 255 as its stdin$"))
def _(world: World, command: str) -> None:
    # A provider that never closes stdin leaves the command waiting: the timeout turns that into a verdict.
    _finish(world, _start(world, ExecRequest(command=command, stdin=bytes(range(256)), timeout_s=10.0)))


@then("the streamed stdout is every byte value from 0 to 255, in order, as hex")
def _(world: World) -> None:
    stream = world.require(world.stream.outcome, "streamed command")
    expected = bytes(range(256)).hex().encode("ascii")
    expect(stream.result.outcome == "ran" and stream.result.termination == "exited",
           f"the streamed command should read its stdin to end of file and exit; got {stream.result.describe()}")
    streamed = _streamed(stream, _carrier(stream, "stdout"))
    expect(streamed == expected,
           f"the streamed command should print the hex of the 256 bytes given as its stdin, {expected[:24]!r}…; it "
           f"streamed {streamed[:80]!r}{_late_note(stream)} — stdin given to a stream reaches the command as it does "
           "a buffered one")


@when(parsers.re(r"I start streaming `(?P<command>.+)`$"))
def _(world: World, command: str) -> None:
    world.stream.running = _start(world, fitted_request(command))


@when("the streamed command has printed something")
def _(world: World) -> None:
    running = world.require(world.stream.running, "command started streaming")
    _wait_for_first_chunk(running)
    expect(bool(running.chunks_so_far()),
           f"the streamed command printed nothing within {FIRST_CHUNK_WAIT_S} s of its start")


@then(parsers.parse('the streamed command finishes within {seconds:d} seconds, printing "{text}"'))
def _(world: World, seconds: int, text: str) -> None:
    running = world.require(world.stream.running, "command started streaming")
    # from the resume that set it going again, when one was sent: the deadline runs from the request
    sent = world.common.verb_sent_at
    try:
        stream = _finish(world, running, float(seconds) if sent is None else max(0.0, sent + seconds - time.monotonic()))
    except CallTimeout:
        expect(False, f"the streamed command did not finish within {seconds} s; it streamed "
                      f"{b''.join(c.data for c in running.chunks_so_far())[:200]!r} — after a resume, what was running "
                      "carries on")
        raise
    expect(stream.result.outcome == "ran" and stream.result.exit_code == 0,
           f"the streamed command should finish normally; it gave {stream.result.describe()}")
    expect(text.encode() in _streamed(stream), f"the streamed command should print {text!r}; it streamed "
                                               f"{_streamed(stream)!r}{_late_note(stream)}")


@when(parsers.parse("I stream a command that writes the numbers 1 to {last:d} to {name}, retaining at most "
                    "{limit:d} bytes"))
def _(world: World, last: int, name: str, limit: int) -> None:
    expect(name in ("stdout", "stderr"), f"the scenario names an unknown stream {name!r}")
    redirect = " >&2" if name == "stderr" else ""
    _finish(world, _start(world, fitted_request(f"seq 1 {last}{redirect}"), retained_limit=limit,
                          comparisons=_compared_with_seq(world, last)))


@when(parsers.parse("I stream a command that writes the numbers 1 to {last:d} on both of its outputs, retaining "
                    "at most {limit:d} bytes each"))
def _(world: World, last: int, limit: int) -> None:
    world.stream.last_number = last
    stream = _finish(world, _start(world, fitted_request(f"seq 1 {last}; seq 1 {last} >&2"), retained_limit=limit))
    if not stream.streams_separated:
        raise NotExpressible(world.provider.dialect, "a retention limit per stream, when the streams are combined")


@when(parsers.parse("I stream a command that writes at least {mib:d} MiB of numbered lines to stdout, retaining "
                    "at most {limit:d} bytes"))
def _(world: World, mib: int, limit: int) -> None:
    last = _seq_last_for(mib << 20)
    request = ExecRequest(command=f"seq 1 {last}", timeout_s=LARGE_STREAM_TIMEOUT_S)
    _finish(world, _start(world, request, retained_limit=limit, comparisons=_compared_with_seq(world, last)))


@when("I stream a slow command that prints a line every 50 ms for 1.5 seconds")
def _(world: World) -> None:
    command = f'for i in $(seq 1 {SLOW_LINES}); do echo "slow line $i"; sleep 0.05; done'
    slow = _start(world, fitted_request(command))
    world.stream.slow = slow
    _wait_for_first_chunk(slow)
    ended = stream_refusal(attempt(lambda: slow.wait(1.0))) if slow.done() else None
    expect(not slow.done(), "the slow command should still be running at this point, but it already answered", ended)


@when("while it runs I stream a fast command and describe the sandbox")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    fast = _start(world, fitted_request("printf 'fast output'"))
    world.provider.describe(sandbox_id)
    world.stream.described_at = time.monotonic()
    world.stream.fast_outcome = fast.wait()
    world.stream.slow_outcome = world.require(world.stream.slow, "slow streamed command").wait()


@when(parsers.re(r"I run `(?P<command>.+)` both buffered and streamed$"))
def _(world: World, command: str) -> None:
    world.stream.buffered = world.run(command)
    _finish(world, _start(world, fitted_request(command)))


@when(parsers.re(r"another stream `(?P<command>.+)` runs beside it in the same sandbox$"))
def _(world: World, command: str) -> None:
    world.stream.slow = _start(world, fitted_request(command))


@then(parsers.parse('the other stream still ends normally, having streamed "{text}"'))
def _(world: World, text: str) -> None:
    other = world.require(world.stream.slow, "the other stream")
    stream = other.wait(15.0)
    expect(stream.result.outcome == "ran" and stream.result.termination == "exited" and stream.result.exit_code == 0,
           f"cancelling one exec ended another in the same sandbox: it gave {stream.result.describe()}")
    expect(_streamed(stream) == text.encode(), f"the other stream streamed {_streamed(stream)!r}, not {text!r}")


@then(parsers.parse('the stream carried "{text}"'))
def _(world: World, text: str) -> None:
    stream = _stream(world)
    expect(text.encode() in _streamed(stream),
           f"the cancelled command's TERM handler did not get to run: the stream carried {_streamed(stream)!r} "
           "— a cancel asks the command to stop (SIGTERM) and kills it only after a grace period")


@when("I stream a command that writes every byte value from 0 to 255")
def _(world: World) -> None:
    octal = "".join(f"\\{b:03o}" for b in range(256))
    _finish(world, _start(world, fitted_request(f"printf '{octal}'")))


@then("the streamed stdout is exactly every byte value from 0 to 255")
def _(world: World) -> None:
    stream = _stream(world)
    _ran(stream)
    streamed = _streamed(stream, _carrier(stream, "stdout"))
    expect(streamed == bytes(range(256)),
           f"the stream carried {len(streamed)} bytes that are not the 256 byte values written "
           f"({streamed[:24]!r}…): stream chunks carry bytes as written, never re-encoded as text")


@when("I cancel it once it has started")
def _(world: World) -> None:
    running = world.require(world.stream.running, "started stream")
    _wait_for_first_chunk(running)
    world.stream.cancelled_at = time.monotonic()
    streams = world.streams("cancel an exec")
    attempt(lambda: streams.cancel_exec(running.exec_id)).expect_success("cancelling a running exec")


@when(parsers.re(r"I cancel it once it has created (?P<name>[A-Za-z0-9._-]+), before it has printed anything$"))
def _(world: World, name: str) -> None:
    running = world.require(world.stream.running, "started stream")
    await_file(world, world.require_sandbox().id, name, "the streamed command",
               ended=lambda: how_it_ended(running) if running.done() else None)
    if running.done():
        expect(False, f"the streamed command should still be running (it sleeps 10 s), but it already answered: "
                      f"{running.wait(1.0).result.describe()}")
    world.stream.cancelled_at = time.monotonic()
    streams = world.streams("cancel an exec")
    attempt(lambda: streams.cancel_exec(running.exec_id)).expect_success("cancelling a running exec")


@when(parsers.parse("while it runs I cancel an exec id that is {which}"))
def _(world: World, which: str) -> None:
    running = world.require(world.stream.running, "started stream")
    if which == "unknown":
        exec_id = world.token("conformance-never-started")
    elif which == "finished":
        finished = _start(world, fitted_request("printf done"))
        _ran(finished.wait())
        exec_id = finished.exec_id
    elif which == "a prefix of the running one's":
        exec_id = running.exec_id[: max(1, len(running.exec_id) - 2)]  # an id matching by prefix would cancel it
    else:
        raise AssertionError(f"the scenario names an unknown kind of exec id {which!r}")
    _wait_for_first_chunk(running)
    streams = world.streams("cancel an exec")
    world.last = attempt(lambda: streams.cancel_exec(exec_id))
    world.stream.cancelled_exec_id = exec_id


# -- order and tagging ----------------------------------------------------------------------------


@then("if the stream says it is live and separated, its chunks came in the order written: out-1, err-1, out-2, "
      "err-2")
def _(world: World) -> None:
    stream = _stream(world)
    _ran(stream)
    if not (stream.live_streaming and stream.streams_separated):
        return  # a replayed or combined stream promises no interleaving (stream-live-streaming-honest judges the claim)
    order = []
    for chunk in _in_time(stream):
        for token in re.findall(rb"(out|err)-(\d)", chunk.data):
            order.append((chunk.stream, token[0].decode() + "-" + token[1].decode()))
    expected = [("stdout", "out-1"), ("stderr", "err-1"), ("stdout", "out-2"), ("stderr", "err-2")]
    expect(order == expected, f"a live, separated stream should deliver each write as it happens, in order "
                              f"{expected}; its chunks came as {order}{_late_note(stream)}")


@then("every output chunk arrived before the response")
def _(world: World) -> None:
    stream = _stream(world)
    _ran(stream)
    answered = stream.answer_sequence
    assert answered is not None  # a stream that answered has a place in the inbound order
    # Output written behind the answer may reach us any time after it: wait until every byte the provider
    # says it observed has come (at once for an honest stream), then count what came late.
    stream.await_late(LATE_OUTPUT_WAIT_S)
    late = [c for c in stream.chunks if c.sequence > answered]
    count = stream.late_chunks
    expect(not count,
           f"{count} of {stream.record.count} output chunks arrived after the exec/stream response; every "
           f"chunk must come before it (the first late one carried {late[0].data[:40]!r})" if late else "")


@then(parsers.parse('the streamed stdout is exactly "{text}"'))
def _(world: World, text: str) -> None:
    stream = _stream(world)
    _ran(stream)
    expected = unescape(text)
    got = _streamed(stream, "stdout")
    expect(got == expected,
           f"the stdout chunks should add up to {expected!r}, in order; they add up to {got[:200]!r} "
           f"({stream.record.count} chunks: {[c.data[:20] for c in stream.chunks[:8]]!r}){_late_note(stream)}")


@then("every output chunk is tagged stdout or stderr")
def _(world: World) -> None:
    stream = _stream(world)
    _ran(stream)
    expect(stream.record.count > 0, "the command wrote output, but no output chunk arrived")
    odd = sorted(stream.record.tags - {"stdout", "stderr"})
    expect(not odd, f"output chunks must be tagged stdout or stderr; some were tagged {odd}")


@then("the chunks keep stdout and stderr apart exactly as far as the result says the streams are separated")
def _(world: World) -> None:
    stream = _stream(world)
    _ran(stream)
    expect(isinstance(stream.streams_separated, bool),
           f"the result should say whether the streams are separated; it says {stream.streams_separated!r}")
    out, err = _streamed(stream, "stdout"), _streamed(stream, "stderr")
    if stream.streams_separated:
        expect(out == b"to stdout" and err == b"to stderr",
               f"the result claims separated streams, so the stdout chunks should carry b'to stdout' and the "
               f"stderr chunks b'to stderr'; they carry {out!r} and {err!r}{_late_note(stream)}")
        expect(stream.result.stdout == b"to stdout" and stream.result.stderr == b"to stderr",
               f"the result claims separated streams; its retained copy should keep them apart: "
               f"{stream.result.describe()}")
    else:
        expect(err == b"",
               f"the result says the streams are combined, so every chunk must be tagged stdout; stderr chunks "
               f"carried {err!r}")
        expect(b"to stdout" in out and b"to stderr" in out and len(out) == len(b"to stdoutto stderr"),
               f"the result says the streams are combined, so the stdout chunks should carry both outputs; "
               f"they carry {out!r}{_late_note(stream)}")
        expect(stream.result.stderr == b"",
               f"the result says the streams are combined, so its retained stderr should be empty: "
               f"{stream.result.describe()}")


# -- honesty flags --------------------------------------------------------------------------------


@then(parsers.parse("if the result claims live streaming, the first chunk arrived at least {lead:d} second before "
                    "the response"))
def _(world: World, lead: int) -> None:
    stream = _stream(world)
    _ran(stream)
    expect(isinstance(stream.live_streaming, bool),
           f"the result should say whether it streamed live; live_streaming={stream.live_streaming!r}")
    if not stream.live_streaming:
        return
    expect(bool(stream.chunks), "the result claims live streaming, but no output chunk arrived")
    expect(stream.answered_at is not None, "the stream has no response time")
    assert stream.answered_at is not None
    first: OutputChunk = min(stream.chunks, key=lambda c: c.sequence)
    ahead = stream.answered_at - first.at
    expect(ahead >= lead,
           f"the result claims live streaming, but the first chunk ({first.data!r}) arrived only {ahead:.2f}s "
           f"before the response although the command paused for seconds after writing it: output replayed "
           f"when the command ends must be reported as live_streaming false")


@then(parsers.parse("the result claims {what} only if the provider declared {capability}"))
def _(world: World, what: str, capability: str) -> None:
    stream = _stream(world)
    _ran(stream)
    claims = {"live streaming": stream.live_streaming, "separated streams": stream.streams_separated}
    expect(what in claims, f"the scenario names an unknown streaming claim {what!r}")
    claimed = claims[what]
    expect(isinstance(claimed, bool), f"the result should say true or false for {what}; it says {claimed!r}")
    declared = world.provider.capabilities.declares(capability)
    expect(declared or not claimed,
           f"the result claims {what}, but the provider did not declare {capability} at initialize")


# -- retention and volume -------------------------------------------------------------------------


@then(parsers.parse("the chunks carry every byte written to {name}, in order"))
def _(world: World, name: str) -> None:
    stream = _stream(world)
    _ran(stream)
    tag = _carrier(stream, name)
    last = _last_number(world)
    comparison = world.require(world.stream.comparisons, "comparison of the streamed numbers")[tag]
    difference = comparison.finished()
    if difference is not None:
        offset, got, wanted = difference
        totals = stream.record.totals.get(tag)
        received = totals.length if totals is not None else 0
        raise AssertionError(
            f"the {tag} chunks should carry the {_seq_size(last)} bytes of `seq 1 {last}`, in order; they differ "
            f"at byte {offset} (of {received} bytes received before the response): got {got!r}, expected "
            f"{wanted!r} ({stream.record.count} chunks, {stream.late_chunks} of them after the response)")


@then(parsers.parse("the {name} capture counts every byte as observed, {retained:d} retained, the rest omitted, "
                    "nothing truncated"))
def _(world: World, name: str, retained: int) -> None:
    stream = _stream(world)
    _ran(stream)
    tag = _carrier(stream, name)
    capture = stream.stdout_capture if tag == "stdout" else stream.stderr_capture
    expect(capture is not None, f"the result carries no {tag} capture statistics")
    assert capture is not None
    total = _seq_size(_last_number(world))
    expected = (total, retained, total - retained, False)
    got = (capture.observed_bytes, capture.retained_bytes, capture.omitted_bytes, capture.truncated)
    expect(got == expected,
           f"the {tag} capture should count observed={total}, retained={retained}, omitted={total - retained}, "
           f"truncated=false; it counts observed={got[0]}, retained={got[1]}, omitted={got[2]}, "
           f"truncated={got[3]}")


@then(parsers.parse("the result keeps the first {head:d} and the last {tail:d} bytes written to {name}"))
def _(world: World, head: int, tail: int, name: str) -> None:
    stream = _stream(world)
    _ran(stream)
    tag = _carrier(stream, name)
    written = b"".join(_seq_blocks(_last_number(world)))
    expected = written[:head] + written[-tail:]
    kept = _result_bytes(stream, tag)
    if kept != expected:
        where = "the head" if kept[:head] != expected[:head] else "the tail"
        at = next((i for i, (a, b) in enumerate(zip(kept, expected)) if a != b), min(len(kept), len(expected)))
        raise AssertionError(
            f"with retained_output_limit {head + tail}, the result's {tag} should be the first {head} bytes plus "
            f"the last {tail} bytes of the output (a stable head of limit/2 bytes, rounded down, and a rolling tail "
            f"of the rest); it is {len(kept)} bytes and {where} differs, first at byte {at}: there it reads "
            f"{kept[max(at - 8, 0):at + 8]!r}, expected {expected[max(at - 8, 0):at + 8]!r}")


@then(parsers.parse("the result keeps nothing of {name}"))
def _(world: World, name: str) -> None:
    stream = _stream(world)
    _ran(stream)
    kept = _result_bytes(stream, _carrier(stream, name))
    expect(kept == b"", f"with retained_output_limit 0 the result should keep none of the output; it kept "
                        f"{len(kept)} bytes: {kept[:40]!r}")


# -- concurrency ----------------------------------------------------------------------------------


@then("the fast command and the describe both finished at least half a second before the slow command")
def _(world: World) -> None:
    slow = world.require(world.stream.slow_outcome, "answer of the slow streamed command")
    fast = world.require(world.stream.fast_outcome, "answer of the fast streamed command")
    _ran(slow)
    _ran(fast)
    expect(slow.answered_at is not None and fast.answered_at is not None, "a stream has no response time")
    assert slow.answered_at is not None and fast.answered_at is not None
    margin = 0.5
    expect(fast.answered_at <= slow.answered_at - margin,
           f"the fast command started while the slow one was running and should not wait for it: expected "
           f"its answer at least {margin}s before the slow command's, it came "
           f"{slow.answered_at - fast.answered_at:+.2f}s before it (negative: after)")
    described = world.require(world.stream.described_at, "describe sent while the slow command ran")
    expect(described <= slow.answered_at - margin,
           f"a streaming command must not hold up other requests: expected the describe answer at least "
           f"{margin}s before the slow command's, it came {slow.answered_at - described:+.2f}s before it "
           f"(negative: after)")


@then("the fast command's chunks carry exactly its own output")
def _(world: World) -> None:
    fast = world.require(world.stream.fast_outcome, "answer of the fast streamed command")
    _ran(fast)
    got = _streamed(fast)
    expect(got == b"fast output",
           f"the fast command's chunks should carry b'fast output' and nothing else; they carry {got[:200]!r}"
           f"{_late_note(fast)}")


@then("the slow command's chunks carry all of its lines, in order")
def _(world: World) -> None:
    slow = world.require(world.stream.slow_outcome, "answer of the slow streamed command")
    _ran(slow)
    expected = "".join(f"slow line {i}\n" for i in range(1, SLOW_LINES + 1)).encode("ascii")
    got = _streamed(slow, "stdout")
    expect(got == expected and slow.late_chunks == 0,
           f"the slow command's chunks should carry its {SLOW_LINES} lines in order before its response; got "
           f"{len(got)} bytes ({got[:60]!r}…), {slow.late_chunks} chunks after the response")


# -- interpreter and sanitization -----------------------------------------------------------------


@then("both runs printed the same, and it names a Bash version")
def _(world: World) -> None:
    buffered = world.require(world.stream.buffered, "buffered run of the command")
    stream = _stream(world)
    expect(buffered.outcome == "ran", f"the buffered command should have run: {buffered.error}")
    _ran(stream)
    expect(not buffered.stdout.startswith(b"not bash"),
           f"the buffered command should run under Bash; the probe printed {buffered.stdout!r}")
    expect(stream.result.stdout == buffered.stdout,
           f"exec/run and exec/stream must use the same interpreter and options; the probe printed "
           f"{buffered.stdout!r} buffered but {stream.result.stdout!r} streamed")
    expect(_streamed(stream, "stdout") == buffered.stdout,
           f"the streamed chunks should carry what the buffered run printed, {buffered.stdout!r}; they carry "
           f"{_streamed(stream, 'stdout')!r}{_late_note(stream)}")


@then(parsers.parse("the stdout capture observed {count:d} bytes"))
def _(world: World, count: int) -> None:
    stream = _stream(world)
    _ran(stream)
    capture = stream.stdout_capture
    expect(capture is not None, "the result carries no stdout capture statistics")
    assert capture is not None
    expect(capture.observed_bytes == count,
           f"the capture counts bytes after sanitization, so observed_bytes should be {count}; it is "
           f"{capture.observed_bytes}")


# -- cancellation ---------------------------------------------------------------------------------


@then(parsers.parse("the stream answered a normal result with termination cancelled, at most {bound:d} seconds "
                    "after the cancel"))
def _(world: World, bound: int) -> None:
    running = world.require(world.stream.running, "started stream")
    deadline = world.require(world.stream.cancelled_at, "cancel of the running stream") + bound
    while not running.done() and time.monotonic() < deadline:
        time.sleep(0.02)
    # Not waiting on the call itself: a provider that ignores the cancel keeps the call open, and the
    # sandbox's deletion at teardown ends it without a stray answer.
    expect(running.done(), f"the stream had not answered {bound}s after it was cancelled")
    stream = _finish(world, running, timeout_s=5.0)
    expect(stream.result.outcome == "ran",
           f"a cancelled command is a normal result with termination cancelled, not an error; got "
           f"{stream.result.error}")
    expect(stream.result.termination == "cancelled",
           f"expected termination cancelled, got {stream.result.describe()}")


@then("the exec cancel succeeds")
def _(world: World) -> None:
    exec_id = world.require(world.stream.cancelled_exec_id, "cancel of an exec id")
    world.last.expect_success(f"cancelling exec id {exec_id!r}")


@then(parsers.parse('the running stream still ends normally, having streamed "{text}"'))
def _(world: World, text: str) -> None:
    stream = _finish(world, world.require(world.stream.running, "started stream"))
    _ran(stream)
    expect(stream.result.termination == "exited",
           f"cancelling another exec id must leave this command alone; it ended with {stream.result.describe()}")
    got = _streamed(stream, "stdout")
    expect(got == text.encode("utf-8"),
           f"the command should have streamed {text!r}; it streamed {got!r}{_late_note(stream)}")
