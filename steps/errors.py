"""Steps for error answers, field encodings and tolerant reading (unknown fields, launch-era shapes)."""

from __future__ import annotations

import base64
import json
import posixpath
import re
import time
from typing import Any

import pytest
from pytest_bdd import given, parsers, then, when

from conformance.adapter import (
    TIMESTAMP_RFC3339_UTC,
    TIMESTAMP_SINCE_EPOCH,
    EventRoute,
    ExecOutcome,
    ExecRequest,
    SandboxHandle,
    SandboxRequest,
)
from conformance.errors import ApplicationErrorAnswer, ProviderCallError

from ._shared import (
    RAW_ID_BASE,
    World,
    answered_error_code,
    answers_counted,
    attempt,
    epoch_seconds,
    exchange,
    expect,
    fresh_provider,
    is_answer,
    preview,
    raw_channel,
)
from ._state import RawReply
from ._subject import error_of, expect_not_refused

MAX_CAUSES = 8
MAX_CAUSE_BYTES = 500
ELLIPSIS = "…"
RFC_3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})")
# RFC 3339 in UTC as upstream's reader takes it: a T or a space, up to nine fractional digits, Z or no offset
# at all (it knows no other offset).
RFC_3339_UTC = re.compile(r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[T ]([01]\d|2[0-3]):[0-5]\d:[0-5]\d"
                          r"(\.\d{1,9})?Z?")
UNKNOWN_FIELD = "conformance_field_from_the_future"

# Each request (by the neutral name of its method) with one required field left out: all its params.
INCOMPLETE_REQUESTS: dict[tuple[str, str], str] = {
    ("describe a sandbox", "sandbox id"): "describe",
    ("initialize", "protocol version"): "initialize",
    ("list sandboxes", "filter"): "list",
}


def _flawed_envelope(flaw: str, jsonrpc: str) -> dict[str, Any]:
    """A request that would succeed, but for one flaw in its envelope."""
    return {
        "no jsonrpc member": {"id": RAW_ID_BASE + 301},
        "a string id": {"jsonrpc": jsonrpc, "id": f"{RAW_ID_BASE + 302}"},
        "a fractional id": {"jsonrpc": jsonrpc, "id": RAW_ID_BASE + 303.5},
        "a negative id": {"jsonrpc": jsonrpc, "id": -(RAW_ID_BASE + 304)},
        # 7340337.0: a whole number written as a float, which an unsigned-integer id decoder refuses
        "an integral float id": {"jsonrpc": jsonrpc, "id": float(RAW_ID_BASE + 305)},
    }[flaw]


FLAWS = ("no jsonrpc member", "a string id", "a fractional id", "a negative id", "an integral float id")


def _fresh_sandbox(world: World) -> SandboxHandle:
    return world.require(world.common.fresh_sandbox, "sandbox created through the freshly started provider")


# -- invalid requests --------------------------------------------------------------------------------


@when(parsers.parse("the host asks to {request} without giving its {field}"))
def _(world: World, request: str, field: str) -> None:
    expect((request, field) in INCOMPLETE_REQUESTS,
           f"the suite knows no incomplete request {request!r}/{field!r}")
    wire = raw_channel(world)
    method = wire.vocabulary.method(INCOMPLETE_REQUESTS[(request, field)])
    world.last = attempt(lambda: wire.call(method, {}))


# The readings a provider may give a request that lacks a field, by the words of the outline.
LENIENT_READINGS = ("nothing at all", "no filter")


@then(parsers.parse('the answer is the JSON-RPC error {code:d} "{meaning}", unless the provider may read the gap '
                    'as {reading}'))
def _(world: World, code: int, meaning: str, reading: str) -> None:
    expect(reading in LENIENT_READINGS, f"the suite knows no lenient reading {reading!r}")
    if reading != "nothing at all" and world.last.error is None:
        # A lenient reader answered as if the field were at its obvious default: legal, and the answer
        # must still be an answer of that method (an object), not a stray value.
        expect(isinstance(world.last.answer, dict),
               f"read as {reading}, the request should get that method's answer, the provider sent {world.last.answer!r}")
        return
    answered = answered_error_code(world)
    expect(answered == code, f"expected JSON-RPC error {code} ({meaning}), the provider answered code {answered}",
           world.last.error if world.common.raw_reply is None else None)


@when(parsers.parse("the host sends a request with {flaw}"))
def _(world: World, flaw: str) -> None:
    expect(flaw in FLAWS, f"the suite knows no envelope flaw {flaw!r}")
    wire = raw_channel(world)
    vocabulary = wire.vocabulary
    message = {**_flawed_envelope(flaw, vocabulary.jsonrpc), "method": vocabulary.method("initialize"),
               "params": vocabulary.initialize_params()}
    frame = json.dumps(message).encode("utf-8")
    received = exchange(wire, frame, answers_counted(1), quiet_s=0.2)
    answers = [m for m in received if is_answer(m)]
    # The step shared with handshake.feature reads the first answer from here.
    world.common.raw_reply = RawReply(answers[0] if answers else None)


# -- application failures ----------------------------------------------------------------------------


@when("I describe a sandbox id that was never issued")
def _(world: World) -> None:
    never_issued = world.token("conformance-never-issued")
    world.errors.never_issued_id = never_issued
    world.last = attempt(lambda: world.provider.describe(never_issued))


def _failure(world: World) -> ProviderCallError:
    error = world.last.error
    expect(error is not None,
           f"describing an id the provider never issued should fail; it answered {world.last.answer!r}")
    assert error is not None
    return error


def _report(world: World) -> dict[str, Any]:
    error = _failure(world)
    code = world.wire(world.provider).vocabulary.application_error_code
    expect(error.code == code,
           f"an application failure must be JSON-RPC error {code}; the provider answered code "
           f"{error.code}: {error.message}", error)
    data = error.data
    expect(isinstance(data, dict) and isinstance(data.get("report"), dict),
           f"error {code} must carry data.report; the provider sent data {preview(data)}")
    return data["report"]


@then("the answer is error -32000 with a report giving the kind, the message, whether it is retryable and "
      "the causes")
def _(world: World) -> None:
    report = _report(world)
    expected_types = {"kind": str, "message": str, "retryable": bool, "causes": list}
    for name, kind in expected_types.items():
        expect(name in report, f"the error report has no {name!r}; it reads {preview(report)}")
        expect(isinstance(report[name], kind),
               f"the error report's {name!r} should be a {kind.__name__}; it is {report[name]!r}")
    bad = [cause for cause in report["causes"] if not isinstance(cause, str)]
    expect(not bad, f"every cause must be a rendered string; these are not: {bad[:3]!r}")


@then("the failure's report says retrying will not help")
def _(world: World) -> None:
    report = _report(world)
    expect(report.get("retryable") is False,
           f"a {report.get('kind')} failure cannot be fixed by retrying, so its report says retryable false "
           f"(true belongs to timeout, rate_limited and transport); it reads {preview(report)}")


@when("I ask for an optional operation the sandbox does not declare")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    operations = world.operations("an optional operation")
    for name, info in operations.catalogue.items():
        declares = sandbox.capabilities if info.needs_sandbox and sandbox.capabilities is not None \
            else world.provider.capabilities
        if declares.known(info.capability) and not declares.declares(info.capability):
            break
    else:
        pytest.skip("the provider declares every optional operation, so none can be refused as unsupported")
    world.errors.undeclared = (name, info.capability)
    target = sandbox.id if info.needs_sandbox else None
    world.last = attempt(lambda: operations.invoke(name, target))


@then("it is refused as unsupported, in a report that says retrying will not help")
def _(world: World) -> None:
    operation, capability = world.require(world.errors.undeclared, "optional operation that is not declared")
    error = world.last.error
    expect(isinstance(error, ApplicationErrorAnswer) and error.kind == "unsupported",
           f"'{operation}' ({capability} is not declared) should be refused as unsupported; it answered "
           f"{error if error is not None else preview(world.last.answer)}", error, "unsupported")
    assert isinstance(error, ApplicationErrorAnswer)
    report = error.data.get("report") if isinstance(error.data, dict) else None
    retryable = report.get("retryable") if isinstance(report, dict) else None
    expect(retryable is False,
           f"the unsupported refusal of '{operation}' says retryable {retryable!r}: a capability the provider does "
           "not declare stays undeclared for the connection (capabilities are immutable), so retrying cannot "
           "help and the report says retryable false (true belongs to timeout, rate_limited and transport)")


@when("I stop the sandbox and run a command in it")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    world.provider.stop(sandbox_id)
    world.last = attempt(lambda: world.provider.exec(sandbox_id, ExecRequest("true", timeout_s=10.0)))


# The Action set of v1 section 10 (snapshot_sandbox is an alias of snapshot).
ACTIONS = frozenset({"create", "attach", "start", "stop", "delete", "activate", "deactivate", "pause", "resume",
                     "archive", "fork", "resize", "snapshot", "snapshot_sandbox", "recover", "undelete",
                     "refresh_activity", "set_timers", "set_labels", "update_network", "unknown"})


@when("I stop the sandbox, then pause it and run a command in it")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    world.provider.stop(sandbox_id)
    world.errors.refusals = [
        ("pause", attempt(lambda: world.invoke("pause", sandbox_id))),
        ("command", attempt(lambda: world.provider.exec(sandbox_id, ExecRequest("true", timeout_s=10.0)))),
    ]


@then("each of those refused as invalid_state names stopped as the current state, and the pause names the action "
      "pause")
def _(world: World) -> None:
    refusals = world.require(world.errors.refusals, "calls in the stopped sandbox")
    pause = next(outcome for what, outcome in refusals if what == "pause")
    # The pause is declared (the scenario's @cap: gate): refused as unknown or unsupported, it never met the
    # stopped sandbox, and the scenario's subject never happened.
    expect_not_refused(world.provider, error_of(pause), "the pause", "lifecycle.pause")
    judged = 0
    for what, outcome in refusals:
        error = error_of(outcome)
        if not (isinstance(error, ApplicationErrorAnswer) and error.kind == "invalid_state"):
            continue  # it ran, or was refused some other way: other scenarios judge that
        judged += 1
        detail = error.detail or {}
        expect(detail.get("current") == "stopped",
               f"the {what} was refused as invalid_state naming current state {detail.get('current')!r}; the sandbox "
               "is stopped, and detail.current names the state it is in")
        expect(detail.get("action") in ACTIONS,
               f"the {what} was refused as invalid_state naming action {detail.get('action')!r}, which is not one of "
               f"the protocol's actions ({', '.join(sorted(ACTIONS))})")
        if what == "pause":
            expect(detail.get("action") == "pause", f"the refused pause names action {detail.get('action')!r}")
    if not judged:
        pytest.skip("neither the pause nor the command in the stopped sandbox was refused as invalid_state (they "
                    "ran, or were refused otherwise: other scenarios judge that), so there is no such refusal "
                    "whose detail could be judged")


@then("the command ran, or was refused in a report that says retrying will not help")
def _(world: World) -> None:
    error = world.last.error
    answer = world.last.answer
    if error is None and isinstance(answer, ExecOutcome):
        error = answer.error  # an infra outcome carries the refusal
    if error is None:
        return  # a provider that starts the sandbox again, or runs the command anyway, is honest too
    data = error.data if isinstance(error.data, dict) else {}
    report = data.get("report") if isinstance(data.get("report"), dict) else {}
    kind = report.get("kind")
    if kind in ("timeout", "rate_limited", "transport", "provider"):
        return  # those may be retryable
    expect(report.get("retryable") is False,
           f"a {kind} refusal cannot be fixed by retrying, so its report says retryable false; "
           f"it reads {preview(report)}")


@then("the report's kind is one of the protocol's stable error kinds")
def _(world: World) -> None:
    kind = _report(world).get("kind")
    kinds = world.wire(world.provider).vocabulary.error_kinds
    expect(kind in kinds, f"error kind {kind!r} is not one of the protocol's kinds: {', '.join(sorted(kinds))}")


@then("the error's message is the report's message")
def _(world: World) -> None:
    error = _failure(world)
    report_message = _report(world).get("message")
    expect(error.message == report_message,
           f"the error's message {error.message!r} differs from the report's message {report_message!r}")


@then(parsers.parse("the report lists at most {count:d} causes, each at most {size:d} bytes plus an "
                    "ellipsis"))
def _(world: World, count: int, size: int) -> None:
    causes = _report(world).get("causes")
    expect(isinstance(causes, list), f"the error report carries no list of causes: {causes!r}")
    expect(len(causes) <= count, f"the error report lists {len(causes)} causes; at most {count} are allowed")
    for cause in causes:
        text = str(cause)
        body = text.removesuffix(ELLIPSIS)
        expect(len(body.encode("utf-8")) <= size,
               f"a cause is {len(body.encode('utf-8'))} bytes long; each is cut to {size} bytes (plus "
               f"{ELLIPSIS!r}): {preview(text, 120)}")


@then("the failure's kind is not_found")
def _(world: World) -> None:
    error = _failure(world)
    expect(isinstance(error, ApplicationErrorAnswer) and error.kind == "not_found",
           f"describing an id the provider never issued should fail with kind not_found; it answered: "
           f"{error}", error)


@then(parsers.parse('the failure\'s detail names the resource "{resource}" and the id that was asked for'))
def _(world: World, resource: str) -> None:
    error = _failure(world)
    assert isinstance(error, ApplicationErrorAnswer)
    asked = world.require(world.errors.never_issued_id, "never-issued sandbox id")
    detail = error.detail
    expect(detail.get("resource") == resource,
           f"a not_found failure's detail should name resource {resource!r}; it reads {preview(detail)}")
    expect(detail.get("id") == asked,
           f"a not_found failure's detail should name the id {asked!r}; it reads {preview(detail)}")


# -- command output stays out of error texts ---------------------------------------------------------

ENDINGS = {
    "fails": ("exit 3", 30.0),
    "times out": ("sleep 10", 1.0),
}


@when(parsers.parse("I run a command that writes a generated marker to stdout and stderr, then {ending}"))
def _(world: World, ending: str) -> None:
    expect(ending in ENDINGS, f"the suite knows no command ending {ending!r}")
    marker = world.token("conformance-marker")
    world.errors.output_marker = marker
    tail, timeout_s = ENDINGS[ending]
    command = f"printf '%s' '{marker}'; printf '%s' '{marker}' >&2; {tail}"
    sandbox = world.require_sandbox()
    request = ExecRequest(command=command, timeout_s=timeout_s)
    world.last = attempt(lambda: world.provider.exec(sandbox.id, request))


@then("the provider reported a result, or an error whose message and report do not contain the marker")
def _(world: World) -> None:
    error = world.last.error
    if error is None and world.last.answer.outcome == "infra":
        error = world.last.answer.error
    if error is None:
        return  # a result: the output is where it belongs
    marker = world.require(world.errors.output_marker, "command writing a generated marker")
    data = error.data if isinstance(error.data, dict) else {}
    report_text = json.dumps(data.get("report"), ensure_ascii=False)
    encoded = base64.b64encode(marker.encode()).decode()
    for where, text in (("message", error.message), ("report", report_text)):
        expect(marker not in text and encoded not in text,
               f"the command's output appears in the error's {where}; raw output belongs in detail.exec only: "
               f"{preview(text)}")


# -- tolerant reading --------------------------------------------------------------------------------


@when("the host describes that sandbox, adding a field the protocol does not define")
def _(world: World) -> None:
    sandbox_id = _fresh_sandbox(world).id
    wire = raw_channel(world)
    params = {wire.vocabulary.sandbox_field: sandbox_id, UNKNOWN_FIELD: {"added_in": "a later release"}}
    world.last = attempt(lambda: wire.call(wire.vocabulary.method("describe"), params))


@then("the answer describes that sandbox")
def _(world: World) -> None:
    result = world.last.expect_success("describe with a field the provider does not know")
    sandbox_id = _fresh_sandbox(world).id
    described = world.wire(fresh_provider(world)).described(result)
    expect(described.id == sandbox_id, f"the answer should describe sandbox {sandbox_id!r}: {preview(result)}")


def _run_on_fresh(world: World, request: ExecRequest) -> None:
    sandbox_id = _fresh_sandbox(world).id
    world.last = attempt(lambda: fresh_provider(world).exec(sandbox_id, request))


@when(parsers.re(r"the host runs `(?P<command>.+)` there, adding undefined fields beside the command's spec "
                 r"and inside it$"))
def _(world: World, command: str) -> None:
    _run_on_fresh(world, ExecRequest(command, undefined_fields={UNKNOWN_FIELD: {"added_in": "a later release"}}))


@when(parsers.re(r"the host runs `(?P<command>.+)` there with a spec giving only the command and its "
                 r"environment$"))
def _(world: World, command: str) -> None:
    _run_on_fresh(world, ExecRequest(command, minimal_spec=True))


@then(parsers.parse('the command\'s answer is a result whose stdout is "{text}"'))
def _(world: World, text: str) -> None:
    outcome: ExecOutcome = world.last.expect_success("the command")
    expect(outcome.outcome == "ran", f"the command should succeed, but the provider answered: {outcome.error}")
    expect(outcome.exit_code == 0 and outcome.stdout == text.encode(),
           f"expected exit code 0 and stdout {text!r}; the provider answered {outcome.describe()}")


@when("the host creates another sandbox whose spec carries a field the protocol does not define")
def _(world: World) -> None:
    fresh = fresh_provider(world)
    request = SandboxRequest(extra={UNKNOWN_FIELD: {"added_in": "a later release"}})
    world.last = attempt(lambda: fresh.create(request))


@given("a sandbox created through that provider, its labels then set to none")
def _(world: World) -> None:
    fresh = fresh_provider(world)
    sandbox = fresh.create(SandboxRequest())
    world.common.fresh_sandbox = sandbox
    world.facet("operations", "set labels", fresh).invoke("set labels", sandbox.id, labels={})


@when("the host lists sandboxes with an empty label map, and again with the label map null")
def _(world: World) -> None:
    wire = raw_channel(world)
    world.errors.listings = [
        (label, attempt(lambda labels=labels: wire.call(wire.vocabulary.method("list"), wire.list_params(labels))))
        for label, labels in (("an empty label map", {}), ("the label map null", None))]


@then("both listings include that sandbox")
def _(world: World) -> None:
    sandbox_id = _fresh_sandbox(world).id
    wire = world.wire(fresh_provider(world))
    for label, listing in world.require(world.errors.listings, "listings by an empty and a null label map"):
        listed = [status.id for status in wire.listed(listing.expect_success(f"a list with {label}"))]
        expect(sandbox_id in listed, f"a list with {label} should list every sandbox, unlabelled sandbox {sandbox_id} "
                                     f"too; it listed {listed}")


@then("that sandbox is created")
def _(world: World) -> None:
    handle = world.last.expect_success("create with a spec field the provider does not know")
    expect(bool(handle.id), f"the create answered a handle without an id: {handle!r}")


@given("a file in that sandbox with generated content")
def _(world: World) -> None:
    sandbox = _fresh_sandbox(world)
    path = "conformance-launch-era.txt"
    if sandbox.working_directory:
        path = posixpath.join(sandbox.working_directory, path)
    content = "\n".join(world.faker.sentences(nb=4)).encode("utf-8")
    world.files("write a file", fresh_provider(world)).write(sandbox.id, path, content)
    world.errors.launch_era_file = (path, content)


@when("the host reads that file giving only the sandbox and the path")
def _(world: World) -> None:
    path, _content = world.require(world.errors.launch_era_file, "file with generated content")
    files = world.files("read a file", fresh_provider(world))
    sandbox_id = _fresh_sandbox(world).id
    world.last = attempt(lambda: files.read(sandbox_id, path))  # no offset, no length


@then("the answer holds the file's whole content")
def _(world: World) -> None:
    path, content = world.require(world.errors.launch_era_file, "file with generated content")
    data = world.last.expect_success(f"reading {path} without offset or length")
    expect(data == content, f"expected the whole file, {len(content)} bytes; the provider answered "
                            f"{len(data)} bytes: {data[:120]!r}")


# -- encodings ---------------------------------------------------------------------------------------


@when("I create a sandbox whose events are routed to the suite")
def _(world: World) -> None:
    route = EventRoute(route_id=world.token("conformance-route"))
    world.errors.route = route
    world.create_sandbox(events=route)


@then("the command's duration is a whole number of milliseconds")
def _(world: World) -> None:
    raw = world.ran().raw
    duration = raw.get("duration_ms") if isinstance(raw, dict) else None
    expect(isinstance(duration, int) and not isinstance(duration, bool) and duration >= 0,
           f"duration_ms must be a whole, non-negative number of milliseconds; the provider wrote "
           f"{duration!r}")


def _is_duration(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    secs, nanos = value.get("secs"), value.get("nanos")
    whole = all(isinstance(v, int) and not isinstance(v, bool) for v in (secs, nanos))
    return whole and secs >= 0 and 0 <= nanos <= 999_999_999


@then("every duration in the sandbox's events is whole seconds plus nanoseconds below one second")
def _(world: World) -> None:
    route = world.require(world.errors.route, "sandbox whose events are routed to the suite")
    for received in route.received:
        if "duration" in received.event:
            expect(_is_duration(received.event["duration"]),
                   f"an event's duration must be whole secs plus nanos below one second; the {received.type} "
                   f"event says {received.event['duration']!r}")


def _timestamp_problem(value: Any, forms: tuple[str, ...]) -> str | None:
    """Why ``value`` is no timestamp in one of ``forms`` (the dialect's), or None when it is one or absent."""
    if value is None:
        return None
    readable = f"this protocol version's readers decode {' or '.join(forms)}"
    if isinstance(value, str):
        if TIMESTAMP_RFC3339_UTC in forms and RFC_3339_UTC.fullmatch(value) is not None:
            return None
        if RFC_3339.fullmatch(value) is not None:
            return f"an RFC 3339 string those readers cannot decode: {readable}"
        return "a string, not a timestamp"
    if isinstance(value, dict):
        secs, nanos = value.get("secs_since_epoch"), value.get("nanos_since_epoch")
        whole = all(isinstance(v, int) and not isinstance(v, bool) for v in (secs, nanos))
        if TIMESTAMP_SINCE_EPOCH not in forms:
            return f"an object: {readable}"
        if whole and secs >= 0 and 0 <= nanos <= 999_999_999:
            return None
        return "an object without whole secs_since_epoch and nanos_since_epoch (below one second)"
    return f"a {type(value).__name__}"


@then("each timestamp in the description is absent or in a form its protocol version defines")
def _(world: World) -> None:
    status = world.last.expect_success("describe")
    raw = status.raw if isinstance(status.raw, dict) else {}
    forms = world.wire(world.provider).vocabulary.timestamp_forms
    for name in ("created_at", "updated_at"):
        problem = _timestamp_problem(raw.get(name), forms)
        expect(problem is None, f"{name} is {problem}: {raw.get(name)!r}")


# Clock skew allowed between the provider and the suite: a remote provider's clock may be off, never by a day.
CLOCK_SKEW_S = 86_400


@then("no timestamp in the description lies in the future")
def _(world: World) -> None:
    status = world.last.expect_success("describe")
    raw = status.raw if isinstance(status.raw, dict) else {}
    now = time.time()
    for name in ("created_at", "updated_at"):
        value = raw.get(name)
        seconds = epoch_seconds(value)
        if seconds is None:
            continue  # absent, or no timestamp: the step before judges that
        # Seconds since the epoch count seconds: milliseconds there put a sandbox made just now some 50,000 years ahead
        expect(seconds <= now + CLOCK_SKEW_S,
               f"{name} is {value!r}, {seconds - now:.0f} s after the suite's clock, for a sandbox made moments ago; "
               "it counts seconds since the epoch (milliseconds, say, are not seconds)")
