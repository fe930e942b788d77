"""The seams the red-team mutants (and the catalogue's own) vary the reference host plugin through.

Each is a subclass that swaps one collaborator of ``HostPlugin`` for a class attribute, so a mutant is
one small subclass of its own: ``class X(BackendPlugin): backend_class = _Broken``.
"""

from __future__ import annotations

from typing import Any

from conformance.reference.host_backend import HostBackend
from conformance.reference.host_events import EventSource, Operation
from conformance.reference.host_plugin import HostPlugin
from conformance.reference.sanitize import Sanitizer


class BackendPlugin(HostPlugin):
    """A plugin over a mutated backend (``backend_class``)."""

    backend_class: type[HostBackend] = HostBackend

    def make_backend(self) -> HostBackend:
        return self.backend_class(environ=self.environ)


class EventsPlugin(HostPlugin):
    """A plugin whose event source is ``event_source_class``."""

    event_source_class: type[EventSource] = EventSource

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events = self.event_source_class(self.provider_kind, self.notify)


class OperationSource(EventSource):
    """An event source whose operations are ``operation_class``."""

    operation_class: type[Operation] = Operation

    def operation(self, route: dict[str, Any] | None, action: str, subject: dict[str, Any]) -> Operation:
        return self.operation_class(self, route, action, subject)


def sanitizing_backend(sanitizer: type[Sanitizer]) -> type[HostBackend]:
    """A backend that sanitizes command output with ``sanitizer``."""
    return type(f"_Backend_{sanitizer.__name__}", (HostBackend,), {"sanitizer_class": sanitizer})
