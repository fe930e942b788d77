"""The plugin side of protocol v2's data channels, written from the protocol text (v2 §2.1).

The host owns a Unix socket and names one channel per byte-moving request (``channel_id`` + one-use
``token``). The plugin connects, sends one ``open`` frame with that pair (and ``acknowledge`` when the
host offered ``open_ack``, then waits for the host's empty ``open`` frame), and only then moves bytes.
A frame is one kind byte, a four-byte big-endian payload length and the payload; no payload exceeds
``MAX_FRAME_BYTES``. Each side sends one empty ``eof`` and nothing after it.

Independent of the checker's host side on purpose (no import from ``conformance.transports``): a
reference that shared the checker's frame code would agree with it even where both misread the
protocol. Failures are ``BackendError``s the plugin answers with: ``transport`` when the connection
cannot carry the operation, ``invalid_spec`` field ``frame`` when the host broke a frame rule.

``PluginChannel`` lists its seams.
"""

from __future__ import annotations

import fcntl
import json
import socket
import struct
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from conformance.reference.host_backend import BackendError, invalid_spec

OPEN, STDOUT, STDERR, STDIN, EOF = 0, 1, 2, 3, 4
KIND_NAMES = {OPEN: "Open", STDOUT: "Stdout", STDERR: "Stderr", STDIN: "Stdin", EOF: "Eof"}
MAX_FRAME_BYTES = 64 * 1024
HEADER = struct.Struct(">BI")


def transport_error(context: str) -> BackendError:
    return BackendError("transport", f"transport error: {context}", transport_context=context)


@dataclass(frozen=True)
class DataTransport:
    """What the host announced at ``initialize``."""

    socket_path: str
    max_frame_bytes: int
    open_ack: bool


class PluginChannel:
    """One authenticated channel connection, for one operation.

    Sending (``send``, ``finish``) blocks in the socket while the host is slow to read: the producer
    stalls, nothing is buffered beyond one frame. Receiving is either synchronous (``next_input``) or on
    a thread (``pump_input``); both enforce the frame rules, and a host rule broken while nothing reads
    synchronously is kept as ``violation``.

    Seams: ``send_frame(kind, payload)`` (every frame this side writes goes through it),
    ``check_header(kind, length)`` (the frame rules of a header), ``receive_frame()`` (every frame read),
    ``next_input()`` (which frames the host may send here, and when), ``finish()``, ``close()``. A plugin
    picks the class with its ``channel_class``.
    """

    def __init__(self, sock: socket.socket, max_frame_bytes: int, accepts_input: bool) -> None:
        self.sock = sock
        self.max_frame_bytes = max_frame_bytes
        # A write channel (stdin, file content) must end with the host's eof; a read channel must carry
        # nothing from the host but that eof.
        self.accepts_input = accepts_input
        self.violation: BackendError | None = None
        self.host_eof = False
        self.peer_closed = False
        self.finished = False
        self._finished = threading.Event()
        self.desynchronized = False  # a header was refused: nothing more can be read from this connection
        self._write_lock = threading.Lock()
        self._closing = False
        self._reader: threading.Thread | None = None

    @property
    def direction(self) -> str:
        return "write" if self.accepts_input else "read"

    # -- sending ---------------------------------------------------------------------------------

    def send(self, kind: int, data: bytes) -> None:
        """``data`` as frames of ``kind``, split at the frame limit."""
        for start in range(0, len(data), self.max_frame_bytes):
            self.send_frame(kind, data[start:start + self.max_frame_bytes])

    def send_frame(self, kind: int, payload: bytes) -> None:
        if self.finished:
            raise invalid_spec("frame", "write after EOF")
        if len(payload) > self.max_frame_bytes:
            raise invalid_spec("frame", f"payload of {len(payload)} bytes exceeds the {self.max_frame_bytes} limit")
        with self._write_lock:
            try:
                # Blocking (bounded by the socket's progress timeout): a host that does not read stalls
                # whoever produces these bytes.
                self.sock.sendall(HEADER.pack(kind, len(payload)) + payload)
            except TimeoutError:
                raise transport_error("data output made no progress; delivery is incomplete") from None
            except OSError as exc:
                raise transport_error(f"writing data frame: {exc}") from None

    def finish(self) -> None:
        """This side's one ``eof``; later calls do nothing."""
        if self.finished:
            return
        self.send_frame(EOF, b"")
        self.finished = True
        self._finished.set()

    def wait_finished(self, timeout_s: float) -> bool:
        """Whether this side's eof went out within ``timeout_s``."""
        return self._finished.wait(timeout_s)

    # -- receiving -------------------------------------------------------------------------------

    def _receive_exact(self, count: int, at_boundary: bool) -> bytes | None:
        """``count`` bytes, or None when the host closed cleanly before the first of them."""
        chunks = bytearray()
        while len(chunks) < count:
            try:
                chunk = self.sock.recv(count - len(chunks))
            except TimeoutError:
                if not self._closing:
                    continue  # reads have no deadline: the timeout bounds writes only
                chunk = b""
            except OSError as exc:
                if not self._closing:
                    raise transport_error(f"reading data frame: {exc}") from None
                chunk = b""  # this side closed the connection under the read
            if not chunk:
                if at_boundary and not chunks:
                    return None
                raise transport_error("data channel closed inside a frame")
            chunks.extend(chunk)
        return bytes(chunks)

    def receive_frame(self) -> tuple[int, bytes] | None:
        """One frame from the host, its header checked before its payload is read; None when the host
        closed at a frame boundary."""
        header = self._receive_exact(HEADER.size, at_boundary=True)
        if header is None:
            return None
        kind, length = HEADER.unpack(header)
        try:
            self.check_header(kind, length)
        except BackendError:
            # The frames after a refused header cannot be found any more: the connection is done.
            self.desynchronized = True
            raise
        payload = self._receive_exact(length, at_boundary=False) if length else b""
        return kind, payload or b""  # (never None: only a read at a frame boundary may find the end)

    def check_header(self, kind: int, length: int) -> None:
        """The rules a frame header must pass, judged before a byte of its payload is allocated or read."""
        if kind not in KIND_NAMES:
            raise invalid_spec("frame", f"unknown kind {kind}")
        if length > self.max_frame_bytes:
            raise invalid_spec("frame", f"payload of {length} bytes exceeds the {self.max_frame_bytes} limit")
        if kind == EOF and length:
            raise invalid_spec("frame", "EOF must have an empty payload")

    def next_input(self) -> bytes | None:
        """The next ``stdin`` payload from the host; None once its ``eof`` arrived or it closed after one.

        Raises ``invalid_spec`` field ``frame`` for a frame the host may not send here (any after its
        eof, an ``open``, ``stdout``/``stderr``, ``stdin`` on a read channel) and a transport error when
        a write channel closes before its eof."""
        while True:
            frame = self.receive_frame()
            if frame is None:
                self.peer_closed = True
                if self.accepts_input and not self.host_eof:
                    # Whoever closed it, the input is incomplete: nothing may treat it as the whole value.
                    raise transport_error("data channel closed before EOF; delivery is incomplete")
                return None
            kind, payload = frame
            if self.host_eof:
                raise invalid_spec("frame", f"{KIND_NAMES[kind]} frame after the host's EOF")
            if kind == EOF:
                self.host_eof = True
                return None
            if kind == STDIN and self.accepts_input:
                return payload
            raise invalid_spec("frame", f"unexpected {KIND_NAMES[kind]} frame on a {self.direction} channel")

    def pump_input(self, deliver: Callable[[bytes], None] | None = None, on_eof: Callable[[], None] | None = None,
                   on_violation: Callable[[BackendError], None] | None = None) -> threading.Thread:
        """Read the host's frames on a thread until it closes: each payload to ``deliver`` (which may
        block: that is the backpressure), ``on_eof`` once the input ended, ``on_violation`` (after
        ``on_eof``) when the host broke a rule. After the host's eof it keeps reading, so a frame sent
        after it is still caught."""

        def run() -> None:
            ended = self.host_eof
            try:
                while not self.peer_closed and not self._closing:
                    data = self.next_input()
                    if data is not None:
                        if deliver is not None:
                            deliver(data)
                    elif not ended:
                        ended = True
                        if on_eof is not None:
                            on_eof()
            except BackendError as error:
                if self._closing:
                    return
                self.violation = self.violation or error
                if not ended and on_eof is not None:
                    on_eof()
                if on_violation is not None:
                    on_violation(error)

        self._reader = threading.Thread(target=run, name="data-channel-input", daemon=True)
        self._reader.start()
        return self._reader

    def settled_violation(self, wait_s: float = 0.2) -> BackendError | None:
        """The host's first broken rule, after the input thread has read what already arrived (bytes
        still unread in the socket when an operation is about to answer belong to that operation)."""
        deadline = time.monotonic() + wait_s
        while (self.violation is None and self._reader is not None and self._reader.is_alive()
               and self._unread_bytes() > 0 and time.monotonic() < deadline):
            time.sleep(0.002)
        return self.violation

    def _unread_bytes(self) -> int:
        try:
            return struct.unpack("i", fcntl.ioctl(self.sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
        except OSError:
            return 0

    # -- ending ----------------------------------------------------------------------------------

    def close(self) -> None:
        """End the connection (the input thread, if any, stops quietly)."""
        self._closing = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def close_after(self, linger_s: float) -> None:
        """Close once the host has ended its side too (its eof or its close), at the latest after
        ``linger_s``: closing under a host that still writes its eof would turn that eof into an error."""

        def wait_then_close() -> None:
            deadline = time.monotonic() + linger_s
            while not (self.host_eof or self.peer_closed or self.desynchronized) and time.monotonic() < deadline:
                if self._reader is None and self._unread_bytes() > 0:
                    try:
                        self.next_input()
                    except BackendError:
                        break
                    continue
                time.sleep(0.01)
            self.close()

        threading.Thread(target=wait_then_close, name="data-channel-close", daemon=True).start()


def open_channel(transport: DataTransport, channel_id: int, token: str, *, accepts_input: bool,
                 open_timeout_s: float, progress_timeout_s: float,
                 channel_class: type[PluginChannel] = PluginChannel) -> PluginChannel:
    """Connect to the host's socket and authenticate one channel within ``open_timeout_s``."""
    deadline = time.monotonic() + open_timeout_s
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(open_timeout_s)
    try:
        sock.connect(transport.socket_path)
    except TimeoutError:
        sock.close()
        raise transport_error("opening data channel timed out") from None
    except OSError as exc:
        sock.close()
        raise transport_error(f"connecting to the host data socket: {exc.strerror or exc}") from None
    channel = channel_class(sock, transport.max_frame_bytes, accepts_input)
    payload = json.dumps({"channel_id": channel_id, "token": token, "acknowledge": transport.open_ack},
                         separators=(",", ":")).encode()
    try:
        channel.send_frame(OPEN, payload)
        if transport.open_ack:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            acknowledged = _read_acknowledgement(channel)
            if not acknowledged:
                raise transport_error("data channel authentication was not acknowledged")
    except BackendError:
        channel.close()
        raise
    sock.settimeout(progress_timeout_s)
    return channel


def _read_acknowledgement(channel: PluginChannel) -> bool:
    """Whether the host's first frame is the empty ``open`` that acknowledges authentication."""
    try:
        header = channel.sock.recv(HEADER.size, socket.MSG_WAITALL)
    except TimeoutError:
        raise transport_error("opening data channel timed out") from None
    except OSError:
        return False
    if len(header) != HEADER.size:
        return False
    kind, length = HEADER.unpack(header)
    return kind == OPEN and length == 0
