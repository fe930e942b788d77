"""The host side of protocol v2's data channels: a Unix socket the plugin connects back to, one
connection per byte-moving operation, carrying binary frames (1 kind byte, 4-byte big-endian length,
payload).

What upstream's host does (its channel listener and host client, read for this module; in our words):

- It listens on ``data.sock`` in a fresh directory of mode 0700, numbers channels from 1 per listener
  and mints each token from 32 random bytes as 64 lowercase hex digits.
- A connection's peer credentials (SO_PEERCRED) are checked before anything is read from it: the pid
  must be the spawned plugin's, or the uid a configured one. Then its first frame must come within the
  open timeout (10 s), be ``open``, fit one frame (the length is judged from the header, before the
  payload is read) and carry JSON ``{channel_id, token, acknowledge?}`` naming a waiting channel with
  exactly that token. Anything else is closed unanswered. A wrong token leaves the expectation
  waiting (a forged connection never uses up an honest one); a bound id is forgotten, so a replay
  finds nothing. At most 64 connections may wait for their open at once; further ones are dropped.
- When the open asked ``acknowledge: true`` the host answers at once with an empty ``open`` frame,
  before it uses the channel; the plugin waits up to 10 s for it.
- The host sends an ``eof`` only where it has input to end: after the stdin of an exec with
  ``stdin: true``, the content of ``fs/write``, the closed input of a stdio process or pty. On channels
  where it sends nothing (``fs/read``, exec without stdin, logs) it sends no frame at all, not even an
  eof, and only lets go of its writing half; the plugin never reads those channels. (Conversely it reads
  nothing back on an ``fs/write`` channel, so it never sees that plugin's eof.)
- It reads until the plugin's ``eof``: a connection that ends first is an incomplete transfer, and a
  kind the operation does not expect fails it. A plugin that answers before its channel was opened
  gets 10 s of grace; a write that makes no progress for 30 s fails.

This module does the same, and records what a conformance suite must judge instead of failing the
operation: ``ChannelServer.take_violations()`` for connections that never bound a channel,
``DataChannel.problems`` for rule breaks on a bound one. Bytes only: nothing here knows a method.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hmac
import itertools
import json
import os
import secrets
import select
import shutil
import socket
import struct
import tempfile
import termios
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

from conformance.errors import HarnessError
from conformance.transports import json_text

OPEN = 0
STDOUT = 1
STDERR = 2
STDIN = 3
EOF = 4
KIND_NAMES = {OPEN: "open", STDOUT: "stdout", STDERR: "stderr", STDIN: "stdin", EOF: "eof"}

MAX_FRAME_BYTES = 65536
HEADER = struct.Struct(">BI")
_HEADER_BYTES = HEADER.size

# Inbound data frames waiting for the consumer; when full the reader stops reading the socket, so the
# plugin's writes block: backpressure through the socket, never an unbounded buffer (64 x 64 KiB).
INBOUND_QUEUE_FRAMES = 64
# Connections accepted but not yet bound (upstream's unauthenticated_handshakes).
MAX_PENDING_HANDSHAKES = 64
# How much one read may take from the socket ahead of the frame parser (four full frames): a frame then
# costs a fraction of a system call, and what was read but not parsed yet stays small and bounded.
_READ_AHEAD_BYTES = 4 * MAX_FRAME_BYTES
# How long a blocked read or write sleeps at most before it looks whether its channel was closed.
_WAKE_SLICE_S = 0.25
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def kind_name(kind: int) -> str:
    return KIND_NAMES.get(kind, f"unknown kind {kind}")


def new_token() -> str:
    """A one-use channel secret: 256 random bits as 64 lowercase hex digits."""
    return secrets.token_hex(32)


@dataclass(frozen=True, slots=True)
class Frame:
    """One inbound data frame (stdout or stderr) as the consumer reads it."""

    kind: int
    payload: bytes

    @property
    def kind_name(self) -> str:
        return kind_name(self.kind)


@dataclass(frozen=True, slots=True)
class FrameRecord:
    """What is kept of every inbound frame, the ``open`` included: never the payload. ``at`` is the
    monotonic time the frame was read whole; ``offset`` is where its header starts in the bytes the
    plugin sent on this connection (the open frame is at 0)."""

    kind: int
    length: int
    at: float
    offset: int

    @property
    def kind_name(self) -> str:
        return kind_name(self.kind)


class _PeerClosed(Exception):
    """The connection ended (the plugin closed it, or we did) after ``got`` bytes of a read."""

    def __init__(self, got: int) -> None:
        super().__init__(got)
        self.got = got


class _CutFrame(Exception):
    """The connection ended inside a frame's payload: ``got`` of its ``length`` bytes had come."""

    def __init__(self, kind: int, length: int, got: int) -> None:
        super().__init__(kind, length, got)
        self.kind, self.length, self.got = kind, length, got


class _Wire:
    """One accepted connection, non-blocking underneath.

    Reads go through a read-ahead buffer: one ``recv`` takes whatever the socket holds (up to
    ``_READ_AHEAD_BYTES``) and the frames in it are handed out without further system calls.
    ``consumed`` counts the bytes handed out, ``received`` the bytes taken from the socket. Reads take
    ``_read_lock`` only for a non-blocking ``recv`` and the bookkeeping, never while waiting, so
    ``on_wire()`` (received + FIONREAD under the same lock) is an exact count of the bytes the plugin
    had handed to the socket at that moment.
    """

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.consumed = 0
        self.received = 0
        self._ahead = memoryview(bytearray(_READ_AHEAD_BYTES))
        self._ahead_start = self._ahead_end = 0  # bytes read but not handed out: _ahead[start:end]
        self.closing = threading.Event()
        self._read_lock = threading.Lock()
        self._write_lock = threading.Lock()

    def peer_credentials(self) -> tuple[int, int, int]:
        return _UCRED.unpack(self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))

    def _wait(self, events: int, deadline: float | None) -> bool:
        """Wait until the socket is ready for ``events``; False at the deadline."""
        poller = select.poll()
        poller.register(self.sock, events)
        while not self.closing.is_set():
            slice_s = _WAKE_SLICE_S if deadline is None else min(_WAKE_SLICE_S, deadline - time.monotonic())
            if slice_s <= 0:
                return False
            if poller.poll(slice_s * 1000):
                return True
        return True  # closing: the next recv/send finds out

    def recv_exact(self, size: int, deadline: float | None = None) -> bytes:
        """Exactly ``size`` bytes (at most ``_READ_AHEAD_BYTES``: callers judge a header's length
        before they ask for its payload); ``TimeoutError`` at the deadline, ``_PeerClosed`` when the
        connection ends first."""
        while True:
            with self._read_lock:
                ahead, start, end = self._ahead, self._ahead_start, self._ahead_end
                if self.closing.is_set():
                    raise _PeerClosed(end - start)
                if end - start >= size:
                    self._ahead_start = start + size
                    self.consumed += size
                    return bytes(ahead[start:start + size])
                if start:  # move the unfinished rest to the front, so the whole frame fits behind it
                    ahead[:end - start] = bytes(ahead[start:end])
                    start, end = 0, end - start
                    self._ahead_start, self._ahead_end = start, end
                try:
                    count = self.sock.recv_into(ahead[end:])
                except (BlockingIOError, InterruptedError):
                    count = -1
                except OSError:  # reset by the peer: an end like any other
                    count = 0
                if count == 0:
                    raise _PeerClosed(end - start)
                if count > 0:
                    self._ahead_end = end + count
                    self.received += count
                    continue
            if not self._wait(select.POLLIN, deadline):
                raise TimeoutError

    def next_frame(self) -> tuple[int, int, bytes | None]:
        """The next frame: its kind, its length and its payload, or ``None`` for the payload when the
        header already breaks a rule (an unknown kind, a length over MAX_FRAME_BYTES; nothing more is
        read). A frame already whole in the read-ahead buffer costs one lock and one copy, no system
        call. ``_PeerClosed`` when the connection ends before a whole header (``got``: bytes of it),
        ``_CutFrame`` when it ends inside a payload."""
        with self._read_lock:
            start, end = self._ahead_start, self._ahead_end
            if end - start >= _HEADER_BYTES and not self.closing.is_set():
                kind, length = HEADER.unpack_from(self._ahead, start)
                stop = start + _HEADER_BYTES + length
                if stop <= end and length <= MAX_FRAME_BYTES and kind in KIND_NAMES:
                    self._ahead_start = stop
                    self.consumed += stop - start
                    return kind, length, self._ahead[start + _HEADER_BYTES:stop].tobytes()
        kind, length = HEADER.unpack(self.recv_exact(_HEADER_BYTES))
        if length > MAX_FRAME_BYTES or kind not in KIND_NAMES:
            return kind, length, None
        try:
            return kind, length, self.recv_exact(length)
        except _PeerClosed as ended:
            raise _CutFrame(kind, length, ended.got) from None

    def on_wire(self) -> int:
        """Bytes the plugin has sent on this connection so far: read by us plus queued for us. (On a
        Unix stream socket a sent byte sits in the receiver's queue, which FIONREAD counts.)"""
        with self._read_lock:
            read = self.received
            if self.sock.fileno() < 0:
                return read
            try:
                queued = struct.unpack("i", fcntl.ioctl(self.sock.fileno(), termios.FIONREAD, b"\0" * 4))[0]
            except OSError:
                queued = 0
            return read + queued

    def send(self, data: bytes, progress_timeout_s: float) -> bool:
        """Write all of ``data``; False when the plugin has closed its side (a command declining its
        input, which upstream does not count as an error); ``TimeoutError`` when no byte could be
        written for ``progress_timeout_s``."""
        view = memoryview(data)
        with self._write_lock:
            while view:
                if self.closing.is_set():
                    return False
                try:
                    view = view[self.sock.send(view):]
                    continue
                except (BlockingIOError, InterruptedError):
                    pass
                except (BrokenPipeError, ConnectionResetError):
                    return False
                if not self._wait(select.POLLOUT, time.monotonic() + progress_timeout_s):
                    raise TimeoutError(f"the plugin read nothing of this channel for {progress_timeout_s:g} s")
        return True

    def close(self) -> None:
        """Wake every waiter, then close the socket once no read or write is inside it."""
        self.closing.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with self._read_lock, self._write_lock:
            self.sock.close()
            # A closed channel stays on record for the whole run; its read-ahead buffer need not.
            self._ahead = memoryview(b"")


class _FrameQueue:
    """The bounded hand-over from a channel's reader thread to its consumer: a queue the consumer reads,
    or a sink the reader calls with each frame (``hand_to``)."""

    def __init__(self, capacity: int) -> None:
        self._frames: deque[Frame] = deque()
        self._capacity = capacity
        self._ended = False
        self._abandoned = False
        self._changed = threading.Condition()
        self._sink: Callable[[int, bytes], None] | None = None

    def hand_to(self, sink: Callable[[int, bytes], None]) -> None:
        self._sink = sink

    def put(self, kind: int, payload: bytes) -> bool:
        """Hands the frame to the sink, or queues it (blocking while full); False when the consumer side
        was abandoned (the channel closed)."""
        sink = self._sink
        if sink is not None:
            if self._abandoned:
                return False
            sink(kind, payload)
            return True
        frame = Frame(kind, payload)
        with self._changed:
            self._changed.wait_for(lambda: len(self._frames) < self._capacity or self._abandoned)
            if self._abandoned:
                return False
            self._frames.append(frame)
            self._changed.notify_all()
            return True

    def end(self) -> None:
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def abandon(self) -> None:
        with self._changed:
            self._abandoned = self._ended = True
            self._frames.clear()
            self._changed.notify_all()

    def wait_ended(self, timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._ended, timeout_s)

    def get(self, timeout_s: float) -> Frame | None:
        if self._sink is not None:
            raise HarnessError("this channel hands its frames to a sink; they cannot be read from it")
        with self._changed:
            if not self._changed.wait_for(lambda: self._frames or self._ended, timeout_s):
                raise TimeoutError
            if not self._frames:
                return None
            frame = self._frames.popleft()
            self._changed.notify_all()
            return frame


class DataChannel:
    """One channel the host expects: what to put in the request, then the bound connection's frames,
    what was recorded of them, and the host's side of the conversation (input, eof, faults)."""

    def __init__(self, server: ChannelServer, channel_id: int, ack_delay_s: float, withhold_ack: bool) -> None:
        self._server = server
        self.channel_id = channel_id
        self.token = new_token()
        self.ack_delay_s = ack_delay_s
        self.withhold_ack = withhold_ack
        self.opened_at: float | None = None
        self.open_payload: dict | None = None  # the open frame's JSON, its token replaced by "<redacted>"
        self.acknowledge_asked = False
        self.ack_sent_at: float | None = None
        self.plugin_eof_at: float | None = None
        self.plugin_eofs = 0
        self.closed_before_eof: bool | None = None
        # FrameRecord's fields as plain tuples (made into records when asked): the reader pays for a
        # tuple per frame, not for a frozen dataclass.
        self._records: list[tuple[int, int, float, int]] = []
        self._data_frames = self._data_bytes = 0
        self._problems: list[str] = []
        self._problem_kinds: set[str] = set()
        self._frames = _FrameQueue(INBOUND_QUEUE_FRAMES)
        # The reader takes the lock itself per frame (a Condition's enter is Python code).
        self._state_lock = threading.RLock()
        self._state = threading.Condition(self._state_lock)
        self._wire: _Wire | None = None
        self._ready = threading.Event()  # bound, and the acknowledgement (if any) is settled
        self._closed = False
        self._ack_offset: int | None = None
        self._eof_end: int | None = None
        self._answered_offset: int | None = None
        self._answered_before_open = False
        self._reader_done = False
        self._ack_thread: threading.Thread | None = None
        self._reader_thread: threading.Thread | None = None

    def __repr__(self) -> str:  # never the token
        return f"DataChannel(channel_id={self.channel_id}, opened={self.opened_at is not None})"

    # -- what the request carries ----------------------------------------------------------------

    @property
    def request(self) -> dict:
        return {"channel_id": self.channel_id, "token": self.token}

    # -- what was observed ------------------------------------------------------------------------

    def wait_open(self, timeout_s: float) -> bool:
        """True once the plugin bound this channel (its open frame matched); False at the timeout or
        when the host closed the channel first."""
        with self._state:
            self._state.wait_for(lambda: self.opened_at is not None or self._closed, timeout_s)
            return self.opened_at is not None

    @property
    def records(self) -> list[FrameRecord]:
        with self._state:
            kept = list(self._records)
        return [FrameRecord(*fields) for fields in kept]

    @property
    def problems(self) -> list[str]:
        with self._state:
            return list(self._problems)

    def read(self, timeout_s: float) -> Frame | None:
        """The next stdout/stderr frame; None once the plugin's eof arrived or the connection ended
        (after every frame before it); ``TimeoutError`` when none came within ``timeout_s``."""
        return self._frames.get(timeout_s)

    def hand_frames_to(self, sink: Callable[[int, bytes], None]) -> None:
        """Hand every stdout/stderr frame to ``sink(kind, payload)`` on the connection's reader thread
        as it is read, instead of queueing it for ``read``: no second thread and no hand-over between
        threads per frame, which is most of what a frame costs. A slow sink stalls the reader and so the
        plugin (backpressure, as a full queue). Called before the request naming this channel is sent,
        when no frame can have come; ``read`` is then refused. The sink must not raise."""
        with self._state:
            if self._wire is not None:
                raise HarnessError(f"data channel {self.channel_id} is bound already: its frames are handed "
                                   f"over from the start or not at all")
            self._frames.hand_to(sink)

    def wait_handed_over(self, timeout_s: float) -> bool:
        """True once every frame before the plugin's eof (or the connection's end, or the channel's
        close) was handed to the sink; False at the timeout."""
        return self._frames.wait_ended(timeout_s)

    def data_totals(self) -> tuple[int, int]:
        """The stdout and stderr frames recorded so far (after an eof too): how many, how many bytes."""
        with self._state:
            return self._data_frames, self._data_bytes

    def mark_answered(self) -> None:
        """The operation's control response arrived: fix how many bytes the plugin had sent on this
        channel by now, to judge ``eof_before_answer`` against.

        Why this judges order without false failures: a plugin that sends its eof before its response
        has handed the eof's bytes to the socket before it wrote the response line, and we call this
        only after reading that line, so those bytes are already counted (read, or queued: FIONREAD).
        An eof ending at or before the mark was therefore sent no later than the mark; one ending after
        it was sent after the response was read. The only error possible is the lenient one: an eof
        sent just after the response but before this call counts as before.

        Called before the channel was bound (the connection may still wait in the listen backlog), the
        mark is taken when it binds: lenient again, never a false failure."""
        with self._state:
            if self._answered_offset is not None or self._answered_before_open:
                return
            wire = self._wire
            if wire is None:
                self._answered_before_open = True
                return
        offset = wire.on_wire()
        with self._state:
            self._answered_offset = offset

    @property
    def eof_before_answer(self) -> bool | None:
        """Whether the plugin's eof ended at or before the mark of ``mark_answered``. None while it
        cannot be known yet: no mark, or bytes before the mark not read yet (read the channel to its
        end first)."""
        with self._state:
            mark = self._answered_offset
            if mark is None:
                return None
            if self._eof_end is not None:
                return self._eof_end <= mark
            if self._reader_done:
                return False
            wire = self._wire
        if wire is not None and wire.consumed >= mark:
            return False  # an eof still to come ends beyond the mark
        return None

    # -- the host's side ----------------------------------------------------------------------------

    def send_stdin(self, data: bytes) -> bool:
        """Send ``data`` as stdin frames of at most MAX_FRAME_BYTES; False when the plugin had closed
        its side (the rest is not sent)."""
        for start in range(0, len(data), MAX_FRAME_BYTES):
            if not self.send_frame(STDIN, data[start:start + MAX_FRAME_BYTES]):
                return False
        return True

    def send_eof(self) -> bool:
        """The host's eof. Nothing stops a second one: that is a fault scenarios inject."""
        return self.send_frame(EOF, b"")

    def send_frame(self, kind: int, payload: bytes) -> bool:
        """One frame exactly as given, any kind byte and length (fault injection included)."""
        return self._send(HEADER.pack(kind, len(payload)) + payload)

    def send_frames(self, *frames: tuple[int, bytes]) -> bool:
        """Several frames in one write, so they reach the plugin together (a fault right behind an eof is on
        the wire before the plugin can act on the eof, however busy the machine)."""
        return self._send(b"".join(HEADER.pack(kind, len(payload)) + payload for kind, payload in frames))

    def send_header(self, kind: int, declared_length: int) -> bool:
        """A bare header announcing ``declared_length`` bytes that never follow (oversized frames)."""
        return self._send(HEADER.pack(kind, declared_length))

    def _send(self, data: bytes) -> bool:
        if not self.wait_open(self._server.open_timeout_s) and not self._closed:
            raise TimeoutError(f"the plugin did not open data channel {self.channel_id} within "
                               f"{self._server.open_timeout_s:g} s")
        # The acknowledgement (when asked) is the plugin's first frame from us; its delay is ours.
        self._ready.wait(self.ack_delay_s + self._server.progress_timeout_s)
        with self._state:
            wire = self._wire
            if self._closed or wire is None:
                raise HarnessError(f"data channel {self.channel_id} is closed; nothing can be sent on it")
        return wire.send(data, self._server.progress_timeout_s)

    def close(self) -> None:
        """Close the connection (or withdraw the expectation) and join this channel's threads.
        Idempotent; closing before sending an eof is a fault scenarios inject."""
        with self._state:
            already = self._closed
            self._closed = True
            wire = self._wire
        if not already:
            self._server._withdraw(self)
            self._frames.abandon()
            self._ready.set()  # a send waiting for the open finds the channel closed
            with self._state:
                self._state.notify_all()
            if wire is not None:
                wire.close()
                with self._state:
                    if self.closed_before_eof is None:
                        self.closed_before_eof = self.plugin_eofs == 0
        # The reader first: it is the thread that starts the ack thread.
        for thread in (self._reader_thread, self._ack_thread):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=5.0)

    # -- the reader side, run by the server on the connection's own thread -------------------------

    def _problem(self, category: str, message: str) -> None:
        """Keep the first problem of each category: a flood of bad frames is one finding."""
        with self._state:
            if category not in self._problem_kinds:
                self._problem_kinds.add(category)
                self._problems.append(message)

    def _bind(self, wire: _Wire, payload: dict, acknowledge: bool, length: int) -> bool:
        """The server matched this channel's open frame on ``wire``; False when it was closed meanwhile."""
        with self._state:
            if self._closed:
                return False
            self._wire = wire
            self._reader_thread = threading.current_thread()
            self.opened_at = time.monotonic()
            self.open_payload = {**payload, "token": "<redacted>"}
            self.acknowledge_asked = acknowledge
            self._records.append((OPEN, length, self.opened_at, 0))
            answered_before_open = self._answered_before_open
        if answered_before_open:
            offset = wire.on_wire()
            with self._state:
                self._answered_offset = offset
        with self._state:
            self._state.notify_all()
        return True

    def _serve(self, wire: _Wire) -> None:
        """Acknowledge if asked, then read frames until the connection ends."""
        if not self.acknowledge_asked or self.withhold_ack:
            self._ready.set()
        elif self.ack_delay_s > 0:
            self._ack_thread = threading.Thread(target=self._acknowledge_later, args=(wire,), daemon=True,
                                                name=f"data-channel-{self.channel_id}-ack")
            self._ack_thread.start()
        else:
            self._acknowledge(wire)
        plugin_stopped_sending = False
        try:
            plugin_stopped_sending = self._read_frames(wire)
        finally:
            self._frames.end()
            with self._state:
                self._reader_done = True
                if self.closed_before_eof is None:
                    self.closed_before_eof = self.plugin_eofs == 0
            # A plugin that ended only its sending half may still read our input (upstream's writing
            # half shuts down when dropped), so the socket stays until the channel is closed.
            if not plugin_stopped_sending:
                wire.close()

    def _acknowledge_later(self, wire: _Wire) -> None:
        if wire.closing.wait(self.ack_delay_s):
            self._ready.set()  # never acknowledged: a send finds the connection closed
        else:
            self._acknowledge(wire)

    def _acknowledge(self, wire: _Wire) -> None:
        # Everything on the wire before the ack was sent before the plugin could have seen it.
        offset = wire.on_wire()
        with self._state:
            self._ack_offset = offset
            self.ack_sent_at = time.monotonic()
        try:
            delivered = wire.send(HEADER.pack(OPEN, 0), self._server.progress_timeout_s)
        except TimeoutError:
            delivered = True  # it sits in the plugin's queue, unread
            self._problem("ack", f"the plugin did not read the host's open acknowledgement on channel "
                                 f"{self.channel_id}")
        finally:
            self._ready.set()
        if not delivered:  # the plugin was gone: it never had leave to send
            with self._state:
                self.ack_sent_at = None

    def _read_frames(self, wire: _Wire) -> bool:
        """Read until the connection ends; True when the plugin ended it, False when we stopped."""
        records, state, frames = self._records, self._state_lock, self._frames
        while True:
            offset = wire.consumed
            try:
                kind, length, payload = wire.next_frame()
            except _PeerClosed as ended:
                self._ended(wire, f"{ended.got} of a frame header's {HEADER.size} bytes" if ended.got else "")
                return True
            except _CutFrame as cut:
                self._ended(wire, f"{cut.got} of a {kind_name(cut.kind)} frame's {cut.length} payload bytes")
                return True
            if payload is None:
                if kind not in KIND_NAMES:
                    self._problem("kind", f"a frame of unknown kind byte {kind} at offset {offset} (kinds are "
                                          f"0-4); the connection was closed")
                else:
                    self._problem("length", f"a {kind_name(kind)} frame header at offset {offset} announces "
                                            f"{length} bytes, over the {MAX_FRAME_BYTES}-byte frame limit; "
                                            f"rejected from the header and the connection was closed")
                return False
            at = time.monotonic()
            with state:
                records.append((kind, length, at, offset))
                after_eof = self.plugin_eofs > 0
                if kind == STDOUT or kind == STDERR:
                    self._data_frames += 1
                    self._data_bytes += length
                elif kind == EOF:
                    self.plugin_eofs += 1
                    if self.plugin_eofs == 1:
                        self.plugin_eof_at = at
                        self._eof_end = offset + HEADER.size + length
                ack_offset = self._ack_offset
            if kind == EOF:
                if after_eof:
                    self._problem("second eof", f"a second eof at offset {offset} (each side sends one)")
                if length:
                    self._problem("eof payload", f"the eof at offset {offset} carries {length} bytes (an eof "
                                                 f"is empty)")
                if not after_eof:
                    frames.end()
                continue
            if after_eof:
                self._problem("after eof", f"a {kind_name(kind)} frame at offset {offset} after the plugin's eof")
                continue
            if kind == OPEN:
                self._problem("second open", f"a second open frame at offset {offset} (open comes once, first)")
                continue
            if kind == STDIN:
                self._problem("stdin", f"a stdin frame at offset {offset}: stdin is the host's kind, never "
                                       f"the plugin's")
                continue
            if self.acknowledge_asked and (ack_offset is None or offset < ack_offset):
                self._problem("before ack", f"a {kind_name(kind)} frame at offset {offset} before the host's "
                                            f"open acknowledgement (the plugin asked acknowledge: true)")
            if not frames.put(kind, payload):
                return False

    def _ended(self, wire: _Wire, inside: str) -> None:
        """The connection ended (``inside``: how much of an unfinished frame had come, if any)."""
        with self._state:
            if self.closed_before_eof is None:
                self.closed_before_eof = self.plugin_eofs == 0
            no_eof = self.plugin_eofs == 0
            # Without the acknowledgement it asked for, the plugin may send nothing and give up.
            unacknowledged = self.acknowledge_asked and self.ack_sent_at is None
        if wire.closing.is_set() or unacknowledged:
            return  # we closed it, or the plugin never had leave to send
        if inside:
            self._problem("truncated", f"the plugin closed the connection inside a frame ({inside} arrived)")
        if no_eof:
            self._problem("closed before eof", "the plugin closed the connection before its eof (an "
                                               "incomplete transfer)")


class ChannelServer:
    """The host's listener for one plugin connection's data channels.

    ``peer_pids()`` names the processes allowed to connect (asked at each connection: a restarted
    plugin has a new pid); ``peer_uid`` additionally allows every process of that user.
    ``open_timeout_s`` bounds the wait for a connection's first frame and a send's wait for its
    channel to open; ``progress_timeout_s`` a write the plugin does not read.
    """

    def __init__(self, peer_pids: Callable[[], set[int]], peer_uid: int | None = None,
                 open_timeout_s: float = 10.0, progress_timeout_s: float = 30.0) -> None:
        self.peer_pids = peer_pids
        self.peer_uid = peer_uid
        self.open_timeout_s = open_timeout_s
        self.progress_timeout_s = progress_timeout_s
        self.directory: str | None = None
        self.socket_path: str | None = None
        self._listener: socket.socket | None = None
        self._wake_read = self._wake_write = -1
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._waiting: dict[int, DataChannel] = {}
        self._bound: set[int] = set()
        self._withdrawn: set[int] = set()
        self._channels: list[DataChannel] = []
        self._handshakes: dict[threading.Thread, _Wire] = {}
        self._threads: set[threading.Thread] = set()
        self._violations: list[str] = []
        self._accept_thread: threading.Thread | None = None
        self._closed = False

    def start(self) -> Self:
        directory = tempfile.mkdtemp(prefix="sandbox-conformance-v2-")  # mode 0700
        path = os.path.join(directory, "data.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(path)
            listener.listen(128)
        except OSError as exc:
            listener.close()
            shutil.rmtree(directory, ignore_errors=True)
            raise HarnessError(f"cannot listen for data channels on {path}: {exc.strerror or exc}") from None
        listener.setblocking(False)
        self.directory, self.socket_path, self._listener = directory, path, listener
        self._wake_read, self._wake_write = os.pipe()
        self._accept_thread = threading.Thread(target=self._accept_loop, daemon=True, name="data-channel-accept")
        self._accept_thread.start()
        return self

    def expect(self, ack_delay_s: float = 0.0, withhold_ack: bool = False) -> DataChannel:
        """A fresh channel (new id, new token) the next request will name."""
        with self._lock:
            if self._closed or self._listener is None:
                raise HarnessError("the data channel server is not listening")
            channel = DataChannel(self, next(self._ids), ack_delay_s, withhold_ack)
            self._waiting[channel.channel_id] = channel
            self._channels.append(channel)
        return channel

    def take_violations(self) -> list[str]:
        """Connection-level problems since the last call (each such connection was closed)."""
        with self._lock:
            taken, self._violations = self._violations, []
        return taken

    def close(self) -> None:
        """Close every channel and connection, end every thread, remove the directory. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            channels = list(self._channels)
            handshakes = list(self._handshakes.values())
        if self._wake_write >= 0:
            os.write(self._wake_write, b"x")
        if self._accept_thread is not None:
            self._accept_thread.join(timeout=5.0)
        for wire in handshakes:
            wire.close()
        for channel in channels:
            channel.close()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=5.0)
        for fd in (self._wake_read, self._wake_write):
            if fd >= 0:
                os.close(fd)
        self._wake_read = self._wake_write = -1
        if self._listener is not None:
            self._listener.close()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------------

    def _violation(self, message: str) -> None:
        with self._lock:
            self._violations.append(message)

    def _withdraw(self, channel: DataChannel) -> None:
        with self._lock:
            if self._waiting.pop(channel.channel_id, None) is not None:
                self._withdrawn.add(channel.channel_id)

    def _accept_loop(self) -> None:
        assert self._listener is not None
        poller = select.poll()
        poller.register(self._listener, select.POLLIN)
        poller.register(self._wake_read, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._wake_read in ready:
                return
            try:
                connection, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):  # out of descriptors: back off, as upstream
                    time.sleep(0.05)
                    continue
                raise
            with self._lock:
                if len(self._handshakes) >= MAX_PENDING_HANDSHAKES or self._closed:
                    connection.close()
                    continue
                wire = _Wire(connection)
                thread = threading.Thread(target=self._admit, args=(wire,), daemon=True,
                                          name="data-channel-connection")
                self._handshakes[thread] = wire
                self._threads.add(thread)
            thread.start()

    def _admit(self, wire: _Wire) -> None:
        """Check the peer and the first frame; bind the channel it names and serve it on this thread."""
        channel: DataChannel | None = None
        try:
            channel = self._authenticate(wire)
        finally:
            with self._lock:
                self._handshakes.pop(threading.current_thread(), None)
            if channel is None:
                wire.close()
        try:
            if channel is not None:
                channel._serve(wire)
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _authenticate(self, wire: _Wire) -> DataChannel | None:
        pid, uid, _gid = wire.peer_credentials()
        allowed_pids = self.peer_pids()
        if pid not in allowed_pids and (self.peer_uid is None or uid != self.peer_uid):
            allowed = f"pid {sorted(allowed_pids)}" + (f" or uid {self.peer_uid}" if self.peer_uid is not None else "")
            self._violation(f"a data channel connection from pid {pid} (uid {uid}), not the plugin "
                            f"({allowed}); closed")
            return None
        deadline = time.monotonic() + self.open_timeout_s
        try:
            kind, length = HEADER.unpack(wire.recv_exact(HEADER.size, deadline))
            if kind != OPEN:
                self._violation(f"a data channel connection whose first frame is {kind_name(kind)}, not open; "
                                f"closed")
                return None
            if length > MAX_FRAME_BYTES:
                self._violation(f"an open frame announcing {length} bytes, over the {MAX_FRAME_BYTES}-byte "
                                f"frame limit (an open cannot span frames); closed")
                return None
            payload = wire.recv_exact(length, deadline)
        except TimeoutError:
            self._violation(f"a data channel connection sent no open frame within {self.open_timeout_s:g} s; "
                            f"closed")
            return None
        except _PeerClosed as ended:
            # A connection that sent nothing at all broke no frame rule; one we closed (shutdown) neither.
            if (ended.got or wire.consumed) and not wire.closing.is_set():
                self._violation("a data channel connection closed inside its open frame")
            return None
        opened = self._parse_open(payload)
        if opened is None:
            return None
        channel_id, token, acknowledge, body = opened
        with self._lock:
            channel = self._waiting.get(channel_id)
            if channel is not None and hmac.compare_digest(token.encode(), channel.token.encode()):
                del self._waiting[channel_id]
                self._bound.add(channel_id)
                problem = None
            elif channel is not None:
                problem = f"an open frame for channel {channel_id} with the wrong token; closed (the channel " \
                          f"still waits for its own)"
            elif channel_id in self._bound:
                problem = f"an open frame reusing channel id {channel_id}, already bound; closed"
            elif channel_id in self._withdrawn:
                problem = f"an open frame for channel {channel_id} after the host stopped waiting for it; closed"
            else:
                problem = f"an open frame for unknown channel id {channel_id}; closed"
        if problem is not None:
            self._violation(problem)
            return None
        return channel if channel._bind(wire, body, acknowledge, length) else None

    def _parse_open(self, payload: bytes) -> tuple[int, str, bool, dict] | None:
        """The open frame's ``(channel_id, token, acknowledge, body)``, or None after recording why not.
        Unknown members are ignored, as upstream's reader ignores them."""
        try:
            body = json_text.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
            self._violation(f"an open frame whose payload is not UTF-8 JSON{where}; closed")
            return None
        except json_text.UnreadableJson as exc:  # a RecursionError here ended the accepting thread unheard
            self._violation(f"an open frame whose payload {exc}; closed")
            return None
        if not isinstance(body, dict):
            self._violation("an open frame whose payload is not a JSON object; closed")
            return None
        channel_id, token = body.get("channel_id"), body.get("token")
        acknowledge = body.get("acknowledge", False)
        if isinstance(channel_id, bool) or not isinstance(channel_id, int) or not 0 <= channel_id < 2**64:
            self._violation("an open frame without a u64 channel_id; closed")
            return None
        if not isinstance(token, str):
            self._violation(f"an open frame for channel {channel_id} without a string token; closed")
            return None
        if not isinstance(acknowledge, bool):
            self._violation(f"an open frame for channel {channel_id} whose acknowledge is not a boolean; closed")
            return None
        return channel_id, token, acknowledge, body
