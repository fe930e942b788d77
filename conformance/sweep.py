"""``sandbox-conformance sweep``: delete what a past run left behind, found by its run label.

Every sandbox the suite creates carries ``sandbox-conformance.run=<run id>``. A run deletes its own
sandboxes (per scenario, then by that label at the end); a run that could not (killed, its machine
lost) leaves them for this command, which lists the label, deletes what it finds and checks that
nothing is left. It needs a provider whose sandboxes outlive the plugin process that created them, as
a real provider's do, and a dialect that can list by label.

A provider that cannot list by label (forkd's API has no labels) is swept by id instead:
``--from-results PATH`` deletes the sandboxes a past run's results.json says it left (``sandboxes.leaked``
and ``died_holding``), or with ``--all-recorded`` every one it created (``sandboxes.ids``: for a provider
whose deletes were answered but may not have taken effect), counting one already gone as done. Only
through the provider the run used: an id means nothing to another provider, and one that reuses ids
would lose a sandbox that is not the run's. An id that held a value handed to the provider was recorded
redacted: it names no sandbox, so it is counted as left, saying why, never sent as a delete.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from conformance import user_input
from conformance.connections import ProviderConnections
from conformance.errors import (
    ApplicationErrorAnswer,
    HarnessError,
    NotExpressible,
    ProviderCallError,
    ProviderViolation,
    UsageError,
)
from conformance.inert import inert_line
from conformance.providers import ProviderConfig, verify_pin
from conformance.transcript import REDACTED, REDACTOR

SETTLED_STATES = ("deleted", "deleting")


@dataclass
class SweepResult:
    label: str  # name=value, or which results.json, as shown to the user
    deleted: list[str] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)  # id -> why it is still there
    gone: list[str] = field(default_factory=list)  # recorded, but already gone before the sweep (--from-results)

    @property
    def exit_code(self) -> int:
        return 1 if self.left else 0


def sweep(config: ProviderConfig) -> SweepResult:
    """Delete every sandbox labelled with ``config.run_id``, then list again to see what is left.

    Raises a ``ConformanceError`` (one line) when the provider cannot be started or cannot list by label.
    """
    if not config.run_id.strip():
        raise UsageError("--run-id is empty")
    verify_pin(config)
    ((name, value),) = config.run_labels.items()
    result = SweepResult(label=f"{name}={value}")
    connections = ProviderConnections(config)
    try:
        try:
            report = connections.sweep(strict=True)
        except NotExpressible as exc:
            raise UsageError(f"this provider cannot be swept by its run label ({exc}); sweep the sandbox ids a past "
                             "run recorded instead: --from-results PATH/TO/results.json") from None
        except (ProviderCallError, ProviderViolation) as exc:
            raise HarnessError(f"the provider could not list the sandboxes labelled {result.label}: {exc}") from None
        result.deleted = list(report.deleted)
        result.left = dict(report.leaked)
        try:
            _, remaining = connections.list_labelled()
        except (ProviderCallError, ProviderViolation, NotExpressible) as exc:
            for sandbox_id in result.deleted:
                result.left.setdefault(sandbox_id, f"its delete was answered, but listing again failed: {exc}")
            result.deleted = []
            return result
        for status in remaining:
            if status.state not in SETTLED_STATES and status.id not in result.left:
                result.left[status.id] = f"still listed in state {status.state} after the sweep"
        result.deleted = [sid for sid in result.deleted if sid not in result.left]
        return result
    finally:
        connections.close()


def recorded_ids(path: Path, every: bool = False) -> tuple[list[str], dict[str, Any]]:
    """The sandbox ids a results.json says its run left (``leaked``, ``died_holding``; with ``every``, also
    every one it created, ``ids``), and the document. ``UsageError`` (one line) when it is no results.json."""
    if not path.exists():
        raise UsageError(f"--from-results {path} does not exist")
    what = f"--from-results {path}"
    document = user_input.load_json(user_input.read_text(path, what, user_input.MAX_RESULTS_BYTES), what)
    sandboxes = document.get("sandboxes") if isinstance(document, dict) else None
    if not isinstance(sandboxes, dict):
        raise UsageError(f"--from-results {path} is not a results.json of a run (it has no sandboxes section)")
    provider = document.get("provider")
    if not isinstance(provider, dict) or not isinstance(provider.get("kind"), str) \
            or not isinstance(provider.get("command"), str):
        raise UsageError(f"--from-results {path} does not say which provider its run used (provider.kind and "
                         "provider.command): its sandbox ids cannot be swept safely")
    ids: list[str] = []
    for key in ("leaked", "died_holding", *(("ids",) if every else ())):
        value = sandboxes.get(key) or []
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise UsageError(f"--from-results {path}: sandboxes.{key} is not a list of sandbox ids")
        ids += [item for item in value if item not in ids]
    return ids, document


def _same_provider(path: Path, recorded: dict[str, Any], identity: Any, moved: bool) -> None:
    """``UsageError`` unless ``identity`` is the provider the recorded run used (its kind, and the URL or
    command it was reached by, unless ``moved`` says it is reached differently now)."""
    if recorded["kind"] != identity.kind:
        raise UsageError(f"--from-results {path} records a run against provider {recorded['kind']!r}; this provider "
                         f"is {identity.kind!r}")
    if not moved and recorded["command"].rstrip("/") != identity.command.rstrip("/"):
        # the current command is not shown: it may hold what the recorded one has redacted
        raise UsageError(f"--from-results {path} records a run against {recorded['command']}, and this provider is "
                         "reached differently; sweep through that one, or add --provider-moved if it is the same "
                         "provider at a new address")


def sweep_recorded(config: ProviderConfig, path: Path, every: bool = False, moved: bool = False) -> SweepResult:
    """Delete the sandboxes ``path`` (a past run's results.json) says its run left — with ``every``, each one
    it created — through the provider ``config`` names, which must be the one the run used; one already gone
    counts as done. Then describe each again, where the provider can, to see what is left."""
    ids, document = recorded_ids(path, every)
    verify_pin(config)
    result = SweepResult(label=f"the sandboxes {path} records" + ("" if every else " as left"))
    if not ids:
        return result
    connections = ProviderConnections(config)
    try:
        adapter = connections.shared()
        _same_provider(path, document["provider"], adapter.identity, moved)
        for sandbox_id in ids:
            if REDACTED in sandbox_id:
                result.left[sandbox_id] = ("its id held a value handed to the provider and was recorded redacted: "
                                           "it cannot be deleted by id (sweep by --run-id, or delete it by hand)")
                continue
            before = _gone(adapter, sandbox_id)
            if before is True:
                result.gone.append(sandbox_id)
                continue
            try:
                adapter.delete(sandbox_id)
            except ApplicationErrorAnswer as exc:
                if exc.kind == "not_found":
                    result.gone.append(sandbox_id)
                else:
                    result.left[sandbox_id] = str(exc)
                continue
            except (ProviderCallError, ProviderViolation) as exc:
                result.left[sandbox_id] = str(exc)
                continue
            after = _gone(adapter, sandbox_id)
            if after is False:
                result.left[sandbox_id] = "its delete was answered, but it is still described as present"
            else:
                result.deleted.append(sandbox_id)
        return result
    finally:
        connections.close()


def _gone(adapter: Any, sandbox_id: str) -> bool | None:
    """Whether describing the sandbox says it is gone (not found, deleting or deleted); None when the
    provider cannot describe one or did not answer clearly."""
    try:
        status = adapter.describe(sandbox_id)
    except ApplicationErrorAnswer as exc:
        return True if exc.kind == "not_found" else None
    except (NotExpressible, ProviderCallError, ProviderViolation):
        return None
    return status.state in SETTLED_STATES


def print_result(result: SweepResult, out: TextIO | None = None) -> None:
    """One line per deleted sandbox, one per sandbox left (with why), then the summary."""
    out = sys.stdout if out is None else out  # looked up when called: a redirected stdout counts
    # a provider's ids and words may hold a value handed to it (sweep by label lists them from the provider)
    for sandbox_id in result.deleted:
        print(inert_line(REDACTOR.text(f"deleted {sandbox_id}")), file=out)
    for sandbox_id in result.gone:
        print(inert_line(REDACTOR.text(f"already gone {sandbox_id}")), file=out)
    for sandbox_id, why in result.left.items():
        print(inert_line(REDACTOR.text(f"not deleted {sandbox_id}: {why}")), file=out)
    if not result.deleted and not result.left and not result.gone:
        print(inert_line(f"swept {result.label}: nothing to delete"), file=out)
        return
    gone = f", {len(result.gone)} already gone" if result.gone else ""
    print(inert_line(f"swept {result.label}: {len(result.deleted)} deleted{gone}, {len(result.left)} left"), file=out)
