"""Broken variants of the v2 reference plugin's handshake and data channels: the transport an initialize
announces, the stop capability's name, the frames the plugin sends, and the host frames it must refuse."""

from __future__ import annotations

import contextlib
import socket
import threading
import types
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

from conformance.reference import data_channel
from conformance.reference.data_channel import EOF, HEADER, STDOUT, DataTransport, PluginChannel
from conformance.reference.host_backend import BackendError
from conformance.reference.host_plugin_v2 import HostPluginV2
from tests.mutants import mutant

# -- the handshake -----------------------------------------------------------------------------------


@mutant("initialize-without-transport-accepted")
class InitializeWithoutTransportAccepted(HostPluginV2):
    """Takes an initialize that announces no data transport, as if it named an (unusable) empty path."""

    def m_initialize(self, params: dict[str, Any]) -> Any:
        if "data_transport" not in params:
            params = {**params, "data_transport": {"socket_path": "", "max_frame_bytes": data_channel.MAX_FRAME_BYTES}}
        return super().m_initialize(params)


@mutant("any-frame-limit-accepted")
class AnyFrameLimitAccepted(HostPluginV2):
    """Answers whatever frame limit the host announces, and goes on using 65,536 bytes."""

    def m_initialize(self, params: dict[str, Any]) -> Any:
        announced = params.get("data_transport")
        if isinstance(announced, dict):
            params = {**params, "data_transport": {**announced, "max_frame_bytes": data_channel.MAX_FRAME_BYTES}}
        return super().m_initialize(params)


@mutant("second-initialize-moves-transport")
class SecondInitializeMovesTransport(HostPluginV2):
    """Takes the data transport of every initialize, so a second one moves later channels elsewhere."""

    def m_initialize(self, params: dict[str, Any]) -> Any:
        self.transport = None
        return super().m_initialize(params)


@mutant("stop-flag-missing")
class StopFlagMissing(HostPluginV2):
    """Declares no stop flag at all, under neither of its names."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        del capabilities["exec"]["stop"]
        return capabilities


@mutant("stop-flag-twice")
class StopFlagTwice(HostPluginV2):
    """Declares the stop flag under its v2 name and keeps the v1 name beside it."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["exec"]["cancel"] = capabilities["exec"]["stop"]
        return capabilities


@mutant("control-stop-flag-as-cancel")
class ControlStopFlagAsCancel(HostPluginV2):
    """Honest (control): declares the stop flag by its v1 name, which v2 hosts read as an alias."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["exec"]["cancel"] = capabilities["exec"].pop("stop")
        return capabilities

    def declares(self, dotted: str) -> bool:
        return super().declares("exec.cancel" if dotted == "exec.stop" else dotted)


# -- what the plugin sends on a channel ------------------------------------------------------------------


@mutant("open-with-wrong-token")
class OpenWithWrongToken(HostPluginV2):
    """Opens every channel with its token in upper case: the host matches tokens exactly."""

    def open_channel(self, request: tuple[int, str], accepts_input: bool) -> PluginChannel:
        channel_id, token = request
        return super().open_channel((channel_id, token.upper()), accepts_input)


@mutant("eof-after-answer")
class EofAfterAnswer(HostPluginV2):
    """Answers an operation first and sends its channel's eof a moment later."""

    def serving(self, channel: PluginChannel) -> AbstractContextManager[PluginChannel]:
        finish = channel.finish

        def later() -> None:
            threading.Timer(0.3, finish).start()

        channel.finish = later  # type: ignore[method-assign]
        return super().serving(channel)


@mutant("file-read-in-one-frame")
class FileReadInOneFrame(HostPluginV2):
    """Sends a file read as a single frame, however large the file."""

    def send_file(self, channel: PluginChannel, path: Any, display_path: str, offset: int,
                  length: int | None) -> None:
        try:
            with path.open("rb") as handle:
                handle.seek(offset)
                content = handle.read() if length is None else handle.read(length)
        except OSError:
            return super().send_file(channel, path, display_path, offset, length)  # its errors, as usual
        channel.max_frame_bytes = max(channel.max_frame_bytes, len(content))
        channel.send_frame(STDOUT, content)
        return None


@mutant("eof-sent-twice")
class EofSentTwice(HostPluginV2):
    """Ends every channel with two eof frames."""

    def serving(self, channel: PluginChannel) -> AbstractContextManager[PluginChannel]:
        finish = channel.finish

        def twice() -> None:
            finish()
            channel.finished = False  # so the second one goes out too
            finish()

        channel.finish = twice  # type: ignore[method-assign]
        return super().serving(channel)


@mutant("channel-closed-without-eof")
class ChannelClosedWithoutEof(HostPluginV2):
    """Ends every channel by closing its connection, never sending the eof frame: the transfer is
    incomplete, whatever the answer says."""

    def serving(self, channel: PluginChannel) -> AbstractContextManager[PluginChannel]:
        def close_instead() -> None:
            if channel.finished:
                return
            channel.finished = True
            channel._finished.set()  # the plugin's own bookkeeping: "ended", so it answers at once
            with contextlib.suppress(OSError):
                channel.sock.shutdown(socket.SHUT_WR)

        channel.finish = close_instead  # type: ignore[method-assign]
        return super().serving(channel)


KEEPALIVE_KIND = 5


@mutant("keepalive-frame-kind")
class KeepaliveFrameKind(HostPluginV2):
    """Sends an empty keepalive frame of a kind the protocol does not have right after every open."""

    def open_channel(self, request: tuple[int, str], accepts_input: bool) -> PluginChannel:
        channel = super().open_channel(request, accepts_input)
        channel.send_frame(KEEPALIVE_KIND, b"")
        return channel


class _AnnouncedAck(HostPluginV2):
    """Opens channels as if the host had announced ``acknowledge_opens``, whatever it did announce."""

    acknowledge_opens = False

    @property
    def transport(self) -> DataTransport | None:
        announced = self.__dict__.get("_announced")
        return None if announced is None else replace(announced, open_ack=self.acknowledge_opens)

    @transport.setter
    def transport(self, value: DataTransport | None) -> None:
        self.__dict__["_announced"] = value


@mutant("never-asks-for-ack")
class NeverAsksForAck(_AnnouncedAck):
    """Never asks for the host's open acknowledgement, and sends at once, even when the host offered it."""


@mutant("always-asks-for-ack")
class AlwaysAsksForAck(_AnnouncedAck):
    """Asks for (and waits for) an open acknowledgement even when the host did not offer one."""

    acknowledge_opens = True


# -- host frames the plugin must refuse -------------------------------------------------------------------


def _replace_input(channel: PluginChannel, next_input: Any) -> PluginChannel:
    channel.next_input = types.MethodType(next_input, channel)  # type: ignore[method-assign]
    return channel


def _every_frame_is_content(self: PluginChannel) -> bytes | None:
    """Reads any frame, of any kind and any length, and takes all but an eof as content."""
    header = self._receive_exact(HEADER.size, at_boundary=True)
    if header is None:
        self.peer_closed = True
        return None
    kind, length = HEADER.unpack(header)
    payload = self._receive_exact(length, at_boundary=False) if length else b""
    if kind == EOF:
        self.host_eof = True
        return None
    return payload


@mutant("any-frame-is-content")
class AnyFrameIsContent(HostPluginV2):
    """Takes every frame the host sends but its eof as content: its kind and its length go unchecked."""

    def open_channel(self, request: tuple[int, str], accepts_input: bool) -> PluginChannel:
        return _replace_input(super().open_channel(request, accepts_input), _every_frame_is_content)


@mutant("input-frame-limit-unchecked")
class InputFrameLimitUnchecked(HostPluginV2):
    """Reads host frames of any length (it still refuses unknown kinds)."""

    def open_channel(self, request: tuple[int, str], accepts_input: bool) -> PluginChannel:
        channel = super().open_channel(request, accepts_input)
        limit = channel.max_frame_bytes
        channel.max_frame_bytes = 16 * limit
        send_frame = channel.send_frame

        def send_within_limit(kind: int, payload: bytes) -> None:
            channel.max_frame_bytes = limit  # what it sends still respects the limit
            try:
                send_frame(kind, payload)
            finally:
                channel.max_frame_bytes = 16 * limit

        channel.send_frame = send_within_limit  # type: ignore[method-assign]
        return channel


@mutant("reads-past-host-eof")
class ReadsPastHostEof(HostPluginV2):
    """After the host's eof, takes whatever stdin frames already arrived as more content."""

    def open_channel(self, request: tuple[int, str], accepts_input: bool) -> PluginChannel:
        channel = super().open_channel(request, accepts_input)
        next_input = channel.next_input

        def past_eof(self: PluginChannel) -> bytes | None:
            while True:
                if not self.host_eof:
                    data = next_input()
                    if data is not None or self._unread_bytes() == 0:
                        return data
                elif self._unread_bytes() == 0:
                    return None
                self.host_eof = False  # so the frame after the eof is read like any other
                data = next_input()
                self.host_eof = True
                if data is not None:
                    return data

        return _replace_input(channel, past_eof)


@mutant("close-taken-as-eof")
class CloseTakenAsEof(HostPluginV2):
    """Takes a write channel the host closed without its eof as a complete transfer (and does not mind that
    its own eof then has nowhere to go)."""

    def open_channel(self, request: tuple[int, str], accepts_input: bool) -> PluginChannel:
        channel = super().open_channel(request, accepts_input)
        receive_frame, finish = channel.receive_frame, channel.finish

        def close_is_eof() -> tuple[int, bytes] | None:
            frame = receive_frame()
            return (EOF, b"") if frame is None and not channel.host_eof else frame

        def finish_if_possible() -> None:
            try:
                finish()
            except BackendError:
                pass

        channel.receive_frame = close_is_eof  # type: ignore[method-assign]
        channel.finish = finish_if_possible  # type: ignore[method-assign]
        return channel
