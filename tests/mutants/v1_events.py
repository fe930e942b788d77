"""Broken variants of the v1 host plugin's control-plane events (protocol section 10)."""

from __future__ import annotations

import datetime
import threading
from typing import Any

from conformance.reference.host_events import EventSource, Operation, _now
from conformance.reference.host_plugin import EVENT_ACTIONS, HostPlugin
from tests.mutants import mutant

Route = dict[str, Any]  # the request's `events`: route_id and correlation_id


class _EventMutant(HostPlugin):
    """A plugin whose event source is ``source_class``."""

    source_class: type[EventSource] = EventSource

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.events = self.source_class(self.provider_kind, self.notify)


def _source_making(operation_class: type[Operation]) -> type[EventSource]:
    class Source(EventSource):
        def operation(self, route: dict[str, Any] | None, action: str, subject: dict[str, Any]) -> Operation:
            return operation_class(self, route, action, subject)

    return Source


# -- start and end of an operation -----------------------------------------------------------------


class _CompletedTwice(Operation):
    def completed(self, subject: dict[str, Any] | None = None) -> None:
        super().completed(subject)
        super().completed(subject)  # once from the handler, once from a cleanup path


@mutant("events-two-terminals")
class EventsTwoTerminals(_EventMutant):
    """Emits operation_completed twice for every operation that succeeds."""

    source_class = _source_making(_CompletedTwice)


class _FailureAsCompleted(Operation):
    def failed(self, report: dict[str, Any]) -> None:
        self.completed()  # a `finally:` that always reports completion


@mutant("events-failure-reported-completed")
class EventsFailureReportedCompleted(_EventMutant):
    """Reports a failed operation with operation_completed instead of operation_failed."""

    source_class = _source_making(_FailureAsCompleted)


class _CompletedLater(Operation):
    def completed(self, subject: dict[str, Any] | None = None) -> None:
        timer = threading.Timer(0.1, super().completed, args=(subject,))  # an asynchronous event queue
        timer.daemon = True
        timer.start()


@mutant("events-terminal-after-answer")
class EventsTerminalAfterAnswer(_EventMutant):
    """Hands operation_completed to a background queue that writes it after the operation's answer."""

    source_class = _source_making(_CompletedLater)


class _SubjectFromStart(Operation):
    def completed(self, subject: dict[str, Any] | None = None) -> None:
        super().completed(None)  # keeps the subject it started with, which for a create has no id


@mutant("events-create-subject-without-id")
class EventsCreateSubjectWithoutId(_EventMutant):
    """The final event of a create describes the sandbox as it was at the start: without its id."""

    source_class = _source_making(_SubjectFromStart)


# -- numbering and order ---------------------------------------------------------------------------


class _GappySource(EventSource):
    def emit(self, route: Route, subject: dict[str, Any], operation_id: str, body: dict[str, Any]) -> None:
        if body.get("type") == "operation_started":
            with self._lock:
                self._sequence += 1  # numbers a progress event that is then never sent
        super().emit(route, subject, operation_id, body)


@mutant("events-sequence-gaps")
class EventsSequenceGaps(_EventMutant):
    """Numbers a progress event it never sends, leaving a gap in every operation's sequence numbers."""

    source_class = _GappySource


class _StartedHeldBack(EventSource):
    """Numbers operation_started when the operation starts but writes it only after the terminal event."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.held: dict[str, dict[str, Any]] = {}

    def emit(self, route: Route, subject: dict[str, Any], operation_id: str, body: dict[str, Any]) -> None:
        if body.get("type") != "operation_started":
            super().emit(route, subject, operation_id, body)
            held = self.held.pop(operation_id, None)
            if held is not None:
                self._notify("host/event", held)
            return
        with self._lock:
            self._sequence += 1
            event: dict[str, Any] = {
                "id": {"source_id": self.source_id, "sequence": self._sequence}, "occurred_at": _now(),
                "provider": self.provider_kind, "subject": subject, "operation_id": operation_id, **body,
            }
            if route.get("correlation_id") is not None:
                event["correlation_id"] = route["correlation_id"]
            self.held[operation_id] = {"route_id": route["route_id"], "event": event}


@mutant("events-started-after-terminal")
class EventsStartedAfterTerminal(_EventMutant):
    """Writes each operation_started after the operation's terminal event, out of sequence order."""

    source_class = _StartedHeldBack


# -- route and correlation ids ---------------------------------------------------------------------


class _TrimmingSource(EventSource):
    def emit(self, route: Route, subject: dict[str, Any], operation_id: str, body: dict[str, Any]) -> None:
        correlation = route.get("correlation_id")
        if isinstance(correlation, str):
            route = {**route, "correlation_id": correlation.strip()}
        super().emit(route, subject, operation_id, body)


@mutant("events-correlation-trimmed")
class EventsCorrelationTrimmed(_EventMutant):
    """Trims whitespace off the correlation id before copying it into events."""

    source_class = _TrimmingSource


class _UncorrelatedSource(EventSource):
    def emit(self, route: Route, subject: dict[str, Any], operation_id: str, body: dict[str, Any]) -> None:
        super().emit({"route_id": route["route_id"]}, subject, operation_id, body)


@mutant("events-correlation-dropped")
class EventsCorrelationDropped(_EventMutant):
    """Routes events but never copies the correlation id into them."""

    source_class = _UncorrelatedSource


# -- events nobody asked for -----------------------------------------------------------------------


@mutant("events-for-unrequested-operations")
class EventsForUnrequestedOperations(HostPlugin):
    """Emits events (without a route id) for every lifecycle operation, asked for or not."""

    def dispatch(self, method: str, params: Any) -> Any:
        asked = isinstance(params, dict) and isinstance(params.get("events"), dict)
        if method in EVENT_ACTIONS and isinstance(params, dict) and not asked:
            params = {**params, "events": {"route_id": None}}
        return super().dispatch(method, params)


@mutant("events-carry-command-output")
class EventsCarryCommandOutput(HostPlugin):
    """Reports every command run in a sandbox created with events as a notice on that sandbox's route,
    output included."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.routes: dict[str, dict[str, Any]] = {}

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_create(params)
        if isinstance(params.get("events"), dict):
            self.routes[info["status"]["id"]] = params["events"]
        return info

    def m_exec_run(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_run(params)
        route = self.routes.get(params["sandbox_id"])
        if route is not None:
            subject = {"type": "sandbox", "id": params["sandbox_id"]}
            operation = self.events.operation(None, "unknown", subject)
            self.events.emit(route, subject, operation.operation_id,
                             {"type": "notice", "code": "exec.finished",
                              "message": f"command finished; stdout_b64={result['stdout_b64']}"})
        return result


# -- encodings of event members ---------------------------------------------------------------------


class _NotifyRewriting(_EventMutant):
    """Rewrites every host/event on its way out with ``rewrite(event)``."""

    def rewrite(self, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def notify(self, method: str, params: Any) -> None:
        if method == "host/event" and isinstance(params, dict) and isinstance(params.get("event"), dict):
            params = {**params, "event": dict(params["event"])}
            self.rewrite(params["event"])
        super().notify(method, params)


@mutant("events-occurred-at-rfc3339")
class EventsOccurredAtRfc3339(_NotifyRewriting):
    """Writes occurred_at as an RFC 3339 string, the v2-era form upstream's v1 host cannot decode."""

    def rewrite(self, event: dict[str, Any]) -> None:
        at = event["occurred_at"]
        moment = datetime.datetime.fromtimestamp(at["secs_since_epoch"] + at["nanos_since_epoch"] / 1e9, datetime.UTC)
        event["occurred_at"] = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@mutant("control-events-optional-members-null")
class ControlEventsOptionalMembersNull(_NotifyRewriting):
    """Legal: writes the Option members upstream decodes with #[serde(default)] as null instead of omitting
    them — correlation_id when the request gave none, and a subject's missing name."""

    def rewrite(self, event: dict[str, Any]) -> None:
        event.setdefault("correlation_id", None)
        subject = event.get("subject")
        if isinstance(subject, dict) and subject.get("type") != "provider":
            event["subject"] = {**subject, "name": subject.get("name")}


# -- routes of a handle's later operations ------------------------------------------------------------


@mutant("control-events-delete-on-handle-route")
class ControlEventsDeleteOnHandleRoute(HostPlugin):
    """Legal (early v1, as upstream's v1 host plugin): ignores a per-call ``events`` object on
    sandbox/delete and reports the delete on the route the handle was created or attached with."""

    def dispatch(self, method: str, params: Any) -> Any:
        if method == "sandbox/delete" and isinstance(params, dict):
            params = {key: value for key, value in params.items() if key != "events"}
        return super().dispatch(method, params)


# -- observations beside the operation's own events ------------------------------------------------------


class _ObservingOperation(Operation):
    """After the terminal event, a ``state_observed`` about the subject: no operation id (it belongs to no
    operation), as upstream's event emitter writes it."""

    def completed(self, subject: dict[str, Any] | None = None) -> None:
        super().completed(subject)
        if self.route is None or self.action != "create":
            return
        source = self.source
        with source._lock:
            source._sequence += 1
            event = {"id": {"source_id": source.source_id, "sequence": source._sequence}, "occurred_at": _now(),
                     "provider": source.provider_kind, "subject": self.subject, "type": "state_observed",
                     "current": {"resource": "sandbox", "state": "running"}}
            if self.route.get("correlation_id") is not None:
                event["correlation_id"] = self.route["correlation_id"]
            source._notify("host/event", {"route_id": self.route["route_id"], "event": event})


@mutant("control-events-state-observed")
class ControlEventsStateObserved(_EventMutant):
    """Legal: a create that asks for events also reports, on its route, that the new sandbox was observed
    running: a ``state_observed`` event carrying no operation id (v1 section 10: only lifecycle events do)."""

    source_class = _source_making(_ObservingOperation)
