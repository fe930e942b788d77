"""The provider session of one pytest process: the shared adapter, fresh adapters for wire-level
scenarios, crash recovery, and the cleanup of every sandbox the suite created."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from conformance.adapter import ProviderAdapter
from conformance.errors import NotExpressible, ProviderCallError, ProviderViolation
from conformance.providers import ProviderConfig, open_provider, with_dialect


@dataclass
class CleanupReport:
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)  # by the cleanup itself
    leaked: dict[str, str] = field(default_factory=dict)  # id -> why it could not be deleted

    def merge(self, other: CleanupReport) -> None:
        self.created.extend(other.created)
        self.deleted.extend(other.deleted)
        self.leaked.update(other.leaked)


class ProviderSession:
    """Owns the connections of one pytest process (the controller, or one xdist worker)."""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self._shared: ProviderAdapter | None = None
        self._lock = threading.Lock()
        self._fresh_count = 0
        self.restarts = 0

    # -- connections -----------------------------------------------------------------------------

    def shared(self) -> ProviderAdapter:
        """The connection scenarios share; restarted when the provider died in an earlier scenario."""
        with self._lock:
            if self._shared is not None and not self._shared.alive:
                self._shared.close()
                self._shared = None
                self.restarts += 1
            if self._shared is None:
                self._shared = open_provider(self.config)
                # Fresh providers and restarts speak what the first connection found out.
                self.config = with_dialect(self.config, self._shared)
            return self._shared

    def fresh(self, handshake: bool = True) -> ProviderAdapter:
        """A newly started provider, for scenarios about startup, the wire, or exit."""
        with self._lock:
            self._fresh_count += 1
            channel = f"fresh#{self._fresh_count}"
        return open_provider(self.config, channel=channel, handshake=handshake)


    # -- cleanup ---------------------------------------------------------------------------------

    def cleanup(self, adapter: ProviderAdapter, owner: str) -> CleanupReport:
        """Delete every sandbox ``owner`` created through ``adapter`` and did not delete itself.

        If the adapter's provider died, a restarted shared connection tries the delete instead.
        """
        report = CleanupReport(created=adapter.ledger.owned(owner))
        for sandbox_id in adapter.ledger.outstanding(owner):
            target = adapter if adapter.alive else self._recovery_adapter()
            if target is None:
                report.leaked[sandbox_id] = "the provider is gone and could not be restarted"
                continue
            try:
                target.delete(sandbox_id)
            except (ProviderCallError, ProviderViolation) as exc:
                report.leaked[sandbox_id] = str(exc)
            else:
                adapter.ledger.record_deleted(sandbox_id)
                report.deleted.append(sandbox_id)
        adapter.release(owner)
        return report

    def _recovery_adapter(self) -> ProviderAdapter | None:
        try:
            return self.shared()
        except Exception:
            return None

    def sweep(self) -> CleanupReport:
        """Delete every sandbox that carries this run's label (the last line of defence)."""
        report = CleanupReport()
        adapter = self._recovery_adapter()
        if adapter is None:
            return report
        try:
            stragglers = adapter.list(self.config.run_labels)
        except (ProviderCallError, ProviderViolation, NotExpressible):
            return report  # a dialect that cannot list by label relies on the per-scenario registry
        for status in stragglers:
            if status.state in ("deleted", "deleting"):
                continue
            try:
                adapter.delete(status.id)
            except (ProviderCallError, ProviderViolation) as exc:
                report.leaked[status.id] = str(exc)
            else:
                report.deleted.append(status.id)
        return report

    def close(self) -> None:
        with self._lock:
            shared, self._shared = self._shared, None
        if shared is not None:
            shared.close()


@contextmanager
def scenario_owner(adapter: ProviderAdapter, owner: str) -> Iterator[None]:
    previous, adapter.owner = adapter.owner, owner
    try:
        yield
    finally:
        adapter.owner = previous
