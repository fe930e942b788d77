"""Protocol v2 data channels, the plugin's side (v2 §2.1).

Every byte-moving request names a channel (``channel_id`` + a one-use ``token``). The plugin connects to
the host's Unix socket (announced in ``initialize``), sends one ``open`` frame naming that pair, waits
for the host's empty ``open`` when the host offered ``open_ack``, and only then moves bytes. A frame is
one kind byte, a 4-byte big-endian payload length and the payload, never more than 65,536 bytes of it.
Each side ends with one empty ``eof`` and sends nothing after it; the plugin's ``eof`` goes out before
the operation's answer.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

OPEN, STDOUT, STDERR, STDIN, EOF = 0, 1, 2, 3, 4
MAX_FRAME_BYTES = 65536
HEADER = struct.Struct(">BI")
OPEN_TIMEOUT_S = 10.0  # connecting, and waiting for the host's acknowledgement (v2 §6.2 open_timeout)
PROGRESS_TIMEOUT_S = 30.0  # a host that stops reading stalls a write at most this long, then it fails


class ChannelError(Exception):
    """Why a channel cannot carry its operation: ``kind`` and ``detail`` of the error report."""

    def __init__(self, kind: str, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.kind, self.message, self.detail = kind, message, detail


def transport_error(context: str) -> ChannelError:
    return ChannelError("transport", f"transport error: {context}", transport_context=context)


def frame_error(reason: str) -> ChannelError:
    # A frame the host may not send here fails the operation and never becomes data (v2 §2.1).
    return ChannelError("invalid_spec", f"invalid spec: frame: {reason}", field="frame", reason=reason)


class Channel:
    """One authenticated connection for one operation. Sends block in the socket while the host is slow
    to read: the command producing the bytes stalls, nothing piles up in memory."""

    def __init__(self, transport: dict[str, Any], request: dict[str, Any]) -> None:
        channel_id, token = request["channel_id"], request["token"]
        if type(channel_id) is not int or not isinstance(token, str):
            raise KeyError("channel")  # params that do not decode: answered as an invalid request
        self.lock = threading.Lock()
        self.finished = False
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(OPEN_TIMEOUT_S)
        try:
            self.sock.connect(transport["socket_path"])
            ack = bool(transport.get("open_ack"))
            self._frame(OPEN, json.dumps({"channel_id": channel_id, "token": token, "acknowledge": ack}).encode())
            # Offered acknowledgements, send nothing before the host's empty open frame: it may come late,
            # or never (then the operation fails as a transport error once the open timeout has passed).
            if ack and self._receive_exact(HEADER.size) != HEADER.pack(OPEN, 0):
                raise transport_error("data channel authentication was not acknowledged")
        except TimeoutError:
            self.sock.close()
            raise transport_error("opening data channel timed out") from None
        except ChannelError:
            self.sock.close()
            raise
        except OSError as exc:
            self.sock.close()
            raise transport_error(f"data channel: {exc}") from None
        self.sock.settimeout(PROGRESS_TIMEOUT_S)

    def _frame(self, kind: int, payload: bytes) -> None:
        with self.lock:
            try:
                self.sock.sendall(HEADER.pack(kind, len(payload)) + payload)
            except OSError as exc:
                raise transport_error(f"writing a data frame: {exc}") from None

    def send(self, kind: int, data: bytes) -> None:
        """``data`` as frames of ``kind``, split at the frame limit."""
        for start in range(0, len(data), MAX_FRAME_BYTES):
            self._frame(kind, data[start:start + MAX_FRAME_BYTES])

    def finish(self) -> None:
        """This side's one eof; it must be on the wire before the operation's answer. Later calls do nothing."""
        if not self.finished:
            self.finished = True
            self._frame(EOF, b"")

    def _receive_exact(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                return data  # the host closed the connection
            data += chunk
        return data

    def read_input(self, sink: Callable[[bytes], None]) -> None:
        """The host's ``stdin`` frames, each to ``sink``, up to its eof. Any other kind, an oversized frame
        (judged from its header, before its payload is read) or a close before the eof fails the operation."""
        self.sock.settimeout(None)  # the host sends at its own pace
        try:
            while True:
                header = self._receive_exact(HEADER.size)
                if len(header) < HEADER.size:
                    raise transport_error("data channel closed before EOF; the transfer is incomplete")
                kind, length = HEADER.unpack(header)
                if length > MAX_FRAME_BYTES:
                    raise frame_error(f"payload of {length} bytes exceeds the {MAX_FRAME_BYTES} limit")
                if kind == EOF:
                    if length:
                        raise frame_error("EOF must have an empty payload")
                    return  # nothing after the host's eof is read: bytes sent after it never become data
                if kind != STDIN:
                    raise frame_error(f"unexpected frame of kind {kind} on a write channel")
                payload = self._receive_exact(length)
                if len(payload) < length:
                    raise transport_error("data channel closed inside a frame")
                sink(payload)
        except OSError as exc:
            raise transport_error(f"reading a data frame: {exc}") from None
        finally:
            self.sock.settimeout(PROGRESS_TIMEOUT_S)

    def close(self) -> None:
        self.sock.close()
