"""Ctrl-C and SIGTERM end a run the same way, and the run never forgets it was interrupted.

The first signal raises ``KeyboardInterrupt`` in the main thread, so the scenario stops and every
``finally`` — per-scenario cleanup, the sweep by run label, the container's removal — runs. A second
signal while that cleanup runs is ignored (a message says so): stopping the cleanup is what leaks
sandboxes. A third abandons it. Because a ``KeyboardInterrupt`` can be swallowed where Python cannot
raise it (a ``__del__``, a finalizer, a callback), the fact is also kept in ``INTERRUPTED``, which the
verdict and the exit code read.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

INTERRUPTED = threading.Event()
_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_count = 0
_shielded = 0  # > 0 while the report is written: a signal is noted, never raised


def _on_signal(signum: int, frame: FrameType | None) -> None:
    global _count
    _count += 1
    INTERRUPTED.set()
    if _shielded:
        print("sandbox-conformance: interrupted; finishing the cleanup and the report first", file=sys.stderr,
              flush=True)
        return
    if _count == 2:
        print("sandbox-conformance: cleaning up the run's sandboxes; interrupt again to abandon the cleanup "
              "(then `sandbox-conformance sweep --run-id ...` removes what is left)", file=sys.stderr, flush=True)
        return
    raise KeyboardInterrupt


@contextmanager
def trapped() -> Iterator[None]:
    """Handle SIGINT and SIGTERM as described above while the block runs (main thread only)."""
    global _count
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _on_signal) for signum in _SIGNALS}
    _count = 0
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextmanager
def shielded() -> Iterator[None]:
    """While the block runs (the end-of-run sweep and report), signals are noted but do not interrupt:
    an interrupted run still gets its results.json, saying it was interrupted."""
    global _shielded
    _shielded += 1
    try:
        yield
    finally:
        _shielded -= 1
