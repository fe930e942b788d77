"""The transport seam for line-framed peers."""

from __future__ import annotations

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

    def send(self, frame: bytes) -> None: ...

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


READ_CHUNK_BYTES = 64 * 1024  # below the allocator's mmap threshold: a small answer costs no mmap per read


def pump_lines(read: Callable[[int], bytes], on_line: Callable[[bytes], None],
               limit: Callable[[], int | None]) -> int | None:
    """Read chunks with ``read(n)`` until it returns nothing, handing on every line without its newline
    (and a last unterminated one at the end, as ``readline`` would). Holds at most ``limit()`` bytes of an
    unfinished line plus one chunk: returns the limit a line crossed (having stopped reading at once), or
    None at the end of the stream."""
    pending = bytearray()
    while chunk := read(READ_CHUNK_BYTES):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if pending:
                pending += chunk[start:end]
                line, pending = bytes(pending), bytearray()
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
        on_line(bytes(pending))
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
