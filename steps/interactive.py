"""Steps for interactive work: bidirectional stdio processes, terminals (PTYs) and log follows."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from pytest_bdd import parsers, then, when

from conformance.adapter import ExecRequest, RunningFollow
from conformance.errors import ApplicationErrorAnswer, CallTimeout

from ._shared import World, attempt, caught_up, cleanup, expect, unescape
from ._state import Background
from ._subject import UnderWay, expect_none_refused, expect_under_way

PROMPT_S = 5.0  # how long a call that must not wait behind a long poll may take
OUTPUT_S = 10.0  # how long a process or terminal may take to show what the scenario waits for
LATE_OUTPUT_S = 0.3  # how long output written behind an answer is given to show before "none came late"
# Escape sequences of every family (CSI, OSC, DCS, C1 forms), then every byte value, then a newline.
RAW_BYTES = (b"\x1b[1;31mred\x1b[0m \x1b]0;title\x07 \x1bP1$r\x1b\\ \xc2\x9b2J \x9b1m \x1b(B\x1b[?25l"
             + bytes(range(256)) + b"\n")


def _sandbox_id(world: World) -> str:
    return world.require_sandbox().id


def _preview(data: bytes, limit: int = 300) -> str:
    return repr(data[-limit:]) if len(data) > limit else repr(data)


# -- stdio processes -------------------------------------------------------------------------------


def _process(world: World) -> str:
    return world.require(world.interactive.process_id, "open stdio process")


@when(parsers.re(r"I open a stdio process running `(?P<command>.+)`$"))
def _(world: World, command: str) -> None:
    # No cleanup of its own: deleting the sandbox ends its processes, and a terminate could wait
    # behind a broken provider's poll.
    process_id = world.token("conformance-stdio")
    processes = world.processes("open a stdio process")
    world.interactive.process_id = processes.open(_sandbox_id(world), command, process_id=process_id)


def _read_process(world: World, size: int, process_id: str | None = None) -> bytes:
    """Read the process's output (the scenario's process unless another is named) until ``size`` bytes have
    come, or its output ends."""
    process_id = process_id or _process(world)
    data = b""
    deadline = time.monotonic() + OUTPUT_S
    while len(data) < size:
        remaining = deadline - time.monotonic()
        expect(remaining > 0, f"the process sent {len(data)} of the {size} bytes expected within {OUTPUT_S:.0f} s: "
                              f"{_preview(data)}")
        try:
            chunk = world.processes("read a stdio process's output").read(process_id, timeout_s=remaining)
        except CallTimeout:
            expect(False, f"the process sent {len(data)} of the {size} bytes expected within {OUTPUT_S:.0f} s: "
                          f"{_preview(data)}")
            raise
        if chunk is None:
            break
        data += chunk
    return data


@when("I send a generated line to the process")
def _(world: World) -> None:
    world.interactive.sent = (world.token("conformance-line") + "\n").encode()
    world.processes("write to a stdio process").write(_process(world), world.interactive.sent)


@when("I send the process bytes full of terminal escape sequences and control characters")
def _(world: World) -> None:
    world.interactive.sent = RAW_BYTES
    world.processes("write to a stdio process").write(_process(world), RAW_BYTES)


@then(parsers.re(r"the (?:first )?process (?:echoes exactly those bytes|echoes that line)$"))
def _(world: World) -> None:
    sent = _sent(world)
    echoed = _read_process(world, len(sent))
    expect(echoed == sent, f"`cat` should give back exactly the {len(sent)} bytes it was sent; it gave "
                           f"{len(echoed)} bytes: {_preview(echoed)} (sent {_preview(sent)}). Bytes exchanged with "
                           "a stdio process are never sanitized or transformed")


@then("the first process still echoes what it is sent")
def _(world: World) -> None:
    sent = (world.token("conformance-line") + "\n").encode()
    world.processes("write to a stdio process").write(_process(world), sent)
    echoed = _read_process(world, len(sent))
    expect(echoed == sent, f"the first process should still echo what it is sent; it gave {_preview(echoed)}")


@when("I close the process's input")
def _(world: World) -> None:
    world.processes("close a stdio process's input").close_input(_process(world))


@then("the process's output ends")
def _(world: World) -> None:
    try:
        end = world.processes("read a stdio process's output").read(_process(world), timeout_s=OUTPUT_S)
    except CallTimeout:
        expect(False, f"after its input was closed `cat` should end its output; no answer within {OUTPUT_S:.0f} s")
        raise
    expect(end is None, f"after its input was closed `cat` should end its output; it sent {_preview(end or b'')}")


def _waited(world: World) -> Any:
    """How the scenario's stdio process ended, waited for within the output deadline."""
    return world.processes("wait for a stdio process").wait(_process(world), timeout_s=OUTPUT_S)


@then(parsers.parse("waiting for the process reports termination exited with exit code {code:d}"))
def _(world: World, code: int) -> None:
    ended = _waited(world)
    expect(ended.termination == "exited" and ended.exit_code == code,
           f"the process should end with termination exited and exit code {code}; waiting for it reported "
           f"termination {ended.termination!r}, exit code {ended.exit_code!r}")


@then("waiting for the process reports that it ended without an exit code")
def _(world: World) -> None:
    ended = _waited(world)
    # 128+N is what a shell reports for a child a signal ended; as an exit code it cannot be told from a
    # program that chose to exit 137.
    expect(ended.exit_code is None,
           f"the process killed itself with SIGKILL, so it has no exit code; waiting for it reported "
           f"termination {ended.termination!r}, exit code {ended.exit_code!r}")


@when("I open another stdio process with the same id")
def _(world: World) -> None:
    process_id = _process(world)
    world.last = attempt(lambda: world.processes("open a stdio process").open(_sandbox_id(world), "cat", process_id=process_id))


@then(parsers.re(r"the second open is refused as invalid_spec naming (?P<field>process_id|pty_id)$"))
def _(world: World, field: str) -> None:
    what = "a second open with an id already in use"
    error = world.last.expect_application_error(what)
    assert isinstance(error, ApplicationErrorAnswer)
    expect(error.kind == "invalid_spec" and error.detail.get("field") == field,
           f"{what} should be refused as invalid_spec naming {field}; it answered: {error}")


def _sent(world: World) -> bytes:
    """The bytes last sent to the process."""
    return world.require(world.interactive.sent, "bytes sent to the process")


def _waiting_read(world: World) -> Background:
    return world.require(world.interactive.waiting_read, "read left waiting")


# -- long polls ------------------------------------------------------------------------------------


@when("I start reading the process's output while it has none to give")
def _(world: World) -> None:
    process_id = _process(world)
    read = Background(lambda: world.processes("read a stdio process's output").read(process_id, timeout_s=30.0))
    world.interactive.waiting_read = read
    # Give the read time to reach the provider and wait there (taken in once a later health call is
    # answered); an answer now is no failure (a provider may answer a poll at once), it only means the
    # rest of the scenario proves less.
    caught_up(world.provider, 0.3)


def _promptly(what: str, call: Callable[[], Any]) -> Any:
    running = Background(call)
    expect(running.wait(PROMPT_S),
           f"{what} got no answer within {PROMPT_S:.0f} s while an output read was waiting; a waiting long poll "
           "must never hold up other requests")
    return running.value()


@when(parsers.parse("{count:d} stdio processes running `cat` each have an output read waiting"))
def _(world: World, count: int) -> None:
    processes = world.processes("open a stdio process")
    sandbox_id = _sandbox_id(world)
    reads = []
    for _ in range(count):
        process_id = processes.open(sandbox_id, "cat", process_id=world.token("conformance-stdio"))
        reads.append(Background(lambda pid=process_id: processes.read(pid, timeout_s=30.0)))
    world.interactive.waiting_reads = reads
    caught_up(world.provider, 0.3)  # every read has reached the provider and waits there


@then("the provider's health and a description of the sandbox are answered while those reads wait")
def _(world: World) -> None:
    sandbox_id = _sandbox_id(world)
    _promptly("asking for the provider's health", lambda: world.provider.health())
    _promptly("describing the sandbox", lambda: world.provider.describe(sandbox_id))


@then("an unrelated request is answered while the read waits")
def _(world: World) -> None:
    sandbox_id = _sandbox_id(world)
    _promptly("describing the sandbox", lambda: world.provider.describe(sandbox_id))


@then("input to the process is accepted while the read waits")
def _(world: World) -> None:
    sent = (world.token("conformance-line") + "\n").encode()
    world.interactive.sent = sent
    process_id = _process(world)
    _promptly("writing to the process", lambda: world.processes("write to a stdio process").write(process_id, sent))


@then("the waiting read then returns that input")
def _(world: World) -> None:
    read = _waiting_read(world)
    expect(read.wait(OUTPUT_S), f"the waiting read did not return within {OUTPUT_S:.0f} s of the input")
    data = read.value() or b""
    sent = _sent(world)
    if len(data) < len(sent):
        data += _read_process(world, len(sent) - len(data))
    expect(data == sent,
           f"the waiting read should return what was written, {_preview(sent)}; it gave {_preview(data)}")


@then("terminating the process is answered while the read waits")
def _(world: World) -> None:
    process_id = _process(world)
    _promptly("terminating the process", lambda: world.processes("terminate a stdio process").terminate(process_id))


@then("the waiting read then reports the end of the output")
def _(world: World) -> None:
    read = _waiting_read(world)
    expect(read.wait(OUTPUT_S), f"the waiting read did not end within {OUTPUT_S:.0f} s of terminating the process")
    expect(read.value() is None, f"the process was terminated before it wrote anything, so the waiting read should "
                                 f"report the end of the output; it gave {_preview(read.value() or b'')}")


# -- input nobody reads ----------------------------------------------------------------------------

PIPE_PIECE = 32 * 1024  # what a host pumps per exec/stdio_input call
UNREAD_INPUT = 32 * PIPE_PIECE  # 1 MiB: far more than any pipe buffer holds


@when("I start sending the process more input than a pipe holds")
def _(world: World) -> None:
    process_id = _process(world)
    processes = world.processes("write to a stdio process")

    def pump() -> None:
        # Piece by piece, as a host pumps input: once the pipe is full, one of these calls waits.
        for _ in range(UNREAD_INPUT // PIPE_PIECE):
            processes.write(process_id, b"x" * PIPE_PIECE)

    world.interactive.waiting_input = Background(pump)
    world.interactive.waiting_input.wait(1.0)  # let the pipe fill; an early end only proves less


@then("a second stdio process running `cat` echoes a line while that input waits")
def _(world: World) -> None:
    processes = world.processes("open a stdio process")
    sandbox_id = _sandbox_id(world)
    line = (world.token("conformance-line") + "\n").encode()

    def echo() -> bytes:
        other = processes.open(sandbox_id, "cat", process_id=world.token("conformance-stdio"))
        processes.write(other, line)
        data = b""
        while len(data) < len(line):
            chunk = processes.read(other, timeout_s=PROMPT_S)
            if chunk is None:
                break
            data += chunk
        return data

    running = Background(echo)
    expect(running.wait(PROMPT_S * 2),
           f"a second process got no echo within {PROMPT_S * 2:.0f} s while input to the first waited on a full "
           "pipe; input a process does not read may hold up only its own call, never the provider's other work")
    echoed = running.value()
    expect(echoed == line, f"the second process should echo {_preview(line)}; it gave {_preview(echoed)}")


@then("terminating the process is answered while that input waits")
def _(world: World) -> None:
    process_id = _process(world)
    # A provider may also take all of it at once (queueing input of its own): then nothing waits, and the
    # terminate is simply answered.
    _promptly("terminating the process", lambda: world.processes("terminate a stdio process").terminate(process_id))


@then("the waiting input is then answered")
def _(world: World) -> None:
    waiting = world.require(world.interactive.waiting_input, "input left waiting")
    ends_at = "the terminate"
    if world.provider.channels is not None and not waiting.done():
        # v2: input is not a request but stdin frames on the process's data channel, which lives until
        # exec/stdio_wait ends it (section 8.4: "pty/close and exec/stdio_wait end the channel"). Until then a
        # plugin need not read input its terminated process no longer takes; the socket's backpressure holds it.
        world.processes("wait for a stdio process").wait(_process(world))
        ends_at = "waiting for the terminated process, which ends its channel"
    expect(waiting.wait(OUTPUT_S),
           f"input waiting on the pipe of a terminated process got no answer within {OUTPUT_S:.0f} s of {ends_at}")
    if isinstance(waiting.error, ApplicationErrorAnswer):
        return  # refusing input to a process that is gone is an answer too
    expect(not isinstance(waiting.error, TimeoutError),
           f"input waiting on the pipe of a terminated process was never taken ({waiting.error}): after "
           f"{ends_at} the provider neither read it nor ended the channel it rides")
    waiting.value()


# A `printf` ends within milliseconds; a second is ample on a loaded machine and costs one second.
LET_END_S = 1.0


@when("I let the process end before reading its output")
def _(world: World) -> None:
    """Nothing in v1 says a process ended short of waiting for it, which ends the exchange; the scenario
    only needs the exit to come before the first read."""
    time.sleep(LET_END_S)


@when(parsers.parse('the process has written "{text}"'))
def _(world: World, text: str) -> None:
    """Reads the output until ``text`` shows: proof the process got as far as writing it (here: a child it
    started is running), so what follows does not race the process's own start."""
    wanted, seen = text.encode("utf-8"), b""
    deadline = time.monotonic() + OUTPUT_S
    while wanted not in seen:
        remaining = deadline - time.monotonic()
        expect(remaining > 0, f"the process should write {text!r}; within {OUTPUT_S:.0f} s it wrote {_preview(seen)}")
        chunk = world.processes("read a stdio process's output").read(_process(world), timeout_s=remaining)
        expect(chunk is not None, f"the process should write {text!r}; its output ended after {_preview(seen)}")
        seen += chunk


@when("I terminate the process")
def _(world: World) -> None:
    processes = world.processes("terminate a stdio process")
    world.interactive.terminated_at = time.monotonic()  # the deadline of its end runs from the request
    processes.terminate(_process(world))


TERMINATIONS = ("exited", "timed_out", "cancelled", "killed", "unknown")


@then("waiting for the process reports one of the terminations exited, timed_out, cancelled, killed or unknown")
def _(world: World) -> None:
    ended = _waited(world)
    expect(ended.termination in TERMINATIONS,
           f"waiting for a terminated process reported termination {ended.termination!r}, which is none of the "
           f"protocol's {', '.join(TERMINATIONS)} (a host reads an unknown name as unknown, losing how it ended)")


@then(parsers.parse("waiting for the process reports a stderr tail of exactly {count:d} letters {letter}"))
def _(world: World, count: int, letter: str) -> None:
    ended = _waited(world)
    tail = ended.stderr_tail or ""
    expect(tail == letter * count, f"a stderr of exactly {count} bytes fits the tail whole; the tail is {len(tail)} "
                                   f"characters starting {tail[:8]!r} — the cut mark belongs only to a stderr that lost "
                                   "bytes")


@when(parsers.re(r'I open a stdio process running `(?P<command>.+)` with the variable (?P<name>[A-Za-z_][A-Za-z0-9_]*) '
                 r'set to "(?P<value>[^"]*)"$'))
def _(world: World, command: str, name: str, value: str) -> None:
    world.interactive.process_id = world.processes("open a stdio process").open(
        _sandbox_id(world), command, env={name: value}, process_id=world.token("conformance-stdio"))


@then(parsers.re(r'the process\'s output is "(?P<text>[^"]*)"(?P<trimmed>, once blanks are trimmed)?$'))
def _(world: World, text: str, trimmed: str | None) -> None:
    data = b""
    deadline = time.monotonic() + OUTPUT_S
    while time.monotonic() < deadline:
        chunk = world.processes("read a stdio process's output").read(_process(world), timeout_s=OUTPUT_S)
        if chunk is None:
            break
        data += chunk
    got = data.strip() if trimmed else data
    expect(got == text.encode(), f"the process's output should be {text!r}; it was {_preview(data)}")


@when(parsers.re(r"I open a stdio process running `(?P<command>.+)` in a new directory of the sandbox, given by its path "
                 r"relative to the sandbox's working directory$"))
def _(world: World, command: str) -> None:
    name = world.token("conformance-stdio-dir")
    made = world.provider.exec(_sandbox_id(world), ExecRequest(f"mkdir -p -- '{name}'"))
    expect(made.outcome == "ran" and made.exit_code == 0, f"could not create {name}: {made.describe()}")
    world.interactive.directory = world.working_directory().rstrip("/") + "/" + name
    world.interactive.process_id = world.processes("open a stdio process").open(
        _sandbox_id(world), command, working_dir=name, process_id=world.token("conformance-stdio"))


@then("the process's output is that directory's absolute path, followed by a newline")
def _(world: World) -> None:
    directory = world.require(world.interactive.directory, "stdio process opened in a directory")
    expected = (directory + "\n").encode()
    data = _read_process(world, len(expected) + 1)  # one byte more than expected: the output must end there
    expect(data == expected, f"a process opened in {directory} (given relative to the sandbox's working directory) "
                             f"should print {expected!r} from `pwd`; it printed {_preview(data)}")


@when("I send the process an empty piece of input")
def _(world: World) -> None:
    world.processes("write to a stdio process").write(_process(world), b"")


@then(parsers.re(r'waiting for the process reports a stderr tail of exactly "(?P<text>[^"]*)"$'))
def _(world: World, text: str) -> None:
    wanted = unescape(text).decode()
    ended = _waited(world)
    tail = ended.stderr_tail or ""
    expect(tail == wanted, f"a stderr this short fits the tail whole, as written: it should be {wanted!r}; it is "
                           f"{tail!r} (the tail is the newest stderr bytes, blanks and line ends included)")


@when("I open a stdio process in a directory that does not exist")
def _(world: World) -> None:
    world.interactive.process_id = world.token("conformance-stdio")
    process_id = world.interactive.process_id
    missing = world.working_directory().rstrip("/") + "/" + world.token("conformance-no-such-dir")
    world.last = attempt(lambda: world.processes("open a stdio process").open(
        _sandbox_id(world), "cat", working_dir=missing, process_id=process_id))


@then("that open is refused")
def _(world: World) -> None:
    world.last.expect_application_error("opening a stdio process in a directory that does not exist")


@then("opening a stdio process running `cat` with the same id succeeds")
def _(world: World) -> None:
    process_id = _process(world)
    attempt(lambda: world.processes("open a stdio process").open(_sandbox_id(world), "cat", process_id=process_id)) \
        .expect_success(f"opening a stdio process with id {process_id!r}, whose earlier open failed")
    sent = (world.token("conformance-line") + "\n").encode()
    world.interactive.sent = sent
    world.processes("write to a stdio process").write(process_id, sent)
    echoed = _read_process(world, len(sent))
    expect(echoed == sent, f"the process opened with the freed id should echo; it gave {_preview(echoed)}")


@when(parsers.parse("I send the process {kib:d} KiB of input at once"))
def _(world: World, kib: int) -> None:
    world.processes("write to a stdio process").write(_process(world), b"y" * (kib * 1024))


@when("I open a second stdio process running `cat`")
def _(world: World) -> None:
    world.interactive.second_process_id = world.processes("open a stdio process").open(
        _sandbox_id(world), "cat", process_id=world.token("conformance-stdio"))


@then("the second process still echoes what it is sent")
def _(world: World) -> None:
    second = world.require(world.interactive.second_process_id, "second stdio process")
    sent = (world.token("conformance-line") + "\n").encode()
    world.processes("write to a stdio process").write(second, sent)
    data = _read_process(world, len(sent), second)
    expect(data == sent, f"terminating one process ended another: the second gave {_preview(data)}")


@then(parsers.parse('waiting for the process reports a stderr tail that ends with "{text}"'))
def _(world: World, text: str) -> None:
    ended = _waited(world)
    tail = ended.stderr_tail or ""
    world.interactive.stderr_tail = tail
    expect(tail.endswith(text), f"the stderr tail should be the newest part of stderr, ending with {text!r}; it "
                                f"is {len(tail)} characters ending {tail[-40:]!r}")


@then(parsers.parse('that stderr tail starts with the cut mark "{mark}" and keeps at most {kib:d} KiB after it'))
def _(world: World, mark: str, kib: int) -> None:
    tail = world.require(world.interactive.stderr_tail, "stderr tail reported by waiting for the process")
    expect(tail.startswith(mark),
           f"the process wrote more stderr than the tail keeps, so earlier bytes were dropped and the tail must "
           f"say so, starting with {mark!r}; it is {len(tail)} characters starting {tail[:16]!r}")
    kept = len(tail[len(mark):].encode("utf-8"))
    expect(kept <= kib * 1024,
           f"the stderr tail keeps the newest {kib} KiB at most; after the cut mark it keeps {kept} bytes")


@then(parsers.parse("the process's output ends within {seconds:d} seconds"))
def _(world: World, seconds: int) -> None:
    deadline = world.require(world.interactive.terminated_at, "terminate the host sent") + seconds
    process_id = _process(world)
    while True:
        remaining = deadline - time.monotonic()
        expect(remaining > 0, f"the process's output did not end within {seconds} s of terminating it: the "
                              "commands it started still hold its output open (terminate ends the whole group)")
        try:
            chunk = world.processes("read a stdio process's output").read(process_id, timeout_s=remaining)
        except CallTimeout:
            expect(False, f"the process's output did not end within {seconds} s of terminating it: the commands it "
                          "started still hold its output open (terminate ends the whole group)")
            raise
        if chunk is None:
            return


def _refused_naming(what: str, call: Callable[[], Any], field: str) -> str | None:
    answer = attempt(call)
    error = answer.error
    if isinstance(error, ApplicationErrorAnswer) and error.kind == "invalid_spec" and \
            (error.detail or {}).get("field") == field:
        return None
    return f"{what}: {error if error is not None else 'succeeded'}"


@then("input, output, terminate and wait for a process id never opened are each refused as invalid_spec naming "
      "process_id")
def _(world: World) -> None:
    processes = world.processes("a stdio process")
    never = world.token("conformance-never-opened")
    problems = [p for p in (
        _refused_naming("input", lambda: processes.write(never, b"x"), "process_id"),
        _refused_naming("output", lambda: processes.read(never, timeout_s=PROMPT_S), "process_id"),
        _refused_naming("terminate", lambda: processes.terminate(never), "process_id"),
        _refused_naming("wait", lambda: processes.wait(never, timeout_s=PROMPT_S), "process_id"),
    ) if p is not None]
    expect(not problems, f"calls naming a process id never opened should each be refused as invalid_spec naming "
                         f"process_id; these were not: {'; '.join(problems)}")


@then("input, output and resize for a terminal id never opened are each refused as invalid_spec naming pty_id")
def _(world: World) -> None:
    terminals = world.terminals("a terminal")
    never = world.token("conformance-never-opened")
    calls = [("input", lambda: terminals.write(never, b"x")),
             ("output", lambda: terminals.read(never, timeout_s=PROMPT_S))]
    if world.provider.capabilities.declares("pty.resize"):
        calls.append(("resize", lambda: terminals.resize(never, 24, 80)))
    problems = [p for p in (_refused_naming(what, call, "pty_id") for what, call in calls) if p is not None]
    expect(not problems, f"calls naming a terminal id never opened should each be refused as invalid_spec naming "
                         f"pty_id; these were not: {'; '.join(problems)}")


# -- terminals -------------------------------------------------------------------------------------


def _terminal(world: World) -> str:
    return world.require(world.interactive.pty_id, "open terminal")


@when(parsers.parse("I open a terminal of {rows:d} rows and {cols:d} columns"))
def _(world: World, rows: int, cols: int, request: pytest.FixtureRequest) -> None:
    pty_id = world.token("conformance-pty")
    terminals = world.terminals("open a terminal")
    world.interactive.pty_id = terminals.open(_sandbox_id(world), rows=rows, cols=cols, pty_id=pty_id)
    world.interactive.screen = b""  # everything the terminal showed, and how much of it the scenario has judged
    world.interactive.judged = 0
    cleanup(request, lambda: world.terminals("close a terminal").close(pty_id))


def _type(world: World, text: str) -> None:
    world.interactive.typed = text
    world.terminals("write to a terminal").write(_terminal(world), text.encode() + b"\r")


@when(parsers.parse("I open a terminal of {rows:d} rows and {cols:d} columns in a new directory of the sandbox"))
def _(world: World, rows: int, cols: int, request: pytest.FixtureRequest) -> None:
    directory = world.working_directory().rstrip("/") + "/" + world.token("conformance-term-dir")
    made = world.provider.exec(_sandbox_id(world), ExecRequest(f"mkdir -p -- '{directory}'"))
    expect(made.outcome == "ran" and made.exit_code == 0, f"could not create {directory}: {made.describe()}")
    pty_id = world.token("conformance-pty")
    world.interactive.pty_id = world.terminals("open a terminal").open(_sandbox_id(world), rows=rows, cols=cols,
                                                                       working_dir=directory, pty_id=pty_id)
    world.interactive.screen, world.interactive.judged = b"", 0
    world.interactive.directory = directory
    cleanup(request, lambda: world.terminals("close a terminal").close(pty_id))


@then("the terminal shows that directory")
def _(world: World) -> None:
    directory = world.require(world.interactive.directory, "terminal opened in a directory")
    _watch(world, re.compile(re.escape(f"cwd={directory}".encode()) + rb"\r?\n"), repr(f"cwd={directory}"))


@then("closing a terminal id that was never opened succeeds")
def _(world: World) -> None:
    never = world.token("conformance-never-opened")
    attempt(lambda: world.terminals("close a terminal").close(never)).expect_success(
        "closing a terminal id that was never opened")


@when("I cancel a stream id that no follow uses yet")
def _(world: World) -> None:
    world.interactive.stream_id = world.token("conformance-stream")
    streams = world.streams("cancel a log follow")
    stream_id = world.interactive.stream_id
    world.last = attempt(lambda: streams.cancel_stream(stream_id))


@then("the cancel succeeds")
def _(world: World) -> None:
    world.last.expect_success("cancelling a stream id no follow uses")


@when(parsers.parse('I open a terminal of {rows:d} rows and {cols:d} columns with TERM set to "{term}"'))
def _(world: World, rows: int, cols: int, term: str, request: pytest.FixtureRequest) -> None:
    pty_id = world.token("conformance-pty")
    world.interactive.pty_id = world.terminals("open a terminal").open(_sandbox_id(world), rows=rows, cols=cols,
                                                                       env={"TERM": term}, pty_id=pty_id)
    world.interactive.screen, world.interactive.judged = b"", 0
    cleanup(request, lambda: world.terminals("close a terminal").close(pty_id))


@then(parsers.parse("reading the terminal reports the end of the session within {seconds:d} seconds"))
def _(world: World, seconds: int) -> None:
    pty_id = _terminal(world)
    deadline = time.monotonic() + seconds
    while True:
        remaining = deadline - time.monotonic()
        expect(remaining > 0, f"the terminal's shell exited, but reading the terminal did not report the end of the "
                              f"session within {seconds} s")
        answer = attempt(lambda left=remaining: world.terminals("read a terminal").read(pty_id, timeout_s=left))
        expect(answer.error is None, f"once the shell exits, reading the terminal reports the end of the session "
                                     f"(no more data), not an error: {answer.error}")
        if answer.answer is None:
            return


@when(parsers.re(r"I type `(?P<text>.+)` into the terminal$"))
def _(world: World, text: str) -> None:
    _type(world, text)


def _watch(world: World, wanted: re.Pattern[bytes], what: str) -> re.Match[bytes]:
    """Read the terminal until ``wanted`` shows up after what earlier steps judged; never leaves a read
    waiting behind, so later input is not swallowed by a forgotten poll."""
    pty_id = _terminal(world)
    deadline = time.monotonic() + OUTPUT_S
    while True:
        found = wanted.search(world.interactive.screen, world.interactive.judged)
        if found:
            world.interactive.judged = found.end()
            return found
        remaining = deadline - time.monotonic()
        shown = world.interactive.screen[world.interactive.judged:]
        expect(remaining > 0, f"the terminal should show {what} within {OUTPUT_S:.0f} s; it showed {_preview(shown)}")
        try:
            chunk = world.terminals("read a terminal").read(pty_id, timeout_s=remaining)
        except CallTimeout:
            expect(False, f"the terminal should show {what} within {OUTPUT_S:.0f} s; it showed {_preview(shown)}")
            raise
        expect(chunk is not None, f"the terminal session ended while waiting for {what}; it showed {_preview(shown)}")
        world.interactive.screen += chunk


@then(parsers.re(r'the terminal shows "(?P<text>[^"]+)"$'))
def _(world: World, text: str) -> None:
    _watch(world, re.compile(re.escape(text.encode())), repr(text))


@then("the terminal echoes what I typed")
def _(world: World) -> None:
    typed = world.require(world.interactive.typed, "text typed into the terminal")
    _watch(world, re.compile(re.escape(typed.encode())), f"the typed text {typed!r} (the terminal's echo)")


@then(parsers.parse("the terminal reports its size as {rows:d} rows and {cols:d} columns"))
def _(world: World, rows: int, cols: int) -> None:
    # Escape sequences (bracketed paste, say) may come before it on its line.
    found = _watch(world, re.compile(rb"(?<![0-9.])([0-9]+) ([0-9]+)\r?\n"), "the output of `stty size`")
    reported = (int(found.group(1)), int(found.group(2)))
    expect(reported == (rows, cols), f"`stty size` in the terminal reports {reported[0]} rows and {reported[1]} "
                                     f"columns; expected {rows} rows and {cols} columns")


@when(parsers.parse("I resize the terminal to {rows:d} rows and {cols:d} columns"))
def _(world: World, rows: int, cols: int) -> None:
    world.terminals("resize a terminal").resize(_terminal(world), rows, cols)


@then("the terminal passes the colour escape sequences through unchanged")
def _(world: World) -> None:
    found = _watch(world, re.compile(rb"[^\n]*conformance-42[^\n]*\n"), "the coloured line 'conformance-42'")
    expect(b"\x1b[1;31mconformance-42\x1b[0m" in found.group(0),
           f"the program printed conformance-42 between the escape sequences ESC[1;31m and ESC[0m; the terminal "
           f"showed {found.group(0)!r}. Terminal bytes are never sanitized")


@when("I open another terminal with the same id")
def _(world: World) -> None:
    pty_id = _terminal(world)
    world.last = attempt(lambda: world.terminals("open a terminal").open(_sandbox_id(world), pty_id=pty_id))


@then("the first terminal still runs what is typed")
def _(world: World) -> None:
    _type(world, "echo conformance-$((6*7))")
    _watch(world, re.compile(rb"conformance-42\r?\n"), "the output of `echo conformance-$((6*7))`")


@when("I start reading the terminal's output while it has none to give")
def _(world: World) -> None:
    pty_id = _terminal(world)
    read = Background(lambda: world.terminals("read a terminal").read(pty_id, timeout_s=30.0))
    world.interactive.waiting_read = read
    read.wait(0.3)


@then("resizing the terminal is answered while the read waits")
def _(world: World) -> None:
    pty_id = _terminal(world)
    _promptly("resizing the terminal", lambda: world.terminals("resize a terminal").resize(pty_id, 30, 100))


@then(parsers.re(r"typing `(?P<text>.+)` into the terminal is accepted while the read waits$"))
def _(world: World, text: str) -> None:
    pty_id = _terminal(world)
    _promptly("typing into the terminal", lambda: world.terminals("write to a terminal").write(pty_id, text.encode() + b"\r"))


@then("the waiting read then returns output")
def _(world: World) -> None:
    read = _waiting_read(world)
    expect(read.wait(OUTPUT_S), f"the waiting read did not return within {OUTPUT_S:.0f} s of the input")
    chunk = read.value()
    expect(chunk is not None, "the terminal session ended instead of showing the program's output")
    world.interactive.screen += chunk


# -- logs ------------------------------------------------------------------------------------------


@when(parsers.re(r"I follow the sandbox's (?P<source>provision|entrypoint) log with that stream id$"))
def _(world: World, source: str) -> None:
    stream_id = world.require(world.interactive.stream_id, "stream id cancelled before")
    world.interactive.log_follow = world.streams("follow logs").start_log_follow(_sandbox_id(world), source,
                                                                               stream_id=stream_id)
    world.interactive.log_source = source


@when(parsers.re(r"I follow the sandbox's (?P<source>provision|entrypoint) log(?P<to_end> to its end)?$"))
def _(world: World, source: str, to_end: str | None) -> None:
    follow = world.streams("follow logs").start_log_follow(_sandbox_id(world), source, stream_id=world.token("conformance-logs"))
    world.interactive.log_follow = follow
    world.interactive.log_source = source
    if to_end:
        _end_of_follow(world, OUTPUT_S)
    else:  # under way before anything else happens to it, and not refused
        _under_way(world, follow, f"the follow of the {source} log", source)


def _under_way(world: World, follow: RunningFollow, what: str, source: str) -> None:
    """A follow the scenario is about, once the provider took it in: not refused (a log that has ended may
    answer it at once)."""
    expect_under_way(UnderWay(what, world.provider, follow.done, lambda: attempt(lambda: follow.wait(1.0)),
                              capability=f"logs.{source}", may_end=True), world.common.under_way)


def _log_follow(world: World) -> RunningFollow:
    return world.require(world.interactive.log_follow, "log follow")


def _end_of_follow(world: World, within_s: float) -> None:
    follow = _log_follow(world)
    try:
        world.interactive.follow_answer = attempt(lambda: follow.wait(within_s))
    except CallTimeout:
        expect(False, f"the follow of the {world.interactive.log_source} log got no answer within {within_s:.0f} s")
    answer = world.require(world.interactive.follow_answer, "answer of the log follow")
    answer.expect_success(f"the follow of the {world.interactive.log_source} log")


@when(parsers.re(r"I follow the sandbox's (?P<source>provision|entrypoint) log a second time, with another stream id$"))
def _(world: World, source: str) -> None:
    world.interactive.second_follow = second = world.streams("follow logs").start_log_follow(
        _sandbox_id(world), source, stream_id=world.token("conformance-logs"))
    _under_way(world, second, f"the second follow of the {source} log", source)


@when("I cancel the follow")
def _(world: World) -> None:
    second = world.interactive.second_follow
    world.interactive.second_ended_before_cancel = second is not None and second.done()
    world.streams("cancel a stream").cancel_stream(_log_follow(world).stream_id)


@then("the second follow is still open")
def _(world: World) -> None:
    second = world.require(world.interactive.second_follow, "second log follow")
    expect_none_refused(world.common.under_way)
    if world.interactive.second_ended_before_cancel:
        pytest.skip("the second follow ended by itself before the first was cancelled (its log ended), so "
                    "nothing here can say whether the cancel would have left it open")
    deadline = time.monotonic() + 0.5
    while not second.done() and time.monotonic() < deadline:
        time.sleep(0.02)
    expect(not second.done(), f"cancelling the follow with stream id {_log_follow(world).stream_id!r} also ended the "
                              f"follow with stream id {second.stream_id!r}; stream/cancel ends only the stream it names")


@when("I cancel the second follow")
def _(world: World) -> None:
    second = world.require(world.interactive.second_follow, "second log follow")
    world.streams("cancel a stream").cancel_stream(second.stream_id)


@then("the second follow ends with an answer")
def _(world: World) -> None:
    second = world.require(world.interactive.second_follow, "second log follow")
    try:
        answer = attempt(lambda: second.wait(PROMPT_S))
    except CallTimeout:
        expect(False, f"the second follow got no answer within {PROMPT_S:.0f} s of its cancel")
        raise
    answer.expect_success(f"the second follow of the {world.interactive.log_source} log")


@when(parsers.re(r"I follow the (?P<source>provision|entrypoint) log of a sandbox id that was never issued$"))
def _(world: World, source: str) -> None:
    follow = world.streams("follow logs").start_log_follow(world.token("conformance-never-issued"), source,
                                                           stream_id=world.token("conformance-logs"))
    world.interactive.log_follow = follow
    world.interactive.log_source = source
    try:
        world.interactive.follow_answer = attempt(lambda: follow.wait(PROMPT_S))
    except CallTimeout:
        expect(False, f"a follow of the {source} log of a sandbox id never issued got no answer within "
                      f"{PROMPT_S:.0f} s; it should be refused as not_found")
        raise


@then("the follow is refused as not_found")
def _(world: World) -> None:
    answer = world.require(world.interactive.follow_answer, "answer of the log follow")
    what = f"a follow of the {world.interactive.log_source} log of a sandbox id that was never issued"
    error = answer.expect_application_error(what)
    expect(error.kind == "not_found", f"{what} should be refused as not_found; it was refused as {error.kind}: {error}")


@then("the follow ends with an answer")
def _(world: World) -> None:
    _end_of_follow(world, PROMPT_S)


@then("the follow ends, with its empty answer or an error report")
def _(world: World) -> None:
    follow = _log_follow(world)
    source = world.interactive.log_source
    expect_none_refused(world.common.under_way)  # a follow refused outright never met the delete
    world.last.expect_success("deleting the sandbox while its log is followed")
    try:
        world.interactive.follow_answer = attempt(lambda: follow.wait(OUTPUT_S))
    except CallTimeout:
        expect(False, f"the follow of the {source} log (stream id {follow.stream_id!r}) got no answer within "
                      f"{OUTPUT_S:.0f} s of the sandbox's delete: the log of a deleted sandbox has ended, and a "
                      "follow answers once its stream ends, without waiting for stream/cancel")
        raise
    answer = world.require(world.interactive.follow_answer, "answer of the log follow")
    if answer.error is not None:
        answer.expect_application_error(f"the follow of the {source} log of a sandbox that was deleted meanwhile")


@then("the follow delivered some log output")
def _(world: World) -> None:
    follow = _log_follow(world)
    # Output a provider sends behind its answer may come any time after it: wait for some (at once when it
    # came first), so the next step can tell late output from none.
    follow.await_output(OUTPUT_S)
    chunks = follow.chunks_so_far()
    expect(any(chunk.data for chunk in chunks),
           f"the follow of the {world.interactive.log_source} log delivered no output")


@then("every piece of log output arrived before the follow's answer")
def _(world: World) -> None:
    follow = _log_follow(world)
    answered = follow.answer_sequence
    expect(answered is not None, "the follow has not answered")
    # Output sent behind the answer may still be on its way: give it LATE_OUTPUT_S to show (less once it does).
    deadline = time.monotonic() + LATE_OUTPUT_S
    while (not any(chunk.sequence > answered for chunk in follow.chunks_so_far())
           and time.monotonic() < deadline):
        time.sleep(0.01)
    late = [chunk for chunk in follow.chunks_so_far() if chunk.sequence > answered]
    expect(not late, f"{len(late)} piece(s) of log output arrived after the follow's answer (answer was inbound "
                     f"message #{answered}, output came as #{[c.sequence for c in late]}); all output must come first")
