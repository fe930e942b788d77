"""Ctrl-C and SIGTERM end a run the same way, and the run never forgets it was interrupted.

The first signal raises ``KeyboardInterrupt`` in the main thread, so the scenario stops and every
``finally`` — per-scenario cleanup, the sweep by run label, the container's removal — runs. A second
signal while that cleanup runs is ignored (a message says so): stopping the cleanup is what leaks
sandboxes. A third abandons it. Because a ``KeyboardInterrupt`` can be swallowed where Python cannot
raise it (a ``__del__``, a finalizer, a callback), the fact is also kept in ``INTERRUPTED``, which the
verdict and the exit code read.

Under ``-n`` the xdist workers run the scenarios, in process groups of their own (``detach_worker``) so that a
terminal's Ctrl-C reaches them once, through the controller: it passes every signal it gets on to each worker
(``forward_to``), and each worker counts them the same way. So the first signal stops every worker's scenario
and lets its cleanup run, the second is ignored everywhere, the third abandons every cleanup.
"""

from __future__ import annotations

import os
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
_workers: set[int] = set()  # pids the controller passes each signal on to
_quiet = False  # an xdist worker's: no message (the controller's says it)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    global _count
    _count += 1
    INTERRUPTED.set()
    for pid in list(_workers):
        try:
            os.kill(pid, signum)
        except OSError:  # it has ended
            _workers.discard(pid)
    if _quiet:  # an xdist worker: the controller speaks for the run
        if _shielded or _count == 2:
            return
        raise KeyboardInterrupt
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
def trapped(quiet: bool = False) -> Iterator[None]:
    """Handle SIGINT and SIGTERM as described above while the block runs (main thread only); ``quiet`` in an
    xdist worker."""
    global _count, _quiet
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _on_signal) for signum in _SIGNALS}
    _count, _quiet = 0, quiet
    try:
        yield
    finally:
        _quiet = False
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


def abandoned() -> bool:
    """Whether a third signal abandoned the cleanup."""
    return _count >= 3


def forward_to(pid: int) -> None:
    """Pass every signal this process gets (while ``trapped``) on to ``pid``, an xdist worker."""
    _workers.add(pid)


def forget_workers() -> None:
    _workers.clear()


def detach_worker() -> None:
    """In an xdist worker: leave the terminal's process group, so a Ctrl-C reaches this worker once, passed
    on by the controller, rather than twice (from the terminal, then from the controller), which would count
    as the second interrupt at once."""
    try:
        os.setpgid(0, 0)
    except (AttributeError, OSError):  # not POSIX, or already a group leader
        pass
