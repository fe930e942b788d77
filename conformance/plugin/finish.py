"""The end of a run on the controller: sweep, close, hand the facts to the engine, set pytest's exit
status from the verdict (never from pytest's own tally), and print the summary."""

from __future__ import annotations

from typing import Any

import pytest

from conformance import interrupts
from conformance.engine import SweepOutcome, finish
from conformance.plugin.keys import RunState
from conformance.reporting import catalogue
from conformance.transcript import REDACTOR


def finish_run(session: pytest.Session, state: RunState, exitstatus: int) -> None:
    connections = state.connections
    sweep = connections.sweep()
    shared = connections.current()
    connections.close()
    # outside any scenario, so nothing else redacts them: a leftover's command line may hold a secret
    state.facts.unattributed.extend(REDACTOR.text(finding) for finding in connections.take_closing_findings())
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or interrupts.INTERRUPTED.is_set()
    state.document = finish(
        state.config, state.facts, catalogue.all_scenarios(), SweepOutcome(sweep.deleted, sweep.leaked),
        state.baseline, interrupted, owned_by=shared.ledger.owned if shared is not None else lambda owner: [],
    )
    # SHOULD failures only warn without --strict, and a run that verified nothing fails. Interruptions
    # and usage errors keep pytest's own codes.
    if interrupted:
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    elif exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        session.exitstatus = pytest.ExitCode.OK if state.document.passed else pytest.ExitCode.TESTS_FAILED


def print_summary(state: RunState, terminalreporter: Any) -> None:
    if state.document is None:
        return
    from conformance.reporting import terminal

    terminal.print_summary(state.document.data, terminalreporter)
