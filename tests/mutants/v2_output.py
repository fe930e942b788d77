"""Broken variants of the v2 reference plugin's command output (features/v2/output.feature): what crosses
the channel, the capture accounting, drains after the main process exited, and stops sent early."""

from __future__ import annotations

import threading
import time
from typing import Any

from conformance.reference.data_channel import PluginChannel
from conformance.reference.host_backend import HostBackend, HostSandbox
from conformance.reference.host_plugin_v2 import ExecSpecV2, ExecStops, HostBackendV2, HostPluginV2
from tests.mutants import mutant

CAPTURES = ("stdout_capture", "stderr_capture")

# -- what crosses the channel, and the accounting ------------------------------------------------------------


class _CappedChannel:
    """A channel that carries at most ``limit`` bytes of each stream and drops the rest unsent."""

    def __init__(self, channel: PluginChannel, limit: int) -> None:
        self._channel = channel
        self._limit = limit
        self._sent: dict[int, int] = {}

    def send(self, kind: int, data: bytes) -> None:
        room = max(0, self._limit - self._sent.get(kind, 0))
        self._sent[kind] = self._sent.get(kind, 0) + len(data)
        if room:
            self._channel.send(kind, data[:room])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._channel, name)


@mutant("retained-limit-caps-frames")
class RetainedLimitCapsFrames(HostPluginV2):
    """Takes the retained output limit as a cap on what it sends: past it, a stream's output never reaches
    the channel (it is still counted as observed)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._asked = threading.local()  # the retained output limit of the exec this thread serves

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        self._asked.limit = params.get("retained_output_limit")
        return super().m_exec_stream(params)

    def stream_exec(self, sandbox: HostSandbox, spec: ExecSpecV2, channel: PluginChannel, stops: ExecStops,
                    wants_stdin: bool) -> Any:
        limit = getattr(self._asked, "limit", None)
        capped: Any = channel if limit is None else _CappedChannel(channel, limit)
        return super().stream_exec(sandbox, spec, capped, stops, wants_stdin)


@mutant("observed-counts-both-streams")
class ObservedCountsBothStreams(HostPluginV2):
    """Counts the bytes of both streams as each stream's observed bytes (one counter for the command), all of
    them omitted, so each capture still adds up."""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stream(params)
        total = sum(answer[capture]["observed_bytes"] for capture in CAPTURES)
        for capture in CAPTURES:
            answer[capture] = {**answer[capture], "observed_bytes": total,
                               "omitted_bytes": total - answer[capture]["retained_bytes"]}
        return answer


@mutant("truncated-always-claimed")
class TruncatedAlwaysClaimed(HostPluginV2):
    """Says every capture was truncated, whether or not any byte was lost."""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stream(params)
        for capture in CAPTURES:
            answer[capture] = {**answer[capture], "truncated": True}
        return answer


@mutant("control-retains-up-to-limit")
class ControlRetainsUpToLimit(HostPluginV2):
    """Honest (control): counts itself as retaining up to the retained output limit asked for (nothing
    without one), accounts for the rest as omitted, and leaves truncated out, which means false."""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stream(params)
        limit = params.get("retained_output_limit") or 0
        for capture in CAPTURES:
            observed = answer[capture]["observed_bytes"]
            kept = min(observed, limit)
            answer[capture] = {"observed_bytes": observed, "retained_bytes": kept, "omitted_bytes": observed - kept}
        return answer


# -- drains after the main process exited --------------------------------------------------------------------


class _StopsIgnoredWhileDraining(HostBackendV2):
    # v1's drain: a bounded wait for the pipes, deaf to the stops and the timeout.
    drain_output = HostBackend.drain_output


@mutant("drain-ignores-stops")
class DrainIgnoresStops(HostPluginV2):
    """Once the main process exited, waits a while for the output pipes without heeding stops: a hard stop
    sent meanwhile leaves the processes holding them running."""

    def make_backend(self) -> HostBackend:
        return _StopsIgnoredWhileDraining(environ=self.environ)


class _AbandonsSilently(HostBackendV2):
    def drain_output(self, proc: Any, readers: list[threading.Thread], cancel: Any, deadline: float | None) -> bool:
        super().drain_output(proc, readers, cancel, deadline)
        return False


@mutant("abandoned-drain-not-truncated")
class AbandonedDrainNotTruncated(HostPluginV2):
    """Gives up on output pipes a leftover process holds open, but never says the captures were truncated."""

    def make_backend(self) -> HostBackend:
        return _AbandonsSilently(environ=self.environ)


# -- stops sent early ------------------------------------------------------------------------------------------

COMMAND_SETUP_S = 0.5


@mutant("stops-dropped-before-command-starts")
class StopsDroppedBeforeCommandStarts(HostPluginV2):
    """Takes half a second to set a command up after opening its channel, and drops an exec/stop that
    arrives before the command has started."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._not_started: set[int] = set()  # id() of the stops of execs whose command has not started

    def register_exec(self, exec_id: str, grace_s: float | None) -> ExecStops:
        stops = super().register_exec(exec_id, grace_s)
        self._not_started.add(id(stops))
        return stops

    def stream_exec(self, sandbox: HostSandbox, spec: ExecSpecV2, channel: PluginChannel, stops: ExecStops,
                    wants_stdin: bool) -> Any:
        time.sleep(COMMAND_SETUP_S)
        self._not_started.discard(id(stops))
        return super().stream_exec(sandbox, spec, channel, stops, wants_stdin)

    def m_exec_stop(self, params: dict[str, Any]) -> Any:
        with self._execs_lock:
            stops = self._execs.get(params["exec_id"])
        if stops is not None and id(stops) in self._not_started:
            return None
        return super().m_exec_stop(params)
