"""Steps for the directories a sandbox's handle names (lifecycle.feature): the working directory a command given
none starts in, before and after attaching by id, and the runtime directory kept private to the sandbox.
Upstream's checks working_directory_is_effective and runtime_directory_is_private."""

from __future__ import annotations

import posixpath
import shlex

import pytest
from pytest_bdd import then, when

from conformance.adapter import SandboxHandle
from conformance.errors import NotExpressible

from ._shared import World, expect, run_ok

PRIVATE_MODE = 0o700


def _attached(world: World) -> SandboxHandle:
    """The handle "I attach to the sandbox by its id" answered (an attach refused fails here, naming it)."""
    return world.last.expect_success(f"attach to sandbox {world.require_sandbox().id} by its id")


@when("I run `pwd -P` in the sandbox")
@when("I run `pwd -P` in the sandbox again")
def _(world: World) -> None:
    # No working directory is given: the command starts wherever the provider starts commands of this sandbox.
    world.lifecycle.directories_printed.append(run_ok(world, world.require_sandbox().id, "pwd -P"))


@then("both runs printed the working directory the create and the attach named")
def _(world: World) -> None:
    created, attached = world.require_sandbox(), _attached(world)
    directory = world.working_directory()  # not expressible where the dialect's handle names none
    expect(attached.working_directory == directory,
           f"attaching to {created.id} by its id named working directory {attached.working_directory!r}; the create "
           f"named {directory!r}: one sandbox has one working directory")
    # Judged as the directory the path names (pwd -P on both sides), so a path through a symbolic link is the same.
    named = run_ok(world, created.id, f"cd {shlex.quote(directory)} && pwd -P")
    printed = world.lifecycle.directories_printed
    expect(len(printed) == 2, f"expected a run before and a run after the attach; saw {len(printed)}")
    for when_run, seen in zip(("before attaching", "after attaching by id"), printed, strict=True):
        expect(seen == named,
               f"a command given no working directory, run {when_run}, started in "
               f"{seen.decode(errors='replace').strip()!r}; "
               f"the handle names {directory!r} ({named.decode(errors='replace').strip()!r}): commands start in the "
               "sandbox's working directory, so relative paths in them mean what they mean to the filesystem methods")


@then("the sandbox's runtime directory is private to it, and the attach named the same one")
def _(world: World) -> None:
    created, attached = world.require_sandbox(), _attached(world)
    runtime = created.runtime_directory
    expect(attached.runtime_directory == runtime,
           f"the create of {created.id} named runtime directory {runtime!r}, attaching by its id named "
           f"{attached.runtime_directory!r}: one sandbox has one runtime directory")
    if runtime is None:
        if "runtime_directory" not in world.provider.handle_reports:
            raise NotExpressible(world.provider.dialect, "a sandbox's runtime directory")
        # Upstream's battery passes such a sandbox; a scenario whose subject never happened skips instead.
        pytest.skip(f"no runtime directory: sandbox {created.id}'s handle names none (runtime_directory null), so "
                    "nothing kept private can be judged")
    expect(posixpath.isabs(runtime), f"sandbox {created.id}'s runtime directory {runtime!r} is not an absolute path")
    working = created.working_directory
    if working:
        inside = posixpath.normpath(runtime) == posixpath.normpath(working) or \
            posixpath.normpath(runtime).startswith(posixpath.normpath(working).rstrip("/") + "/")
        expect(not inside, f"sandbox {created.id}'s runtime directory {runtime!r} is its working directory "
                           f"{working!r} or inside it, where the sandbox's commands and file methods reach it")
    info = world.files("read the runtime directory's metadata").metadata(created.id, runtime)
    expect(info.kind == "directory", f"sandbox {created.id}'s runtime directory {runtime!r} is a {info.kind}, "
                                     "not a directory")
    expect(info.mode is not None, f"the metadata of runtime directory {runtime!r} gives no mode: its privacy "
                                  "(mode 0700) cannot be seen")
    assert info.mode is not None
    expect(info.mode & 0o777 == PRIVATE_MODE,
           f"sandbox {created.id}'s runtime directory {runtime!r} has mode {info.mode & 0o777:04o}; a private "
           f"directory has mode {PRIVATE_MODE:04o}")
