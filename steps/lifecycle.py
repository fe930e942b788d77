"""Steps for the sandbox lifecycle: create, describe, list, attach, delete, the optional verbs, snapshots,
volumes, SSH access and what a creation spec may ask for."""

from __future__ import annotations

import concurrent.futures
import re
import time
import unicodedata
from collections.abc import Callable
from typing import Any

import pytest
from pytest_bdd import given, parsers, then, when

from conformance.adapter import (
    ExecRequest,
    SandboxHandle,
    SandboxRequest,
    SandboxStatus,
    SnapshotInfo,
    SnapshotRef,
    SshAccess,
)
from conformance.errors import ApplicationErrorAnswer, NotExpressible

from ._shared import (
    MARKER_FILE,
    Attempt,
    World,
    attempt,
    await_file,
    cleanup,
    create_volume,
    epoch_seconds,
    expect,
    names_field,
    run_ok,
)
from ._state import Background

KNOWN_STATES = {
    "creating", "starting", "running", "stopping", "stopped", "pausing", "paused", "resuming", "archiving",
    "archived", "restoring", "resizing", "forking", "snapshotting", "deleting", "deleted", "error", "unknown",
}


@when("I create a sandbox")
def _(world: World) -> None:
    world.create_sandbox()


@when("I describe the sandbox")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    world.last = attempt(lambda: world.provider.describe(sandbox.id))


@when("I delete the sandbox")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    world.last = attempt(lambda: world.provider.delete(sandbox.id))
    world.attempts.append(world.last)


@when("I delete the sandbox again")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    world.last = attempt(lambda: world.provider.delete(sandbox.id))
    world.attempts.append(world.last)


@when("I delete the sandbox twice at the same time")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(attempt, lambda: world.provider.delete(sandbox.id)) for _ in range(2)]
        world.attempts.extend(f.result() for f in futures)


@when("I delete a sandbox id that was never issued")
def _(world: World) -> None:
    never_issued = world.token("conformance-never-issued")
    world.last = attempt(lambda: world.provider.delete(never_issued))
    world.attempts.append(world.last)


@then("the delete succeeds")
def _(world: World) -> None:
    world.last.expect_success("sandbox delete")


@then("both deletes succeed")
def _(world: World) -> None:
    expect(len(world.attempts) == 2, f"expected two deletes, saw {len(world.attempts)}")
    for number, outcome in enumerate(world.attempts, start=1):
        outcome.expect_success(f"delete number {number} of the same sandbox")


@then("the description names the same sandbox")
def _(world: World) -> None:
    status = world.last.expect_success("describe")
    expect(status.id == world.require_sandbox().id,
           f"describe of {world.require_sandbox().id!r} answered a status for {status.id!r}")


@then("the description reports a known sandbox state")
def _(world: World) -> None:
    state = world.last.answer.state
    expect(state in KNOWN_STATES, f"state {state!r} is not one of the protocol's sandbox states")


def _expect_gone(world: World, what: str, state_of: Callable[[Any], str]) -> None:
    """A deleted sandbox is reported gone: an answer saying its id names nothing (not_found), or the sandbox in
    state deleting or deleted (SDP1-S05: a provider may keep its tombstone). ``state_of`` reads the answer."""
    sandbox_id = world.require_sandbox().id
    error = world.last.error
    if error is not None:
        expect(world.provider.says_unknown_sandbox(error, sandbox_id),
               f"{what} of a deleted sandbox should be not_found (or report it deleted); it answered: {error}",
               error)
        return
    state = state_of(world.last.answer)
    expect(state in ("deleting", "deleted"),
           f"{what} of a deleted sandbox reported state {state!r}; expected not_found, deleting or deleted")


@then("the sandbox is reported not found, or in state deleting or deleted")
def _(world: World) -> None:
    _expect_gone(world, "describe", lambda status: status.state)


@then("the handle carries the sandbox's status, with its id and state")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    expect(bool(sandbox.status.id), "the handle's status has no id")
    expect(sandbox.status.id == sandbox.id, "the handle's status id differs from the handle's id")
    expect(sandbox.status.state in KNOWN_STATES, f"the handle reports unknown state {sandbox.status.state!r}")


@then("the handle carries the sandbox's own capability declaration")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    expect(sandbox.capabilities is not None and isinstance(sandbox.capabilities.raw, dict),
           "the handle carries no per-sandbox capability declaration")


@then("every capability the handle declares, the provider declared too")
def _(world: World) -> None:
    own = world.require_sandbox().capabilities
    if own is None:
        raise NotExpressible(world.provider.dialect, "a per-sandbox capability declaration")
    # flags that grant an operation; those that describe how one is done (native file access, separate
    # streams) may rightly differ for a sandbox of another class than the provider's typical one
    wider = [name for name in own.declared() if not world.provider.capabilities.declares(name)
             and not name.endswith(".native") and name != "exec.streams_separated"]
    expect(not wider, f"the new sandbox declares {', '.join(wider)}, which its provider's declaration (the upper bound "
                      "a sandbox's own may narrow) does not")


@then("the handle names a non-empty working directory")
def _(world: World) -> None:
    directory = world.require_sandbox().working_directory
    expect(isinstance(directory, str) and directory != "", f"the handle's working directory is {directory!r}")


@then("the sandbox id is non-empty, at most 256 bytes, without whitespace or control characters")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    expect(sandbox_id != "", "the sandbox id is empty")
    expect(len(sandbox_id.encode("utf-8")) <= 256, f"the sandbox id is {len(sandbox_id.encode())} bytes long")
    bad = [c for c in sandbox_id if c.isspace() or unicodedata.category(c) == "Cc"]
    expect(not bad, f"the sandbox id {sandbox_id!r} contains whitespace or control characters {bad!r}")


# == the rest of the lifecycle: listing, attaching, optional verbs, snapshots, creation specs =======

SNAPSHOT_STATES = {"building", "active", "inactive", "error", "deleting", "unknown"}
VOLUME_STATES = {"creating", "ready", "deleting", "deleted", "error", "unknown"}
# While a sandbox settles into a state, it may pass through these first.
SETTLING = {
    "stopped": {"stopping"}, "running": {"starting", "resuming", "restoring", "creating"},
    "paused": {"pausing"}, "archived": {"archiving", "stopping"}, "error": {"creating", "starting"},
}
SETTLE_TIMEOUT_S = 20.0
COPY_ONLY_FILE = "conformance-written-in-copy"
TIMER_NAMES = ("auto_stop_after_idle", "auto_pause_after_idle", "auto_archive_after_stop",
               "auto_delete_after_stop", "ttl")
# Leftovers of a template a provider forgot to fill in: <user>, {host}, ${TOKEN}, %s.
PLACEHOLDER = re.compile(r"<[^<>\s]*>|\{[^{}\s]*\}|\$\{|%s")


def _expect_refusal(outcome: Attempt, what: str, kind: str, field: str | None = None) -> ApplicationErrorAnswer:
    error = outcome.expect_application_error(what, kind)
    expect(error.kind == kind, f"{what} should be refused with kind {kind}; it answered: {error}", error, kind)
    if field is not None:
        expect(names_field(error, field),
               f"{what} was refused as {kind}, but detail.field is {error.detail.get('field')!r} instead of "
               f"{field!r}")
    return error


def _settle(world: World, sandbox_id: str, wanted: str, provider: Any = None) -> SandboxStatus:
    """Describe until the sandbox leaves the transitional states that lead to ``wanted``."""
    provider = provider or world.provider
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        status = provider.describe(sandbox_id)
        world.lifecycle.states_seen.append(status.state)
        if status.state not in SETTLING.get(wanted, set()) or time.monotonic() >= deadline:
            return status
        time.sleep(0.2)


def _await_gone(world: World, sandbox_id: str) -> str | None:
    """Describe until the sandbox is gone: None once it is not_found, else its last state (deleting, deleted, ...)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        described = attempt(lambda: world.provider.describe(sandbox_id))
        error = described.error
        if isinstance(error, ApplicationErrorAnswer) and error.kind == "not_found":
            return None
        state = described.expect_success(f"describe of sandbox {sandbox_id}").state
        if state in ("deleting", "deleted") or time.monotonic() >= deadline:
            return state
        time.sleep(0.2)


def _expect_state(world: World, sandbox_id: str, wanted: str, who: str = "the sandbox") -> None:
    state = _settle(world, sandbox_id, wanted).state
    expect(state == wanted, f"{who} ({sandbox_id}) should be described as {wanted}, but it is {state!r}")


def _sandbox_declares(world: World, capability: str) -> bool:
    """A sandbox's own declaration is authoritative for operations on it."""
    sandbox = world.sandbox
    if sandbox is not None and sandbox.capabilities is not None and sandbox.capabilities.raw:
        return sandbox.capabilities.declares(capability)
    return world.provider.capabilities.declares(capability)


def _invoke_ok(world: World, operation: str, sandbox_id: str | None, **arguments: Any) -> Any:
    outcome = attempt(lambda: world.invoke(operation, sandbox_id, **arguments))
    return outcome.expect_success(f"'{operation}'")


def _new_sandbox(world: World) -> SandboxHandle:
    return world.require(world.lifecycle.new_sandbox, "second sandbox")


def _ids(statuses: list[SandboxStatus]) -> list[str]:
    return [status.id for status in statuses]


def _labels(world: World) -> dict[str, str]:
    return world.require(world.lifecycle.labels, "generated labels")


# -- listing -------------------------------------------------------------------------------------


@when("I create a sandbox labelled with two generated labels")
def _(world: World) -> None:
    labels = {"conformance-first": world.token("first"), "conformance-second": world.token("second")}
    world.lifecycle.labels = labels
    world.create_sandbox(labels=labels)


@when("I create a sandbox labelled with two generated labels, the second with an empty value")
def _(world: World) -> None:
    labels = {"conformance-first": world.token("first"), "conformance-second": ""}
    world.lifecycle.labels = labels
    created = attempt(lambda: world.provider.create(SandboxRequest(labels=labels)))
    error = created.error
    if isinstance(error, ApplicationErrorAnswer) and error.kind == "invalid_spec" and names_field(error, "labels"):
        # Labels are strings to strings (section 5.4), but a backend that cannot store an empty value may say so.
        pytest.skip(f"the provider refuses a label with an empty value as invalid_spec naming labels: {error}")
    world.sandbox = created.expect_success("a create labelled with a label whose value is empty")


@when("I create another sandbox that carries only the first of those labels")
def _(world: World) -> None:
    first = {"conformance-first": _labels(world)["conformance-first"]}
    world.lifecycle.other_sandbox = world.provider.create(SandboxRequest(labels=first))


@when("I create another sandbox whose first label has another value")
def _(world: World) -> None:
    other = {"conformance-first": world.token("other-value")}
    world.lifecycle.other_sandbox = world.provider.create(SandboxRequest(labels=other))


@when(parsers.re(r"I create another sandbox whose first label differs only in the letter case of its "
                 r"(?P<part>value|name)$"))
def _(world: World, part: str) -> None:
    value = _labels(world)["conformance-first"]
    other = {"conformance-first": value.upper()} if part == "value" else {"conformance-first".upper(): value}
    created = attempt(lambda: world.provider.create(SandboxRequest(labels=other)))
    error = created.error
    if isinstance(error, ApplicationErrorAnswer) and error.kind == "invalid_spec" and names_field(error, "labels"):
        # A backend that keeps labels in lower case only may refuse capitals; it must not fold them.
        pytest.skip(f"the provider refuses a label with capitals in its {part} as invalid_spec naming labels: {error}")
    world.lifecycle.other_sandbox = created.expect_success(f"a create labelled {other}")


@when("I list the sandboxes carrying both labels")
def _(world: World) -> None:
    world.lifecycle.listing_filter = dict(_labels(world))
    world.common.listed = world.provider.list(world.lifecycle.listing_filter)


@when("I list the sandboxes carrying the first label")
def _(world: World) -> None:
    world.lifecycle.listing_filter = {"conformance-first": _labels(world)["conformance-first"]}
    world.common.listed = world.provider.list(world.lifecycle.listing_filter)


@when("I list every sandbox")
def _(world: World) -> None:
    world.lifecycle.listing_filter = None
    world.common.listed = world.provider.list(None)


def _listed_ids(world: World) -> list[str]:
    return _ids(world.require(world.common.listed, "listing of sandboxes"))


def _other_sandbox(world: World) -> SandboxHandle:
    return world.require(world.lifecycle.other_sandbox, "other sandbox")


def _listing(world: World) -> str:
    wanted = world.lifecycle.listing_filter
    return f"listing by {wanted}" if wanted else "listing without a filter"


@then("the list includes the first sandbox")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    listed = _listed_ids(world)
    expect(sandbox_id in listed, f"{_listing(world)} should include sandbox {sandbox_id}; it listed {listed}")


@then("the list includes both sandboxes")
def _(world: World) -> None:
    listed = _listed_ids(world)
    for sandbox in (world.require_sandbox(), _other_sandbox(world)):
        expect(sandbox.id in listed, f"{_listing(world)} should include sandbox {sandbox.id}; it listed {listed}")


@then("the list does not include the first sandbox")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    listed = _listed_ids(world)
    expect(sandbox_id not in listed, f"{_listing(world)} still lists sandbox {sandbox_id}, which was deleted")


@then("the list does not include the other sandbox")
def _(world: World) -> None:
    other = _other_sandbox(world)
    listed = _listed_ids(world)
    expect(other.id not in listed,
           f"{_listing(world)} listed sandbox {other.id}, which lacks one of those labels (it carries only "
           f"{dict(other.status.labels)}); a label filter matches sandboxes that carry every listed label")


# -- attaching -----------------------------------------------------------------------------------


@when("I attach to the sandbox by its id")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    world.last = attempt(lambda: world.provider.attach(sandbox_id))


@when("I delete the sandbox and attach to it by its id")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    world.provider.delete(sandbox_id)
    world.last = attempt(lambda: world.provider.attach(sandbox_id))


@when("I delete that labelled sandbox")
def _(world: World) -> None:
    world.provider.delete(world.require_sandbox().id)


@when("I replace the sandbox's labels with none at all")
def _(world: World) -> None:
    _invoke_ok(world, "set labels", world.require_sandbox().id, labels={})


@then("the sandbox is described with no labels")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    labels = dict(world.provider.describe(sandbox_id).labels or {})
    expect(labels == {}, f"after its labels were set to none, sandbox {sandbox_id} is described with {labels!r}; "
                         "setting labels replaces all of them, with nothing when given nothing")


@when("I attach to a sandbox id that was never issued")
def _(world: World) -> None:
    never_issued = world.token("conformance-never-issued")
    world.last = attempt(lambda: world.provider.attach(never_issued))


@when(parsers.re(r"I call (?P<call>platform info|start|stop) for a sandbox id that was never issued$"))
def _(world: World, call: str) -> None:
    never_issued = world.token("conformance-never-issued")
    world.lifecycle.unknown_call = call
    provider = world.provider
    calls = {"platform info": provider.platform_info, "start": provider.start, "stop": provider.stop}
    world.last = attempt(lambda: calls[call](never_issued))


@then("that call is refused as not_found")
def _(world: World) -> None:
    call = world.require(world.lifecycle.unknown_call, "per-sandbox call made")
    _expect_refusal(world.last, f"{call} for a sandbox id that was never issued", "not_found")


@when("a freshly started provider attaches to the sandbox by its id")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    world.fresh = world.start_fresh(handshake=True)
    fresh = world.fresh
    attached = attempt(lambda: fresh.attach(sandbox_id))
    error = attached.error
    if isinstance(error, ApplicationErrorAnswer) and error.kind == "not_found":
        # A provider whose sandboxes live only as long as its process (upstream's host with its default,
        # per-process registry) has nothing for a later process to see; this scenario cannot judge it.
        pytest.skip(f"the provider keeps no sandbox across plugin processes: a freshly started one answers "
                    f"not_found for {sandbox_id}")
    world.lifecycle.attached_elsewhere = attached.expect_success(
        f"attach by id to sandbox {sandbox_id} from a freshly started provider")


@then("the handle it answers carries exactly the new labels")
def _(world: World) -> None:
    handle = world.require(world.lifecycle.attached_elsewhere, "handle a freshly started provider answered")
    labels = dict(handle.status.labels or {})
    new_labels = world.require(world.lifecycle.new_labels, "replaced labels")
    expect(labels == new_labels,
           f"a provider process started after the labels were set attached to {handle.id} and reports labels "
           f"{labels}; they were set to {new_labels}: what set_labels changed is the sandbox's state, which a "
           "later process attaching by its id sees")


@then("the attached handle names the same sandbox and working directory")
def _(world: World) -> None:
    original = world.require_sandbox()
    handle = world.last.expect_success(f"attach to sandbox {original.id}")
    expect(handle.id == original.id, f"attach to {original.id!r} answered a handle for {handle.id!r}")
    expect(handle.working_directory == original.working_directory,
           f"attach to {original.id} names working directory {handle.working_directory!r}; the create named "
           f"{original.working_directory!r}")
    expect(handle.status.state in KNOWN_STATES, f"the attached handle reports unknown state {handle.status.state!r}")
    if original.capabilities is not None and handle.capabilities is not None:
        # The per-sandbox set is authoritative: an attach that narrows it makes working operations look refused.
        lost = sorted(set(original.capabilities.declared()) - set(handle.capabilities.declared()))
        gained = sorted(set(handle.capabilities.declared()) - set(original.capabilities.declared()))
        expect(not lost and not gained, f"the attached handle declares other capabilities than the create's: it "
                                        f"drops {lost} and adds {gained}; one sandbox has one capability set")


@then("the attach is refused as not_found")
def _(world: World) -> None:
    _expect_refusal(world.last, "attach to a sandbox id that was never issued", "not_found")


@then("the attach is refused as not_found, or answers the sandbox in state deleting or deleted")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id

    def state_of(handle: SandboxHandle) -> str:
        expect(handle.id == sandbox_id, f"attach to deleted sandbox {sandbox_id!r} answered a handle for {handle.id!r}")
        return handle.status.state

    _expect_gone(world, "attach", state_of)


# -- start, stop and the optional verbs ----------------------------------------------------------


@when("I stop the sandbox")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    attempt(lambda: world.provider.stop(sandbox_id)).expect_success("stop")


@when(parsers.re(r"another sandbox is running `(?P<command>.+)`, which has created (?P<name>[A-Za-z0-9._-]+)$"))
def _(world: World, command: str, name: str) -> None:
    other = world.provider.create(SandboxRequest())
    world.lifecycle.other_sandbox = other
    world.lifecycle.other_command = Background(lambda: world.provider.exec(other.id, ExecRequest(command=command)))
    await_file(world, other.id, name, "the command started in the other sandbox")


@then(parsers.parse('the command in the other sandbox still ends normally, printing "{text}"'))
def _(world: World, text: str) -> None:
    running = world.require(world.lifecycle.other_command, "command running in another sandbox")
    expect(running.wait(15.0), "the command running in the other sandbox did not answer within 15 s")
    outcome = running.value()
    expect(outcome.outcome == "ran" and outcome.termination == "exited" and outcome.exit_code == 0
           and outcome.stdout == text.encode(),
           f"stopping one sandbox ended a command running in another: it gave {outcome.describe()}, not exit code 0 "
           f"printing {text!r}; a lifecycle verb acts on the sandbox it names, never on the provider's other sandboxes")


@when("I start the sandbox")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    attempt(lambda: world.provider.start(sandbox_id)).expect_success("start")


@then("listing by the sandbox's labels reports it in the state it is described in")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    labels = dict(sandbox.status.labels)
    described = _settle(world, sandbox.id, "stopped").state
    # A list may lag a moment behind describe (the authoritative answer, section 10); it may not stay behind.
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        listed = {status.id: status.state for status in world.provider.list(labels or None)}
        if listed.get(sandbox.id) == described or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
        described = world.provider.describe(sandbox.id).state
    expect(sandbox.id in listed, f"listing by {labels} does not list sandbox {sandbox.id}, which carries them")
    expect(listed[sandbox.id] == described,
           f"listing by {labels} reports sandbox {sandbox.id} {listed[sandbox.id]!r} while describing it reports "
           f"{described!r}, still after {SETTLE_TIMEOUT_S:.0f} s: a list answers each sandbox's status, the one "
           "describe answers, not the status it had when it was created")


# How long output written before a pause may still be on its way, and how long a paused command is watched.
PAUSE_IN_FLIGHT_S = 0.3
PAUSE_WATCH_S = 0.7


@then("the streamed command prints nothing more while the sandbox stays paused")
def _(world: World) -> None:
    running = world.require(world.stream.running, "command started streaming")
    _settle(world, world.require_sandbox().id, "paused")
    time.sleep(PAUSE_IN_FLIGHT_S)
    before = b"".join(c.data for c in running.chunks_so_far())
    time.sleep(PAUSE_WATCH_S)
    after = b"".join(c.data for c in running.chunks_so_far())
    expect(not running.done(), f"the streamed command finished while its sandbox was paused, printing {after!r}: "
                               "a paused sandbox's processes are frozen until it is resumed")
    expect(after == before,
           f"the streamed command went on printing while its sandbox was paused: {before!r} became {after!r} within "
           f"{PAUSE_WATCH_S} s; a paused sandbox's processes make no progress until it is resumed")


@when(parsers.re(r"I (?P<verb>pause|resume|archive) the sandbox$"))
def _(world: World, verb: str) -> None:
    world.common.verb_sent_at = time.monotonic()
    _invoke_ok(world, verb, world.require_sandbox().id)


@then(parsers.re(r"the sandbox is described as (?P<state>stopped|running|paused|archived)$"))
def _(world: World, state: str) -> None:
    _expect_state(world, world.require_sandbox().id, state)


@then("the sandbox is described in one of the protocol's sandbox states")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    state = world.provider.describe(sandbox_id).state
    world.lifecycle.states_seen.append(state)
    expect(state in KNOWN_STATES, f"the sandbox ({sandbox_id}) is described in state {state!r}, which is not one of "
                                  f"the protocol's sandbox states ({', '.join(sorted(KNOWN_STATES))})")


@then("every state reported along the way is one of the protocol's sandbox states")
def _(world: World) -> None:
    seen = world.lifecycle.states_seen
    expect(bool(seen), "no state was reported along the way")
    unknown = sorted({state for state in seen if state not in KNOWN_STATES})
    expect(not unknown, f"the provider reported states {unknown}, which are not protocol sandbox states "
                        f"({', '.join(sorted(KNOWN_STATES))})")


@when("I refresh the sandbox's activity")
def _(world: World) -> None:
    _invoke_ok(world, "refresh activity", world.require_sandbox().id)


@when("I refresh the activity of a sandbox id that was never issued")
def _(world: World) -> None:
    never_issued = world.token("conformance-never-issued")
    world.last = attempt(lambda: world.invoke("refresh activity", never_issued))


@then("that refresh is refused as not_found")
def _(world: World) -> None:
    _expect_refusal(world.last, "refreshing the activity of a sandbox that was never issued", "not_found")


@given("a sandbox with a marker file")
def _(world: World) -> None:
    sandbox = world.create_sandbox()
    marker = world.token("conformance-marker")
    world.common.marker_file_content = marker
    run_ok(world, sandbox.id, f"printf '%s' '{marker}' > {MARKER_FILE}")


def _expect_marker(world: World, sandbox_id: str, who: str) -> None:
    marker = world.require(world.common.marker_file_content, "marker file")
    outcome = world.provider.exec(sandbox_id, ExecRequest(command=f"cat {MARKER_FILE}"))
    expect(outcome.outcome == "ran" and outcome.exit_code == 0 and outcome.stdout == marker.encode(),
           f"{who} ({sandbox_id}) should hold {MARKER_FILE} containing {marker!r}; `cat {MARKER_FILE}` gave "
           f"{outcome.describe()}")


@then("the marker file is still there")
def _(world: World) -> None:
    _expect_marker(world, world.require_sandbox().id, "the sandbox")


@then("the new sandbox has the marker file")
def _(world: World) -> None:
    _expect_marker(world, _new_sandbox(world).id, "the new sandbox")


@when("I write a file in the new sandbox")
def _(world: World) -> None:
    run_ok(world, _new_sandbox(world).id, f"printf 'copy only' > {COPY_ONLY_FILE}")


@then("that file does not appear in the original sandbox")
def _(world: World) -> None:
    original = world.require_sandbox()
    seen = run_ok(world, original.id, f"if [ -e {COPY_ONLY_FILE} ]; then echo present; else echo absent; fi")
    expect(seen.strip() == b"absent",
           f"a file written in the new sandbox ({_new_sandbox(world).id}) appeared in the original sandbox "
           f"({original.id}); the two must not share their files")


@then("the new sandbox is a different sandbox")
def _(world: World) -> None:
    new, original = _new_sandbox(world), world.require_sandbox()
    expect(new.id != original.id, f"the new sandbox has the original's id {original.id!r}")


@then("both the original and the new sandbox are described as running")
def _(world: World) -> None:
    _expect_state(world, world.require_sandbox().id, "running", "the original sandbox")
    _expect_state(world, _new_sandbox(world).id, "running", "the new sandbox")


@given("a sandbox labelled with a generated label")
def _(world: World) -> None:
    world.lifecycle.old_label = {"conformance-label": world.token("old")}
    world.create_sandbox(labels=world.lifecycle.old_label)


@when("I replace the sandbox's labels with a new generated label, keeping the run label")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    # Keep what the suite itself put there (the run label its sweep looks for); drop the scenario's own.
    old_label = _old_label(world)
    kept = {k: v for k, v in sandbox.status.labels.items() if k not in old_label}
    new_label = {"conformance-new-label": world.token("new")}
    world.lifecycle.new_label = new_label
    world.lifecycle.new_labels = {**kept, **new_label}
    _invoke_ok(world, "set labels", sandbox.id, labels=world.lifecycle.new_labels)


def _old_label(world: World) -> dict[str, str]:
    return world.require(world.lifecycle.old_label, "label the sandbox was created with")


def _new_label(world: World) -> dict[str, str]:
    return world.require(world.lifecycle.new_label, "new label")


@then("the sandbox is described with exactly the new labels")
def _(world: World) -> None:
    labels = dict(world.provider.describe(world.require_sandbox().id).labels)
    new_labels = world.require(world.lifecycle.new_labels, "replaced labels")
    expect(labels == new_labels,
           f"set labels replaces every label: expected exactly {new_labels}, described {labels}")


@then("listing by the new label finds the sandbox")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    new_label = _new_label(world)
    listed = _ids(world.provider.list(new_label))
    expect(sandbox_id in listed, f"listing by {new_label} should find {sandbox_id}; it listed {listed}")


@then("listing by the replaced label does not find it")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    old_label = _old_label(world)
    listed = _ids(world.provider.list(old_label))
    expect(sandbox_id not in listed, f"listing by the replaced label {old_label} still finds {sandbox_id}")


@when("I undelete the sandbox")
def _(world: World, request: pytest.FixtureRequest) -> None:
    sandbox_id = world.require_sandbox().id
    world.last = attempt(lambda: world.invoke("undelete", sandbox_id))
    if world.last.error is None:
        cleanup(request, lambda: world.provider.delete(sandbox_id))


@then("the undelete answers a handle for the same sandbox")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    handle = world.last.expect_success(f"undelete of sandbox {sandbox_id}")
    expect(isinstance(handle, SandboxHandle), f"undelete should answer a HandleInfo; it answered {handle!r}")
    expect(handle.id == sandbox_id, f"undelete of {sandbox_id!r} answered a handle for {handle.id!r}")
    expect(handle.status.state not in ("deleted", "deleting"),
           f"undelete brings the sandbox back, yet the handle it answered says {handle.status.state!r}")


@then("the sandbox is described with the labels it had before it was deleted")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    before = dict(sandbox.status.labels or {})
    labels = dict(world.provider.describe(sandbox.id).labels or {})
    expect(labels == before, f"undelete brought sandbox {sandbox.id} back with labels {labels}; before it was "
                             f"deleted it carried {before}, and undelete restores the sandbox, labels too")


# -- snapshots -----------------------------------------------------------------------------------


def _forget_snapshot(world: World, request: pytest.FixtureRequest, snapshot_id: str, provider: Any = None) -> None:
    provider = provider or world.provider
    if provider.capabilities.declares("snapshots"):
        operations = world.facet("operations", "delete a snapshot", provider)
        cleanup(request, lambda: operations.invoke("delete a snapshot", None, snapshot_id=snapshot_id))


@when("I take a filesystem snapshot of the sandbox")
def _(world: World, request: pytest.FixtureRequest) -> None:
    name = world.token("conformance-snapshot")
    answer = _invoke_ok(world, "snapshot", world.require_sandbox().id, include_memory=False, name=name)
    world.lifecycle.snapshot_name = name
    world.lifecycle.snapshot_id = answer.id
    _forget_snapshot(world, request, answer.id)


@when("I create a sandbox from that snapshot by name")
def _(world: World) -> None:
    name = world.require(world.lifecycle.snapshot_name, "filesystem snapshot")
    outcome = attempt(lambda: world.provider.create(SandboxRequest(from_snapshot=name)))
    world.lifecycle.new_sandbox = outcome.expect_success(
        f"creating a sandbox from snapshot {name!r} (source.snapshot.name)")


@when("I snapshot the sandbox including its memory and running processes")
def _(world: World, request: pytest.FixtureRequest) -> None:
    world.last = attempt(lambda: world.invoke("snapshot", world.require_sandbox().id, include_memory=True))
    if world.last.error is None and isinstance(world.last.answer, SnapshotRef) and world.last.answer.id:
        _forget_snapshot(world, request, world.last.answer.id)


@then("the snapshot is taken if live-process snapshots are declared, and otherwise refused as unsupported "
      "naming snapshots.live_process_state")
def _(world: World) -> None:
    what = "a snapshot with include_memory true"
    if _sandbox_declares(world, "snapshots.live_process_state"):
        world.last.expect_success(f"{what} (snapshots.live_process_state_from_sandbox is declared)")
        return
    error = _expect_refusal(world.last, f"{what}, from a provider that does not declare live-process snapshots",
                            "unsupported")
    expect(error.detail.get("capability") in world.provider.capabilities.names_of("snapshots.live_process_state"),
           f"the refusal of {what} should name capability snapshots.live_process_state; it names "
           f"{error.detail.get('capability')!r}")


@when("I snapshot the sandbox's filesystem alone")
def _(world: World, request: pytest.FixtureRequest) -> None:
    name = world.token("conformance-snapshot")
    world.last = attempt(lambda: world.invoke("snapshot", world.require_sandbox().id, include_memory=False, name=name))
    if world.last.error is None and isinstance(world.last.answer, SnapshotRef) and world.last.answer.id:
        _forget_snapshot(world, request, world.last.answer.id)


@then("the snapshot is taken if filesystem snapshots are declared, and otherwise refused as unsupported naming "
      "snapshots.filesystem")
def _(world: World) -> None:
    # v1 section 8.3: include_memory false is the Filesystem mode, which snapshots.filesystem_from_sandbox declares;
    # upstream's snapshot_modes_are_honest wants exactly that capability named, not lifecycle.snapshot_sandbox.
    what = "a snapshot with include_memory false"
    if _sandbox_declares(world, "snapshots.filesystem"):
        answer = world.last.expect_success(f"{what} (snapshots.filesystem_from_sandbox is declared)")
        expect(isinstance(answer, SnapshotRef) and bool(answer.id), f"{what} answered no snapshot id: {answer!r}")
        return
    error = _expect_refusal(world.last, f"{what}, from a provider that does not declare filesystem snapshots",
                            "unsupported")
    expect(error.detail.get("capability") in world.provider.capabilities.names_of("snapshots.filesystem"),
           f"the refusal of {what} should name capability snapshots.filesystem; it names "
           f"{error.detail.get('capability')!r}")


@when("I create a snapshot of the sandbox")
def _(world: World, request: pytest.FixtureRequest) -> None:
    name = world.token("conformance-snapshot")
    answer = _invoke_ok(world, "create a snapshot", world.require_sandbox().id, name=name)
    world.lifecycle.snapshot_id = answer.id
    _forget_snapshot(world, request, answer.id)


@when("I create a snapshot of the sandbox asking for a generated region")
def _(world: World, request: pytest.FixtureRequest) -> None:
    region = f"conformance-region-{world.faker.pystr(min_chars=6, max_chars=6).lower()}"
    world.lifecycle.spec_asked = region
    world.last = attempt(lambda: world.invoke("create a snapshot", world.require_sandbox().id,
                                              name=world.token("conformance-snapshot"), region=region))
    if world.last.error is None:
        world.lifecycle.snapshot_id = world.last.answer.id
        _forget_snapshot(world, request, world.last.answer.id)


@then("the snapshot lists that region among its regions, unless the request was refused as invalid_spec naming "
      "region")
def _(world: World) -> None:
    region = _spec_asked(world)
    if world.last.error is not None:
        _expect_refusal(world.last, f"a snapshot asking for region {region!r}", "invalid_spec", "region")
        return
    snapshot_id = _snapshot_id(world)
    info = _invoke_ok(world, "get a snapshot", None, snapshot_id=snapshot_id)
    expect(region in (info.regions or ()),
           f"snapshot {snapshot_id!r} was asked for in region {region!r} and accepted, but its status lists the "
           f"regions {info.regions!r}: a region that cannot be honoured is refused as invalid_spec naming region, "
           f"never dropped ({info!r})")


@when("I create a snapshot of the sandbox named with spaces and accented letters")
def _(world: World, request: pytest.FixtureRequest) -> None:
    world.lifecycle.name = f"Conformance {world.token('snapshot')} déjà vu"
    world.last = attempt(lambda: world.invoke("create a snapshot", world.require_sandbox().id,
                                              name=world.lifecycle.name))
    if world.last.error is None and world.last.answer.id:
        _forget_snapshot(world, request, world.last.answer.id)


@then("the snapshot's id is free of whitespace and control characters, unless the name was refused as invalid_spec "
      "naming name")
def _(world: World) -> None:
    name = world.require(world.lifecycle.name, "snapshot named with spaces")
    if world.last.error is not None:
        _expect_refusal(world.last, f"a snapshot named {name!r}", "invalid_spec", "name")
        return
    snapshot_id = world.last.answer.id
    bad = [c for c in snapshot_id or "" if c.isspace() or unicodedata.category(c).startswith("C")]
    expect(bool(snapshot_id) and not bad, f"a snapshot id must be non-empty and free of whitespace and control "
                                          f"characters whatever the snapshot's name ({name!r}); it is {snapshot_id!r}")


@when("I create two snapshots of the sandbox, the second named like the first with a suffix")
def _(world: World, request: pytest.FixtureRequest) -> None:
    ids, names = [], []
    first = world.token("conformance-snapshot")
    # "nightly" and "nightly-2": a name filter that matches a prefix, or part of a name, lists both.
    for name in (first, f"{first}-2"):
        answer = _invoke_ok(world, "create a snapshot", world.require_sandbox().id, name=name)
        _forget_snapshot(world, request, answer.id)
        ids.append(answer.id)
        names.append(name)
    world.lifecycle.snapshot_id, world.lifecycle.other_snapshot_id = ids
    world.lifecycle.snapshot_names = names


@when("I list the snapshots by the first one's name")
def _(world: World) -> None:
    name = world.require(world.lifecycle.snapshot_names, "two named snapshots")[0]
    world.lifecycle.snapshot_listing = _invoke_ok(world, "list snapshots", None, name=name)


@then("the listing holds the first snapshot and not the second")
def _(world: World) -> None:
    listing = world.require(world.lifecycle.snapshot_listing, "listing of snapshots by name")
    ids = [s.id for s in listing.snapshots]
    first, second = _snapshot_id(world), world.require(world.lifecycle.other_snapshot_id, "second snapshot")
    expect(first in ids, f"listing snapshots by the first one's name should find {first!r}; it listed {ids}")
    names = world.require(world.lifecycle.snapshot_names, "two named snapshots")
    expect(second not in ids, f"listing snapshots by the name {names[0]!r} also listed {second!r}, named {names[1]!r}: "
                              f"the name filter lists the snapshots of exactly that name, not every name it begins "
                              f"or appears in ({ids})")


def _snapshot_id(world: World) -> str:
    return world.require(world.lifecycle.snapshot_id, "snapshot")


def _snapshot_status(world: World) -> SnapshotInfo:
    snapshot_id = _snapshot_id(world)
    status = _invoke_ok(world, "get a snapshot", None, snapshot_id=snapshot_id)
    expect(status.id == snapshot_id, f"get of snapshot {snapshot_id!r} answered the status of {status.id!r}")
    return status


@then("the snapshot is described with a known snapshot state")
def _(world: World) -> None:
    state = _snapshot_status(world).state
    expect(state in SNAPSHOT_STATES,
           f"snapshot state {state!r} is not one of the protocol's snapshot states "
           f"({', '.join(sorted(SNAPSHOT_STATES))})")


@then(parsers.re(r"the snapshot is described as (?P<state>active|inactive)$"))
def _(world: World, state: str) -> None:
    described = _snapshot_status(world).state
    expect(described == state, f"snapshot {_snapshot_id(world)} should be {state}; it is {described!r}")


def _delete_snapshot(world: World) -> Attempt:
    snapshot_id = _snapshot_id(world)
    return attempt(lambda: world.invoke("delete a snapshot", None, snapshot_id=snapshot_id))


@when("I delete the snapshot twice at the same time")
def _(world: World) -> None:
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(_delete_snapshot, world) for _ in range(2)]
        world.attempts.extend(f.result() for f in futures)


@when("I delete the snapshot once more")
def _(world: World) -> None:
    world.attempts.append(_delete_snapshot(world))


@then("every snapshot delete succeeds")
def _(world: World) -> None:
    for number, outcome in enumerate(world.attempts, start=1):
        outcome.expect_success(f"delete number {number} of snapshot {_snapshot_id(world)}")


@then("the snapshot is reported gone")
def _(world: World) -> None:
    snapshot_id = _snapshot_id(world)
    outcome = attempt(lambda: world.invoke("get a snapshot", None, snapshot_id=snapshot_id))
    if outcome.error is not None:
        _expect_refusal(outcome, f"get of deleted snapshot {snapshot_id}", "not_found")
        return
    state = outcome.answer.state
    expect(state == "deleting", f"deleted snapshot {snapshot_id} is still described, in state {state!r}")


@when(parsers.re(r"I (?P<verb>activate|deactivate) the snapshot$"))
def _(world: World, verb: str) -> None:
    snapshot_id = _snapshot_id(world)
    world.last = attempt(lambda: world.invoke(f"{verb} a snapshot", None, snapshot_id=snapshot_id))
    if verb == "activate":
        world.last.expect_success("activating the snapshot")


@then("the deactivation is served if snapshot activation is declared, and otherwise refused as unsupported "
      "naming snapshots.activation")
def _(world: World) -> None:
    if world.provider.capabilities.declares("snapshots.activation"):
        world.last.expect_success("deactivating a snapshot (snapshots.activation is declared)")
        return
    error = _expect_refusal(world.last, "deactivating a snapshot without declaring snapshots.activation",
                            "unsupported")
    expect(error.detail.get("capability") == "snapshots.activation",
           f"the refusal should name capability snapshots.activation; it names {error.detail.get('capability')!r}")


@given("a sandbox created through a freshly started provider")
def _(world: World) -> None:
    world.fresh = world.start_fresh(handshake=True)
    world.sandbox = world.fresh.create(SandboxRequest())


@when(parsers.re(r"I create a snapshot of the sandbox asking for a different (?P<field>sandbox_kind|resources)$"))
def _(world: World, field: str, request: pytest.FixtureRequest) -> None:
    fresh = world.fresh
    expect(fresh is not None, "the scenario has no freshly started provider (a Given step is missing)")
    wire = world.wire(fresh, "this scenario needs a wire-level channel")
    status = world.require_sandbox().status.raw or {}
    # Whatever the sandbox has, ask for something else: a snapshot inherits kind and resources.
    if field == "sandbox_kind":
        different: Any = "virtual_machine" if status.get("sandbox_kind") == "container" else "container"
    else:
        cpu_cores = (status.get("resources") or {}).get("cpu_cores")
        different = {"cpu_cores": (cpu_cores or 1) + 1}
    spec = {"name": world.token("conformance-snapshot"),
            "source": {"sandbox": {"id": world.require_sandbox().id, "include_memory": False}}, field: different}
    world.lifecycle.spec_asked = different
    world.last = attempt(lambda: wire.call(wire.vocabulary.method("create a snapshot"), {"spec": spec}))
    if world.last.error is None and isinstance(world.last.answer, dict) and world.last.answer.get("snapshot_id"):
        _forget_snapshot(world, request, world.last.answer["snapshot_id"], provider=fresh)


@then(parsers.re(r"the snapshot request is refused as invalid_spec naming (?P<field>sandbox_kind|resources)$"))
def _(world: World, field: str) -> None:
    _expect_refusal(world.last, f"a snapshot of a sandbox asking for {field} {_spec_asked(world)!r}, which the "
                                f"sandbox does not have", "invalid_spec", field)


@when(parsers.re(r"I list the provider's (?P<service>snapshots|volumes)$"))
def _(world: World, service: str) -> None:
    world.lifecycle.listed_service = service
    world.last = attempt(lambda: world.invoke(f"list {service}", None))


@then(parsers.re(r"the listing is served if (?P<service>snapshots|volumes) is declared, and otherwise refused as "
                  r"unsupported naming (?P<named>snapshots|volumes)$"))
def _(world: World, service: str, named: str) -> None:
    if world.provider.capabilities.declares(service):
        world.last.expect_success(f"listing {service} ({service} is declared)")
        return
    error = _expect_refusal(world.last, f"listing {service} while the {service} capability is null", "unsupported")
    expect(error.detail.get("capability") == named,
           f"the refusal should name capability {named}; it names {error.detail.get('capability')!r}")


# -- platform info -------------------------------------------------------------------------------


@when("I ask for the sandbox's platform info")
def _(world: World) -> None:
    world.lifecycle.platform = world.provider.platform_info(world.require_sandbox().id)


@then("the platform names a non-empty lowercase operating system")
def _(world: World) -> None:
    os_name = world.require(world.lifecycle.platform, "platform info").os
    expect(isinstance(os_name, str) and os_name != "" and os_name == os_name.lower(),
           f"platform os should be a non-empty lowercase name such as linux or macos; it is {os_name!r}")


GO_ARCH_NAMES = {"amd64": "x86_64", "arm64": "aarch64", "386": "x86"}


@then("the platform names its architecture as x86_64, aarch64 and the like, not amd64 or arm64")
def _(world: World) -> None:
    arch = world.require(world.lifecycle.platform, "platform info").arch
    expect(arch not in GO_ARCH_NAMES, f"platform arch is {arch!r}, Go's name for it; the protocol's platform names "
                                      f"follow the target's ({GO_ARCH_NAMES.get(arch)!r})")


@then("the platform names an architecture, not a kernel release")
def _(world: World) -> None:
    arch = world.require(world.lifecycle.platform, "platform info").arch
    expect(isinstance(arch, str) and arch != "" and "." not in arch,
           f"platform arch should be an architecture name such as x86_64 or aarch64; it is {arch!r}")


# -- creation specs ------------------------------------------------------------------------------


def _spec_request(world: World, field: str) -> SandboxRequest:
    if field == "sandbox_kind":
        world.lifecycle.spec_asked = "container"
        return SandboxRequest(extra={"sandbox_kind": "container"})
    if field == "region":
        region = world.token("conformance-region")
        world.lifecycle.spec_asked = region
        return SandboxRequest(extra={"region": region})
    if field == "user":
        world.lifecycle.spec_asked = "nobody"
        return SandboxRequest(extra={"user": "nobody"})
    if field == "resources":
        world.lifecycle.spec_asked = 1
        return SandboxRequest(cpu_cores=1)
    raise AssertionError(f"the suite knows no creation-spec field {field!r}")


@when(parsers.re(r"I create a sandbox asking for (?P<field>sandbox_kind|region|user|resources)$"))
def _(world: World, field: str) -> None:
    world.last = attempt(lambda: world.provider.create(_spec_request(world, field)))
    if world.last.error is None:
        world.sandbox = world.last.answer


SETTINGS: dict[str, dict[str, Any]] = {
    "a GPU": {"resources": {"gpus": 1}},
    "a 1024 MiB disk": {"resources": {"disk_mb": 1024}},
    "a one-hour ttl": {"timers": {"ttl": {"secs": 3600, "nanos": 0}}},
    # NetworkPolicy values (section 5.4) and the capability flag that offers each
    "an allow-all network": {"network": "allow_all"},
    "a blocked network": {"network": "block"},
    # an ephemeral sandbox is deleted as soon as it stops (upstream's Daytona plugin: auto-delete at once)
    "deletion once stopped": {"ephemeral": True},
}
NETWORK_FLAGS = {"an allow-all network": "network.allow_all", "a blocked network": "network.block_all"}
SETTING_NAMES = r"a GPU|a 1024 MiB disk|a one-hour ttl|a volume mount|a new working directory|an allow-all network|" \
                r"a blocked network|deletion once stopped|an unknown provider option"


def _setting_spec(world: World, setting: str) -> dict[str, Any]:
    if setting == "a volume mount":
        # a volume id never issued: a provider with volumes may refuse it as not_found, or make it on demand
        mount = {"volume": world.token("conformance-volume"), "mount_path": f"/mnt/{world.token('conformance-mount')}",
                 "subpath": None}
        world.lifecycle.spec_asked = mount
        return {"volumes": [mount]}
    if setting == "a new working directory":
        # A path nobody uses, never a shared one such as /tmp: a provider that manages the directory it is
        # given removes it with the sandbox; one that only uses existing directories refuses it.
        directory = f"/tmp/{world.token('conformance-workdir')}"
        world.lifecycle.spec_asked = directory
        return {"working_directory": directory}
    if setting == "an unknown provider option":
        # provider_config is the plugin's own (section 8.2); an option no plugin defines cannot be honoured
        option = world.token("conformance-option").replace("-", "_")
        world.lifecycle.spec_asked = option
        return {"provider_config": {option: True}}
    return SETTINGS[setting]


@when(parsers.re(rf"I create a sandbox asking for (?P<setting>{SETTING_NAMES})$"))
def _(world: World, setting: str) -> None:
    spec = _setting_spec(world, setting)
    world.last = attempt(lambda: world.provider.create(SandboxRequest(extra=spec)))
    if world.last.error is None:
        world.sandbox = world.last.answer


def _has_setting(world: World, setting: str) -> tuple[bool, str]:
    sandbox_id = world.require_sandbox().id
    if setting == "a GPU":
        seen = world.provider.exec(sandbox_id, ExecRequest("ls /dev/nvidia0 >/dev/null 2>&1 || nvidia-smi -L"))
        return seen.outcome == "ran" and seen.exit_code == 0, "no GPU device is visible inside it"
    if setting == "a 1024 MiB disk":
        seen = world.provider.exec(sandbox_id, ExecRequest("df -Pm . | awk 'NR==2 {print $2}'"))
        size = seen.stdout.decode(errors="replace").strip()
        ok = size.isdigit() and 512 <= int(size) <= 2048
        return ok, f"its working directory's filesystem holds {size or '?'} MiB"
    if setting == "a volume mount":
        mount_path = _spec_asked(world)["mount_path"]
        seen = world.provider.exec(sandbox_id, ExecRequest(f"test -d '{mount_path}'"))
        return seen.outcome == "ran" and seen.exit_code == 0, f"nothing is mounted at {mount_path} inside it"
    if setting == "a new working directory":
        directory = _spec_asked(world)
        here = run_ok(world, sandbox_id, "pwd -P").decode(errors="replace").strip()
        seen = world.provider.exec(sandbox_id, ExecRequest(f"cd '{directory}' && pwd -P"))
        asked = seen.stdout.decode(errors="replace").strip() if seen.outcome == "ran" and seen.exit_code == 0 else None
        return asked is not None and here == asked, f"its commands run in {here!r}, not in {directory!r}"
    if setting == "deletion once stopped":
        attempt(lambda: world.provider.stop(sandbox_id)).expect_success("stop of a sandbox created ephemeral")
        state = _await_gone(world, sandbox_id)
        return state in (None, "deleting", "deleted"), (f"once stopped it is still described {state!r} after "
                                                        f"{SETTLE_TIMEOUT_S:.0f} s, not deleted")
    if setting == "an unknown provider option":
        return False, (f"it took provider_config option {_spec_asked(world)!r}, which no provider defines, so the "
                       "option was dropped")
    if setting in NETWORK_FLAGS:
        flag = NETWORK_FLAGS[setting]
        return world.provider.capabilities.declares(flag), f"the provider declares {flag} false, so it does not offer it"
    declared = world.provider.capabilities.declares("lifecycle.timers")
    return declared, "the provider declares no lifecycle timers, so nothing will end the sandbox after an hour"


@then(parsers.re(rf"the sandbox visibly has (?P<setting>{SETTING_NAMES}), or the create is "
                 r"refused as invalid_spec naming (?P<field>[a-z_.]+)$"))
def _(world: World, setting: str, field: str) -> None:
    error = world.last.error
    if setting == "a volume mount" and isinstance(error, ApplicationErrorAnswer) and error.kind == "not_found" \
            and world.provider.capabilities.declares("volumes"):
        expect((error.detail or {}).get("resource") == "volume",
               f"a create mounting a volume that was never issued was refused as not_found naming resource "
               f"{(error.detail or {}).get('resource')!r}, not the volume")
        return
    if setting == "a new working directory" and _refused_naming_path(error, _spec_asked(world)):
        # Upstream's host takes only a directory that exists and refuses any other as kind io, naming the path
        # ("designated directory ... is not usable"): the setting is refused, not dropped, which is the rule's point.
        return
    if error is not None:
        _expect_refusal(world.last, f"a create asking for {setting}", "invalid_spec", field)
        return
    has, instead = _has_setting(world, setting)
    expect(has, f"the create asking for {setting} succeeded, but {instead}: a setting the provider cannot honour is "
                f"refused as invalid_spec naming {field}, never silently dropped")


def _refused_naming_path(error: Any, path: str) -> bool:
    """Is ``error`` a refusal as kind io (the path cannot be used) whose message or detail names ``path``?"""
    if not isinstance(error, ApplicationErrorAnswer) or error.kind != "io":
        return False
    detail = error.detail if isinstance(error.detail, dict) else {}
    return any(path in str(text) for text in (error.message, *detail.values()))


def _spec_asked(world: World) -> Any:
    return world.require(world.lifecycle.spec_asked, "value the request asked for")


def _honoured(world: World, field: str) -> tuple[bool, Any]:
    """Whether the new sandbox visibly has what was asked, and what it has instead."""
    sandbox = world.require_sandbox()
    status = world.provider.describe(sandbox.id).raw or {}
    if field in ("sandbox_kind", "region"):
        return status.get(field) == _spec_asked(world), f"its status reports {field} {status.get(field)!r}"
    if field == "resources":
        cores = (status.get("resources") or {}).get("cpu_cores")
        return cores == _spec_asked(world), f"its status reports cpu_cores {cores!r}"
    user = run_ok(world, sandbox.id, "id -un").decode(errors="replace").strip()
    return user == _spec_asked(world), f"its commands run as {user!r}"


@then(parsers.re(r"the sandbox honours (?P<field>sandbox_kind|region|user|resources), or the create is refused as "
                  r"invalid_spec naming (?P<named>[a-z_.]+)$"))
def _(world: World, field: str, named: str) -> None:
    if world.last.error is not None:
        _expect_refusal(world.last, f"a create asking for {field} {_spec_asked(world)!r}", "invalid_spec", named)
        return
    honoured, instead = _honoured(world, field)
    expect(honoured, f"the create asking for {field} {_spec_asked(world)!r} succeeded, but {instead}; a "
                     "field the provider cannot honour must be refused as invalid_spec naming it, never ignored")


@when(parsers.re(r"I create a sandbox with an empty (?P<field>region|working_directory)$"))
def _(world: World, field: str) -> None:
    world.last = attempt(lambda: world.provider.create(SandboxRequest(extra={field: ""})))
    if world.last.error is None:
        world.sandbox = world.last.answer


@then(parsers.re(r"the create is refused as invalid_spec naming (?P<field>region|working_directory)$"))
def _(world: World, field: str) -> None:
    expect(world.last.error is not None,
           f"a create with {field} \"\" succeeded; {field} must not be empty (section 8.2), so the spec is refused "
           f"as invalid_spec naming {field}")
    _expect_refusal(world.last, f"a create with an empty {field}", "invalid_spec", field)


@when("I create a sandbox with an empty name")
def _(world: World) -> None:
    world.lifecycle.name = ""
    world.last = attempt(lambda: world.provider.create(SandboxRequest(name="")))
    if world.last.error is None:
        world.sandbox = world.last.answer


@when("I create a sandbox with a generated name")
def _(world: World) -> None:
    world.lifecycle.name = world.token("conformance-name")
    world.create_sandbox(name=world.lifecycle.name)


@when(parsers.parse("I create a sandbox with a generated name of {length:d} characters"))
def _(world: World, length: int) -> None:
    stem = world.token("conformance-long-name")
    world.lifecycle.name = (stem + "-" + "x" * length)[:length]
    name = world.lifecycle.name
    world.last = attempt(lambda: world.provider.create(SandboxRequest(name=name)))
    if world.last.error is None:
        world.sandbox = world.last.answer


@then("the sandbox's status reports that name, unless the create was refused as invalid_spec naming name")
def _(world: World) -> None:
    name = world.require(world.lifecycle.name, "generated sandbox name")
    if world.last.error is not None:
        _expect_refusal(world.last, f"a create with the name {name!r}", "invalid_spec", "name")
        return
    sandbox = world.require_sandbox()
    for where, status in _statuses(world, sandbox):
        expect(status.name == name, f"the {where} reports the {len(name)}-character name {name!r} as {status.name!r}; "
                                    "a name the provider cannot keep as given is refused, never cut short or dropped")


@when("I ask for a snapshot id that was never issued")
def _(world: World) -> None:
    world.lifecycle.snapshot_id = world.token("conformance-never-issued-snapshot")
    snapshot_id = world.lifecycle.snapshot_id
    world.last = attempt(lambda: world.invoke("get a snapshot", None, snapshot_id=snapshot_id))


@then("that request is refused as not_found naming the resource snapshot and that id")
def _(world: World) -> None:
    snapshot_id = world.require(world.lifecycle.snapshot_id, "snapshot id never issued")
    error = _expect_refusal(world.last, "asking for a snapshot that was never issued", "not_found")
    detail = error.detail or {}
    expect(detail.get("resource") == "snapshot" and detail.get("id") == snapshot_id,
           f"the not_found for snapshot {snapshot_id!r} names resource {detail.get('resource')!r} and id "
           f"{detail.get('id')!r}")


@when("I create a sandbox named with spaces and accented letters")
def _(world: World) -> None:
    world.lifecycle.name = f"Conformance {world.token('name')} déjà vu"
    world.create_sandbox(name=world.lifecycle.name)


@then("the sandbox's id is free of whitespace and control characters")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    bad = [c for c in sandbox_id if c.isspace() or unicodedata.category(c).startswith("C")]
    expect(sandbox_id != "" and not bad, f"a sandbox id must be free of whitespace and control characters "
                                         f"whatever the sandbox's name; it is {sandbox_id!r}")


@when("I create a sandbox from an image that does not exist")
def _(world: World) -> None:
    # .invalid is a reserved top-level domain (RFC 2606): no registry serves it, so no provider has the image
    reference = f"conformance.invalid/{world.token('absent-image')}:absent"
    world.lifecycle.spec_asked = reference
    request = SandboxRequest(extra={"source": {"image": {"reference": reference}}})
    world.last = attempt(lambda: world.provider.create(request))
    if world.last.error is None:
        world.sandbox = world.last.answer


@then("the create is refused, naming source if it is refused as invalid_spec")
def _(world: World) -> None:
    reference = _spec_asked(world)
    if world.last.error is None:
        # A provider may answer at once and fail the build later: the sandbox then settles in state error.
        state = _settle(world, world.require_sandbox().id, "error").state
        expect(state == "error",
               f"a create from image {reference!r}, which no registry has, answered sandbox "
               f"{world.require_sandbox().id} in state {state!r}: that sandbox was not made from the image asked "
               "for; a source the provider cannot create from is refused (invalid_spec naming source when the "
               "provider cannot create from images at all), never replaced by another")
        return
    error = world.last.expect_application_error(f"a create from image {reference!r}")
    if error.kind == "invalid_spec":
        expect(names_field(error, "source"), f"a create from image {reference!r} was refused as invalid_spec, but "
                                              f"detail.field is {error.detail.get('field')!r} instead of 'source'")


@then("the sandbox's status reports that name")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    name = world.require(world.lifecycle.name, "generated sandbox name")
    for where, status in _statuses(world, sandbox):
        expect(status.name == name, f"the {where} reports name {status.name!r}; the create asked for {name!r}")


def _statuses(world: World, sandbox: SandboxHandle) -> list[tuple[str, SandboxStatus]]:
    """The sandbox's status as every answer that carries one reports it: the create, a describe, a listing,
    and an attach where the dialect has them."""
    found = [("create answer", sandbox.status), ("describe", world.provider.describe(sandbox.id))]
    try:
        listed = [s for s in world.provider.list() if s.id == sandbox.id]
    except NotExpressible:
        listed = None
    if listed is not None:
        expect(len(listed) == 1, f"listing the sandboxes shows sandbox {sandbox.id} {len(listed)} times")
        found.append(("listing", listed[0]))
    try:
        found.append(("attach answer", world.provider.attach(sandbox.id).status))
    except NotExpressible:
        pass
    return found


@when("I create a sandbox labelled with labels in several scripts")
def _(world: World) -> None:
    labels = {"conformance-script": f"café ✓ 日本語 {world.token('label')}", "conformance-ascii": world.token("plain")}
    world.lifecycle.labels = labels
    world.create_sandbox(labels=labels)


@then("every answer reports those labels exactly as given")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    labels = _labels(world)
    for where, status in _statuses(world, sandbox):
        shown = {key: status.labels.get(key) for key in labels} if status.labels is not None else None
        expect(shown == labels, f"the {where} reports labels {shown!r}; the create gave {labels!r}")


@when("I create a second sandbox with that same name")
def _(world: World) -> None:
    name = world.require(world.lifecycle.name, "generated sandbox name")
    world.last = attempt(lambda: world.provider.create(SandboxRequest(name=name)))
    if world.last.error is None:
        world.lifecycle.other_sandbox = world.last.answer


@then("the second create is refused, or answers a sandbox of its own")
def _(world: World) -> None:
    if world.last.error is not None:
        return  # names are unique here, and the provider said so
    first, second = world.require_sandbox(), world.require(world.lifecycle.other_sandbox, "second sandbox")
    expect(second.id != first.id,
           f"a second create with the name {world.lifecycle.name!r} answered the first sandbox, {first.id!r}, as if it "
           "were new: whoever deletes \"its\" sandbox then deletes the other's")
    run_ok(world, first.id, f"printf first > {MARKER_FILE}")
    seen = world.provider.exec(second.id, ExecRequest(f"cat {MARKER_FILE} 2>/dev/null || true"))
    expect(seen.stdout != b"first", f"sandboxes {first.id} and {second.id} share their files")


# -- timers ----------------------------------------------------------------------------------------


def _timers(**set_to: Any) -> dict[str, Any]:
    return {name: set_to.get(name) for name in TIMER_NAMES}


@when("I create a sandbox whose lifecycle timers are all left unset")
def _(world: World) -> None:
    outcome = attempt(lambda: world.provider.create(SandboxRequest(extra={"timers": _timers()})))
    world.sandbox = outcome.expect_success("a create whose timers are all null (the provider's defaults)")


@when("I set the sandbox's timers, leaving them all unset")
def _(world: World) -> None:
    world.last = attempt(lambda: world.invoke("set timers", world.require_sandbox().id, timers=_timers()))
    world.lifecycle.timers_described = "every timer null (the provider's defaults)"


@when("I switch the sandbox's idle auto-stop timer off with a zero duration")
def _(world: World) -> None:
    timers = _timers(auto_stop_after_idle={"secs": 0, "nanos": 0})
    world.last = attempt(lambda: world.invoke("set timers", world.require_sandbox().id, timers=timers))
    world.lifecycle.timers_described = "auto_stop_after_idle zero (switched off)"


@then("the timers are accepted")
def _(world: World) -> None:
    world.last.expect_success(f"set timers with {world.require(world.lifecycle.timers_described, 'timers set')}")


@then("the timers are accepted, or refused as invalid_spec naming the timers")
def _(world: World) -> None:
    if world.last.error is not None:
        timers = world.require(world.lifecycle.timers_described, "timers set")
        _expect_refusal(world.last, f"set timers with {timers}", "invalid_spec", "timers")


@then("the sandbox is still described as running after staying idle for a moment")
def _(world: World) -> None:
    time.sleep(1.5)  # a zero timer mistaken for "now" fires at once; give it time to show
    _expect_state(world, world.require_sandbox().id, "running")


# -- fork, resize, network -------------------------------------------------------------------------


@when("I fork the sandbox without its memory")
def _(world: World) -> None:
    world.last = attempt(lambda: world.invoke("fork", world.require_sandbox().id, include_memory=False))


@then("the fork is refused as invalid_spec naming include_memory, or as unsupported naming lifecycle.fork "
      "when forks are not declared")
def _(world: World) -> None:
    what = "a fork with include_memory false"
    error = world.last.expect_application_error(what)
    if error.kind == "unsupported" and not _sandbox_declares(world, "lifecycle.fork"):
        expect(error.detail.get("capability") == "lifecycle.fork",
               f"the unsupported answer to {what} names {error.detail.get('capability')!r} instead of lifecycle.fork")
        return
    _expect_refusal(world.last, what, "invalid_spec", "include_memory")


@when("I fork the sandbox with its memory")
def _(world: World) -> None:
    handle = _invoke_ok(world, "fork", world.require_sandbox().id, include_memory=True)
    expect(isinstance(handle, SandboxHandle), f"a fork should answer a HandleInfo; it answered {handle!r}")
    world.lifecycle.new_sandbox = handle


@when("I resize the sandbox to a different number of CPU cores")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    current = ((world.provider.describe(sandbox.id).raw or {}).get("resources") or {}).get("cpu_cores")
    world.lifecycle.resized_cpu_cores = 2 if current == 1 else 1
    _invoke_ok(world, "resize", sandbox.id, cpu_cores=world.lifecycle.resized_cpu_cores)


@then("the sandbox is described with that number of CPU cores")
def _(world: World) -> None:
    resources = (world.provider.describe(world.require_sandbox().id).raw or {}).get("resources") or {}
    cpu_cores = world.require(world.lifecycle.resized_cpu_cores, "resize")
    expect(resources.get("cpu_cores") == cpu_cores,
           f"after a resize to {cpu_cores} CPU cores the sandbox reports resources {resources!r}")


@when("I change the sandbox's network policy to one the provider declares")
def _(world: World) -> None:
    caps = world.provider.capabilities
    policy = "allow_all" if caps.declares("network.allow_all") else "block" if caps.declares("network.block_all") \
        else "provider_default"
    world.lifecycle.network_policy = policy
    world.last = attempt(lambda: world.invoke("update network", world.require_sandbox().id, network=policy))


@then("the change is accepted")
def _(world: World) -> None:
    world.last.expect_success(
        f"changing the network policy to {world.require(world.lifecycle.network_policy, 'network policy change')}")


@then("the sandbox's status reports the new network policy, if it reports one")
def _(world: World) -> None:
    reported = (world.provider.describe(world.require_sandbox().id).raw or {}).get("network")
    policy = world.require(world.lifecycle.network_policy, "network policy change")
    expect(reported is None or reported == policy,
           f"after changing the network policy to {policy!r} the status still reports {reported!r}")


@then("the sandbox still runs commands")
def _(world: World) -> None:
    run_ok(world, world.require_sandbox().id, "true")


# -- volumes ---------------------------------------------------------------------------------------


@when("I create a volume")
def _(world: World, request: pytest.FixtureRequest) -> None:
    create_volume(world, request)


def _volume_id(world: World) -> str:
    return world.require(world.lifecycle.volume_id, "volume")


@then("the volume is described with a known volume state")
def _(world: World) -> None:
    volume_id = _volume_id(world)
    status = _invoke_ok(world, "get a volume", None, volume_id=volume_id)
    expect(status.id == volume_id, f"get of volume {volume_id!r} answered the status of {status.id!r}")
    expect(status.state in VOLUME_STATES,
           f"volume state {status.state!r} is not one of the protocol's volume states "
           f"({', '.join(sorted(VOLUME_STATES))})")


@then("listing volumes includes it")
def _(world: World) -> None:
    listed = [v.id for v in _invoke_ok(world, "list volumes", None).volumes]
    volume_id = _volume_id(world)
    expect(volume_id in listed, f"volume {volume_id} is not listed; listed {listed}")


@when(parsers.re(r"I delete the volume(?: again)?$"))
def _(world: World) -> None:
    volume_id = _volume_id(world)
    world.attempts.append(attempt(lambda: world.invoke("delete a volume", None, volume_id=volume_id)))


@then("both volume deletes succeed")
def _(world: World) -> None:
    expect(len(world.attempts) == 2, f"expected two volume deletes, saw {len(world.attempts)}")
    for number, outcome in enumerate(world.attempts, start=1):
        outcome.expect_success(f"delete number {number} of volume {_volume_id(world)}")


@then("the volume is reported gone")
def _(world: World) -> None:
    volume_id = _volume_id(world)
    outcome = attempt(lambda: world.invoke("get a volume", None, volume_id=volume_id))
    if outcome.error is not None:
        _expect_refusal(outcome, f"get of deleted volume {volume_id}", "not_found")
        return
    state = outcome.answer.state
    expect(state in ("deleting", "deleted"), f"deleted volume {volume_id} is still described, in state {state!r}")


# -- ssh access ------------------------------------------------------------------------------------


def _ssh(world: World) -> SshAccess:
    return world.require(world.lifecycle.ssh, "SSH access")


@when("I ask for SSH access to the sandbox")
def _(world: World) -> None:
    access = _invoke_ok(world, "create ssh access", world.require_sandbox().id)
    expect(isinstance(access, SshAccess), f"SSH access should answer an access; it answered {access!r}")
    world.lifecycle.ssh = access


@then("the access is a single command line with no placeholders left to fill in")
def _(world: World) -> None:
    command = _ssh(world).command
    expect(isinstance(command, str) and command.strip() != "", f"the SSH access carries no command: {command!r}")
    expect("\n" not in command.strip(), f"the SSH access command spans several lines: {command!r}")
    leftover = PLACEHOLDER.search(command)
    expect(leftover is None, f"the SSH access command {command!r} still has a placeholder "
                             f"{leftover and leftover.group()!r}; it must run as it is")


@when(parsers.parse("I ask for SSH access to the sandbox for {seconds:d} seconds"))
def _(world: World, seconds: int) -> None:
    world.lifecycle.ssh_ttl_s = seconds
    world.lifecycle.ssh_asked_at = time.time()
    world.last = attempt(lambda: world.invoke("create ssh access", world.require_sandbox().id,
                                                       ttl_ms=seconds * 1000))


@then(parsers.parse("the access expires within {seconds:d} seconds if SSH lifetimes are declared, and otherwise "
                    "is refused as unsupported naming access.ssh.ttl"))
def _(world: World, seconds: int) -> None:
    what = f"SSH access for {seconds} seconds"
    if not _sandbox_declares(world, "access.ssh.ttl"):
        error = _expect_refusal(world.last, f"{what} from a provider without access.ssh_ttl", "unsupported")
        expect(error.detail.get("capability") in world.provider.capabilities.names_of("access.ssh.ttl"),
               f"the refusal should name capability access.ssh.ttl; it names {error.detail.get('capability')!r}")
        return
    access: SshAccess = world.last.expect_success(f"{what} (access.ssh_ttl is declared)")
    expires = epoch_seconds(access.expires_at)
    asked_at = world.require(world.lifecycle.ssh_asked_at, "request for SSH access with a lifetime")
    # Minutes of slack either way: a remote provider's clock need not agree with ours.
    expect(expires is not None and asked_at - 120 <= expires <= asked_at + seconds + 120,
           f"{what} should expire about {seconds} s from now; it says expires_at {access.expires_at!r}")


@then("the access carries a token")
def _(world: World) -> None:
    token = _ssh(world).token
    expect(isinstance(token, str) and token != "",
           f"a provider that declares access.ssh_revoke must hand out revocable tokens; the access carries {token!r}")


@when("I revoke that token")
def _(world: World) -> None:
    token = _ssh(world).token
    world.last = attempt(lambda: world.invoke("revoke ssh access", world.require_sandbox().id, token=token))


@then("the revocation succeeds")
def _(world: World) -> None:
    world.last.expect_success("revoking the token the SSH access came with")


# -- calls naming another sandbox, sent where this one's go ---------------------------------------------

@when("I delete a never-issued sandbox id, on the provider that serves the sandbox")
def _(world: World) -> None:
    never_issued = world.token("conformance-never-issued")
    with world.provider.alongside(world.require_sandbox().id):
        world.last = attempt(lambda: world.provider.delete(never_issued))


@then("the sandbox still runs commands")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    outcome = world.provider.exec(sandbox_id, ExecRequest("printf still-here"))
    expect(outcome.outcome == "ran" and outcome.stdout == b"still-here",
           f"after a delete naming another sandbox id, sandbox {sandbox_id} no longer runs commands: "
           f"{outcome.describe()}; the delete removed the wrong sandbox")
