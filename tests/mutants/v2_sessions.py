"""Broken variants of the v2 reference plugin's stdio processes and terminals (features/v2/sessions.feature):
the session's channel, ids that were never opened, and calls that should end nothing."""

from __future__ import annotations

from typing import Any

from conformance.reference.data_channel import PluginChannel
from conformance.reference.host_backend import invalid_spec, not_found
from conformance.reference.host_interactive import PtySession, StdioProcess
from conformance.reference.host_interactive_v2 import ChannelInteractiveMethods, ChannelStdioProcess
from conformance.reference.host_plugin_v2 import HostPluginV2
from tests.mutants import mutant

# -- the session's channel ------------------------------------------------------------------------------------


class _InputNeverClosed(ChannelStdioProcess):
    def _close_stdin(self) -> None:
        pass  # the host's eof is read, and the process's stdin stays open


@mutant("stdio-eof-leaves-input-open")
class StdioEofLeavesInputOpen(HostPluginV2):
    """Reads the host's end of file on a stdio process's channel but never closes the process's input."""

    stdio_process_class = _InputNeverClosed


class _WithoutEof:
    """A channel's sending side whose end of file is never sent."""

    def __init__(self, channel: PluginChannel) -> None:
        self._channel = channel

    def send(self, kind: int, data: bytes) -> None:
        self._channel.send(kind, data)

    def finish(self) -> None:
        pass


@mutant("pty-close-drops-channel")
class PtyCloseDropsChannel(HostPluginV2):
    """Closes a terminal's channel when the terminal closes without sending its end of file first."""

    @staticmethod
    def _pump_pty_output(session: PtySession, channel: PluginChannel) -> None:
        ChannelInteractiveMethods._pump_pty_output(session, _WithoutEof(channel))  # type: ignore[arg-type]

    def _pty_ended(self, pty_id: str, session: PtySession) -> None:
        with self._interactive_lock:
            entry = self._pty_channels.pop(pty_id, None)
        if entry is not None:
            entry.channel.close()


# -- ids that were never opened ---------------------------------------------------------------------------------


@mutant("stdio-unknown-id-not-found")
class StdioUnknownIdNotFound(HostPluginV2):
    """Refuses a stdio process id that is not open as not_found of a resource the protocol does not have."""

    def _process(self, params: dict[str, Any]) -> StdioProcess:
        with self._interactive_lock:
            known = params["process_id"] in self._processes
        if not known:
            raise not_found("stdio process", params["process_id"])
        return super()._process(params)


@mutant("pty-resize-unknown-ignored")
class PtyResizeUnknownIgnored(HostPluginV2):
    """Answers a resize of a terminal id that is not open as done."""

    def m_pty_resize(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            known = params["pty_id"] in self._ptys
        return super().m_pty_resize(params) if known else None


# -- calls that end nothing ------------------------------------------------------------------------------------


@mutant("pty-close-unknown-refused")
class PtyCloseUnknownRefused(HostPluginV2):
    """Refuses to close a terminal id that is not open."""

    def m_pty_close(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            known = params["pty_id"] in self._ptys
        if not known:
            raise invalid_spec("pty_id", "unknown PTY id")
        return super().m_pty_close(params)


@mutant("stream-cancel-unknown-refused")
class StreamCancelUnknownRefused(HostPluginV2):
    """Refuses to cancel a stream id no follow uses."""

    def m_stream_cancel(self, params: dict[str, Any]) -> Any:
        with self._interactive_lock:
            known = params["stream_id"] in self._streams
        if not known:
            raise invalid_spec("stream_id", "unknown stream id")
        return super().m_stream_cancel(params)
