"""Variants behind the proofs of the verdict itself: redaction (a plugin that leaks the secrets it was
given) and flake detection (a plugin whose answer changes from one attempt to the next)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conformance.reference.host_backend import BackendError
from conformance.reference.host_plugin import HostPlugin
from tests.mutants import mutant

# Where flaky-delete-unknown keeps its toggle across plugin processes (one file per test).
FLAKE_STATE_ENV = "SANDBOX_CONFORMANCE_FLAKE_STATE"


def _secrets(environ: Mapping[str, str]) -> list[str]:
    """What it leaks: every ``*_TOKEN`` value, and every ``CANARY*`` value whatever its name looks like
    (a value handed over with ``--env PLAIN=…`` or ``--pass-env`` is as secret as a token)."""
    return [value for name, value in sorted(environ.items())
            if (name.endswith("_TOKEN") or name.startswith("CANARY")) and value]


@mutant("secret-echoing")
class SecretEchoing(HostPlugin):
    """Writes every ``*_TOKEN`` (and ``CANARY*``) value it was given to stderr, and puts them into the error it answers for
    a delete of an id it never minted — the suite must still never show a token in any report."""

    def on_start(self) -> None:
        super().on_start()
        for secret in _secrets(self.environ):
            self.log(f"debug: authenticating with {secret}")

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        sandbox_id = params["sandbox_id"]
        try:
            self.backend.get(sandbox_id, include_deleted=True)
        except BackendError:
            secrets = " ".join(_secrets(self.environ))
            self.log(f"debug: unknown sandbox {sandbox_id}; authenticating with {secrets}")
            raise BackendError("not_found", f"no sandbox {sandbox_id} for credentials {secrets}",
                               resource="sandbox", id=sandbox_id) from None
        return super().m_sandbox_delete(params)


@mutant("flaky-delete-unknown")
class FlakyDeleteUnknown(HostPlugin):
    """Deleting an id it never minted fails, then succeeds, then fails…: every other attempt, counted
    across plugin processes in the file named by SANDBOX_CONFORMANCE_FLAKE_STATE (in-process without it)."""

    attempts = 0

    def _attempt(self) -> int:
        state = self.environ.get(FLAKE_STATE_ENV)
        if not state:
            FlakyDeleteUnknown.attempts += 1
            return FlakyDeleteUnknown.attempts
        path = Path(state)
        count = int(path.read_text() or "0") + 1 if path.exists() else 1
        path.write_text(str(count))
        return count

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        sandbox_id = params["sandbox_id"]
        try:
            self.backend.get(sandbox_id, include_deleted=True)
        except BackendError:
            if self._attempt() % 2 == 1:
                raise
        return super().m_sandbox_delete(params)
