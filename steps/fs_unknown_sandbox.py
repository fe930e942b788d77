"""Steps for file calls that name a sandbox the provider never issued: refused as not_found naming the sandbox,
never answered from a path computed without asking whether the sandbox exists (a missing file, exists: false,
a write that makes the directory)."""

from __future__ import annotations

from pytest_bdd import parsers, then, when

from ._shared import World, attempt, expect

FILE_CALLS = r"read a file|check whether a path exists|write a file"


@when(parsers.re(rf"I (?P<call>{FILE_CALLS}) in a sandbox id that was never issued$"))
def _(world: World, call: str) -> None:
    never_issued = world.token("conformance-never-issued")
    files = world.files(call)
    path = world.token("conformance-file")
    calls = {"read a file": lambda: files.read(never_issued, path),
             "check whether a path exists": lambda: files.exists(never_issued, path),
             "write a file": lambda: files.write(never_issued, path, b"written")}
    world.lifecycle.unknown_call = call
    world.last = attempt(calls[call])


@then("that file call is refused as not_found, naming the sandbox if it names a resource")
def _(world: World) -> None:
    call = world.require(world.lifecycle.unknown_call, "file call for a never-issued sandbox id")
    what = f"a call to {call} in a sandbox id that was never issued"
    error = world.last.expect_application_error(what)
    expect(error.kind == "not_found", f"{what} should be refused as not_found; it answered: {error}")
    resource = error.detail.get("resource") if isinstance(error.detail, dict) else None
    expect(resource in (None, "sandbox"),
           f"{what} was refused as not_found naming resource {resource!r}: what is missing is the sandbox")
