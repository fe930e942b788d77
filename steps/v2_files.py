"""Steps for version 2 files: contents across frame boundaries, ranges, missing files and parent directories."""

from __future__ import annotations

from pytest_bdd import given, parsers, then, when

from conformance.errors import ApplicationErrorAnswer

from ._shared import World, attempt, expect, first_difference, patterned_bytes


def _write_patterned(world: World, path: str, size: int) -> None:
    content = patterned_bytes(size)
    world.files("write a file").write(world.require_sandbox().id, path, content)
    world.channels_state.contents[path] = content


def _content(world: World, path: str) -> bytes:
    return world.require(world.channels_state.contents.get(path), f"patterned content written to {path!r}")


@when(parsers.re(r'I write (?P<size>\d+) bytes of patterned content to "(?P<path>[^"]+)"$'))
def _(world: World, size: str, path: str) -> None:
    _write_patterned(world, path, int(size))


@given(parsers.re(r'a file "(?P<path>[^"]+)" of (?P<size>\d+) bytes of patterned content$'))
def _(world: World, path: str, size: str) -> None:
    _write_patterned(world, path, int(size))


@then(parsers.re(r'reading "(?P<path>[^"]+)" gives back exactly those (?P<size>\d+) bytes$'))
def _(world: World, path: str, size: str) -> None:
    got = world.files("read a file").read(world.require_sandbox().id, path)
    expected = _content(world, path)
    expect(got == expected, f"reading {path!r} back should give the {size} bytes written; it gave "
                            f"{first_difference(got, expected)}")


@when(parsers.re(r'I read "(?P<path>[^"]+)" from offset (?P<offset>\d+) for (?P<length>\d+|all) bytes$'))
def _(world: World, path: str, offset: str, length: str) -> None:
    start = int(offset)
    count = None if length == "all" else int(length)
    end = len(_content(world, path)) if count is None else start + count
    world.channels_state.read_range = (path, start, end)
    sandbox_id = world.require_sandbox().id
    world.last = attempt(lambda: world.files("read a file").read(sandbox_id, path, start, count))


@then(parsers.parse("the read returns exactly bytes {start:d} to {end:d} of that content"))
def _(world: World, start: int, end: int) -> None:
    path, _, _ = world.require(world.channels_state.read_range, "read with an offset and a length")
    got = world.last.expect_success(f"reading bytes {start} to {end} of {path!r}")
    expected = _content(world, path)[start:end]
    expect(got == expected, f"reading {path!r} from offset {start} to {end} should give those {end - start} bytes; "
                            f"it gave {first_difference(got, expected)}")


@then("the read fails as not found, naming a file")
def _(world: World) -> None:
    error = world.last.expect_application_error("reading a file that does not exist")
    assert isinstance(error, ApplicationErrorAnswer)
    expect(error.kind == "not_found" and error.detail.get("resource") == "file",
           f"a version 2 provider reports a missing file as not_found with resource file; it answered {error}")


@then(parsers.re(r'nothing named "(?P<name>[^"]+)" appeared in the sandbox\'s working directory$'))
def _(world: World, name: str) -> None:
    exists = world.files("check a path").exists(world.require_sandbox().id, name)
    expect(not exists, f"{name!r} appeared: a command hidden in a path's name ran while its parents were created; "
                       "parents are created without a shell")
