"""A pytest plugin (``-p tests.interrupt_at_session_finish``) whose session finish is hit by a signal, as
xdist's is when a third Ctrl-C lands while it waits for its workers: the run must still write its report."""

from __future__ import annotations


def pytest_sessionfinish(session, exitstatus) -> None:
    raise KeyboardInterrupt
