"""Steps for running commands."""

from __future__ import annotations

import hashlib

import os
import shlex
import time
from typing import Any

from pytest_bdd import given, parsers, then, when

from conformance.adapter import ExecRequest, SandboxRequest

from ._shared import World, attempt, expect, sanitization_mode, unescape

ALL_BYTES = bytes(range(256))


def _octal_printf(data: bytes) -> str:
    return "printf '" + "".join(f"\\{byte:03o}" for byte in data) + "'"


def _directory(world: World) -> str:
    """The absolute path of the directory the scenario made in the sandbox."""
    return world.require(world.commands.directory, "directory made in the sandbox")


@when(parsers.re(r"I run `(?P<command>.+)`$"))
def _(world: World, command: str) -> None:
    world.run(command)


@when(parsers.re(r"I run `(?P<command>.+)` with the variable (?P<name>[A-Za-z_][A-Za-z0-9_]*) set to a generated value$"))
def _(world: World, command: str, name: str) -> None:
    value = world.faker.sentence(nb_words=4)
    world.commands.generated_value = value
    world.run(command, env={name: value})


# Quotes of both kinds, expansions, a command substitution, backslashes, a glob, history and comment characters,
# a tab and a newline: a provider that splices the value into shell source instead of the environment alters it.
SHELL_SYNTAX_VALUE = "it's \"quoted\" $HOME ${USER:-nobody} `id` $(id) \\n back\\\\slash; * ! # %s\ttab\nline two"


@when(parsers.re(r"I run `(?P<command>.+)` with the variable (?P<name>[A-Za-z_][A-Za-z0-9_]*) set to a value full of "
                 r"shell syntax$"))
def _(world: World, command: str, name: str) -> None:
    value = f"{world.faker.word()} {SHELL_SYNTAX_VALUE}"
    world.commands.generated_value = value
    world.run(command, env={name: value})


@when(parsers.re(r"I run `(?P<command>.+)` with the variable (?P<name>[A-Za-z_][A-Za-z0-9_]*) set to an empty value$"))
def _(world: World, command: str, name: str) -> None:
    world.run(command, env={name: ""})


@when(parsers.re(r'I run `(?P<command>.+)` with the variable (?P<name>[A-Za-z_][A-Za-z0-9_]*) set to "(?P<value>[^"]*)"$'))
def _(world: World, command: str, name: str, value: str) -> None:
    world.run(command, env={name: value})


@given(parsers.re(r'a sandbox created with the variable (?P<name>[A-Za-z_][A-Za-z0-9_]*) set to "(?P<value>[^"]*)"$'))
def _(world: World, name: str, value: str) -> None:
    world.create_sandbox(env={name: value})


@when("I create another sandbox without variables")
def _(world: World) -> None:
    world.commands.other_sandbox = world.provider.create(SandboxRequest())


@then(parsers.re(r'in that other sandbox (?P<name>[A-Za-z_][A-Za-z0-9_]*) is unset, and in the first it is '
                 r'"(?P<value>[^"]*)"$'))
def _(world: World, name: str, value: str) -> None:
    other = world.require(world.commands.other_sandbox, "another sandbox")
    probe = f'printf "%s" "${{{name}-unset}}"'
    seen = world.provider.exec(other.id, ExecRequest(probe))
    expect(seen.outcome == "ran" and seen.stdout == b"unset",
           f"a sandbox created without variables sees {name} as {seen.stdout!r}: another sandbox's variables (secrets "
           f"among them) leaked into it ({seen.describe()})")
    first = world.provider.exec(world.require_sandbox().id, ExecRequest(probe))
    expect(first.stdout == value.encode(), f"the sandbox created with {name}={value!r} sees {first.stdout!r}")


@when(parsers.re(r"I run `(?P<command>.+)` with a timeout of (?P<seconds>\d+\.\d+) seconds$"))
def _(world: World, command: str, seconds: str) -> None:
    world.run(command, timeout_s=float(seconds))


@then(parsers.parse("stdout is {out:d} bytes of the letter {o} and stderr {err:d} bytes of the letter {e}"))
def _(world: World, out: int, o: str, err: int, e: str) -> None:
    outcome = world.ran()
    for name, got, size, letter in (("stdout", outcome.stdout, out, o), ("stderr", outcome.stderr, err, e)):
        expect(got == letter.encode() * size,
               f"{name} should be {size} bytes of {letter!r}; it is {len(got)} bytes"
               f"{'' if set(got) <= {ord(letter)} else ', and not only ' + repr(letter)} — a buffered result "
               "carries the whole output")


@when(parsers.parse('there is a directory "{name}" in the sandbox'))
def _(world: World, name: str) -> None:
    outcome = world.run(f"mkdir -p -- '{name}'")
    expect(outcome.outcome == "ran" and outcome.exit_code == 0, f"could not create {name}: {outcome.describe()}")
    world.commands.directory = os.path.join(world.working_directory(), name)


@when(parsers.re(r"I run `(?P<command>.+)` in that directory, given by its absolute path$"))
def _(world: World, command: str) -> None:
    world.run(command, working_dir=_directory(world))


@when("I run a command that writes every byte value from 0 to 255 to stdout")
def _(world: World) -> None:
    world.require_report("bytes")
    world.run(_octal_printf(ALL_BYTES))


@then(parsers.parse("the command ran and exited with code {code:d}"))
def _(world: World, code: int) -> None:
    outcome = world.ran()
    expect(outcome.termination == "exited", f"expected termination exited, got {outcome.describe()}")
    expect(outcome.exit_code == code, f"expected exit code {code}, got {outcome.describe()}")


@then(parsers.parse('stdout is exactly "{text}"'))
def _(world: World, text: str) -> None:
    outcome = world.ran()
    expect(outcome.stdout == unescape(text), f"expected stdout {unescape(text)!r}, got {outcome.describe()}")


@then(parsers.parse('stderr is exactly "{text}"'))
def _(world: World, text: str) -> None:
    outcome = world.ran()
    expect(outcome.stderr == unescape(text), f"expected stderr {unescape(text)!r}, got {outcome.describe()}")


@then("stdout is exactly that generated value")
def _(world: World) -> None:
    outcome = world.ran()
    expected = world.require(world.commands.generated_value, "generated value").encode("utf-8")
    expect(outcome.stdout == expected, f"expected stdout {expected!r}, got {outcome.describe()}")


@then("stdout is that directory's absolute path, followed by a newline")
def _(world: World) -> None:
    outcome = world.ran()
    expected = (_directory(world) + "\n").encode("utf-8")
    expect(outcome.stdout == expected, f"expected stdout {expected!r}, got {outcome.describe()}")


@then("stdout is exactly every byte value from 0 to 255, in order")
def _(world: World) -> None:
    stdout = world.ran().stdout
    if stdout != ALL_BYTES:
        first = next((i for i, (a, b) in enumerate(zip(stdout, ALL_BYTES)) if a != b), min(len(stdout), 256))
        raise AssertionError(
            f"stdout is {len(stdout)} bytes and differs from the 256 byte values at offset {first}: "
            f"got {stdout[first:first + 8]!r}, expected {ALL_BYTES[first:first + 8]!r}")


# -- spelling bytes in Gherkin --------------------------------------------------------------------

CONTROL_NAMES = {"NUL": b"\x00", "SOH": b"\x01", "BEL": b"\x07", "TAB": b"\x09", "LF": b"\x0a", "VT": b"\x0b",
                 "FF": b"\x0c", "CR": b"\x0d", "ESC": b"\x1b", "SP": b" ",
                 # the string terminator; the C1 controls CSI, OSC, ST and NEL as UTF-8 encodes them
                 # (U+009B, U+009D, U+009C, U+0085)
                 "ST": b"\x1b\\", "C1CSI": b"\xc2\x9b", "C1OSC": b"\xc2\x9d", "C1ST": b"\xc2\x9c",
                 "C1NEL": b"\xc2\x85"}


def spelled_bytes(spelled: str) -> bytes:
    """Bytes spelled as space-separated tokens: control names (ESC, BEL, SOH, LF, ST, C1CSI, ...; SP is a space)
    stand for those bytes, anything else for its UTF-8 text. ``ESC [31m red LF`` is ``b"\\x1b[31mred\\n"``."""
    return b"".join(CONTROL_NAMES.get(token, token.encode("utf-8")) for token in spelled.split())


@when(parsers.re(r'I run a command that writes the bytes "(?P<spelled>[^"]+)" with output sanitization '
                 r'(?P<mode>not given|[a-z_]+)$'))
def _(world: World, spelled: str, mode: str) -> None:
    world.require_report("bytes")
    world.run(_octal_printf(spelled_bytes(spelled)), sanitization=sanitization_mode(mode))


@when(parsers.re(r'I run `(?P<command>.+)` buffered and streamed, each asking for the output sanitization '
                 r'"(?P<mode>[a-z_]+)", which the protocol does not define$'))
def _(world: World, command: str, mode: str) -> None:
    sandbox_id = world.require_sandbox().id
    request = ExecRequest(command=command, sanitization=mode, unchecked=True)
    world.commands.undefined_sanitization = {
        "buffered": attempt(lambda: world.provider.exec(sandbox_id, request)),
        "streamed": attempt(lambda: world.streams("streaming exec").exec(sandbox_id, request)),
    }


@then(parsers.parse('both requests are answered with the JSON-RPC error {code:d} "{meaning}"'))
def _(world: World, code: int, meaning: str) -> None:
    answers = world.commands.undefined_sanitization
    expect(bool(answers), "no command asked for an undefined output sanitization")
    for kind, answered in answers.items():
        why = (f"the {kind} command asked for an output sanitization the protocol does not define (only raw, "
               f"strip_ansi and strip_all exist), so its params cannot be decoded: the answer must be the "
               f"JSON-RPC error {code} ({meaning})")
        error = answered.error
        if error is None:
            outcome = getattr(answered.answer, "result", answered.answer)  # a stream's outcome holds the result
            error = getattr(outcome, "error", None)
            expect(error is not None, f"{why}; instead the command ran: {outcome.describe()}")
        assert error is not None
        expect(error.code == code, f"{why}; the provider answered code {error.code}: {error}", error)


# -- running with options -------------------------------------------------------------------------


@when("I run a command that writes every byte value from 0 to 255 to stderr")
def _(world: World) -> None:
    world.require_report("bytes")
    world.run(_octal_printf(ALL_BYTES) + " >&2")


@given(parsers.parse('a Bash startup file in the sandbox that prints "{text}"'))
def _(world: World, text: str) -> None:
    # The command reports the file's absolute path itself, so no assumption about the layout is needed.
    script = f"printf '%s' {shlex.quote(text)}\n"
    outcome = world.run(f"printf '%s' {shlex.quote(script)} > conformance-bash-env.sh && "
                        "printf '%s' \"$PWD/conformance-bash-env.sh\"")
    expect(outcome.outcome == "ran" and outcome.stdout.startswith(b"/"),
           f"could not write the startup file in the sandbox: {outcome.describe()}")
    world.commands.startup_file = outcome.stdout.decode("utf-8")


@given(parsers.parse('a sandbox created with BASH_ENV naming a startup file that prints "{text}"'))
def _(world: World, text: str) -> None:
    path = f"/tmp/conformance-bash-env-{world.token('file')}.sh"
    world.create_sandbox(env={"BASH_ENV": path})
    script = f"printf '%s' {shlex.quote(text)}\n"
    outcome = world.run(f"printf '%s' {shlex.quote(script)} > {path} && printf written")
    expect(outcome.outcome == "ran" and outcome.stdout.endswith(b"written"),
           f"could not write the startup file {path} in the sandbox: {outcome.describe()}")


@when(parsers.re(r"I run `(?P<command>.+)` with BASH_ENV pointing at that startup file$"))
def _(world: World, command: str) -> None:
    world.run(command, env={"BASH_ENV": world.require(world.commands.startup_file, "Bash startup file")})


@when(parsers.re(r"I run `(?P<command>.+)` with output sanitization (?P<mode>not given|[a-z_]+)$"))
def _(world: World, command: str, mode: str) -> None:
    world.run(command, sanitization=sanitization_mode(mode))


@when(parsers.re(r"I run `(?P<command>.+)` with every byte value from 0 to 255 as its stdin$"))
def _(world: World, command: str) -> None:
    # A provider that never closes stdin leaves the command waiting: the timeout turns that into a verdict.
    world.run(command, stdin=ALL_BYTES, timeout_s=10.0)


def _patterned(size: int) -> bytes:
    """Bytes whose every 64 KiB block differs, so a lost, repeated or reordered block shows."""
    return bytes((i * 7 + i // 65536) % 251 for i in range(size))


@when(parsers.re(r"I run `(?P<command>.+)` with (?P<kib>\d+) KiB of patterned bytes as its stdin$"))
def _(world: World, command: str, kib: str) -> None:
    data = _patterned(int(kib) * 1024)
    world.commands.stdin_digest = hashlib.sha256(data).hexdigest()
    world.run(command, stdin=data, timeout_s=20.0)


@then("stdout starts with the SHA-256 of those bytes")
def _(world: World) -> None:
    expected = world.require(world.commands.stdin_digest, "stdin of patterned bytes")
    stdout = world.ran().stdout.decode("utf-8", errors="replace")
    expect(stdout.startswith(expected), f"the command saw other bytes than it was given: sha256 of its stdin "
                                        f"{stdout[:64]!r}, expected {expected!r}")


@when(parsers.re(r"I run `(?P<command>.+)` with a megabyte of the letter x as its stdin$"))
def _(world: World, command: str) -> None:
    world.run(command, stdin=b"x" * (1 << 20), timeout_s=10.0)




def _timed(world: World, command: str, seconds: float, **options: Any) -> None:
    """Run ``command`` with a timeout, noting the timeout and how long the answer took."""
    world.common.command_timeout_s = seconds
    started = time.monotonic()
    world.run(command, timeout_s=seconds, **options)
    world.common.command_answered_after_s = time.monotonic() - started


@when(parsers.re(r"I run `(?P<command>.+)` with a timeout of (?P<seconds>\d+) seconds?$"))
def _(world: World, command: str, seconds: str) -> None:
    _timed(world, command, float(seconds))


@when(parsers.re(r"I run `(?P<command>.+)` with a megabyte of the letter x as its stdin and a timeout of "
                 r"(?P<seconds>\d+) seconds?$"))
def _(world: World, command: str, seconds: str) -> None:
    _timed(world, command, float(seconds), stdin=b"x" * (1 << 20))


@when(parsers.re(r"I run `(?P<command>.+)` with an empty stdin and a timeout of (?P<seconds>\d+) seconds?$"))
def _(world: World, command: str, seconds: str) -> None:
    # Zero bytes of stdin, then end of file: a provider that never closes the pipe leaves the command waiting.
    _timed(world, command, float(seconds), stdin=b"")


BACKGROUND_PID_FILE = "/tmp/conformance-background-{token}.pid"


@when(parsers.re(r"I run a command that starts a background sleep, noting its pid, with a timeout of "
                 r"(?P<seconds>\d+) seconds?$"))
def _(world: World, seconds: str) -> None:
    world.commands.pid_file = BACKGROUND_PID_FILE.format(token=world.token("pid"))
    _timed(world, f"sleep 60 & printf '%s' $! > {world.commands.pid_file}; wait", float(seconds))


@then("the background sleep has ended too")
def _(world: World) -> None:
    pid_file = world.require(world.commands.pid_file, "command that started a background sleep")
    # Ended means gone or a zombie: in a container whose first process reaps nothing, a killed orphan stays a
    # zombie, which `kill -0` still finds.
    probe = (f'pid=$(cat {pid_file}); for i in $(seq 1 30); do '
             f'state=$(cut -d")" -f2 /proc/"$pid"/stat 2>/dev/null | cut -d" " -f2); '
             f'[ -z "$state" ] || [ "$state" = Z ] && exit 0; sleep 0.1; done; exit 1')
    outcome = world.provider.exec(world.require_sandbox().id, ExecRequest(probe, timeout_s=10.0))
    expect(outcome.outcome == "ran" and outcome.exit_code == 0,
           f"the background sleep the timed-out command started was still running 3 s later ({outcome.describe()}): a "
           "timeout stops the whole command, its process group")


@when(parsers.re(r"I run `(?P<command>.+)` in that directory, given by its path relative to the sandbox's "
                 r"working directory$"))
def _(world: World, command: str) -> None:
    world.run(command, working_dir=os.path.relpath(_directory(world), world.working_directory()))


# -- verdicts -------------------------------------------------------------------------------------


@then(parsers.parse('stdout is exactly the bytes "{spelled}"'))
def _(world: World, spelled: str) -> None:
    outcome = world.ran()
    expected = spelled_bytes(spelled)
    expect(outcome.stdout == expected, f"expected stdout {expected!r} ({spelled}), got {outcome.describe()}")


@then(parsers.parse('stderr is exactly the bytes "{spelled}"'))
def _(world: World, spelled: str) -> None:
    outcome = world.ran()
    expected = spelled_bytes(spelled)
    expect(outcome.stderr == expected, f"expected stderr {expected!r} ({spelled}), got {outcome.describe()}")


@then("stderr is exactly every byte value from 0 to 255, in order")
def _(world: World) -> None:
    stderr = world.ran().stderr
    if stderr != ALL_BYTES:
        first = next((i for i, (a, b) in enumerate(zip(stderr, ALL_BYTES)) if a != b), min(len(stderr), 256))
        raise AssertionError(
            f"stderr is {len(stderr)} bytes and differs from the 256 byte values at offset {first}: "
            f"got {stderr[first:first + 8]!r}, expected {ALL_BYTES[first:first + 8]!r}")


@then("stdout is every byte value from 0 to 255, in order, as hex")
def _(world: World) -> None:
    outcome = world.ran()
    expected = ALL_BYTES.hex().encode("ascii")
    expect(outcome.termination == "exited",
           f"the command should read its stdin to end of file and exit; got {outcome.describe()}")
    expect(outcome.stdout == expected,
           f"the command should print the hex of the 256 bytes given as stdin, {expected[:24]!r}…; "
           f"got {outcome.describe()}")


@then(parsers.parse("the command was ended by signal {number:d}"))
def _(world: World, number: int) -> None:
    world.require_report("signal")
    outcome = world.ran()
    expect(outcome.signal == number,
           f"the command killed itself with signal {number}, so the result's signal should be {number}; "
           f"got {outcome.describe()} (signal={outcome.signal})")


@then(parsers.parse("the result says the command timed out, at most {bound:d} seconds after the timeout"))
def _(world: World, bound: int) -> None:
    outcome = world.outcome
    expect(outcome is not None, "no command has run yet")
    assert outcome is not None
    expect(outcome.outcome == "ran",
           f"a timeout is a normal result with termination timed_out, not an error; got {outcome.error}")
    expect(outcome.termination == "timed_out", f"expected termination timed_out, got {outcome.describe()}")
    timeout_s = world.require(world.common.command_timeout_s, "command run with a timeout")
    late = world.require(world.common.command_answered_after_s, "command run with a timeout") - timeout_s
    expect(late <= bound,
           f"the result came {late:.1f}s after the {timeout_s:.0f}s timeout; "
           f"expected at most {bound}s")


@then(parsers.parse("the command was ended at its timeout: answered, with a result or an error, at most {bound:d} "
                    "seconds after it"))
def _(world: World, bound: int) -> None:
    outcome = world.outcome
    expect(outcome is not None, "no command has run yet")
    assert outcome is not None
    timeout_s = world.require(world.common.command_timeout_s, "command run with a timeout")
    late = world.require(world.common.command_answered_after_s, "command run with a timeout") - timeout_s
    expect(late <= bound, f"the answer ({outcome.describe()}) came {late:.1f}s after the {timeout_s:.0f}s timeout; "
                          f"a command that outlives its timeout is stopped and answered at most {bound}s after it")
    expect(b"finished" not in outcome.stdout,
           f"the command ran to its end although it outlived its {timeout_s:.0f}s timeout: {outcome.describe()}")


@then(parsers.parse('the command never got as far as creating "{name}", {seconds:d} seconds into it'))
def _(world: World, name: str, seconds: int) -> None:
    # Nothing announces that a command did not go on: wait until it would have made the file (with a margin for
    # a loaded machine), then look for it.
    answered_after = world.require(world.common.command_answered_after_s, "command run with a timeout")
    time.sleep(max(0.0, seconds + 1.5 - answered_after))
    seen = world.run(f"test -e '{name}' && printf present || printf absent")
    expect(seen.outcome == "ran" and seen.stdout in (b"present", b"absent"),
           f"could not look for {name!r} in the sandbox: {seen.describe()}")
    expect(seen.stdout == b"absent", f"the command created {name!r} {seconds}s in, after its timeout: it was answered "
                                     "but not stopped")


@then(parsers.parse("its duration is a whole number of milliseconds, at least the {seconds:d} second timeout"))
def _(world: World, seconds: int) -> None:
    outcome = world.ran()
    # The adapter only reports a duration the provider gave as whole milliseconds.
    world.require_report("duration")
    expect(outcome.duration_s is not None,
           f"the result should carry its duration as a whole number of milliseconds; got {outcome.describe()}")
    assert outcome.duration_s is not None
    expect(outcome.duration_s >= seconds,
           f"the command ran until its {seconds}s timeout, so its duration should be at least "
           f"{seconds * 1000} ms; got {outcome.duration_s * 1000:.0f} ms")
