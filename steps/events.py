"""Steps for control-plane events: the host/event notifications an operation sends when it asks for them.

Every scenario of events.feature runs against a freshly started provider, so its event source is new
(sequence numbers start at 1) and nothing else shares the connection.
"""

from __future__ import annotations

import base64
import json
import time
from collections import defaultdict
from typing import Any

import pytest
from pytest_bdd import given, parsers, then, when

from conformance.adapter import EventRoute, ExecRequest, ReceivedEvent, SandboxRequest
from conformance.errors import CapabilityNotDeclared

from ._shared import World, attempt, caught_up, epoch_seconds, expect, fresh_provider, raw_channel, settle

TERMINAL = ("operation_completed", "operation_failed")
# A terminal event that arrives after its operation's answer fails a scenario of its own; the other
# scenarios wait this long for it, so that each judges only what it is about.
LATE_EVENT_GRACE_S = 1.0
# How long the suite waits for events of earlier operations, at most: a provider answering a health call sent
# after them has sent them by its answer (caught_up, settle), and the wait ends there.
QUIET_S = 0.3


def _new_route(world: World, action: str, route_id: str | None = None, correlation_id: str | None = None,
               send_correlation: bool = True) -> EventRoute:
    """A route for ``action``; ids not given are generated, and ``send_correlation=False`` asks with none."""
    if route_id is None:
        route_id = world.token("conformance-route")
    if correlation_id is None and send_correlation:
        correlation_id = world.token("conformance-corr")
    route = EventRoute(route_id=route_id, correlation_id=correlation_id)
    world.event_watch.operations.append((action, route))
    world.event_watch.settled = False
    return route


def _operation(world: World) -> tuple[str, EventRoute]:
    operations = world.event_watch.operations
    expect(bool(operations), "no operation has asked for events yet")
    return operations[-1]


def _settle(world: World) -> None:
    """Wait (briefly) until every operation that asked for events has its terminal event."""
    if world.event_watch.settled:
        return
    deadline = time.monotonic() + LATE_EVENT_GRACE_S
    routes = [route for _, route in world.event_watch.operations]
    while time.monotonic() < deadline and not all(any(e.type in TERMINAL for e in r.received) for r in routes):
        time.sleep(0.02)
    world.event_watch.settled = True


def _describe(events: list[ReceivedEvent]) -> str:
    return "[" + ", ".join(f"{e.type}/{e.action} op={e.event.get('operation_id')!r}" for e in events) + "]" \
        if events else "no events"


def _all_received(world: World) -> list[ReceivedEvent]:
    """Every event of every route the scenario opened, in the order they arrived."""
    _settle(world)
    received = [event for _, route in world.event_watch.operations for event in route.received]
    return sorted(received, key=lambda e: e.sequence)


def _create_plain(world: World) -> None:
    world.sandbox = fresh_provider(world).create(SandboxRequest())


# -- operations that ask for events --------------------------------------------------------------


@when("I create a sandbox asking for events")
def _(world: World) -> None:
    world.sandbox = fresh_provider(world).create(SandboxRequest(events=_new_route(world, "create")))


@when("I attach to a sandbox asking for events")
def _(world: World) -> None:
    _create_plain(world)
    route = _new_route(world, "attach")
    fresh_provider(world).attach(world.require_sandbox().id, events=route)


@when("I delete a sandbox asking for events")
def _(world: World) -> None:
    # The sandbox is created with events of its own (a route the scenario does not judge): an early-v1
    # provider reports the delete on the route of the handle's create, a late-v1 one on the delete's own.
    setup = EventRoute(route_id=world.token("conformance-setup-route"),
                       correlation_id=world.token("conformance-setup-corr"))
    world.sandbox = fresh_provider(world).create(SandboxRequest(events=setup))
    route = _new_route(world, "delete")
    fresh_provider(world).delete(world.require_sandbox().id, events=route)


@when("I undelete a sandbox asking for events")
def _(world: World) -> None:
    fresh = fresh_provider(world)
    if not fresh.capabilities.declares("lifecycle.undelete"):
        raise CapabilityNotDeclared("lifecycle.undelete")
    operations = world.facet("operations", "undelete", fresh)
    _create_plain(world)
    fresh.delete(world.require_sandbox().id)
    route = _new_route(world, "undelete")
    operations.invoke("undelete", world.require_sandbox().id, events=route)


@when("I delete a snapshot asking for events")
def _(world: World, request: pytest.FixtureRequest) -> None:
    fresh = fresh_provider(world)
    for needed in ("snapshots", "snapshots.filesystem"):
        if not fresh.capabilities.declares(needed):
            raise CapabilityNotDeclared(needed)
    operations = world.facet("operations", "delete a snapshot", fresh)
    _create_plain(world)
    snapshot = operations.invoke("create a snapshot", world.require_sandbox().id)
    request.addfinalizer(lambda: operations.invoke("delete a snapshot", None, snapshot_id=snapshot.id))
    route = _new_route(world, "delete")
    operations.invoke("delete a snapshot", None, snapshot_id=snapshot.id, events=route)


@when("I stop that sandbox and start it again")
def _(world: World) -> None:
    fresh = fresh_provider(world)
    sandbox_id = world.require_sandbox().id
    fresh.stop(sandbox_id)
    fresh.start(sandbox_id)


@when("I archive that sandbox and start it again")
def _(world: World) -> None:
    fresh = fresh_provider(world)
    sandbox_id = world.require_sandbox().id
    world.facet("operations", "archive", fresh).invoke("archive", sandbox_id)
    fresh.start(sandbox_id)


@then(parsers.parse("every event on the create's route names {actions} as its action"))
def _(world: World, actions: str) -> None:
    allowed = {a.strip() for a in actions.replace(" or ", ",").split(",") if a.strip()}
    routes = dict(world.event_watch.operations)
    caught_up(fresh_provider(world), QUIET_S, trail_s=QUIET_S)  # events of the later operations, if reported on this route
    received = routes["create"].received
    wrong = [(e.type, e.action) for e in received if e.action not in allowed and e.type != "state_observed"]
    expect(not wrong, f"events on the create's route name actions {wrong}, but only {sorted(allowed)} were "
                      f"performed: {_describe(received)}")
    # When the later operations are reported here at all, each is reported under its own action.
    later = {e.event.get("operation_id"): e.action for e in received
             if e.action != "create" and e.type and e.type.startswith("operation_")}
    if later:
        expect(sorted(later.values()) == sorted(allowed - {"create"}),
               f"the operations after the create were {sorted(allowed - {'create'})}, but their events on the create's "
               f"route name {sorted(later.values())}: {_describe(received)}")


@when("I pause that sandbox and resume it")
def _(world: World) -> None:
    fresh = fresh_provider(world)
    sandbox_id = world.require_sandbox().id
    operations = world.facet("operations", "pause", fresh)
    operations.invoke("pause", sandbox_id)
    operations.invoke("resume", sandbox_id)


@when("I create a snapshot of a sandbox asking for events")
def _(world: World, request: pytest.FixtureRequest) -> None:
    fresh = fresh_provider(world)
    _create_plain(world)
    operations = world.facet("operations", "create a snapshot", fresh)
    route = _new_route(world, "snapshot")
    answer = operations.invoke("create a snapshot", world.require_sandbox().id, events=route)
    world.event_watch.snapshot_id = answer.id
    request.addfinalizer(lambda: operations.invoke("delete a snapshot", None, snapshot_id=answer.id))


@then("the snapshot's terminal event names the snapshot by the id the provider assigned")
def _(world: World) -> None:
    _action, route = _operation(world)
    _settle(world)
    terminal = [e for e in route.received if e.type in TERMINAL]
    expect(bool(terminal), f"the snapshot's creation emitted no terminal event: {_describe(route.received)}")
    subject = terminal[-1].event.get("subject") or {}
    snapshot_id = world.require(world.event_watch.snapshot_id, "snapshot created asking for events")
    expect(subject.get("type") == "snapshot" and subject.get("id") == snapshot_id,
           f"the events of creating snapshot {snapshot_id!r} should be about it (subject type snapshot, its id); "
           f"the subject is {subject!r}")


@then("any operation_failed it emitted arrived before the refusal")
def _(world: World) -> None:
    if not world.provider.terminal_event_precedes_answer:
        return  # this dialect lets the answer come before the terminal event: only the events' own order holds
    _, route = _operation(world)
    answered = [sequence for _, sequence in route.answers]
    for event in route.received:
        if event.type == "operation_failed" and answered:
            expect(event.sequence < answered[0],
                   f"the operation_failed arrived after the refusal (inbound #{event.sequence} vs answer "
                   f"#{answered[0]}); a failed operation's final event is written before its answer too")


@when("I attach to the sandbox asking for events")
def _(world: World) -> None:
    fresh_provider(world).attach(world.require_sandbox().id, events=_new_route(world, "attach"))


@when("I delete the sandbox asking for events")
def _(world: World) -> None:
    fresh_provider(world).delete(world.require_sandbox().id, events=_new_route(world, "delete"))


@when("I delete the sandbox again asking for events")
def _(world: World) -> None:
    fresh_provider(world).delete(world.require_sandbox().id, events=_new_route(world, "delete-again"))


@when("I attach to a never-issued sandbox id asking for events")
def _(world: World) -> None:
    route = _new_route(world, "attach")
    never_issued = world.token("conformance-never-issued")
    world.last = attempt(lambda: fresh_provider(world).attach(never_issued, events=route))


ODD_IDS: dict[str, tuple[str, str | None]] = {
    # kind: (route id, correlation id); {token} is replaced by a generated token; None: the events object
    # carries no correlation_id at all
    "plain": ("conformance-route-{token}", "conformance-corr-{token}"),
    "padded": ("  conformance-route-{token}  ", "  conformance-corr-{token}\t"),
    "unicode": ("Route ✓ {token} 日本", "Corrélation ✓ {token} ☃"),
    "uri-like": ("urn:Conformance:Route/{token}?X=1#Frag", "https://example.invalid/Corr/{token}?a=b&c=d"),
    "json-looking": ('{{"route": "{token}"}}', '["corr", "{token}", null]'),
    "empty-correlation": ("conformance-route-{token}", ""),
    "absent-correlation": ("conformance-route-{token}", None),
}


@when(parsers.re(r"I create a sandbox asking for events with (?:a|an) (?P<kind>[a-z-]+) route id and "
                 r"correlation id$"))
def _(world: World, kind: str) -> None:
    expect(kind in ODD_IDS, f"the suite knows no kind of id called {kind!r}")
    token = world.faker.pystr(min_chars=8, max_chars=8)
    route_template, correlation_template = ODD_IDS[kind]
    route_id = route_template.format(token=token)
    correlation_id = None if correlation_template is None else correlation_template.format(token=token)
    route = _new_route(world, "create", route_id=route_id, correlation_id=correlation_id,
                       send_correlation=correlation_id is not None)
    world.sandbox = fresh_provider(world).create(SandboxRequest(events=route))


# -- what the events say -------------------------------------------------------------------------


def _started_and_terminal(action: str, events: list[ReceivedEvent]) -> tuple[ReceivedEvent, ReceivedEvent]:
    started = [e for e in events if e.type == "operation_started"]
    terminal = [e for e in events if e.type in TERMINAL]
    emitted = _describe(events)
    expect(len(started) == 1, f"the {action} should emit exactly one operation_started; it emitted {emitted}")
    expect(len(terminal) == 1,
           f"the {action} should emit exactly one operation_completed or operation_failed; it emitted {emitted}")
    operation_ids = {e.event.get("operation_id") for e in events if e.type and e.type.startswith("operation_")}
    expect(len(operation_ids) == 1 and None not in operation_ids and "" not in operation_ids,
           f"every event of the {action} should share one operation_id; they carry "
           f"{sorted(map(repr, operation_ids))}")
    return started[0], terminal[0]


@then("the operation emitted operation_started and exactly one terminal event, all sharing one operation id")
def _(world: World) -> None:
    action, route = _operation(world)
    _settle(world)
    _started_and_terminal(action, route.received)


@then("every event of it names the provider's kind, and those on its own route carry its own correlation id")
def _(world: World) -> None:
    action, route = _operation(world)
    kind = fresh_provider(world).identity.kind
    for event in route.received:
        expect(event.event.get("provider") == kind,
               f"the {event.type} of the {action} names provider {event.event.get('provider')!r}; the provider's kind "
               f"is {kind!r}")
        if event.route_id == route.route_id:
            expect(event.event.get("correlation_id") == route.correlation_id,
                   f"the {event.type} of the {action}, on the {action}'s own route, carries correlation_id "
                   f"{event.event.get('correlation_id')!r}; the {action} asked with {route.correlation_id!r}")


@then(parsers.re(r"its terminal event is (?P<terminal>operation_completed|operation_failed)$"))
def _(world: World, terminal: str) -> None:
    action, route = _operation(world)
    ends = [e for e in route.received if e.type in TERMINAL]
    expect(bool(ends) and ends[0].type == terminal,
           f"the {action} should end with {terminal}; it emitted {_describe(route.received)}")
    expect(ends[0].action == action, f"the terminal event of the {action} names action {ends[0].action!r}")


@then("the attach is refused, and any events it emitted are operation_started and exactly one operation_failed, "
      "sharing one operation id")
def _(world: World) -> None:
    action, route = _operation(world)
    error = world.last.expect_application_error("attach to a sandbox id that was never issued")
    expect(error.kind == "not_found", f"attach to a never-issued id should be not_found; it answered {error}")
    _settle(world)
    if not route.received:
        return  # refused before it was accepted: no operation, no events
    _, terminal = _started_and_terminal(action, route.received)
    expect(terminal.type == "operation_failed",
           f"the attach failed, so its terminal event must be operation_failed; it emitted "
           f"{_describe(route.received)}")
    # A failure is an event like the others: it carries the request's correlation id and its own number.
    for event in route.received:
        expect(event.event.get("correlation_id") == route.correlation_id,
               f"the {event.type} event of the failed {action} carries correlation_id "
               f"{event.event.get('correlation_id', '(none)')!r}; the request gave {route.correlation_id!r}")
    numbers = [((e.event.get("id") or {}).get("source_id"), (e.event.get("id") or {}).get("sequence"))
               for e in route.received]
    expect(len(set(numbers)) == len(numbers),
           f"every event of the failed {action} has a sequence number of its own; they carry {numbers}")


@then("the repeated delete reported its start and exactly one end wherever the first delete reported its own")
def _(world: World) -> None:
    _settle(world)
    routes = dict(world.event_watch.operations)
    first, again = routes["delete"], routes["delete-again"]
    if not any(event.route_id == first.route_id for event in first.received):
        # Reported on the handle's create route (early v1), or not at all: a handle that is gone has no route
        # left for a repeated delete, so silence is all it can give. Whatever it did send must still pair up.
        if again.received:
            _started_and_terminal("repeated delete", again.received)
        return
    # The first delete reported on the route its own request gave (late v1): the repeated delete is an
    # accepted operation too (it succeeds), and must report on its route the same way.
    _started_and_terminal("repeated delete", [e for e in again.received])
    ends = [e for e in again.received if e.type in TERMINAL]
    expect(ends[0].type == "operation_completed",
           f"the repeated delete succeeded, so its terminal event must be operation_completed; it emitted "
           f"{_describe(again.received)}")


@then("each operation's terminal event arrived before its answer")
def _(world: World) -> None:
    _settle(world)
    expect(bool(world.event_watch.operations), "no operation has asked for events yet")
    for action, route in world.event_watch.operations:
        answered = [sequence for _, sequence in route.answers]
        expect(bool(answered), f"the {action} has no recorded answer")
        terminal = [e for e in route.received if e.type in TERMINAL]
        expect(bool(terminal), f"the {action} emitted no terminal event: {_describe(route.received)}")
        expect(terminal[0].sequence < answered[0],
               f"the {action}'s {terminal[0].type} arrived after the {action}'s answer (inbound message "
               f"#{terminal[0].sequence} vs answer #{answered[0]}); the final event must be written first")


@then("the events of each source are numbered from 1, up by exactly one per event")
def _(world: World) -> None:
    by_source: dict[Any, list[int]] = defaultdict(list)
    for event in _all_received(world):
        identity = event.event.get("id") or {}
        by_source[identity.get("source_id")].append(identity.get("sequence"))
    expect(bool(by_source), "no events arrived")
    for source, sequences in by_source.items():
        expected = list(range(1, len(sequences) + 1))
        expect(sorted(sequences) == expected,
               f"the events of source {source!r} carry sequence numbers {sorted(sequences)}; a new source numbers "
               f"its events {expected}")


@then("each operation id belongs to exactly one operation: one operation_started and one terminal event")
def _(world: World) -> None:
    caught_up(fresh_provider(world), QUIET_S, trail_s=QUIET_S)  # events of the later operations, if reported on the create's route
    received = _all_received(world)
    by_operation: dict[Any, list[ReceivedEvent]] = defaultdict(list)
    for event in received:
        if event.type and event.type.startswith("operation_"):
            by_operation[event.event.get("operation_id")].append(event)
    expect(len(by_operation) >= 2, f"the create and the delete both asked for events, but the events name "
                                   f"{len(by_operation)} operation id(s): {_describe(received)}")
    for operation_id, events in by_operation.items():
        started = [e for e in events if e.type == "operation_started"]
        terminal = [e for e in events if e.type in TERMINAL]
        actions = sorted({str(e.action) for e in events})
        expect(len(started) == 1 and len(terminal) == 1,
               f"operation id {operation_id!r} carries {len(started)} operation_started and {len(terminal)} terminal "
               f"events (actions {actions}); an operation id names one operation, so each operation reported "
               f"needs an id of its own: {_describe(events)}")


@then("the events arrived in the order of their sequence numbers, each operation's start before its end")
def _(world: World) -> None:
    received = _all_received(world)
    expect(bool(received), "no events arrived")
    arrival = [(e.event.get("id") or {}).get("sequence") for e in received]
    last_seen: dict[Any, int] = {}
    started: set[Any] = set()
    for event in received:
        identity = event.event.get("id") or {}
        source, sequence = identity.get("source_id"), identity.get("sequence")
        expect(sequence is not None and sequence > last_seen.get(source, 0),
               f"event #{sequence} of source {source!r} arrived after event #{last_seen.get(source)}; events must "
               f"be delivered in order. Arrival order: {arrival}")
        last_seen[source] = sequence
        operation_id = event.event.get("operation_id")
        if event.type == "operation_started":
            started.add(operation_id)
        elif event.type in TERMINAL:
            expect(operation_id in started,
                   f"the {event.type} of operation {operation_id!r} ({event.action}) arrived before its "
                   "operation_started")


@then("every event of the create carries that route id and that correlation id, exactly as given")
def _(world: World) -> None:
    action, route = _operation(world)
    _settle(world)
    expect(len(route.received) >= 2,
           f"the {action} asked for events on route id {route.route_id!r}, but {len(route.received)} event(s) "
           "arrived with exactly that route id; a provider passes route_id back exactly as it was given")
    for event in route.received:
        if route.correlation_id is None:
            # v1 section 10: correlation_id is "the optional consumer value from the events request object".
            # Asked without one, an event carries none (absent, or null as upstream's readers accept); a
            # value there is one the host never sent (a route id copied over, a generated id).
            expect(event.event.get("correlation_id") is None,
                   f"the {event.type} event of the {action} carries correlation_id "
                   f"{event.event.get('correlation_id')!r}, but the request's events object gave none: an event carries "
                   "the host's correlation id or none, never one the provider made up")
            continue
        expect("correlation_id" in event.event and event.event["correlation_id"] == route.correlation_id,
               f"the {event.type} event of the {action} carries correlation_id "
               f"{event.event.get('correlation_id', '(none)')!r}; the request gave {route.correlation_id!r}, which "
               "every event must carry unchanged")


# How far an event's date may stray from the host's clock at its arrival: a provider's clock need not agree
# with ours to the second (it may even date events by a remote service's clock), but a date off by more than
# this is not read from a wall clock at all (time since boot, a stopwatch, local time written as UTC).
CLOCK_SLACK_S = 10 * 60


def _utc(seconds: float) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))
    except (OverflowError, OSError, ValueError):
        return "not a representable date"


@then("every event is dated by the wall clock, at about the time it arrived")
def _(world: World) -> None:
    events = _all_received(world)
    expect(bool(events), "no event arrived for the operations that asked for events")
    # Arrival is stamped on the monotonic clock; carried over to the wall clock, it is what occurred_at is
    # compared with.
    wall_minus_monotonic = time.time() - time.monotonic()
    for event in events:
        occurred_at = event.event.get("occurred_at")
        seconds = epoch_seconds(occurred_at)
        expect(seconds is not None, f"the {event.type} event carries no readable occurred_at: {occurred_at!r}")
        assert seconds is not None
        arrived = event.at + wall_minus_monotonic
        offset = seconds - arrived
        expect(abs(offset) <= CLOCK_SLACK_S,
               f"the {event.type} event of {event.action} is dated {occurred_at!r} "
               f"({_utc(seconds)}), {abs(offset):.0f} s "
               f"{'after' if offset > 0 else 'before'} it arrived: occurred_at is the time the event was observed, in "
               "seconds since the Unix epoch (a wall clock), not a reading of another clock")


@then("the create's terminal event names the sandbox by the id the provider assigned")
def _(world: World) -> None:
    action, route = _operation(world)
    _settle(world)
    terminal = [e for e in route.received if e.type in TERMINAL]
    expect(bool(terminal), f"the {action} emitted no terminal event: {_describe(route.received)}")
    subject = terminal[-1].event.get("subject") or {}
    sandbox_id = world.require_sandbox().id
    expect(subject.get("id") == sandbox_id,
           f"the {action}'s {terminal[-1].type} should name sandbox {sandbox_id!r} in its subject; its subject "
           f"is {subject!r}")


# -- events nobody asked for -----------------------------------------------------------------------


@given("the host watches every message the provider sends")
def _(world: World) -> None:
    world.event_watch.watch = raw_channel(world)


@when("I run a command that prints a generated marker on both of its outputs, buffered and streamed")
def _(world: World) -> None:
    marker = world.token("conformance-output")
    world.event_watch.output_marker = marker
    command = f"printf '%s' '{marker}'; printf '%s' '{marker}' >&2"
    sandbox_id = world.require_sandbox().id
    buffered = fresh_provider(world).exec(sandbox_id, ExecRequest(command=command))
    expect(buffered.outcome == "ran" and buffered.stdout == marker.encode(),
           f"the command did not run: {buffered.describe()}")
    streamed = world.streams("streaming exec", fresh_provider(world)).exec(sandbox_id, ExecRequest(command=command))
    expect(streamed.result.outcome == "ran", f"the streamed command did not run: {streamed.result.describe()}")


@when("I create and delete another sandbox without asking for events")
def _(world: World) -> None:
    other = fresh_provider(world).create(SandboxRequest())
    fresh_provider(world).delete(other.id)


def _watched_events(world: World) -> list[dict[str, Any]]:
    if world.event_watch.watched_events is None:
        raw = world.require(world.event_watch.watch, "raw channel watching every message")
        events = [message.get("params") or {} for message in settle(raw, QUIET_S)
                  if isinstance(message, dict) and message.get("method") == raw.vocabulary.event_notification]
        world.event_watch.watched_events = events
    return world.event_watch.watched_events


@then("every event the provider sent belongs to the one create that asked for events")
def _(world: World) -> None:
    _, route = _operation(world)
    events = _watched_events(world)
    strays = [(p.get("route_id"), (p.get("event") or {}).get("type"), (p.get("event") or {}).get("action"))
              for p in events if p.get("route_id") != route.route_id]
    expect(not strays, f"{len(strays)} event(s) arrived for operations that did not ask for events "
                       f"(route id, type, action): {strays}")
    # Only lifecycle events carry an operation id; an observation (state_observed) has none and belongs
    # to no operation, so it counts for none.
    operations = {(p.get("event") or {}).get("operation_id") for p in events} - {None}
    expect(len(operations) == 1,
           f"only the create asked for events, but events of {len(operations)} operations arrived on its route: "
           f"{[((p.get('event') or {}).get('type'), (p.get('event') or {}).get('action')) for p in events]}")


@then("no event carries the command's output")
def _(world: World) -> None:
    marker = world.require(world.event_watch.output_marker, "command printing a generated marker")
    encoded = base64.b64encode(marker.encode()).decode()
    for params in _watched_events(world):
        text = json.dumps(params, ensure_ascii=False)
        expect(marker not in text and encoded not in text,
               f"an event carries the command's output ({marker!r}); command output never travels in the event "
               f"feed: {text[:400]}")


@when("I create a second sandbox asking for events")
def _(world: World) -> None:
    # Not the scenario's sandbox: the later operations act on the first one.
    fresh_provider(world).create(SandboxRequest(events=_new_route(world, "second create")))


@then("no event on the second create's route is about the first sandbox")
def _(world: World) -> None:
    first = world.require_sandbox().id
    routes = dict(world.event_watch.operations)
    caught_up(fresh_provider(world), QUIET_S, trail_s=QUIET_S)  # events of the later operations, wherever they go
    strays = [e for e in routes["second create"].received if (e.event.get("subject") or {}).get("id") == first]
    expect(not strays, f"operations on sandbox {first} were reported on the route of another sandbox's create: "
                       f"{_describe(strays)}; a route belongs to the request that gave it (early v1: to that "
                       "handle's create or attach)")
