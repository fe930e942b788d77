"""Steps for a command's options taken together: stdin given with variables, a relative working directory on a
streamed command. Each option alone has its scenario; these check that one does not switch the other off."""

from __future__ import annotations

import os

from pytest_bdd import parsers, when

from conformance.adapter import ExecRequest

from ._shared import World, fitted_request


@when(parsers.re(r'I run `(?P<command>.+)` with the variable (?P<name>[A-Za-z_][A-Za-z0-9_]*) set to '
                 r'"(?P<value>[^"]*)" and "(?P<stdin>[^"]*)" as its stdin$'))
def _(world: World, command: str, name: str, value: str, stdin: str) -> None:
    world.run(command, env={name: value}, stdin=stdin.encode(), timeout_s=10.0)


def _streamed(world: World, request: ExecRequest) -> None:
    """Stream ``request`` to its end; the result is the scenario's command result, as a buffered run's is."""
    streams = world.streams("streaming exec")
    stream = streams.start_exec(world.require_sandbox().id, request).wait()
    world.stream.outcome = stream
    world.outcome = stream.result


@when(parsers.re(r"I stream `(?P<command>.+)` in that directory, given by its path relative to the sandbox's "
                 r"working directory$"))
def _(world: World, command: str) -> None:
    directory = world.require(world.commands.directory, "directory made in the sandbox")
    _streamed(world, fitted_request(command, working_dir=os.path.relpath(directory, world.working_directory())))
