"""Steps for running commands."""

from __future__ import annotations

import os

from pytest_bdd import parsers, then, when

from ._world import World, expect

ALL_BYTES = bytes(range(256))


def _octal_printf(data: bytes) -> str:
    return "printf '" + "".join(f"\\{byte:03o}" for byte in data) + "'"


def _unescape(text: str) -> bytes:
    """Gherkin strings may spell newlines and tabs as \\n and \\t."""
    return text.replace("\\n", "\n").replace("\\t", "\t").encode("utf-8")


@when(parsers.re(r"I run `(?P<command>.+)`$"))
def _(world: World, command: str) -> None:
    world.run(command)


@when(parsers.re(r"I run `(?P<command>.+)` with the variable (?P<name>[A-Za-z_][A-Za-z0-9_]*) set to a generated value$"))
def _(world: World, command: str, name: str) -> None:
    value = world.faker.sentence(nb_words=4)
    world.values["generated"] = value
    world.run(command, env={name: value})


@when(parsers.parse('there is a directory "{name}" in the sandbox'))
def _(world: World, name: str) -> None:
    outcome = world.run(f"mkdir -p -- '{name}'")
    expect(outcome.outcome == "ran" and outcome.exit_code == 0, f"could not create {name}: {outcome.describe()}")
    world.values["directory"] = os.path.join(world.require_sandbox().working_directory or "", name)


@when(parsers.re(r"I run `(?P<command>.+)` in that directory, given by its absolute path$"))
def _(world: World, command: str) -> None:
    world.run(command, working_dir=world.values["directory"])


@when("I run a command that writes every byte value from 0 to 255 to stdout")
def _(world: World) -> None:
    world.run(_octal_printf(ALL_BYTES))


@then(parsers.parse("the command ran and exited with code {code:d}"))
def _(world: World, code: int) -> None:
    outcome = world.ran()
    expect(outcome.termination == "exited", f"expected termination exited, got {outcome.describe()}")
    expect(outcome.exit_code == code, f"expected exit code {code}, got {outcome.describe()}")


@then(parsers.parse('stdout is exactly "{text}"'))
def _(world: World, text: str) -> None:
    outcome = world.ran()
    expect(outcome.stdout == _unescape(text), f"expected stdout {_unescape(text)!r}, got {outcome.describe()}")


@then(parsers.parse('stderr is exactly "{text}"'))
def _(world: World, text: str) -> None:
    outcome = world.ran()
    expect(outcome.stderr == _unescape(text), f"expected stderr {_unescape(text)!r}, got {outcome.describe()}")


@then("stdout is exactly that generated value")
def _(world: World) -> None:
    outcome = world.ran()
    expected = world.values["generated"].encode("utf-8")
    expect(outcome.stdout == expected, f"expected stdout {expected!r}, got {outcome.describe()}")


@then("stdout is that directory's absolute path, followed by a newline")
def _(world: World) -> None:
    outcome = world.ran()
    expected = (world.values["directory"] + "\n").encode("utf-8")
    expect(outcome.stdout == expected, f"expected stdout {expected!r}, got {outcome.describe()}")


@then("stdout is exactly every byte value from 0 to 255, in order")
def _(world: World) -> None:
    stdout = world.ran().stdout
    if stdout != ALL_BYTES:
        first = next((i for i, (a, b) in enumerate(zip(stdout, ALL_BYTES)) if a != b), min(len(stdout), 256))
        raise AssertionError(
            f"stdout is {len(stdout)} bytes and differs from the 256 byte values at offset {first}: "
            f"got {stdout[first:first + 8]!r}, expected {ALL_BYTES[first:first + 8]!r}")
