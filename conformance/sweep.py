"""``sandbox-conformance sweep``: delete what a past run left behind, found by its run label.

Every sandbox the suite creates carries ``sandbox-conformance.run=<run id>``. A run deletes its own
sandboxes (per scenario, then by that label at the end); a run that could not (killed, its machine
lost) leaves them for this command, which lists the label, deletes what it finds and checks that
nothing is left. It needs a provider whose sandboxes outlive the plugin process that created them, as
a real provider's do, and a dialect that can list by label.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TextIO

from conformance.connections import ProviderConnections
from conformance.errors import HarnessError, NotExpressible, ProviderCallError, ProviderViolation, UsageError
from conformance.providers import ProviderConfig, verify_pin

SETTLED_STATES = ("deleted", "deleting")


@dataclass
class SweepResult:
    label: str  # name=value, as shown to the user
    deleted: list[str] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)  # id -> why it is still there

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
            raise UsageError(f"this provider cannot be swept: {exc}") from None
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


def print_result(result: SweepResult, out: TextIO | None = None) -> None:
    """One line per deleted sandbox, one per sandbox left (with why), then the summary."""
    out = sys.stdout if out is None else out  # looked up when called: a redirected stdout counts
    for sandbox_id in result.deleted:
        print(f"deleted {sandbox_id}", file=out)
    for sandbox_id, why in result.left.items():
        print(f"not deleted {sandbox_id}: {why}", file=out)
    if not result.deleted and not result.left:
        print(f"swept {result.label}: nothing to delete", file=out)
        return
    print(f"swept {result.label}: {len(result.deleted)} deleted, {len(result.left)} left", file=out)
