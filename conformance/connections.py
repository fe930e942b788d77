"""The provider connections of one pytest process (the controller, or one xdist worker): the shared
adapter, fresh adapters for wire-level scenarios, crash recovery, and the cleanup of every sandbox the
suite created."""

from __future__ import annotations

import concurrent.futures
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
    # id -> what happened: the provider process that made it died holding it, and only a restarted one
    # answered its delete (which proves nothing when the restart never knew the sandbox)
    orphaned: dict[str, str] = field(default_factory=dict)
    # id -> what the provider answered: its delete said the provider no longer knows the sandbox (not_found,
    # e.g. from a plugin restarted with a per-process registry). Nothing is left to delete, so it is no leak;
    # that a delete of an unknown id is refused at all is the delete-idempotency rule's (delete-unknown).
    forgotten: dict[str, str] = field(default_factory=dict)

    def merge(self, other: CleanupReport) -> None:
        self.created.extend(other.created)
        self.deleted.extend(other.deleted)
        self.leaked.update(other.leaked)
        self.orphaned.update(other.orphaned)
        self.forgotten.update(other.forgotten)


@dataclass(frozen=True)
class Forgotten:
    """A delete the provider answered by saying it knows no such sandbox: what it answered."""

    answer: str


# Fresh providers started ahead of the scenarios that will ask for them: a start costs a process and an
# interpreter (~150 ms), paid meanwhile instead of inside the scenario. Two, because fresh-provider
# scenarios come in runs of short ones (a feature's Background) that outpace a single one's start.
SPARE_PROVIDERS = 2


class ProviderConnections:
    """Owns the connections of one pytest process (the controller, or one xdist worker)."""

    def __init__(self, config: ProviderConfig, connected: ProviderAdapter | None = None) -> None:
        """``connected``: an adapter already handshaken with this provider (the CLI's preflight), which
        becomes the shared connection, so a run handshakes once per provider process."""
        self.config = with_dialect(config, connected) if connected is not None else config
        self._shared: ProviderAdapter | None = connected
        self._lock = threading.Lock()
        self._fresh_count = 0
        self._spares: list[tuple[concurrent.futures.Future[ProviderAdapter], ProviderConfig]] = []
        self.restarts = 0
        # What closing providers revealed (killed for not exiting on EOF, processes left holding their
        # output): outside any scenario, so the run reports them beside its other unattributed violations.
        self._closing_findings: list[str] = []
        self._findings_lock = threading.Lock()  # not self._lock: shared() ends a dead provider holding that

    # -- connections -----------------------------------------------------------------------------

    def shared(self) -> ProviderAdapter:
        """The connection scenarios share; restarted when the provider died in an earlier scenario."""
        with self._lock:
            if self._shared is not None and not self._shared.alive:
                self.end(self._shared)
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

    def fresh(self, handshake: bool = True, ahead: bool = False) -> ProviderAdapter:
        """A newly started provider, for scenarios about startup, the wire, or exit.

        With ``ahead`` (and without ``handshake``) it may be a spare started in the background after an
        earlier such call: nothing has been sent to it, so it is as fresh as one started now for a scenario
        that has done nothing yet — but not for one that wants a process started after what it did (a
        plugin may read a durable registry at start). The spares are then topped up for the next calls (a
        run that never asks for one ahead starts none).
        """
        spare_allowed = ahead and not handshake
        adapter = self._take_spare() if spare_allowed else None
        if adapter is None:
            adapter = open_provider(self.config, channel=self._next_fresh_channel(), handshake=handshake)
        if spare_allowed and self.config.rest_url is None:  # a REST provider has no process to start ahead
            self._start_spares()
        return adapter

    def _next_fresh_channel(self) -> str:
        with self._lock:
            self._fresh_count += 1
            return f"fresh#{self._fresh_count}"

    def _start_spares(self) -> None:
        """Top the spares up to ``SPARE_PROVIDERS``, each started on a thread of its own."""
        while True:
            with self._lock:
                if len(self._spares) >= SPARE_PROVIDERS:
                    return
                self._fresh_count += 1
                channel = f"fresh#{self._fresh_count}"
                config = self.config
                spare: concurrent.futures.Future[ProviderAdapter] = concurrent.futures.Future()
                self._spares.append((spare, config))

            def start(spare=spare, config=config, channel=channel) -> None:
                try:
                    spare.set_result(open_provider(config, channel=channel, handshake=False))
                except BaseException as exc:  # noqa: BLE001 - taken by fresh(), which then starts one itself
                    spare.set_exception(exc)

            threading.Thread(target=start, name="conformance-spare-provider", daemon=True).start()

    def _take_spare(self) -> ProviderAdapter | None:
        """The oldest spare, once it has started; None when there is none, it failed to start (the caller
        starts one itself, so the failure is reported where it matters), or it speaks an outdated
        configuration."""
        with self._lock:
            if not self._spares:
                return None
            spare, config = self._spares.pop(0)
        try:
            adapter = spare.result()
        except Exception:  # noqa: BLE001
            return None
        if config != self.config or not adapter.alive:
            adapter.close()
            return None
        return adapter

    # -- cleanup ---------------------------------------------------------------------------------

    def cleanup(self, adapter: ProviderAdapter, owner: str) -> CleanupReport:
        """Delete every sandbox ``owner`` created through ``adapter`` and did not delete itself.

        If the adapter's provider died, a restarted shared connection tries the delete instead; if it
        is wedged (took the delete and never answered), it is ended and a restarted one tries again.
        """
        report = CleanupReport(created=adapter.ledger.owned(owner))
        for sandbox_id in adapter.ledger.outstanding(owner):
            problem, holder_died = self._delete(adapter, sandbox_id)
            if isinstance(problem, Forgotten):
                adapter.ledger.record_deleted(sandbox_id)
                report.forgotten[sandbox_id] = problem.answer
                continue
            if problem is not None:
                report.leaked[sandbox_id] = problem
                continue
            adapter.ledger.record_deleted(sandbox_id)
            if holder_died:
                report.orphaned[sandbox_id] = ("the provider died holding it; a restarted provider answered its "
                                               "delete, which does not confirm it is gone")
            else:
                report.deleted.append(sandbox_id)
        adapter.release(owner)
        return report

    def _delete(self, adapter: ProviderAdapter, sandbox_id: str) -> tuple[str | Forgotten | None, bool]:
        """Delete ``sandbox_id``, through ``adapter`` while its provider lives: (None once it is deleted,
        ``Forgotten`` when the provider answered that it knows no such sandbox, otherwise why it could not be;
        whether the provider holding it died, so a restarted one was asked)."""
        holder_died = not adapter.alive and not _exited_cleanly(adapter)
        target = adapter if adapter.alive else self._recovery_adapter()
        if target is None:
            return "the provider is gone and could not be restarted", True
        try:
            target.delete(sandbox_id)
            return None, holder_died
        except ProviderCallError as exc:
            if target.says_unknown_sandbox(exc, sandbox_id):
                return Forgotten(str(exc)), holder_died
            return str(exc), holder_died
        except ProviderViolation as exc:
            if not isinstance(exc, CallTimeout | ProviderCrashed) and target.alive:
                return str(exc), holder_died  # it answered, though not as it should: a restart would not change that
            first = exc
        # The provider died during the delete, or never answered it: nothing more gets through this
        # connection. End it (a shared one is restarted on its next use) and ask a restarted provider.
        self.end(target)
        retry = self._recovery_adapter()
        if retry is None:
            return f"{first}; the provider could not be restarted", True
        try:
            retry.delete(sandbox_id)
        except ProviderCallError as exc:
            if retry.says_unknown_sandbox(exc, sandbox_id):
                return Forgotten(f"{first}; after a restart: {exc}"), True
            return f"{first}; after a restart: {exc}", True
        except ProviderViolation as exc:
            return f"{first}; after a restart: {exc}", True
        return None, True

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
            problem, _ = self._delete(adapter, status.id)
            # a provider that listed it knew it: deleted even if a restart finished the job, or if it was gone
            # by the time its delete came (answered not_found)
            if problem is None or isinstance(problem, Forgotten):
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
            self.end(adapter)
            adapter = self.shared()
            return adapter, adapter.list(self.config.run_labels)

    def end(self, adapter: ProviderAdapter) -> None:
        """Close ``adapter`` and keep what its close revealed (``take_closing_findings``)."""
        adapter.close()
        found = [str(violation) for violation in adapter.take_violations()]
        with self._findings_lock:
            self._closing_findings.extend(found)

    def take_closing_findings(self) -> list[str]:
        with self._findings_lock:
            taken, self._closing_findings = self._closing_findings, []
        return taken

    def close(self) -> None:
        with self._lock:
            shared, self._shared = self._shared, None
            spares, self._spares = self._spares, []
        for spare, _config in spares:
            _close_spare(spare)
        if shared is not None:
            self.end(shared)


def _exited_cleanly(adapter: ProviderAdapter) -> bool:
    """Whether a provider that is gone ended on its own terms (exit status 0: asked to shut down, or
    its input closed, by a scenario), with its chance to clean up, rather than crashed or killed. An exit
    in the middle of a call is no clean exit, whatever its status: nothing asked it to end."""
    wire = adapter.wire
    return wire is not None and not wire.ended_mid_call and wire.wait_exit(0.0) == 0


def _close_spare(spare: concurrent.futures.Future[ProviderAdapter]) -> None:
    try:
        adapter = spare.result()
    except Exception:  # noqa: BLE001 - a spare that never started has nothing to close
        return
    adapter.close()


@contextmanager
def scenario_owner(adapter: ProviderAdapter, owner: str) -> Iterator[None]:
    previous, adapter.owner = adapter.owner, owner
    try:
        yield
    finally:
        adapter.owner = previous
