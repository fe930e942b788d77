"""The end of a run on the controller: sweep, close, hand the facts to the engine, set pytest's exit
status from the verdict (never from pytest's own tally), and print the summary."""

from __future__ import annotations

from typing import Any

import pytest

from conformance import interrupts, leftovers
from conformance.config import RunConfig
from conformance.engine import SweepOutcome, finish
from conformance.plugin import workers
from conformance.plugin.keys import RunState
from conformance.reporting import catalogue
from conformance.transcript import REDACTOR


def finish_run(session: pytest.Session, state: RunState, exitstatus: int) -> None:
    connections = state.connections
    # even after a third signal abandoned the scenarios' cleanup: it finds a sandbox whose create was cut off
    # before its answer, which no account names
    sweep = connections.sweep()
    shared = connections.current()
    connections.close()
    own = workers.accounts(state)  # the controller's own interrupted scenarios, as a worker's are
    known = set(state.facts.created)
    state.facts.created.extend(sid for sid in own["created"] if sid not in known)
    state.facts.unknown.update(own["unknown"])
    state.facts.silent_workers = workers.fold_accounts(state)
    # outside any scenario, so nothing else redacts them: a leftover's command line may hold a secret
    state.facts.unattributed.extend(REDACTOR.text(finding) for finding in connections.take_closing_findings())
    processes_left = processes_left_by(state.config)
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or interrupts.INTERRUPTED.is_set()
    state.document = finish(
        state.config, state.facts, catalogue.all_scenarios(), SweepOutcome(sweep.deleted, sweep.leaked),
        state.baseline, interrupted, owned_by=shared.ledger.owned if shared is not None else lambda owner: [],
        processes_left=processes_left,
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


def processes_left_by(config: RunConfig) -> dict[str, Any]:
    """Once every plugin is closed: the processes still carrying the run's mark, ended (``leftovers``).
    Their command lines are redacted like anything else outside a scenario: one may hold a secret."""
    provider = config.provider
    if provider.rest_url is not None or provider.in_process is not None:
        return {"checked": False, "why_not": "the provider is no process this run started", "found": []}
    if not leftovers.supported():
        return {"checked": False, "why_not": "this system has no /proc and pidfds to find them by (Linux only)",
                "found": []}
    found = leftovers.end_marked(provider.run_id, provider.run_token)
    return {"checked": True, "found": [{**left.as_dict(), "command": REDACTOR.text(left.command)} for left in found]}
