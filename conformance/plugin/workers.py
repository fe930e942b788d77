"""xdist workers: their signals, their sandbox accounts, and that none outlives the run.

A worker leaves the terminal's process group and counts the signals the controller passes on
(``interrupts``). When it ends — interrupted too — it hands the controller its sandbox accounts through
xdist's ``workeroutput``: every sandbox its scenarios created and what became of each, including the
scenarios the controller never heard the end of (interrupted: their teardown ran at the session's end, or
was abandoned). The controller folds them into the run's, so ``created`` counts every sandbox the run made,
and one whose cleanup was abandoned is reported with an unknown fate rather than as deleted.
"""

from __future__ import annotations

import os
import time
from typing import Any

from conformance import interrupts, leftovers
from conformance.config import RunConfig
from conformance.connections import CleanupReport
from conformance.plugin.keys import RunState

ACCOUNTS = "sandbox_conformance_accounts"  # the key in a worker's workeroutput
ABANDONED_GRACE_S = 10.0  # for workers to report once their cleanup is abandoned (xdist's own exit timeout)
POLL_S = 0.02


def worker_pid(node: Any) -> int | None:
    """The pid of a local xdist worker (execnet's popen gateway); None for any other kind."""
    popen = getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None)
    return getattr(popen, "pid", None)


def on_node_configured(state: RunState, node: Any) -> None:
    """The controller: keep the node for its accounts and pass it every signal from now on."""
    state.workers.append(node)
    pid = worker_pid(node)
    if pid is not None:
        interrupts.forward_to(pid)


def marked_environment(config: RunConfig) -> tuple[str, str | None]:
    """The controller, before xdist starts its workers: they inherit the run's mark, so one that outlives the
    run is found like any leftover. Returns what to restore (the variable's name, its previous value)."""
    name, value = leftovers.mark_entry(config.provider.run_id, config.provider.run_token)
    previous = os.environ.get(name)
    os.environ[name] = value
    return name, previous


def restore_environment(saved: tuple[str, str | None]) -> None:
    name, previous = saved
    if previous is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = previous


def accounts(state: RunState) -> dict[str, Any]:
    """A worker's sandbox accounts, as JSON-ready data. ``unknown``: sandboxes of a scenario whose cleanup
    never finished that no delete was answered for (the cleanup was abandoned)."""
    total = CleanupReport()
    total.merge(state.cleaned)
    unknown: list[str] = []
    for owner, run in list(state.open_runs.items()):
        total.merge(run.cleanup)
        for adapter in (run.adapter, *run.fresh):
            total.created.extend(adapter.ledger.owned(owner))  # duplicates dropped below
            unknown.extend(sid for sid in adapter.ledger.outstanding(owner)
                           if sid not in run.cleanup.leaked and sid not in unknown)
    return {"created": list(dict.fromkeys(total.created)), "leaked": sorted(total.leaked),
            "orphaned": sorted(total.orphaned), "forgotten": sorted(total.forgotten), "unknown": unknown}


def await_accounts(state: RunState) -> None:
    """The controller, interrupted, before xdist ends its workers: wait until each running worker has handed
    over its accounts, its scenario's cleanup done (xdist would otherwise tell it to exit, and kill it 10 s
    later, mid-cleanup, its accounts lost). A worker's cleanup is bounded by the call timeouts; once a third
    signal abandons it, the wait is at most ``ABANDONED_GRACE_S``."""
    deadline: float | None = None
    while True:
        try:
            while [node for node in state.workers if _owes_accounts(node)]:
                if interrupts.abandoned():
                    deadline = deadline or time.monotonic() + ABANDONED_GRACE_S
                    if time.monotonic() > deadline:
                        return
                time.sleep(POLL_S)  # xdist hands its events to no one meanwhile: the node's attribute is all
            return
        except KeyboardInterrupt:  # the third signal: the workers got it too, and end their cleanup
            continue


def _owes_accounts(node: Any) -> bool:
    """Whether a worker is still running and has not handed over its accounts."""
    if getattr(node, "workeroutput", None) is not None:
        return False
    popen = getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None)
    return popen is not None and popen.poll() is None


def fold_accounts(state: RunState) -> int:
    """The controller, once the workers are down: each worker's accounts folded into the run's facts (by
    sandbox id: a scenario whose report arrived is in both). Returns how many workers never reported."""
    facts = state.facts
    silent = 0
    for node in state.workers:
        data = (getattr(node, "workeroutput", None) or {}).get(ACCOUNTS)
        if data is None:
            silent += 1
            continue
        known = set(facts.created)
        facts.created.extend(sid for sid in data["created"] if sid not in known)
        facts.leaked.update(data["leaked"])
        facts.orphaned.update(data["orphaned"])
        facts.forgotten.update(data["forgotten"])
        facts.unknown.update(data["unknown"])
    return silent
