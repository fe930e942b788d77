"""The pytest plugin behind a conformance run: a router, every hook one line into its concern.

``ConformancePlugin(config)`` is handed to ``pytest.main`` by ``conformance.runner.run``; an xdist
worker builds its own from the serialized ``RunConfig`` (``conformance/pytest_plugin.py``).

    keys.py       the stash keys, RunState (per process) and ScenarioRun (per scenario)
    steps.py      steps/ loaded as the package conformance_steps
    step_lookup.py  pytest-bdd's step look-up, with what an item can see computed once per collector
    selection.py  which tests are scenarios, their identity, the selection
    fixtures.py   the fixtures steps use; gating, transcript, sandbox owner, cleanup per scenario
    outcomes.py   a typed PhaseReport per phase, folded on the controller
    progress.py   while the run goes: the live line on a terminal, failure lines in a CI log
    finish.py     sweep, the engine's finish, the exit status, the terminal summary
    workers.py    xdist workers: the signals passed on to them, their sandbox accounts, the run's mark
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

import pytest

from conformance import interrupts
from conformance.adapter import ProviderAdapter
from conformance.config import RunConfig
from conformance.connections import ProviderConnections
from conformance.engine import RunFacts
from conformance.errors import CapabilityNotDeclared, ConformanceError, NotExpressible
from conformance.plugin import fixtures, outcomes, progress, selection, step_lookup, steps, workers
from conformance.plugin.finish import finish_run, print_summary
from conformance.plugin.keys import INFO, RUN, STATE, WORKER_CONFIG, RunState, state_of
from conformance.reporting.baseline import Baseline
from conformance.scenario_tags import LEVELS
from conformance.transcript import REDACTOR

MARKERS = (("scenario_id(id)", "stable scenario id"), ("requirement(id)", "requirement"),
           ("level(name)", "must/should/may/gap"), ("capability(name)", "capability gate"),
           ("dialect(name)", "dialect gate"))
_TAG_MARKS = {"id": "scenario_id", "req": "requirement", "cap": "capability", "dialect": "dialect"}


class ConformancePlugin:
    """One conformance run inside one pytest process."""

    def __init__(self, config: RunConfig, connected: ProviderAdapter | None = None, is_worker: bool = False) -> None:
        self.config = config
        self.connected = connected  # the preflight connection: the run's first and only handshake
        self.is_worker = is_worker
        self.state: RunState | None = None
        self.pytest_config: pytest.Config | None = None
        self._undo = ExitStack()  # what pytest_configure set up for the process (signals, environment)

    # -- configuration ---------------------------------------------------------------------------

    def pytest_configure(self, config: pytest.Config) -> None:
        self.pytest_config = config
        for name, doc in MARKERS:
            config.addinivalue_line("markers", f"{name}: {doc}")
        baseline = Baseline.load(self.config.expected_failures) if self.config.expected_failures else None
        connections = ProviderConnections(self.config.provider, connected=self.connected)
        self.state = RunState(self.config, connections, self.is_worker, RunFacts(provider={}), baseline)
        config.stash[STATE] = self.state
        if self.is_worker:
            interrupts.detach_worker()
            self._undo.enter_context(interrupts.trapped(quiet=True))
        else:
            config.pluginmanager.register(_ReportWhateverHappens(self.state), "sandbox-conformance-report-guard")
            if self.config.workers:
                self._undo.callback(workers.restore_environment, workers.marked_environment(self.config))
                self._undo.callback(interrupts.forget_workers)
        config.pluginmanager.register(fixtures, "conformance.plugin.fixtures")
        if not self.is_worker:
            config.pluginmanager.register(progress.RunProgress(self.state, config), progress.PLUGIN_NAME)
        steps.load(config)
        step_lookup.install()

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: a worker gets the run's configuration as the first connection settled it."""
        node.workerinput[WORKER_CONFIG] = replace(self.config, provider=self.state.connections.config).to_json()
        workers.on_node_configured(self.state, node)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self._undo.close()

    @pytest.hookimpl(tryfirst=True)
    def pytest_bdd_apply_tag(self, tag: str, function: Any) -> Any:
        prefix, sep, value = tag.partition(":")
        if sep and prefix in _TAG_MARKS:
            getattr(pytest.mark, _TAG_MARKS[prefix])(value)(function)
            return True
        if tag in LEVELS:
            pytest.mark.level(tag)(function)
            return True
        return None

    # -- session start: the provider, as the handshake found it ----------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.is_worker:
            return
        try:
            adapter = self.state.connections.shared()
        except ConformanceError as exc:
            raise pytest.UsageError(str(exc)) from None
        self.state.facts.provider = provider_info(adapter, self.state)

    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        kept, left_out, kept_ids = selection.select(items, self.config.selection)
        self.state.facts.selected |= kept_ids
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = kept

    # -- running ---------------------------------------------------------------------------------

    def pytest_bdd_step_error(self, request: pytest.FixtureRequest, step: Any, **_: Any) -> None:
        run = request.node.stash.get(RUN, None)
        if run is not None and run.failed_step is None:
            run.failed_step = f"{step.keyword} {step.name} (line {step.line_number})"
            run.failed_step_type = step.type

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        try:
            result = yield
        except NotExpressible as gap:
            outcomes.skip_not_expressible(item, gap)
        except CapabilityNotDeclared as undeclared:
            outcomes.skip_not_declared(item, undeclared)
        except BaseException:
            outcomes.note_violations(item)
            raise
        outcomes.raise_violations(item)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        report = yield
        if INFO in item.stash:
            phase = outcomes.phase_report(item, call, report, self.state)
            report.user_properties.append((outcomes.REPORT_PROPERTY, phase.to_json()))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.is_worker:
            outcomes.fold(report, self.state)

    # -- the end ---------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Iterator[None]:
        """A signal can land on a bytecode that has no line number (Python 3.11+): pytest's terminal reporter
        then fails to render the interrupted frame (a TypeError in place of the interruption, and later an
        assertion at the session's end). Frames without a line are dropped from the traceback first; should
        rendering fail anyway, the run is still recorded as interrupted."""
        drop_lineless_frames(excinfo)
        try:
            return (yield)
        except Exception:  # noqa: BLE001 - whatever rendering raised, the run was interrupted
            interrupts.INTERRUPTED.set()
            reporter = self.pytest_config.pluginmanager.get_plugin("terminalreporter") if self.pytest_config else None
            if reporter is not None and getattr(reporter, "_keyboardinterrupt_memo", ...) is None:
                # else the reporter asserts at the session's end that it rendered the interruption
                reporter._keyboardinterrupt_memo = _PlainInterrupt()
            return None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker:
            with interrupts.shielded():
                self.state.connections.close()
                workeroutput = getattr(session.config, "workeroutput", None)
                if workeroutput is not None:  # sent to the controller once the session finishes
                    workeroutput[workers.ACCOUNTS] = workers.accounts(self.state)
            return
        with interrupts.shielded():
            finish_run(session, self.state, exitstatus)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        state = state_of(config)
        if state is not None and not self.is_worker:
            print_summary(state, terminalreporter)


class _ReportWhateverHappens:
    """The controller's: a signal that lands in another plugin's session finish (a third one, while xdist
    waits for its workers) ends that hook before ``pytest_sessionfinish`` writes the report. This wraps the
    whole hook, so the report is written then, with what is known, and its summary printed (the terminal
    reporter's was skipped too)."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Iterator[None]:
        if interrupts.INTERRUPTED.is_set() and self.state.workers:
            workers.await_accounts(self.state)  # before xdist tells them to exit
        try:
            return (yield)
        except KeyboardInterrupt:
            interrupts.INTERRUPTED.set()
            if self.state.document is not None:
                raise
            with interrupts.shielded():
                finish_run(session, self.state, pytest.ExitCode.INTERRUPTED)
                reporter = session.config.pluginmanager.get_plugin("terminalreporter")
                if reporter is not None:
                    print_summary(self.state, reporter)
            return None


def provider_info(adapter: ProviderAdapter, state: RunState) -> dict[str, Any]:
    identity = adapter.identity
    problems = adapter.wire.handshake_problems if adapter.wire is not None else []
    info = {
        "kind": identity.kind,
        "version": identity.version,
        "protocol_version": identity.protocol_version,
        "dialect": identity.dialect,
        "transport": identity.transport,
        "command": REDACTOR.text(identity.command),
        "negotiation": identity.negotiation,
        **({"negotiation_detail": identity.negotiation_detail} if identity.negotiation_detail else {}),
        "capabilities": adapter.capabilities.raw,
        "declared": adapter.capabilities.declared(),
        "handshake_problems": [str(p) for p in problems],
        "run_id": state.config.run_id,
    }
    if state.config.provider.image is not None:  # the provider's identity; `command` is one container's URL
        info["image"] = REDACTOR.text(state.config.provider.image)
    mode = adapter.settled().get("sandboxes_per_process")
    if mode is not None:
        info["sandboxes_per_process"] = mode
    return info


__all__ = ["ConformancePlugin", "ProviderConnections"]


def drop_lineless_frames(excinfo: Any) -> None:
    """Unlink the traceback entries whose line Python cannot name (``tb_lineno`` None); ``tb_next`` is
    writable. A head entry without a line is skipped by pointing the ExceptionInfo past it."""
    head = getattr(excinfo, "tb", None)
    while head is not None and head.tb_lineno is None:
        head = head.tb_next
    if head is not getattr(excinfo, "tb", None) and head is not None:
        excinfo._excinfo = (excinfo.type, excinfo.value, head)  # no public setter
        excinfo._traceback = None  # recomputed from the new head
    entry = head
    while entry is not None:
        following = entry.tb_next
        while following is not None and following.tb_lineno is None:
            following = following.tb_next
        if following is not entry.tb_next:
            entry.tb_next = following
        entry = following


class _PlainInterrupt:
    """What the terminal reporter prints for an interruption it could not render: one line."""

    class _Crash:
        message = "KeyboardInterrupt"

        def toterminal(self, tw: Any) -> None:
            tw.line("KeyboardInterrupt (where it landed has no source line to show)")

    reprcrash = _Crash()

    def toterminal(self, tw: Any) -> None:
        self.reprcrash.toterminal(tw)
