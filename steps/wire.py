"""Steps for the wire: stdout purity, framing, envelopes, ids, batches, notifications, concurrency.

Wire-level probes go through a freshly started provider's raw channel, never the shared connection's:
enabling the raw inbox keeps every inbound message for the rest of the connection's life, and raw
sends switch off the check for answers nobody asked for.
"""

from __future__ import annotations

import concurrent.futures
import re
import time
from typing import Any

from pytest_bdd import given, parsers, then, when

from conformance.adapter import EventRoute, ExecRequest, SandboxRequest
from conformance.errors import ProviderCallError, ProviderViolation

from ._shared import (
    ANSWER_DEADLINE_S,
    NEVER_ISSUED_ID,
    RAW_ID_BASE,
    Attempt,
    World,
    answered,
    answers_counted,
    attempt,
    exchange,
    expect,
    first,
    fresh_provider,
    is_answer,
    is_notification,
    notification_line,
    preview,
    raw_channel,
    request_line,
)
from ._subject import error_of, expect_not_refused

SNAKE_CASE = re.compile(r"[a-z][a-z0-9_]*")
# Fields whose values are maps keyed by whatever the user chose, so their keys follow no naming rule.
USER_KEYED_FIELDS = frozenset({"labels", "env", "headers", "provider_config"})


def _initialize(wire) -> tuple[str, dict[str, Any]]:
    """An initialize request in the dialect's words: its method and params."""
    return wire.vocabulary.method("initialize"), wire.vocabulary.initialize_params()


def _describe(wire, sandbox_id: str) -> tuple[str, dict[str, Any]]:
    return wire.vocabulary.method("describe"), {wire.vocabulary.sandbox_field: sandbox_id}


# -- a representative session ------------------------------------------------------------------------

BUFFERED_COMMAND = "printf 'line one\\nline two\\n'; printf 'to \"stderr\"\\n' >&2"
STREAMED_COMMAND = "printf 'first\\n'; sleep 0.2; printf 'second\\n' >&2"


@when("the host takes it through a representative session")
def _(world: World) -> None:
    """initialize, create (with events), a buffered command with output on both streams, a streamed
    command, describe, delete, shutdown — and keep every message the provider wrote meanwhile."""
    fresh = fresh_provider(world)
    raw = raw_channel(world)  # from now on every inbound message is kept
    fresh.handshake(strict=False)
    route = EventRoute(route_id=world.token("conformance-route"))
    sandbox = fresh.create(SandboxRequest(labels={"conformance.wire": "session"}, events=route))
    # Output with line breaks and quotes, which a message must carry escaped.
    buffered = fresh.exec(sandbox.id, ExecRequest(command=BUFFERED_COMMAND))
    streamed = world.streams("streaming exec", fresh).exec(sandbox.id, ExecRequest(command=STREAMED_COMMAND))
    # Refused, they wrote none of the output the session is there to show: it would not be representative.
    expect_not_refused(fresh, error_of(Attempt(answer=buffered)), "the buffered command of the session")
    expect_not_refused(fresh, error_of(Attempt(answer=streamed)), "the streamed command of the session")
    fresh.describe(sandbox.id)
    fresh.delete(sandbox.id, events=route)
    try:
        fresh.shutdown()
    except (ProviderCallError, ProviderViolation):
        pass  # how a provider ends is the session feature's business; here only its output counts
    raw.wait_exit(2.0)
    # Once its stdout has ended every line it wrote is waiting here; while it has not (a process that
    # inherited it lives on), a quiet period decides when the provider has said everything.
    trail_s = 0.0 if raw.wait_output_closed(2.0) else 0.25
    messages: list[Any] = []
    while (message := raw.next_message(trail_s)) is not None:
        messages.append(message)
    expect(bool(messages), "the provider wrote nothing on stdout during the whole session")
    world.wire_probe.session_messages = messages


def _session_messages(world: World) -> list[Any]:
    return world.require(world.wire_probe.session_messages, "representative session")


@then("every line the provider wrote on stdout was a single JSON object")
def _(world: World) -> None:
    bad = [m for m in _session_messages(world) if not isinstance(m, dict)]
    expect(not bad, f"{len(bad)} stdout line(s) were not a single JSON object (logs belong on stderr, and a "
                    f"message must not contain a raw newline); the first: {first(bad)}")


@then("every message the provider wrote declares JSON-RPC version 2.0")
def _(world: World) -> None:
    version = raw_channel(world).vocabulary.jsonrpc
    bad = [m for m in _session_messages(world) if isinstance(m, dict) and m.get("jsonrpc") != version]
    expect(not bad, f"{len(bad)} message(s) do not carry jsonrpc \"2.0\"; the first: {first(bad)}")


@then("the only notifications the provider sent were those its protocol version defines")
def _(world: World) -> None:
    vocabulary = raw_channel(world).vocabulary
    allowed = vocabulary.notifications
    methods = sorted({str(m["method"]) for m in _session_messages(world) if is_notification(m)})
    unknown = [method for method in methods if method not in allowed]
    expect(not unknown, f"the provider sent notifications a version {vocabulary.protocol_version} plugin must not "
                        f"send: {unknown} (allowed: {', '.join(allowed)})")


@then("the provider sent no host/log notification")
def _(world: World) -> None:
    log = raw_channel(world).vocabulary.log_notification
    logs = [m for m in _session_messages(world) if is_notification(m) and m.get("method") == log]
    expect(not logs, f"the provider sent {len(logs)} host/log notification(s); host/log is reserved and logs "
                     f"belong on stderr. The first: {first(logs)}")


def _field_names(value: Any, path: str = "") -> list[tuple[str, str]]:
    """(JSON pointer, field name) of every object key, not descending into user-keyed maps."""
    found: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            pointer = f"{path}/{key}"
            found.append((pointer, str(key)))
            if key not in USER_KEYED_FIELDS:
                found.extend(_field_names(inner, pointer))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found.extend(_field_names(inner, f"{path}/{index}"))
    return found


@then("every field name in the provider's messages was snake_case, leaving aside the keys of labels, env, "
      "headers and provider config")
def _(world: World) -> None:
    offenders: dict[str, str] = {}
    for message in _session_messages(world):
        for pointer, name in _field_names(message):
            if SNAKE_CASE.fullmatch(name) is None:
                offenders.setdefault(name, f"{pointer} in {preview(message, 160)}")
    expect(not offenders, "field names must be snake_case; these are not: "
           + "; ".join(f"{name!r} at {where}" for name, where in list(offenders.items())[:5]))


# -- framing and envelopes ---------------------------------------------------------------------------


@given("a sandbox created through that provider")
def _(world: World) -> None:
    world.common.fresh_sandbox = fresh_provider(world).create(SandboxRequest())


def _fresh_sandbox_id(world: World) -> str:
    return world.require(world.common.fresh_sandbox, "sandbox created through the freshly started provider").id


@when("the host sends blank and whitespace-only lines followed by a request")
def _(world: World) -> None:
    marker = RAW_ID_BASE + 1
    wire = raw_channel(world)
    frame = b"\n   \n\t \t\n\n" + request_line(wire, marker, *_initialize(wire))
    world.wire_probe.marker_request_id = marker
    world.wire_probe.exchange = exchange(wire, frame, answered(marker))


@when("the host sends notifications followed by a request")
def _(world: World) -> None:
    marker = RAW_ID_BASE + 2
    wire = raw_channel(world)
    # Each would get an answer if it were a request: a result, an application error, "method not found".
    frame = b"\n".join([
        notification_line(wire, wire.vocabulary.method("health"), None),
        notification_line(wire, *_describe(wire, NEVER_ISSUED_ID)),
        notification_line(wire, "conformance/no-such-notification", {}),
        request_line(wire, marker, *_initialize(wire)),
    ])
    world.wire_probe.marker_request_id = marker
    world.wire_probe.exchange = exchange(wire, frame, answered(marker))


@then("the provider answered that request and nothing else")
def _(world: World) -> None:
    marker = world.require(world.wire_probe.marker_request_id, "request sent after the lines under test")
    messages = [m for m in _exchange(world) if is_answer(m)]
    mine = [m for m in messages if isinstance(m, dict) and m.get("id") == marker]
    others = [m for m in messages if not (isinstance(m, dict) and m.get("id") == marker)]
    expect(not others, f"the provider answered something it must skip silently: {first(others)}")
    expect(len(mine) == 1,
           f"the request (id {marker}) should be answered exactly once; it was answered {len(mine)} times")
    expect("result" in mine[0], f"the request (id {marker}) should succeed; it was answered {first(mine)}")


@when(parsers.parse("the host sends {count:d} requests in a single write, without waiting for any answer"))
def _(world: World, count: int) -> None:
    sandbox_id = _fresh_sandbox_id(world)
    wire = raw_channel(world)
    requests: dict[int, tuple[str, Any]] = {}
    for index in range(count):
        if index % 3 == 2:
            requests[RAW_ID_BASE + 100 + index] = _initialize(wire)
        else:
            requests[RAW_ID_BASE + 100 + index] = _describe(wire, sandbox_id)
    frame = b"\n".join(request_line(wire, request_id, *request) for request_id, request in requests.items())
    world.wire_probe.requests = requests
    world.wire_probe.exchange = exchange(wire, frame, answers_counted(count), quiet_s=0.2)


def _exchange(world: World) -> list[Any]:
    """Every message received after the host's last raw frame."""
    return world.require(world.wire_probe.exchange, "raw exchange with the provider")


def _requests(world: World) -> dict[int, tuple[str, Any]]:
    return world.require(world.wire_probe.requests, "requests sent in a single write")


def _answers_by_id(world: World) -> dict[Any, list[dict[str, Any]]]:
    by_id: dict[Any, list[dict[str, Any]]] = {}
    for message in _exchange(world):
        if isinstance(message, dict) and "id" in message and "method" not in message:
            by_id.setdefault(message["id"], []).append(message)
    return by_id


@then("every one of those requests was answered exactly once, under its own id")
def _(world: World) -> None:
    requests = _requests(world)
    by_id = _answers_by_id(world)
    missing = sorted(request_id for request_id in requests if request_id not in by_id)
    twice = sorted(request_id for request_id in requests if len(by_id.get(request_id, [])) > 1)
    strays = sorted(str(i) for i in by_id if i not in requests)
    expect(not missing, f"{len(missing)} of {len(requests)} requests sent together got no answer within "
                        f"{ANSWER_DEADLINE_S:.0f}s (ids {missing[:6]}); answers arrived under ids "
                        f"{sorted(map(str, by_id))[:12]}")
    expect(not twice, f"requests {twice} were answered more than once")
    expect(not strays, f"answers arrived under ids no request carried: {strays}")


@then("each answer fits its own request")
def _(world: World) -> None:
    requests = _requests(world)
    sandbox_id = _fresh_sandbox_id(world)
    protocol_version = fresh_provider(world).identity.protocol_version
    vocabulary = raw_channel(world).vocabulary
    by_id = _answers_by_id(world)
    for request_id, (method, _params) in requests.items():
        answer = by_id[request_id][0]
        result = answer.get("result")
        expect(isinstance(result, dict),
               f"{method} (id {request_id}) should succeed; it was answered {preview(answer)}")
        if method == vocabulary.method("describe"):
            status = result.get("status") if isinstance(result.get("status"), dict) else {}
            expect(status.get("id") == sandbox_id,
                   f"the answer under id {request_id} should describe sandbox {sandbox_id!r}: "
                   f"{preview(answer)}")
        else:
            expect(result.get(vocabulary.version_field) == protocol_version,
                   f"the answer under id {request_id} should be an initialize answer: {preview(answer)}")


def _large_ids(wire) -> dict[int, tuple[str, Any, str]]:
    """Requests under unsigned ids from the smallest to the largest, and the form of answer each must get."""
    return {
        0: (*_initialize(wire), "result"),  # the smallest id is an id like any other, never a notification
        2**32 + 1: (*_initialize(wire), "result"),
        2**53 + 1: (*_describe(wire, NEVER_ISSUED_ID), "error"),  # a double rounds it to 2**53
        2**64 - 1: ("conformance/no-such-method", {}, "error"),  # the largest unsigned 64-bit id
    }


@when("the host sends requests with unsigned ids from 0 to the largest, two answered with a result and two "
      "with errors")
def _(world: World) -> None:
    wire = raw_channel(world)
    large_ids = _large_ids(wire)
    frame = b"\n".join(request_line(wire, request_id, method, params)
                       for request_id, (method, params, _form) in large_ids.items())
    world.wire_probe.exchange = exchange(wire, frame, answers_counted(len(large_ids)), quiet_s=0.2)


@then("each of those requests was answered under exactly its own id")
def _(world: World) -> None:
    by_id = _answers_by_id(world)
    for request_id, (method, _params, form) in _large_ids(raw_channel(world)).items():
        answers = by_id.get(request_id, [])
        expect(len(answers) == 1,
               f"{method} sent with id {request_id} should be answered once under exactly that id; "
               f"answers arrived under ids {sorted(map(str, by_id))} (an id kept as a floating-point number "
               "loses its last digits)")
        expect(form in answers[0],
               f"{method} (id {request_id}) should be answered with {form}: {first(answers)}")


@then("each of those answers declares JSON-RPC version 2.0")
def _(world: World) -> None:
    answers = [m for m in _exchange(world) if is_answer(m)]
    expect(bool(answers), "no answers arrived")
    version = raw_channel(world).vocabulary.jsonrpc
    bad = [m for m in answers if not isinstance(m, dict) or m.get("jsonrpc") != version]
    expect(not bad, f"every answer must carry jsonrpc \"2.0\"; this one does not: {first(bad)}")


BATCH_IDS = (RAW_ID_BASE + 201, RAW_ID_BASE + 202)


@when("the host sends two requests together as one batch, followed by a request of its own")
def _(world: World) -> None:
    marker = RAW_ID_BASE + 203
    wire = raw_channel(world)
    batch = b"[" + request_line(wire, BATCH_IDS[0], *_initialize(wire)) + b"," \
        + request_line(wire, BATCH_IDS[1], *_describe(wire, NEVER_ISSUED_ID)) + b"]"
    world.wire_probe.marker_request_id = marker
    frame = batch + b"\n" + request_line(wire, marker, *_initialize(wire))
    world.wire_probe.exchange = exchange(wire, frame, answered(marker))


@then("the batch was refused with a single error object, not an array")
def _(world: World) -> None:
    messages = _exchange(world)
    arrays = [m for m in messages if isinstance(m, list)]
    expect(not arrays, "the provider wrote a JSON array; batches are not part of the protocol: "
                       f"{first(arrays)}")
    marker = world.require(world.wire_probe.marker_request_id, "request sent after the batch")
    expect(answered(marker)(messages), f"the request sent after the batch (id {marker}) got no answer")
    refusals = [m for m in messages if is_answer(m) and not (isinstance(m, dict) and m.get("id") == marker)]
    expect(len(refusals) == 1, "the batch should be refused with exactly one error object; the provider sent "
                               f"{len(refusals)} answers for it: {[preview(m, 160) for m in refusals[:3]]}")
    expect(isinstance(refusals[0], dict) and isinstance(refusals[0].get("error"), dict),
           f"the batch should be refused with an error object; the provider sent {preview(refusals[0])}")


@then("neither request inside the batch was answered on its own")
def _(world: World) -> None:
    inside = [m for m in _exchange(world) if isinstance(m, dict) and m.get("id") in BATCH_IDS]
    expect(not inside, "a request inside the batch was answered as if it had been sent alone: "
                       f"{first(inside)}")


# -- concurrency on the shared connection ------------------------------------------------------------

FIRST_CHUNK_WAIT_S = 1.5


@when("I start a streamed command that runs for about 3 seconds")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    running = world.streams("streaming exec").start_exec(
        sandbox.id, ExecRequest(command="printf 'started\\n'; sleep 3; printf 'finished\\n'", timeout_s=30.0))
    world.wire_probe.long_command = running
    # A provider that streams live shows the command has started; one that does not is given a moment.
    deadline = time.monotonic() + FIRST_CHUNK_WAIT_S
    while not running.chunks_so_far() and not running.done() and time.monotonic() < deadline:
        time.sleep(0.02)


@when("I describe the sandbox while that command is still running")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    running = world.require(world.wire_probe.long_command, "3-second streamed command")
    expect(not running.done(), "the 3-second streamed command was answered before the describe could be sent")
    world.last = attempt(lambda: world.provider.describe(sandbox.id))
    world.wire_probe.described_at = time.monotonic()
    world.wire_probe.still_running = not running.done()


@then("the description came back while the command was still running, at least a second before the "
      "command's answer")
def _(world: World) -> None:
    status = world.last.expect_success("describe while a streamed command runs")
    expect(status.id == world.require_sandbox().id, f"describe answered a status for {status.id!r}")
    outcome = world.require(world.wire_probe.long_command, "3-second streamed command").wait()
    expect(outcome.result.outcome == "ran", f"the streamed command should run: {outcome.result.describe()}")
    described_at = world.require(world.wire_probe.described_at, "describe sent while the command ran")
    gap = (outcome.answered_at or 0.0) - described_at
    expect(world.require(world.wire_probe.still_running, "describe sent while the command ran") and gap >= 1.0,
           "the describe should be answered while the 3-second command still runs, well before the command's "
           f"answer; it came back {abs(gap):.2f}s {'before' if gap >= 0 else 'after'} that answer (a quick "
           "request must not wait for a slow one)")


# -- large answers at once ---------------------------------------------------------------------------


@when(parsers.parse("I write a file of {kib:d} KiB of patterned bytes into the sandbox"))
def _(world: World, kib: int) -> None:
    data = bytes((i * 7 + i // 251) % 256 for i in range(kib * 1024))
    path = f"conformance-large-{world.token('file')}.bin"
    world.files("write a file").write(world.require_sandbox().id, path, data)
    world.wire_probe.large_file = (path, data)


@when(parsers.parse("I read that file {count:d} times at once"))
def _(world: World, count: int) -> None:
    path, _ = world.require(world.wire_probe.large_file, "large file written into the sandbox")
    files = world.files("read a file")
    sandbox_id = world.require_sandbox().id

    def read() -> Any:
        try:
            return files.read(sandbox_id, path)
        except Exception as error:  # noqa: BLE001 -- judged by the Then step, with what the others got
            return error

    with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
        world.wire_probe.large_reads = list(pool.map(lambda _: read(), range(count)))


@then("every read returned the whole file")
def _(world: World) -> None:
    _, data = world.require(world.wire_probe.large_file, "large file written into the sandbox")
    reads = world.require(world.wire_probe.large_reads, "reads sent at once")
    for index, got in enumerate(reads, start=1):
        expect(not isinstance(got, BaseException),
               f"read {index} of {len(reads)} sent at once failed: {got} — answers written at the same time must "
               "each go out as one whole line, never interleaved")
        expect(got == data, f"read {index} of {len(reads)} sent at once returned {len(got)} bytes, not the "
                            f"{len(data)} bytes written")
