"""Broken variants for the every-call outlines of features/errors.feature: each breaks one error rule on exactly
one method, so every row of those outlines is shown able to fail (catalogue/every-method.yaml).

- ``params-as-invalid-spec-<row>``: the method answers a request without the params it requires as an
  application failure (``invalid_spec``) instead of the JSON-RPC error -32600 — a plugin that validates its
  params by hand, on that method only.
- ``unknown-sandbox-as-invalid-spec-<row>``: the method refuses a sandbox id it never issued as
  ``invalid_spec`` naming ``sandbox_id`` instead of ``not_found`` — before its capability gate, so a call the
  provider does not offer is mis-refused too.
- ``unknown-sandbox-retryable-<row>``: the same refusal as ``not_found``, correct but for saying a retry
  may help.

The v1 variants subclass the v1 reference; the ``v2-`` ones the v2 reference, for the rows only v2 has and
for the calls v2 moves onto data channels (its path differs from v1's there).
"""

from __future__ import annotations

import re
from typing import Any

from conformance.dialects.sandbox_driver_v1.rules import VOCABULARY as V1_VOCABULARY
from conformance.dialects.sandbox_driver_v2.rules import VOCABULARY as V2_VOCABULARY
from conformance.reference.host_backend import BackendError
from conformance.reference.host_events import EventSource, Operation
from conformance.reference.host_plugin import HostPlugin, application_error
from conformance.reference.host_plugin_v2 import HostPluginV2
from tests.mutants import mutant
from tests.mutants.v1_lifecycle import ForkCopiesWorkspace

# The rows of invalid-params-every-method (errors.feature), by their first cell.
PARAMS_ROWS = (
    "create a sandbox", "attach to a sandbox", "describe", "read a sandbox's platform", "start a sandbox",
    "stop a sandbox", "delete a sandbox", "pause", "resume", "archive", "recover", "refresh activity", "undelete",
    "fork", "resize", "snapshot", "set timers", "set labels", "update network", "run a command",
    "stream a command", "cancel a command", "open a stdio process", "write to a stdio process",
    "close a stdio process's input", "read a stdio process's output", "terminate a stdio process",
    "wait for a stdio process", "open a terminal", "write to a terminal", "read a terminal", "resize a terminal",
    "close a terminal", "follow logs", "cancel a stream", "read a file", "write a file",
    "ask whether a path exists", "read a path's metadata", "list a directory", "create a directory",
    "rename a path", "delete a path", "set permissions", "create a snapshot", "get a snapshot",
    "delete a snapshot", "activate a snapshot", "deactivate a snapshot", "follow a snapshot's build logs",
    "create a volume", "get a volume", "delete a volume", "get a preview url", "get a signed preview url",
    "create ssh access", "revoke ssh access", "open a web terminal", "open a vnc connection",
    "get the sandbox's environment", "release a preview url", "clone a repository", "run a one-shot container",
)

# The rows of unknown-sandbox-every-call and unknown-sandbox-not-retryable, by their first cell.
SANDBOX_ROWS = (
    "describe a sandbox", "attach to a sandbox", "read a sandbox's platform", "start a sandbox", "stop a sandbox",
    "run a command", "stream a command", "read a file", "write a file", "ask whether a path exists",
    "read a path's metadata", "list a directory", "create a directory", "rename a path", "delete a path",
    "set permissions", "open a stdio process", "open a terminal", "follow logs", "pause", "resume", "archive",
    "recover", "refresh activity", "undelete", "fork", "resize", "snapshot", "set timers", "set labels",
    "update network", "get a preview url", "get a signed preview url", "create ssh access", "revoke ssh access",
    "open a web terminal", "open a vnc connection", "get the sandbox's environment", "release a preview url",
    "clone a repository", "run a one-shot container",
)

# v2 methods whose request carries a data channel: their v2 path differs from v1's, so each gets a v2 variant.
V2_CHANNEL_METHODS = frozenset({"exec/stream", "fs/read", "fs/write", "exec/stdio_open", "pty/open", "logs/follow",
                                "one_shot/run", "snapshot/build_logs"})


def slug(row: str) -> str:
    """A row's key as the scenario ids spell it (conformance.scenario_tags.example_key)."""
    return re.sub(r"[^a-z0-9.]+", "-", row.lower()).strip("-")


def _unknown_sandbox(plugin: Any, params: Any) -> str | None:
    """The sandbox id ``params`` names, when the plugin never issued it."""
    sandbox_id = params.get("sandbox_id") if isinstance(params, dict) else None
    if not isinstance(sandbox_id, str):
        return None
    try:
        plugin.backend.get(sandbox_id)
    except BackendError:
        return sandbox_id
    return None


class _ParamsAsInvalidSpec:
    target = ""

    def dispatch(self, method: str, params: Any) -> Any:
        if method == self.target and not params:
            raise application_error("invalid_spec", "invalid spec: params: the request gives no params",
                                    {"field": "params", "reason": "the request gives no params"})
        return super().dispatch(method, params)  # type: ignore[misc]


class _UnknownSandboxAsInvalidSpec:
    target = ""

    def dispatch(self, method: str, params: Any) -> Any:
        unknown = _unknown_sandbox(self, params) if method == self.target else None
        if unknown is not None:
            raise application_error("invalid_spec", f"invalid spec: sandbox_id: no sandbox {unknown}",
                                    {"field": "sandbox_id", "reason": "no such sandbox"})
        return super().dispatch(method, params)  # type: ignore[misc]


class _UnknownSandboxRetryable:
    target = ""

    def dispatch(self, method: str, params: Any) -> Any:
        unknown = _unknown_sandbox(self, params) if method == self.target else None
        if unknown is not None:
            raise application_error("not_found", f'Sandbox "{unknown}" was not found',
                                    {"resource": "sandbox", "id": unknown}, retryable=True)
        return super().dispatch(method, params)  # type: ignore[misc]


BREAKS = {
    "params-as-invalid-spec": (_ParamsAsInvalidSpec, PARAMS_ROWS,
                               "answers {method} without the params it requires as invalid_spec, not -32600"),
    "unknown-sandbox-as-invalid-spec": (_UnknownSandboxAsInvalidSpec, SANDBOX_ROWS,
                                        ("refuses {method} naming a sandbox id it never issued as invalid_spec "
                                         "naming sandbox_id, not not_found")),
    "unknown-sandbox-retryable": (_UnknownSandboxRetryable, SANDBOX_ROWS,
                                  ("refuses {method} naming a sandbox id it never issued as not_found, saying "
                                   "a retry may help")),
}


def variants() -> list[tuple[str, str, tuple[str, ...], str, type]]:
    """Every variant: (name, dialect, the rows it breaks, its method, the class). A v2 variant whose method
    serves two rows (v2 runs and streams a command alike, with exec/stream) breaks both, named after the first."""
    found: list[tuple[str, str, tuple[str, ...], str, type]] = []
    for prefix, (_, rows, _) in BREAKS.items():
        v2_rows: dict[str, list[str]] = {}
        for row in rows:
            v1_method = V1_VOCABULARY.methods.get(row)
            v2_method = V2_VOCABULARY.methods.get(row)
            if v1_method is not None:
                found.append((f"{prefix}-{slug(row)}", "sandbox-driver-v1", (row,), v1_method, HostPlugin))
            if v2_method is not None and (v1_method is None or v2_method in V2_CHANNEL_METHODS):
                v2_rows.setdefault(v2_method, []).append(row)
        found += [(f"v2-{prefix}-{slug(named[0])}", "sandbox-driver-v2", tuple(named), method, HostPluginV2)
                  for method, named in v2_rows.items()]
    return found


def _register() -> None:
    for name, _, rows, method, base in variants():
        prefix = name.removeprefix("v2-").removesuffix(f"-{slug(rows[0])}")
        breaks, _, says = BREAKS[prefix]
        cls = type(name.title().replace("-", ""), (breaks, base),
                   {"target": method, "__doc__": says.format(method=method).capitalize() + "."})
        mutant(name)(cls)


_register()


# -- a result field on every path that carries it -----------------------------------------------------------


@mutant("stream-signal-dropped")
class StreamSignalDropped(HostPlugin):
    """Reports the ending signal of a buffered command, but not of a streamed one (exec/stream)."""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stream(params)
        answer["result"]["signal"] = None
        return answer


@mutant("undelete-handle-widens-capabilities")
class UndeleteHandleWidensCapabilities(HostPlugin):
    """The handle undelete answers declares forks, which neither the provider nor the created sandbox does."""

    def m_sandbox_undelete(self, params: dict[str, Any]) -> Any:
        handle = super().m_sandbox_undelete(params)
        capabilities = dict(handle["capabilities"])
        capabilities["lifecycle"] = {**capabilities["lifecycle"], "fork": True}
        return {**handle, "capabilities": capabilities}


# -- the events of a refused operation -----------------------------------------------------------------------


class _FailureReportedCompleted(Operation):
    def failed(self, report: dict[str, Any]) -> None:
        self.completed()


class _EventsEndingCompleted(EventSource):
    """Reports the failure of one kind of operation (action, subject type) as operation_completed."""

    def __init__(self, provider_kind: str, notify: Any, target: tuple[str, str]) -> None:
        super().__init__(provider_kind, notify)
        self.target = target

    def operation(self, route: dict[str, Any] | None, action: str, subject: dict[str, Any]) -> Operation:
        if (action, subject.get("type")) == self.target:
            return _FailureReportedCompleted(self, route, action, subject)
        return super().operation(route, action, subject)


def _refusal_reported_completed(name: str, target: tuple[str, str], says: str) -> None:
    def __init__(self: HostPlugin, *args: Any, **kwargs: Any) -> None:
        HostPlugin.__init__(self, *args, **kwargs)
        self.events = _EventsEndingCompleted(self.provider_kind, self.notify, target)

    mutant(name)(type(name.title().replace("-", ""), (HostPlugin,), {"__init__": __init__, "__doc__": says}))


_refusal_reported_completed("refused-create-events-completed", ("create", "sandbox"),
                            "A create it refuses reports operation_started, then operation_completed.")
_refusal_reported_completed("refused-undelete-events-completed", ("undelete", "sandbox"),
                            "An undelete it refuses reports operation_started, then operation_completed.")
_refusal_reported_completed("refused-snapshot-create-events-completed", ("create", "snapshot"),
                            "A snapshot create it refuses reports operation_started, then operation_completed.")


@mutant("fork-handle-widens-capabilities")
class ForkHandleWidensCapabilities(ForkCopiesWorkspace):
    """The handle a fork answers declares resizing, which the provider does not."""

    def m_sandbox_fork(self, params: dict[str, Any]) -> Any:
        handle = super().m_sandbox_fork(params)
        capabilities = dict(handle["capabilities"])
        capabilities["lifecycle"] = {**capabilities["lifecycle"], "resize": True}
        return {**handle, "capabilities": capabilities}


@mutant("refused-create-reports-no-events")
class RefusedCreateReportsNoEvents(HostPlugin):
    """Control: validates a create's spec before it accepts the operation, as upstream's host does, so a
    refused create reports no events at all — the other legal reading of a refused operation's events."""

    def dispatch(self, method: str, params: Any) -> Any:
        if method == "sandbox/create" and isinstance(params, dict) and isinstance(params.get("spec"), dict):
            try:
                self.validate_spec(params["spec"])
            except BackendError as error:
                raise self.backend_failure(method, error) from None
        return super().dispatch(method, params)
