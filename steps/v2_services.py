"""Steps for the optional services version 2 added or changed: a sandbox's environment, preview URLs and
their release, a snapshot's build log on a channel, native git clones, and one-shot containers."""

from __future__ import annotations

import base64
import re
import secrets
import time
import urllib.error
import urllib.request
from http.client import HTTPException

import pytest
from pytest_bdd import given, parsers, then, when

from conformance.adapter import ExecRequest, PreviewUrl, RunningExec, SandboxEnvironment, SnapshotRef

from ._shared import Attempt, World, attempt, cleanup, expect, printed_so_far, run_ok
from ._subject import expect_not_refused

SERVER_WAIT_S = 10.0
# A forward may accept before the port inside listens and close with no data: a host retries the request.
FETCH_RETRY_S = 3.0
# A page server that picks a free port, says which on its stdout, and ends on its own after a while.
PAGE_SERVER = """
import http.server, os, threading
page = os.environ["CONFORMANCE_PAGE"].encode()
class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Page)
print(server.server_address[1], flush=True)
threading.Timer(60, server.shutdown).start()
server.serve_forever()
"""
ORIGIN = "origin"
CLONE_USER = "conformance"
OLDER_TAG = "conformance-first"


def _sandbox_id(world: World) -> str:
    return world.require_sandbox().id


def _require_program(world: World, program: str, why: str) -> None:
    found = world.provider.exec(_sandbox_id(world), ExecRequest(f"command -v {program}"))
    if found.outcome != "ran" or found.exit_code != 0:
        pytest.skip(f"the sandbox has no {program}, {why}")


# -- the sandbox's environment ------------------------------------------------------------------------------


@when("I ask for the sandbox's environment")
def _(world: World) -> None:
    world.channels_state.environment = attempt(lambda: world.invoke("get the sandbox's environment",
                                                                    _sandbox_id(world)))


@when("I run the program env in the sandbox, giving it no variables of its own")
def _(world: World) -> None:
    ran = world.provider.exec(_sandbox_id(world), ExecRequest(command="", argv=("env",), env={}))
    expect(ran.outcome == "ran" and ran.exit_code == 0, f"`env` should run and exit 0; it gave {ran.describe()}")
    world.channels_state.printed_environment = ran.stdout.decode("utf-8", errors="replace")


def _environment(world: World) -> dict[str, str]:
    answer = world.require(world.channels_state.environment, "the sandbox's environment asked for")
    reported: SandboxEnvironment = answer.expect_success("asking for the sandbox's environment "
                                                         "(exec.environment is declared)")
    expect(reported.variables is not None, f"the answer carries no environment map: {reported!r}")
    assert reported.variables is not None
    return dict(reported.variables)


@then(parsers.re(r'the environment names (?P<name>[A-Z_]+) as "(?P<value>[^"]*)"$'))
def _(world: World, name: str, value: str) -> None:
    variables = _environment(world)
    expect(variables.get(name) == value,
           f"the environment a command starts with includes the sandbox's own variables; it names {name} as "
           f"{variables.get(name)!r}, and the sandbox was created with {value!r}")


@then("every variable it names reaches that command with the same value")
def _(world: World) -> None:
    printed = "\n" + world.require(world.channels_state.printed_environment, "environment a command printed")
    if not printed.endswith("\n"):
        printed += "\n"
    # Exact lines, so a value spanning lines is compared whole. Only names are shown: values may be secrets.
    differing = sorted(name for name, value in _environment(world).items() if f"\n{name}={value}\n" not in printed)
    expect(not differing, "sandbox/environment answers the environment a command in the sandbox starts with; a "
                          "command started without variables of its own has these differently or not at all: "
                          + ", ".join(differing[:10]))


# -- preview URLs ---------------------------------------------------------------------------------------------


@when(parsers.parse("I release preview port {port:d} of the sandbox, which was never asked for"))
def _(world: World, port: int) -> None:
    world.last = attempt(lambda: world.invoke("release a preview url", _sandbox_id(world), port=port))


@then("the release succeeded")
def _(world: World) -> None:
    world.last.expect_success("releasing a preview port")


@when(parsers.parse("I ask for a preview url of port {port:d} and release it twice"))
def _(world: World, port: int) -> None:
    sandbox_id = _sandbox_id(world)
    attempt(lambda: world.invoke("get a preview url", sandbox_id, port=port)).expect_success(
        f"a preview url of port {port}")
    world.attempts = [attempt(lambda: world.invoke("release a preview url", sandbox_id, port=port)) for _ in "12"]


@then("both releases succeeded")
def _(world: World) -> None:
    for which, outcome in zip(("the first release", "releasing it again"), world.attempts, strict=True):
        outcome.expect_success(f"{which} of a preview port")


@given("a process in the sandbox serving a generated page over HTTP")
def _(world: World, request: pytest.FixtureRequest) -> None:
    _require_program(world, "python3", "which the suite's page server runs on")
    page = f"conformance page {world.token('page')}".encode()
    streams = world.streams("streaming exec")
    running = streams.start_exec(_sandbox_id(world), ExecRequest(
        command="", argv=("python3", "-c", PAGE_SERVER), env={"CONFORMANCE_PAGE": page.decode()}, timeout_s=90.0))
    cleanup(request, lambda: streams.stop_exec(running.exec_id, "kill"))
    world.channels_state.server, world.channels_state.server_page = running, page
    world.channels_state.server_port = _announced_port(running)


def _announced_port(running: RunningExec) -> int:
    deadline = time.monotonic() + SERVER_WAIT_S
    while True:
        printed = printed_so_far(running)
        found = re.match(rb"(\d+)\n", printed)
        if found:
            return int(found.group(1))
        expect(not running.done(), f"the page server ended before it said its port: {printed[-200:]!r}")
        expect(time.monotonic() < deadline, f"the page server did not say its port within {SERVER_WAIT_S:.0f}s")
        time.sleep(0.02)


def _server_port(world: World) -> int:
    return world.require(world.channels_state.server_port, "page server in the sandbox")


@when("I ask for a preview url of that process's port")
def _(world: World) -> None:
    world.last = attempt(lambda: world.invoke("get a preview url", _sandbox_id(world), port=_server_port(world)))


def _fetch(url: str, headers: dict[str, str]) -> bytes | str:
    """The body at ``url``, retried for a while; the last failure, in words, if none came."""
    deadline = time.monotonic() + FETCH_RETRY_S
    while True:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2.0) as response:
                return response.read()
        except (urllib.error.URLError, HTTPException, OSError) as error:
            if time.monotonic() >= deadline:
                return f"{type(error).__name__}: {error}"
            time.sleep(0.1)


@then("opening the url from the host's machine gets that page")
def _(world: World) -> None:
    preview: PreviewUrl = world.last.expect_success(f"a preview url of port {_server_port(world)}")
    expect(bool(preview.url), f"the preview answer names no url: {preview!r}")
    assert preview.url is not None
    got = _fetch(preview.url, dict(preview.headers))
    page = world.require(world.channels_state.server_page, "page the server serves")
    expect(got == page, f"a preview url reaches, from the host's machine, the port a process in the sandbox listens "
                        f"on ({_server_port(world)}); {preview.url} gave "
                        f"{got if isinstance(got, str) else repr(got[:200])}, not the page served there")


# -- a snapshot's build log --------------------------------------------------------------------------------------


@given("a snapshot of the sandbox's filesystem")
def _(world: World, request: pytest.FixtureRequest) -> None:
    made: SnapshotRef = world.invoke("create a snapshot", _sandbox_id(world))
    expect(bool(made.id), f"the snapshot's answer names no snapshot id: {made!r}")
    world.lifecycle.snapshot_id = made.id
    cleanup(request, lambda: world.invoke("delete a snapshot", None, snapshot_id=made.id))


@when("I follow the snapshot's build log to its end")
def _(world: World) -> None:
    snapshot_id = world.require(world.lifecycle.snapshot_id, "snapshot")
    world.last = attempt(lambda: world.invoke("follow a snapshot's build logs", None, snapshot_id=snapshot_id))
    world.channels_state.faulted_record = world.channels().records()[-1]


@then("the follow succeeded, its channel carrying stdout frames only, then one empty end of file before the answer")
def _(world: World) -> None:
    world.last.expect_success("following a snapshot's build log")
    record = world.require(world.channels_state.faulted_record, "the build log's channel")
    kinds = [kind for kind, _ in record.frames]
    expect(all(kind == "stdout" for kind in kinds[:-1]) and kinds[-1:] == ["eof"] and record.frames[-1][1] == 0,
           f"a build log's bytes are stdout frames, then one empty end of file; its channel carried "
           f"{record.frames[:8]}")
    expect(record.eof_before_answer is True, "the build log's end of file comes before the follow's answer; it did "
                                             "not")


# -- native git clones -------------------------------------------------------------------------------------------


@given(parsers.re(rf'a git repository "{ORIGIN}" in the sandbox with two commits, the older one tagged '
                  rf'"{OLDER_TAG}"$'))
def _(world: World) -> None:
    _require_program(world, "git", "to make the repository the clone reads")
    script = (f"git init -q {ORIGIN} && cd {ORIGIN} && git config user.email conformance@example.invalid && "
              "git config user.name conformance && echo older > tracked && git add tracked && "
              f"git commit -qm older && git tag {OLDER_TAG} && echo newer > tracked && git commit -qam newer && "
              "git rev-parse HEAD~1 HEAD")
    world.channels_state.commits = run_ok(world, _sandbox_id(world), script).decode().split()
    world.channels_state.repository = f"file://{world.working_directory().rstrip('/')}/{ORIGIN}"


def _clone(world: World, target: str, options: dict | None = None) -> None:
    url = world.require(world.channels_state.repository, "git repository in the sandbox")
    world.last = attempt(lambda: world.invoke("clone a repository", _sandbox_id(world), url=url, target_path=target,
                                              options=options))


@when(parsers.re(r'I clone "origin" into "(?P<target>[^"]+)" through the provider$'))
def _(world: World, target: str) -> None:
    _clone(world, target)


@when(parsers.re(r'I clone "origin" into "(?P<target>[^"]+)" pinned to (?P<pin>the older commit|the tag '
                 rf'"{OLDER_TAG}"|a commit it does not have)$'))
def _(world: World, target: str, pin: str) -> None:
    if pin == "the older commit":
        options = {"commit": world.channels_state.commits[0]}
    elif pin == "a commit it does not have":
        options = {"commit": secrets.token_hex(20)}
    else:
        options = {"tag": OLDER_TAG}
    _clone(world, target, options)


@when(parsers.re(r'I clone "origin" into "(?P<target>[^"]+)" with a generated username and password$'))
def _(world: World, target: str) -> None:
    world.channels_state.clone_password = f"conformance-password-{secrets.token_hex(8)}"
    _clone(world, target, {"credentials": {"username": CLONE_USER, "password": world.channels_state.clone_password}})


def _head(world: World, target: str) -> str | None:
    ran = world.provider.exec(_sandbox_id(world), ExecRequest(f"git -C '{target}' rev-parse HEAD"))
    return ran.stdout.decode().strip() if ran.outcome == "ran" and ran.exit_code == 0 else None


@then(parsers.re(r'the clone succeeded, and "(?P<target>[^"]+)" in the working directory is at the '
                 r'(?P<which>older|newer) commit$'))
def _(world: World, target: str, which: str) -> None:
    world.last.expect_success(f"cloning into {target!r}")
    expected = world.channels_state.commits[0 if which == "older" else 1]
    head = _head(world, target)
    expect(head == expected, f"once git/clone answered, {target!r} (relative to the working directory) holds the "
                             f"clone at the {which} commit {expected}; its HEAD is {head!r}")


@then(parsers.re(r'the clone failed, and "(?P<target>[^"]+)" holds no checkout of the branch head$'))
def _(world: World, target: str) -> None:
    # Refused outright, the clone never looked for the pin: its failure says nothing about the pin.
    expect_not_refused(world.provider, world.last.error, "the clone", "git.native")
    expect(world.last.error is not None, f"a clone pinned to a commit the repository does not have must fail; it "
                                         f"succeeded with {world.last.answer!r}")
    expect(_head(world, target) != world.channels_state.commits[1],
           f"a clone whose pin is unavailable must not fall back to the branch head; {target!r} is at it")


@then(parsers.re(r'nothing under "(?P<target>[^"]+)/\.git" holds the password$'))
def _(world: World, target: str) -> None:
    password = world.require(world.channels_state.clone_password, "password given to the clone")
    world.last.expect_success(f"cloning into {target!r} with credentials")
    # As given, or as the basic-auth header git would be configured with.
    basic = base64.b64encode(f"{CLONE_USER}:{password}".encode()).decode()
    found = world.provider.exec(_sandbox_id(world), ExecRequest(
        f"grep -rlF -e \"$CONFORMANCE_SECRET\" -e \"$CONFORMANCE_BASIC\" '{target}/.git'",
        env={"CONFORMANCE_SECRET": password, "CONFORMANCE_BASIC": basic}))
    expect(found.outcome == "ran" and found.exit_code == 1 and not found.stdout,
           "credentials apply to the one clone and are never written into the repository; the password is in "
           f"{found.stdout.decode(errors='replace')[:300]!r}")


# -- one-shot containers ----------------------------------------------------------------------------------------


def _one_shot(world: World, entrypoint: str, *args: str) -> Attempt:
    return attempt(lambda: world.invoke("run a one-shot container", _sandbox_id(world), entrypoint=entrypoint,
                                        args=list(args)))


@when(parsers.re(r'I run a one-shot container that copies "(?P<source>[^"]+)" to "(?P<target>[^"]+)"$'))
def _(world: World, source: str, target: str) -> None:
    world.last = _one_shot(world, "cp", source, target)


@when(parsers.re(r'I run a one-shot container that fetches that page from 127\.0\.0\.1 into "(?P<target>[^"]+)"$'))
def _(world: World, target: str) -> None:
    world.last = _one_shot(world, "wget", "-q", "-O", target, f"http://127.0.0.1:{_server_port(world)}/")


def _sandbox_file(world: World, path: str) -> bytes | None:
    read = attempt(lambda: world.files("read a file").read(_sandbox_id(world), path))
    return read.answer if read.error is None else None


@then(parsers.re(r'"(?P<path>[^"]+)" in the sandbox holds the text of "(?P<source>[^"]+)"$'))
def _(world: World, path: str, source: str) -> None:
    world.last.expect_success("the one-shot container")
    expect(_sandbox_file(world, path) == world.fs.written[source],
           f"a one-shot container works in the sandbox's workspace, at its working directory: what it wrote to "
           f"{path!r} is not there as the sandbox sees it")


@then(parsers.re(r'"(?P<path>[^"]+)" in the sandbox holds that page$'))
def _(world: World, path: str) -> None:
    world.last.expect_success("the one-shot container")
    page = world.require(world.channels_state.server_page, "page the server serves")
    expect(_sandbox_file(world, path) == page,
           f"a one-shot container shares the sandbox's network: from 127.0.0.1 it reaches the server the sandbox "
           f"runs on port {_server_port(world)}, and what it fetched into {path!r} is not that page")
