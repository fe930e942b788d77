"""The provider connections of one pytest process (the controller, or one xdist worker): the shared
adapter, fresh adapters for wire-level scenarios, crash recovery, and the cleanup of every sandbox the
suite created."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from conformance.adapter import ProviderAdapter, SandboxStatus
from conformance.errors import CallTimeout, ProviderCallError, ProviderCrashed, ProviderViolation
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


class ProviderConnections:
    """Owns the connections of one pytest process (the controller, or one xdist worker)."""

    def __init__(self, config: ProviderConfig, connected: ProviderAdapter | None = None) -> None:
        """``connected``: an adapter already handshaken with this provider (the CLI's preflight), which
        becomes the shared connection, so a run handshakes once per provider process."""
        self.config = with_dialect(config, connected) if connected is not None else config
        self._shared: ProviderAdapter | None = connected
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

    def current(self) -> ProviderAdapter | None:
        """The shared connection as it is, without starting or restarting one."""
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

        If the adapter's provider died, a restarted shared connection tries the delete instead; if it
        is wedged (took the delete and never answered), it is ended and a restarted one tries again.
        """
        report = CleanupReport(created=adapter.ledger.owned(owner))
        for sandbox_id in adapter.ledger.outstanding(owner):
            problem = self._delete(adapter, sandbox_id)
            if problem is None:
                adapter.ledger.record_deleted(sandbox_id)
                report.deleted.append(sandbox_id)
            else:
                report.leaked[sandbox_id] = problem
        adapter.release(owner)
        return report

    def _delete(self, adapter: ProviderAdapter, sandbox_id: str) -> str | None:
        """Delete ``sandbox_id``, through ``adapter`` while its provider lives; None once it is deleted,
        otherwise why it could not be."""
        target = adapter if adapter.alive else self._recovery_adapter()
        if target is None:
            return "the provider is gone and could not be restarted"
        try:
            target.delete(sandbox_id)
            return None
        except ProviderCallError as exc:
            return str(exc)
        except ProviderViolation as exc:
            if not isinstance(exc, CallTimeout | ProviderCrashed) and target.alive:
                return str(exc)  # it answered, though not as it should: a restart would not change that
            first = exc
        # The provider died during the delete, or never answered it: nothing more gets through this
        # connection. End it (a shared one is restarted on its next use) and ask a restarted provider.
        target.close()
        retry = self._recovery_adapter()
        if retry is None:
            return f"{first}; the provider could not be restarted"
        try:
            retry.delete(sandbox_id)
        except (ProviderCallError, ProviderViolation) as exc:
            return f"{first}; after a restart: {exc}"
        return None

    def _recovery_adapter(self) -> ProviderAdapter | None:
        try:
            return self.shared()
        except Exception:  # noqa: BLE001 - whatever stops a restart, the caller reports the sandbox as leaked
            return None

    def sweep(self, strict: bool = False) -> CleanupReport:
        """Delete every sandbox that carries this run's label (the last line of defence).

        Not ``strict`` (at the end of a run), a provider that cannot be reached or cannot list by label
        sweeps nothing; ``strict`` (the sweep command) raises instead: ``ProviderStartError``,
        ``NotExpressible``, or the listing's ``ProviderCallError``/``ProviderViolation``.
        """
        report = CleanupReport()
        try:
            adapter, stragglers = self.list_labelled()
        except Exception:
            if strict:
                raise
            # A dialect that cannot list by label, or a provider that cannot be restarted: the
            # per-scenario registry is all there is, and the scenarios' reports name what leaked.
            return report
        for status in stragglers:
            if status.state in ("deleted", "deleting"):
                continue
            problem = self._delete(adapter, status.id)
            if problem is None:
                report.deleted.append(status.id)
            else:
                report.leaked[status.id] = problem
        return report

    def list_labelled(self) -> tuple[ProviderAdapter, list[SandboxStatus]]:
        """The sandboxes carrying this run's label, and the connection that listed them; a wedged
        provider is ended and a restarted one asked."""
        adapter = self.shared()
        try:
            return adapter, adapter.list(self.config.run_labels)
        except CallTimeout:
            adapter.close()
            adapter = self.shared()
            return adapter, adapter.list(self.config.run_labels)

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
