"""Broken variants of the v2 reference plugin's control connection (features/v2/control.feature): bytes in
control messages, version-1 shaped file requests, transport diagnostics, retryable flags, deletes by id from
another process, and the gates of a command's input and of one-shot containers."""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import replace
from typing import Any

from conformance.reference.data_channel import PluginChannel
from conformance.reference.host_fs_v2 import ChannelFilesystemMethods
from conformance.reference.host_plugin_v2 import (
    EventDelivery,
    HostBackendV2,
    HostPluginV2,
    ProvisionReportingEvents,
)
from tests.mutants import mutant
from tests.mutants.v1_lifecycle import RegistrySharedByProcesses
from tests.mutants.v2_shared import KeepsExecOutput

# -- no bytes on the control connection ------------------------------------------------------------------


@mutant("exec-answer-carries-output-b64")
class ExecAnswerCarriesOutputB64(KeepsExecOutput):
    """Still sends a command's output as base64 in its answer, beside the result, as version 1 sent it inside."""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stream(params)
        stdout, stderr = self.exec_output()
        return {**answer, "stdout_b64": base64.b64encode(stdout).decode(),
                "stderr_b64": base64.b64encode(stderr).decode()}


# -- requests in version 1's shape -----------------------------------------------------------------------


@mutant("earlier-shape-file-requests-served")
class EarlierShapeFileRequestsServed(HostPluginV2):
    """Serves fs/read and fs/write without a channel the version-1 way, content as base64 in the messages."""

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        if "channel" not in params:
            return super(ChannelFilesystemMethods, self).m_fs_read(params)
        return super().m_fs_read(params)

    def m_fs_write(self, params: dict[str, Any]) -> Any:
        if "channel" not in params:
            return super(ChannelFilesystemMethods, self).m_fs_write(params)
        return super().m_fs_write(params)


# -- transport diagnostics -------------------------------------------------------------------------------


@mutant("diagnostics-list-open-channels")
class DiagnosticsListOpenChannels(HostPluginV2):
    """Lists the data channels it has open in its transport diagnostics, each with the id and token it opened
    with."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._open: dict[int, tuple[int, str]] = {}  # id() of each open channel -> what it was opened with
        self._open_lock = threading.Lock()

    def open_channel(self, request: tuple[int, str], accepts_input: bool) -> PluginChannel:
        channel = super().open_channel(request, accepts_input)
        with self._open_lock:
            self._open[id(channel)] = request
        return channel

    def release_channel(self, channel: PluginChannel) -> None:
        with self._open_lock:
            self._open.pop(id(channel), None)
        super().release_channel(channel)

    def m_transport_diagnostics(self, params: dict[str, Any]) -> Any:
        with self._open_lock:
            channels = [{"channel_id": channel_id, "token": token} for channel_id, token in self._open.values()]
        return {**super().m_transport_diagnostics(params), "channels": channels}


# -- what a failure says about retrying -------------------------------------------------------------------


@mutant("failures-all-retryable")
class FailuresAllRetryable(HostPluginV2):
    """Says every application failure may be retried."""

    def write_message(self, message: dict[str, Any]) -> None:
        report = ((message.get("error") or {}).get("data") or {}).get("report")
        if isinstance(report, dict):
            report["retryable"] = True
        super().write_message(message)


# -- a delete from a provider process that never attached the sandbox ---------------------------------------

@mutant("control-registry-shared-on-v2")
class ControlRegistrySharedOnV2(HostPluginV2):
    """Honest (control): sandboxes outlive the plugin process. Every plugin served in the test process keeps its
    records in one registry directory (what SANDBOX_CONFORMANCE_HOST_REGISTRY does for real processes), so
    another process can delete a sandbox by its id."""

    backend_kind = HostBackendV2
    make_backend = RegistrySharedByProcesses.make_backend


@mutant("delete-needs-attach")
class DeleteNeedsAttach(ControlRegistrySharedOnV2):
    """Deletes only sandboxes this process created or attached; a delete of any other id is answered as done
    (deletes are idempotent) and removes nothing."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._handled: set[str] = set()

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_create(params)
        self._handled.add(info["status"]["id"])
        return info

    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_attach(params)
        self._handled.add(info["status"]["id"])
        return info

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        if params["sandbox_id"] not in self._handled:
            return None
        return super().m_sandbox_delete(params)

# -- events the provider cannot deliver ----------------------------------------------------------------


class _DeliversWith(HostPluginV2):
    """Delivers its events through ``delivery_class`` (an ``EventDelivery``) instead of the reference's."""

    delivery_class: type[EventDelivery] = EventDelivery

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.event_delivery = self.delivery_class(self.write_message, self.limits.event_queue_messages,
                                                  self.limits.event_queue_bytes)
        self.events = ProvisionReportingEvents(self.provider_kind, self.event_delivery.offer)


class _DropsSilently(EventDelivery):
    def offer(self, method: str, params: Any) -> None:
        size = len(json.dumps({"jsonrpc": "2.0", "method": method, "params": params}, separators=(",", ":"))) + 1
        with self._ready:
            full = (len(self._queue) + self._writing >= self.max_messages
                    or self._queued_bytes + size > self.max_bytes)
        if not full:
            super().offer(method, params)


@mutant("events-dropped-silently")
class EventsDroppedSilently(_DeliversWith):
    """Drops the events its full queue cannot take, and never says its events could not be delivered."""

    delivery_class = _DropsSilently


class _RecoversAfterFailing(EventDelivery):
    def offer(self, method: str, params: Any) -> None:
        with self._ready:
            self.failed = False  # the next event is taken again once the queue has room
        super().offer(method, params)


@mutant("events-after-event-failed")
class EventsAfterEventFailed(_DeliversWith):
    """Says its events could not be delivered when its queue overflows, then goes on sending later events."""

    delivery_class = _RecoversAfterFailing


@mutant("control-roomy-event-queue")
class ControlRoomyEventQueue(HostPluginV2):
    """Honest (control): an event queue of 64 MiB, which the scenario's events never fill: every event arrives."""

    limits = replace(HostPluginV2.limits, event_queue_bytes=64 * 1024 * 1024, event_queue_messages=65536)


# -- gates -----------------------------------------------------------------------------------------------


class _DeclaresNoStdin(HostPluginV2):
    """Declares neither exec.stdin nor exec.stdin_stream."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["exec"].update({"stdin": False, "stdin_stream": False})
        return capabilities


@mutant("control-no-stdin-declared")
class ControlNoStdinDeclared(_DeclaresNoStdin):
    """Honest (control): declares no way to take a command's input, and refuses one given input as unsupported."""


@mutant("stdin-served-undeclared")
class StdinServedUndeclared(_DeclaresNoStdin):
    """Declares no way to take a command's input, yet streams the input of a command given one."""

    def declares(self, dotted: str) -> bool:
        return dotted in ("exec.stdin", "exec.stdin_stream") or super().declares(dotted)


@mutant("one-shot-method-not-found")
class OneShotMethodNotFound(HostPluginV2):
    """Answers one_shot/run as a method it does not have, instead of an unsupported operation."""

    def dispatch(self, method: str, params: Any) -> Any:
        if method == "one_shot/run":
            raise self.unknown_method(method)
        return super().dispatch(method, params)
