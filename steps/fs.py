"""Steps for the filesystem methods: read, write, append, exists, metadata, list, rename, delete.

Paths in the features are relative on purpose: a relative path must mean a path under the sandbox's
working directory, and commands (which run there by default) are used to cross-check that.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable
from typing import Any

from pytest_bdd import given, parsers, then, when

from conformance.adapter import DirEntryInfo, FileInfo, SandboxRequest

from ._shared import World, attempt, expect

ALL_BYTES = bytes(range(256))
# 251 is prime, so the pattern never lines up with a power-of-two buffer size: a chunk that goes
# missing, repeats or lands at the wrong offset shows up as a mismatch.
PATTERN_MODULUS = 251


# -- shared helpers ----------------------------------------------------------------------------------


def _written(world: World) -> dict[str, bytes]:
    """What each path should hold, by the path the scenario used for it."""
    return world.fs.written


def _expected(world: World, path: str) -> bytes:
    content = _written(world).get(path)
    expect(content is not None, f"the scenario wrote nothing to {path!r} (a Given or When step is missing)")
    assert content is not None
    return content


def _succeed(what: str, call: Callable[[], Any]) -> Any:
    """Run a call the scenario depends on; an error answer fails the step with ``what`` in the message."""
    return attempt(call).expect_success(what)


def _generated_text(world: World, sentences: int = 4) -> bytes:
    return world.faker.paragraph(nb_sentences=sentences).encode("utf-8")


def _generated_name(world: World, suffix: str) -> str:
    return f"{world.token('conformance-missing')}{suffix}"


def _write(world: World, path: str, content: bytes, append: bool | None = None) -> None:
    sandbox = world.require_sandbox()
    how = "" if append is None else f" with append {str(append).lower()}"
    _succeed(f"writing {len(content)} bytes to {path!r}{how}",
             lambda: world.files("write a file").write(sandbox.id, path, content, append=append))


def _read(world: World, path: str, offset: int | None = None, length: int | None = None) -> bytes:
    sandbox = world.require_sandbox()
    return _succeed(f"reading {path!r}", lambda: world.files("read a file").read(sandbox.id, path, offset, length))


def _metadata(world: World, path: str) -> FileInfo:
    sandbox = world.require_sandbox()
    return _succeed(f"reading the metadata of {path!r}", lambda: world.files("read file metadata").metadata(sandbox.id, path))


def _exists(world: World, path: str) -> bool:
    sandbox = world.require_sandbox()
    return _succeed(f"asking whether {path!r} exists", lambda: world.files("test whether a path exists").exists(sandbox.id, path))


def _run_ok(world: World, command: str) -> None:
    outcome = world.run(command)
    expect(outcome.outcome == "ran" and outcome.exit_code == 0,
           f"the command `{command}` should succeed in the sandbox, but: {outcome.describe()}")


def _compare(what: str, got: bytes, expected: bytes) -> None:
    """Byte-exact comparison whose message says where the two first differ."""
    if got == expected:
        return
    first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
    raise AssertionError(
        f"{what}: expected {len(expected)} bytes, got {len(got)}; they first differ at offset {first}: "
        f"got {got[first:first + 12]!r}, expected {expected[first:first + 12]!r}")


def _quoted(text: str) -> list[str]:
    return re.findall(r'"([^"]+)"', text)


# -- writing and reading -----------------------------------------------------------------------------


@when(parsers.re(r'I write (?P<content>every byte value from 0 to 255|(?P<kib>\d+) KiB of patterned bytes) '
                 r'to "(?P<path>[^"]+)"$'))
def _(world: World, content: str, kib: str | None, path: str) -> None:
    data = ALL_BYTES if kib is None else bytes(i % PATTERN_MODULUS for i in range(int(kib) * 1024))
    _write(world, path, data)
    _written(world)[path] = data


@when(parsers.re(r'I write nothing to "(?P<path>[^"]+)"$'))
def _(world: World, path: str) -> None:
    _write(world, path, b"")
    _written(world)[path] = b""


@when(parsers.re(r'another sandbox holds other text at "(?P<path>[^"]+)"$'))
def _(world: World, path: str) -> None:
    other = world.provider.create(SandboxRequest())
    data = _generated_text(world)
    world.files("write a file").write(other.id, path, data)
    world.fs.other_file = (other.id, path, data)


@then(parsers.re(r'reading "(?P<path>[^"]+)" in the other sandbox gives back its own text$'))
def _(world: World, path: str) -> None:
    sandbox_id, written_path, data = world.require(world.fs.other_file, "another sandbox holding other text")
    got = world.files("read a file").read(sandbox_id, written_path)
    expect(got == data, f"reading {path!r} in sandbox {sandbox_id} gave {len(got)} bytes that are not what was written "
                        f"there ({got[:40]!r}): the path reached another sandbox's file")


@when(parsers.re(r'I write generated text to "(?P<path>[^"]+)"$'))
def _(world: World, path: str) -> None:
    data = _generated_text(world)
    _write(world, path, data)
    _written(world)[path] = data


@given(parsers.re(r'a file "(?P<path>[^"]+)" holding generated text$'))
def _(world: World, path: str) -> None:
    data = _generated_text(world, sentences=6)
    _write(world, path, data)
    _written(world)[path] = data


@given(parsers.re(r'a file "(?P<path>[^"]+)" containing "(?P<text>[^"]*)"$'))
def _(world: World, path: str, text: str) -> None:
    data = text.encode("utf-8")
    _write(world, path, data)
    _written(world)[path] = data


@when(parsers.re(r'I write shorter generated text to "(?P<path>[^"]+)" '
                 r'(?P<how>without saying whether to append|with append set to false)$'))
def _(world: World, path: str, how: str) -> None:
    before = _expected(world, path)
    data = world.faker.sentence(nb_words=4).encode("utf-8")
    # Shorter than what is there, so a write that forgets to truncate leaves the old tail behind.
    data = data[: max(1, len(before) // 2)]
    _write(world, path, data, append=None if how.startswith("without") else False)
    _written(world)[path] = data


@when(parsers.re(r'I append generated text to "(?P<path>[^"]+)"$'))
def _(world: World, path: str) -> None:
    before = _expected(world, path)
    data = _generated_text(world, sentences=2)
    _write(world, path, data, append=True)
    world.fs.appended = (before, data)
    _written(world)[path] = before + data


@when(parsers.re(r'I append generated text to "(?P<path>[^"]+)", which does not exist yet$'))
def _(world: World, path: str) -> None:
    data = _generated_text(world, sentences=2)
    _write(world, path, data, append=True)
    _written(world)[path] = data


@when("I append generated text to a file with a generated name that does not exist yet")
def _(world: World) -> None:
    path = _generated_name(world, ".log")
    data = _generated_text(world, sentences=2)
    _write(world, path, data, append=True)
    world.fs.generated_path = path
    _written(world)[path] = data


@then(parsers.re(r'reading "(?P<path>[^"]+)" gives back exactly the bytes (?:written|the command wrote)$'))
def _(world: World, path: str) -> None:
    _compare(f"reading {path!r} back", _read(world, path), _expected(world, path))


@then(parsers.re(r'reading "(?P<path>[^"]+)" gives back the first text followed by the appended text$'))
def _(world: World, path: str) -> None:
    before, appended = world.require(world.fs.appended, "append")
    got = _read(world, path)
    if got == before:
        raise AssertionError(f"{path!r} still holds only its first {len(before)} bytes: "
                             "the append left no trace")
    if got == appended:
        raise AssertionError(f"{path!r} holds only the {len(appended)} appended bytes: "
                             "the append replaced the file")
    _compare(f"reading {path!r} after appending", got, before + appended)


@then("reading that file gives back exactly the bytes appended")
def _(world: World) -> None:
    path = world.require(world.fs.generated_path, "file created by an append")
    _compare(f"reading {path!r}, created by an append", _read(world, path), _expected(world, path))


@when(parsers.re(r'I read "(?P<path>[^"]+)" with offset (?P<offset>\d+|unset) '
                 r'and length (?P<length>\d+|unset)$'))
def _(world: World, path: str, offset: str, length: str) -> None:
    sandbox = world.require_sandbox()
    start = None if offset == "unset" else int(offset)
    count = None if length == "unset" else int(length)
    world.fs.read_request = f"reading {path!r} with offset {offset} and length {length}"
    world.last = attempt(lambda: world.files("read a file").read(sandbox.id, path, start, count))


@then(parsers.re(r'the read returns (?:"(?P<text>[^"]*)"|nothing)$'))
def _(world: World, text: str | None) -> None:
    what = world.require(world.fs.read_request, "read with offset and length")
    got = world.last.expect_success(what)
    expected = (text or "").encode("utf-8")
    expect(got == expected, f"{what} should return {expected!r}, but returned {got!r}")


@when("I read a file with a generated name that does not exist")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    path = _generated_name(world, ".txt")
    world.fs.generated_path = path
    world.last = attempt(lambda: world.files("read a file").read(sandbox.id, path))


@then("the read fails with the error kind not_found, naming a file if it names a resource, or io")
def _(world: World) -> None:
    # v1's not_found resources are sandbox, snapshot, volume and plugin; not_found naming a file is a v2
    # rule, so a v1 provider may answer io for a missing file.
    path = world.require(world.fs.generated_path, "read of a missing file")
    error = world.last.expect_application_error(f"reading the missing file {path!r}")
    expect(error.kind in ("not_found", "io"), f"reading the missing file {path!r} should fail with kind "
                                              f"not_found or io, but it failed with: {error}")
    if error.kind == "io":
        return
    resource = error.detail.get("resource")
    expect(resource is None or resource == "file",
           f"the not_found answer for the missing file {path!r} names the resource {resource!r}, not 'file'")


# -- paths ---------------------------------------------------------------------------------------------


@then(parsers.re(r'stdout is exactly the bytes written to "(?P<path>[^"]+)"$'))
def _(world: World, path: str) -> None:
    _compare(f"the command's stdout (the file {path!r} as the command sees it)", world.ran().stdout,
             _expected(world, path))


@then(parsers.re(r'reading "(?P<path>[^"]+)" under the sandbox\'s working directory, by its absolute path, '
                 r'gives back exactly the bytes written$'))
def _(world: World, path: str) -> None:
    directory = world.require_sandbox().working_directory
    expect(bool(directory), f"the sandbox's handle names no working directory ({directory!r}) to build "
                            f"the absolute path of {path!r} from")
    absolute = posixpath.join(str(directory), path)
    _compare(f"reading {absolute!r}, the absolute path of {path!r}", _read(world, absolute),
             _expected(world, path))


@when(parsers.re(r'a command writes generated text to "(?P<path>[^"]+)"$'))
def _(world: World, path: str) -> None:
    text = world.faker.sentence(nb_words=6)
    parent = posixpath.dirname(path)
    make_parent = f"mkdir -p -- {shlex.quote(parent)} && " if parent else ""
    _run_ok(world, f"{make_parent}printf '%s' {shlex.quote(text)} > {shlex.quote(path)}")
    _written(world)[path] = text.encode("utf-8")


@then(parsers.re(r'"(?P<path>[^"]+)" exists$'))
def _(world: World, path: str) -> None:
    expect(_exists(world, path), f"{path!r} should exist, but the provider says it does not")


@then(parsers.re(r'"(?P<path>[^"]+)" does not exist$'))
def _(world: World, path: str) -> None:
    expect(not _exists(world, path), f"{path!r} should no longer exist, but the provider says it does")


@then("a path with a generated name does not exist")
def _(world: World) -> None:
    path = _generated_name(world, ".txt")
    expect(not _exists(world, path), f"nothing was ever written to {path!r}, but the provider says it exists")


# -- metadata ------------------------------------------------------------------------------------------


@given(parsers.re(r'a directory "(?P<path>[^"]+)" made with the filesystem$'))
def _(world: World, path: str) -> None:
    sandbox = world.require_sandbox()
    _succeed(f"creating the directory {path!r}", lambda: world.files("create a directory").mkdir(sandbox.id, path))


@given(parsers.re(r'a command has made "(?P<link>[^"]+)" a symbolic link to "(?P<target>[^"]+)"$'))
def _(world: World, link: str, target: str) -> None:
    _run_ok(world, f"ln -s -- {shlex.quote(target)} {shlex.quote(link)}")


@given(parsers.re(r'a command has set the permissions of "(?P<path>[^"]+)" to (?P<mode>[0-7]{3,4})$'))
def _(world: World, path: str, mode: str) -> None:
    _run_ok(world, f"chmod {mode} -- {shlex.quote(path)}")


@then(parsers.re(r'the metadata of "(?P<path>[^"]+)" says it is a (?P<kind>file|directory|symlink|other)$'))
def _(world: World, path: str, kind: str) -> None:
    info = _metadata(world, path)
    expect(info.kind == kind, f"the metadata of {path!r} should say kind {kind!r}, but says {info.kind!r}")


@then(parsers.re(r'the metadata of "(?P<path>[^"]+)" gives the number of bytes written as its size$'))
def _(world: World, path: str) -> None:
    expected = len(_expected(world, path))
    info = _metadata(world, path)
    expect(info.size == expected,
           f"{expected} bytes were written to {path!r}, but its metadata gives size {info.size!r}")


@then(parsers.re(r'the metadata of "(?P<path>[^"]+)" gives a numeric mode '
                 r'with the permission bits (?P<mode>[0-7]{3,4})$'))
def _(world: World, path: str, mode: str) -> None:
    expected = int(mode, 8)
    info = _metadata(world, path)
    expect(isinstance(info.mode, int) and not isinstance(info.mode, bool),
           f"the metadata of {path!r} should give a numeric POSIX mode, but gives {info.mode!r}")
    assert isinstance(info.mode, int)
    # File-type bits above the permission bits are tolerated; the permission bits must be exact. v1 section 8.5
    # says only that fs/set_permissions' mode "is numeric POSIX"; of fs/metadata's mode it says nothing more,
    # POSIX's "file mode" (st_mode) carries the file type too, and upstream's own battery compares mode & 0o777.
    # So 0o100640 for a 0o640 file is a legal answer (a control of blind_6), as is 0o640.
    bits = info.mode & 0o7777
    expect(bits == expected,
           f"the permissions of {path!r} were set to {mode} (octal), but its metadata gives mode "
           f"{info.mode} (octal {info.mode:o}), whose permission bits are {bits:o}")


# -- directories ---------------------------------------------------------------------------------------


@when(parsers.re(r'I create the directory "(?P<path>[^"]+)"$'))
def _(world: World, path: str) -> None:
    sandbox = world.require_sandbox()
    _succeed(f"creating the directory {path!r}", lambda: world.files("create a directory").mkdir(sandbox.id, path))


@given(parsers.re(r'a directory "(?P<directory>[^"]+)" holding the files (?P<files>.+)$'))
def _(world: World, directory: str, files: str) -> None:
    names = _quoted(files)
    expect(bool(names), f"no file names in {files!r}")
    for name in names:
        path = posixpath.join(directory, name)
        data = world.faker.sentence(nb_words=5).encode("utf-8")
        _write(world, path, data)
        _written(world)[path] = data
    world.fs.tree = (directory, names)


@when(parsers.re(r'I list "(?P<path>[^"]+)" to depth (?P<depth>\d+)$'))
def _(world: World, path: str, depth: str) -> None:
    sandbox = world.require_sandbox()
    listing: list[DirEntryInfo] = _succeed(f"listing {path!r} to depth {depth}",
                                           lambda: world.files("list a directory").list_dir(sandbox.id, path, int(depth)))
    world.fs.listing = (path, int(depth), listing)


@then(parsers.re(r'the listing reports "(?P<name>[^"]+)" as a symlink, and nothing beneath it$'))
def _(world: World, name: str) -> None:
    path, depth, listing = world.require(world.fs.listing, "directory listing")
    entries = {entry.path: entry for entry in listing}
    expect(name in entries, f"listing {path!r} to depth {depth} does not name {name!r}: {sorted(entries)}")
    expect(entries[name].kind == "symlink",
           f"listing {path!r} reports the symbolic link {name!r} as {entries[name].kind!r}; a link is listed as a "
           "symlink, not as what it points at")
    beneath = sorted(p for p in entries if p.startswith(name + "/"))
    expect(not beneath, f"listing {path!r} descended through the symbolic link {name!r}: {beneath}")


@given(parsers.re(r'a command has made (?P<count>\d+) files in "(?P<path>[^"]+)"$'))
def _(world: World, count: str, path: str) -> None:
    _run_ok(world, f"mkdir -p -- {shlex.quote(path)} && cd -- {shlex.quote(path)} && "
                   f"for i in $(seq 1 {int(count)}); do : > \"f$i\"; done")


@then(parsers.re(r"the listing names all (?P<count>\d+) files$"))
def _(world: World, count: str) -> None:
    path, depth, listing = world.require(world.fs.listing, "directory listing")
    expected = {f"f{i}" for i in range(1, int(count) + 1)}
    got = {entry.path for entry in listing}
    missing = sorted(expected - got, key=lambda n: int(n[1:]))
    expect(not missing, f"listing {path!r} names {len(got & expected)} of its {len(expected)} files; missing "
                        f"{missing[:5]}{' …' if len(missing) > 5 else ''} — a listing has no silent cap")


@then(parsers.re(r"the listing holds exactly (?P<entries>.+)$"))
def _(world: World, entries: str) -> None:
    path, depth, listing = world.require(world.fs.listing, "directory listing")
    expected = set(_quoted(entries))
    got = [entry.path for entry in listing]
    expect(len(got) == len(set(got)),
           f"listing {path!r} to depth {depth} names some entries twice: {sorted(got)}")
    missing, extra = sorted(expected - set(got)), sorted(set(got) - expected)
    expect(not missing and not extra,
           f"listing {path!r} to depth {depth} should give exactly {sorted(expected)} (paths relative to "
           f"{path!r}); missing {missing}, unexpected {extra}")


@then("every listed entry has the kind of what was written there")
def _(world: World) -> None:
    directory, files = world.require(world.fs.tree, "directory holding files")
    path, _depth, listing = world.require(world.fs.listing, "directory listing")
    for entry in listing:
        if entry.path in files:
            expect(entry.kind == "file", f"{entry.path!r} in the listing of {path!r} is a file, "
                                         f"but the listing says {entry.kind!r}")
            size = len(_expected(world, posixpath.join(directory, entry.path)))
            expect(entry.size is None or entry.size == size,
                   f"{entry.path!r} in the listing of {path!r} holds {size} bytes, "
                   f"but the listing says {entry.size}")
        else:
            expect(entry.kind == "directory", f"{entry.path!r} in the listing of {path!r} is a directory, "
                                              f"but the listing says {entry.kind!r}")


# -- rename and delete ---------------------------------------------------------------------------------


@when(parsers.re(r'I rename "(?P<source>[^"]+)" to "(?P<target>[^"]+)"$'))
def _(world: World, source: str, target: str) -> None:
    sandbox = world.require_sandbox()
    _succeed(f"renaming {source!r} to {target!r}", lambda: world.files("rename a path").rename(sandbox.id, source, target))
    _written(world)[target] = _written(world).pop(source)


@when(parsers.re(r'I delete the file "(?P<path>[^"]+)"$'))
def _(world: World, path: str) -> None:
    sandbox = world.require_sandbox()
    world.fs.deletion = f"deleting the file {path!r}"
    world.last = attempt(lambda: world.files("delete a path").delete_path(sandbox.id, path, recursive=False))


@when(parsers.re(r'I delete the (?P<what>directory|link) "(?P<path>[^"]+)" (?P<how>recursively|without recursion)$'))
def _(world: World, what: str, path: str, how: str) -> None:
    sandbox = world.require_sandbox()
    recursive = how == "recursively"
    world.fs.deletion = f"deleting the {what} {path!r} with recursive {str(recursive).lower()}"
    world.last = attempt(lambda: world.files("delete a path").delete_path(sandbox.id, path, recursive=recursive))


@then("the deletion succeeds")
def _(world: World) -> None:
    world.last.expect_success(world.require(world.fs.deletion, "deletion"))


@then("the deletion is refused")
def _(world: World) -> None:
    what = world.require(world.fs.deletion, "deletion")
    expect(world.last.error is not None,
           f"{what} should be refused because the directory is not empty, but the provider answered success")
    world.last.expect_application_error(what)


# -- permissions ---------------------------------------------------------------------------------------


@when(parsers.re(r'I set the permissions of "(?P<path>[^"]+)" to (?P<mode>[0-7]{3,4})$'))
def _(world: World, path: str, mode: str) -> None:
    sandbox = world.require_sandbox()
    _succeed(f"setting the permissions of {path!r} to {mode} (octal)",
             lambda: world.invoke("set permissions", sandbox.id, path=path, mode=int(mode, 8)))
