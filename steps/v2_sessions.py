"""Steps for version 2 stdio processes and terminals: one data channel each for their whole life, ids that
were never opened, and calls that end nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pytest_bdd import parsers, then, when

from conformance.adapter import ChannelRecord
from conformance.errors import ApplicationErrorAnswer, CallTimeout

from ._shared import World, attempt, expect

# How long a process or terminal whose input or session ended may take to end its output.
END_S = 3.0
DATA_KINDS = ("stdout", "stderr")


def _session_record(world: World, method: str) -> ChannelRecord:
    """The channel of the session's open: the newest channel of the connection, which nothing since opened."""
    records = world.channels().records()
    expect(bool(records) and records[-1].method == method,
           f"a session lives on the one channel of its {method}; the newest channel of the connection belongs to "
           f"{records[-1].method if records else 'nothing'}")
    return records[-1]


def _frames_note(record: ChannelRecord) -> str:
    shown = ", ".join(f"{kind}:{length}" for kind, length in record.frames[:8])
    return shown + (f", … {len(record.frames) - 8} more" if len(record.frames) > 8 else "")


def _read_to_end(read: Callable[[float], bytes | None], what: str) -> bytes:
    """What ``read`` gives until the end of the output, which must come within ``END_S``."""
    data = b""
    deadline = time.monotonic() + END_S
    while True:
        remaining = deadline - time.monotonic()
        expect(remaining > 0, f"{what} did not end within {END_S:.0f}s; it gave {data[-200:]!r}")
        try:
            chunk = read(remaining)
        except CallTimeout:
            expect(False, f"{what} did not end within {END_S:.0f}s; it gave {data[-200:]!r}")
            raise
        if chunk is None:
            return data
        data += chunk


def _ended_once(record: ChannelRecord, what: str) -> None:
    kinds = [kind for kind, _ in record.frames]
    expect(record.plugin_eofs == 1 and kinds and kinds[-1] == "eof",
           f"the provider ends {what}'s channel with exactly one end of file, its last frame; the channel carried "
           f"{_frames_note(record)}")


# -- stdio processes ---------------------------------------------------------------------------------------


@then(parsers.re(r'the process\'s output goes on with "(?P<text>[^"]+)", then ends$'))
def _(world: World, text: str) -> None:
    process_id = world.require(world.interactive.process_id, "open stdio process")
    processes = world.processes("read a stdio process's output")
    rest = _read_to_end(lambda timeout_s: processes.read(process_id, timeout_s=timeout_s),
                        "the process's output, once the host's end of file closed its input,")
    expect(rest == text.encode(), f"after its input ended the process prints {text!r} and exits; its output went on "
                                  f"with {rest[-200:]!r}")
    world.channels_state.rest_of_output = rest


@then("the process used one data channel, that of its open, which carried its output as stdout frames and ended "
      "with one end of file")
def _(world: World) -> None:
    record = _session_record(world, "exec/stdio_open")
    # The echoed line (an earlier step read it), then the rest.
    echoed = world.require(world.interactive.sent, "line the process echoed")
    output = echoed + world.require(world.channels_state.rest_of_output, "rest of the process's output")
    carried = sum(length for kind, length in record.frames if kind == "stdout")
    strays = sorted({kind for kind, _ in record.frames if kind not in (*DATA_KINDS, "eof")})
    expect(not strays, f"a stdio process's channel carries its output and an end of file; it carried {strays}")
    expect(carried == len(output),
           f"the process's {len(output)} bytes of output ride its channel as stdout frames; its stdout frames carried "
           f"{carried} bytes ({_frames_note(record)})")
    _ended_once(record, "a stdio process")


# -- terminals ---------------------------------------------------------------------------------------------


@when("I close the terminal")
def _(world: World) -> None:
    pty_id = world.require(world.interactive.pty_id, "open terminal")
    world.terminals("close a terminal").close(pty_id)


@then("the terminal used one data channel, that of its open, which the provider ended with one end of file when "
      "the terminal closed")
def _(world: World) -> None:
    pty_id = world.require(world.interactive.pty_id, "open terminal")
    terminals = world.terminals("read a terminal")
    _read_to_end(lambda timeout_s: terminals.read(pty_id, timeout_s=timeout_s), "the closed terminal's output")
    _ended_once(_session_record(world, "pty/open"), "a terminal")


# -- ids that were never opened ------------------------------------------------------------------------------


def _refusal(what: str, call: Callable[[], Any], field: str) -> str | None:
    """Why ``call`` was not refused as invalid_spec naming ``field``; None when it was."""
    answer = attempt(call)
    error = answer.error
    if isinstance(error, ApplicationErrorAnswer) and error.kind == "invalid_spec" and error.detail.get("field") == field:
        return None
    return f"{what}: {error if error is not None else 'it succeeded'}"


@then("terminating and waiting for a process id never opened are each refused as invalid_spec naming process_id")
def _(world: World) -> None:
    processes = world.processes("a stdio process")
    never = world.token("conformance-never-opened")
    problems = [p for p in (_refusal("terminate", lambda: processes.terminate(never), "process_id"),
                            _refusal("wait", lambda: processes.wait(never, timeout_s=END_S), "process_id"))
                if p is not None]
    expect(not problems, "exec/stdio_terminate and exec/stdio_wait naming a process id that is not open are refused "
                         f"as invalid_spec naming process_id; these were not: {'; '.join(problems)}")


@then("resizing a terminal id never opened is refused as invalid_spec naming pty_id")
def _(world: World) -> None:
    terminals = world.terminals("a terminal")
    problem = _refusal("resize", lambda: terminals.resize(world.token("conformance-never-opened"), 24, 80), "pty_id")
    expect(problem is None, f"pty/resize naming a terminal id that is not open is refused as invalid_spec naming "
                            f"pty_id; {problem}")
