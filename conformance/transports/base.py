"""The transport seam for line-framed peers."""

from __future__ import annotations

import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

# How long a plugin has to exit once its input closed (after a shutdown, where one was sent): upstream's
# host waits 5 s after the shutdown answer before it kills, and session.feature judges 5 s; a shorter grace
# here reported, on a loaded machine, plugins the host itself would have let exit.
EXIT_GRACE_S = 5.0


class LineTransport(Protocol):
    """A peer that exchanges newline-terminated frames.

    ``start`` begins delivering every received line (without its terminator) to ``on_line`` from a
    background thread, and calls ``on_close`` once when the peer's output ends. A line longer than
    ``max_line_bytes`` (settable at any time) is never held whole: the transport calls
    ``on_overflow(limit)`` as soon as the unfinished line crosses it, stops reading, and closes.
    """

    max_line_bytes: int | None

    def start(self, on_line: Callable[[bytes], None], on_close: Callable[[], None],
              on_overflow: Callable[[int], None] | None = None) -> None: ...

    def send(self, frame: bytes, timeout_s: float | None = None) -> None:
        """Write one whole frame within ``timeout_s`` (None: the transport's default); ``InputStalled``
        when the peer did not take it in time."""

    def close_input(self) -> None: ...

    def close(self, grace_s: float = 2.0) -> None: ...

    @property
    def alive(self) -> bool: ...

    @property
    def peer_pid(self) -> int | None:
        """The pid whose Unix-socket connections count as the peer's own (v2 data channels); None
        before the peer started."""

    def describe(self) -> str: ...

    def stderr_tail(self, since: int | None = None) -> str:
        """The newest stderr bytes, or those written after position ``since``."""

    def stderr_position(self) -> int: ...

    def wait_exit(self, timeout_s: float) -> int | None: ...


# A frame written without a deadline of its own (the connection gives every request its call's) still gets one:
# a peer that stopped reading must never hold a writer in the kernel for ever.
DEFAULT_WRITE_TIMEOUT_S = 30.0


class InputStalled(TimeoutError):
    """The peer stopped reading its input: a frame was not taken within its deadline (or a write was
    interrupted while it waited). ``broken``: part of a frame went out, so nothing more can be framed."""

    def __init__(self, message: str, broken: bool) -> None:
        super().__init__(message)
        self.broken = broken


class FrameWriter:
    """Writes whole frames to the peer's input pipe, each within a deadline: the descriptor is non-blocking
    and a full pipe is waited on with ``poll``, so a peer that stopped reading costs the frame's deadline,
    never a writer blocked in the kernel (where even Ctrl-C could not reach it: ``poll`` is interrupted by a
    signal, a blocking ``write`` of a large frame is resumed). Once part of a frame went out and the rest
    could not, the framing is lost: every later frame is refused at once with the first one's cause."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)  # our end only: the pipe's read end is the peer's own open file
        self.fd = fd
        self.lock = threading.Lock()
        self.broken: str | None = None
        self.closed = False

    def write(self, frame: bytes, timeout_s: float | None) -> None:
        timeout_s = DEFAULT_WRITE_TIMEOUT_S if timeout_s is None else max(0.0, timeout_s)
        deadline = time.monotonic() + timeout_s
        if not self.lock.acquire(timeout=timeout_s):
            raise InputStalled(f"the plugin stopped reading its input: an earlier frame still waited to be taken "
                               f"after {timeout_s:g}s", broken=False)
        try:
            if self.closed:  # the suite closed it (EOF scenarios): nothing more can be sent
                raise BrokenPipeError("the plugin's input is closed")
            if self.broken is not None:
                raise InputStalled(self.broken, broken=True)
            self._write_all(frame, deadline, timeout_s)
        finally:
            self.lock.release()

    def close(self, close_descriptor: Callable[[], None]) -> None:
        """Close the input with ``close_descriptor``, never under a write (one in progress has its own
        deadline), and refuse every later frame: the descriptor's number may name another file by then."""
        with self.lock:
            if not self.closed:
                self.closed = True
                close_descriptor()

    def _write_all(self, frame: bytes, deadline: float, timeout_s: float) -> None:
        view, sent = memoryview(frame), 0
        try:
            while sent < len(frame):
                try:
                    sent += os.write(self.fd, view[sent:])
                    continue
                except BlockingIOError:
                    pass
                remaining = deadline - time.monotonic()
                poller = select.poll()
                poller.register(self.fd, select.POLLOUT)
                if remaining <= 0 or not poller.poll(remaining * 1000):
                    cause = (f"the plugin stopped reading its input: {sent} of the frame's {len(frame)} bytes "
                             f"were taken within {timeout_s:g}s")
                    if sent:
                        self.broken = f"{cause}, so its input holds part of a frame"
                    raise InputStalled(self.broken or cause, broken=bool(sent))
        except OSError:  # InputStalled, or the pipe broke (the plugin is gone: there is no framing left to keep)
            raise
        except BaseException:  # interrupted (Ctrl-C): the part written ends the framing
            if 0 < sent < len(frame):
                self.broken = (f"a frame was cut short after {sent} of its {len(frame)} bytes (the plugin had not "
                               f"taken the rest), so its input holds part of a frame")
            raise


READ_CHUNK_BYTES = 64 * 1024  # below the allocator's mmap threshold: a small answer costs no mmap per read


def pump_lines(read: Callable[[int], bytes], on_line: Callable[[bytes], None],
               limit: Callable[[], int | None]) -> int | None:
    """Read chunks with ``read(n)`` until it returns nothing, handing on every line without its newline
    (and a last unterminated one at the end, as ``readline`` would), as bytes or, when it spanned chunks,
    the bytearray it was gathered in (never copied: the consumer must not grow it). Holds at most ``limit()`` bytes of an
    unfinished line plus one chunk: returns the limit a line crossed (having stopped reading at once), or
    None at the end of the stream."""
    pending = bytearray()
    while chunk := read(READ_CHUNK_BYTES):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if pending:
                pending += chunk[start:end]
                line, pending = pending, bytearray()  # handed on as it is: a copy would double a long line
            else:
                line = chunk[start:end]
            ceiling = limit()
            if ceiling is not None and len(line) > ceiling:
                return ceiling
            on_line(line)
            start = end + 1
        pending += chunk[start:] if start else chunk
        ceiling = limit()
        if ceiling is not None and len(pending) > ceiling:
            return ceiling
    if pending:
        on_line(pending)
    return None


class StderrTail:
    """A bounded ring of the newest bytes a peer wrote to stderr, drained continuously."""

    def __init__(self, limit_bytes: int = 64 * 1024) -> None:
        self._limit = limit_bytes
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._dropped = 0
        self._lock = threading.Lock()

    def append(self, chunk: bytes) -> None:
        with self._lock:
            self._chunks.append(chunk)
            self._size += len(chunk)
            while self._size > self._limit and self._chunks:
                head = self._chunks[0]
                excess = self._size - self._limit
                if len(head) <= excess:
                    self._chunks.popleft()
                    self._size -= len(head)
                    self._dropped += len(head)
                else:
                    self._chunks[0] = head[excess:]
                    self._size -= excess
                    self._dropped += excess

    def text(self, max_bytes: int | None = None) -> str:
        with self._lock:
            data = b"".join(self._chunks)
            dropped = self._dropped
        if max_bytes is not None and len(data) > max_bytes:
            dropped += len(data) - max_bytes
            data = data[-max_bytes:]
        body = data.decode("utf-8", errors="replace")
        return f"[{dropped} earlier bytes dropped]\n{body}" if dropped else body

    def settle(self, quiet_s: float = 0.05, limit_s: float = 0.5) -> None:
        """Wait until nothing new arrived for ``quiet_s`` (at most ``limit_s``), so a failure report
        includes what the provider wrote just before it answered."""
        deadline = time.monotonic() + limit_s
        last = self.mark()
        while time.monotonic() < deadline:
            time.sleep(quiet_s)
            now = self.mark()
            if now == last:
                return
            last = now

    def mark(self) -> int:
        """A position to read new stderr from later (bytes ever written)."""
        with self._lock:
            return self._dropped + self._size

    def since(self, position: int, max_bytes: int | None = None) -> str:
        with self._lock:
            data = b"".join(self._chunks)
            start = max(0, position - self._dropped)
        data = data[start:]
        if max_bytes is not None and len(data) > max_bytes:
            return f"[{len(data) - max_bytes} earlier bytes dropped]\n" + data[-max_bytes:].decode("utf-8", errors="replace")
        return data.decode("utf-8", errors="replace")
