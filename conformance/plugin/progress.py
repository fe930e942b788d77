"""The run's progress while it runs, on the controller (or the single process): the live line on a terminal,
one line per failure in a CI log (``conformance/reporting/progress.py`` renders both).

pytest's own per-test output (``..F  [100%]``) would fight the live line and says less than a failure line,
so unless -v it is silenced: every report keeps its category (pytest's closing tally) but loses its
letter and word. Scenarios are followed through the phase reports the controller folds
(``pytest_runtest_logreport``, which xdist replays there for every worker): set up → running, torn down →
finished.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import IO, Any

import pytest

from conformance.plugin.keys import INFO, RunState
from conformance.reporting import progress, terminal
from conformance.reporting.progress import LiveDisplay, PlainDisplay, ProgressState

PLUGIN_NAME = "sandbox-conformance-progress"


class RunProgress:
    """Registered by ``ConformancePlugin`` on the controller; hooks only."""

    def __init__(self, state: RunState, config: pytest.Config) -> None:
        self.state = state
        self.config = config
        self.progress = ProgressState()
        self.verbose = state.config.verbose
        self.display: LiveDisplay | PlainDisplay | None = None
        self._own_stream: IO[str] | None = None
        self._shown = False

    # -- what pytest prints per test ------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Iterator[None]:
        status = yield
        if self.verbose or not status:
            return status
        category = status[0]
        return category, "", ""

    # -- what the run will cover ---------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        dialect = self.state.facts.provider.get("dialect")
        infos = [item.stash[INFO] for item in items if INFO in item.stash]
        other = {info.id for info in infos if info.dialects and dialect not in info.dialects}
        self.progress.expect(len(infos), other)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if not self.progress.total and not self.progress.done:  # every worker collects the same selection
            self.progress.expect(len(ids))

    # -- while it runs ---------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Iterator[None]:
        self.display = self._open_display()
        try:
            if self.progress.total:  # one process: the selection is known; under xdist, see _show
                self._show()
            return (yield)
        finally:  # the run's end, --maxfail or Ctrl-C alike: the terminal is left clean
            if self._shown:
                self.display.stop()
            self._close_stream()

    @pytest.hookimpl(trylast=True)  # after ConformancePlugin folded the phase into the scenario's result
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        result = self.state.facts.results.get(report.nodeid)
        if result is None or self.display is None:
            return
        self._show()
        if report.when == "setup" and result.outcome == "passed":
            self.progress.started(result.id)
        elif report.when == "teardown":
            # not for this dialect (reporting/counts.py): neither done nor expected
            not_for_dialect = result.skip_cause in ("other dialect", "no rule")
            self.progress.finished(result.id, result.outcome, other_dialect=not_for_dialect)
            if result.outcome in progress.FAILING_OUTCOMES:
                baseline = self.state.baseline
                expected = baseline is not None and baseline.expects(result.id, result.requirements)
                self.display.failure(result.to_dict(include_diagnostics=False), expected)
        self.display.refresh()

    def _show(self) -> None:
        """Start showing progress. Under xdist not before the first scenario report: until the workers have
        collected, xdist rewrites its own status line ("bringing up nodes...") on the terminal."""
        if not self._shown and self.display is not None:
            self.display.start()
            self._shown = True

    def _open_display(self) -> LiveDisplay | PlainDisplay:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        stream: IO[str] | None = getattr(getattr(reporter, "_tw", None), "_file", None)
        if stream is None or not terminal.wants_live_display(stream, self.verbose):
            return PlainDisplay(reporter.write_line if reporter is not None else print)
        # The live line writes from rich's refresh thread, also while pytest's capture has fd 1 redirected
        # around a scenario: it gets its own descriptor of the terminal (the loop starts with capture off).
        self._own_stream = os.fdopen(os.dup(stream.fileno()), "w", encoding=getattr(stream, "encoding", None)
                                     or "utf-8", errors="replace")
        return LiveDisplay(progress.live_console(self._own_stream), self.progress)

    def _close_stream(self) -> None:
        if self._own_stream is not None:
            self._own_stream.close()
            self._own_stream = None
