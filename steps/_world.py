"""The state one scenario carries from step to step, and the helpers steps share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from faker import Faker

from conformance.adapter import ExecOutcome, ExecRequest, ProviderAdapter, SandboxHandle, SandboxRequest
from conformance.errors import ApplicationErrorAnswer, NotExpressible, ProviderCallError

CONFORMANCE_PREFIX = "conformance"


def expect(condition: bool, message: str) -> None:
    """Fail the scenario with ``message`` unless ``condition`` holds."""
    if not condition:
        raise AssertionError(message)


@dataclass
class Attempt:
    """One call's outcome: a result, or the error the provider answered with."""

    answer: Any = None
    error: ProviderCallError | None = None

    def expect_success(self, what: str) -> Any:
        expect(self.error is None, f"{what} should succeed, but the provider answered: {self.error}")
        return self.answer

    def expect_application_error(self, what: str) -> ApplicationErrorAnswer:
        expect(self.error is not None, f"{what} should fail, but the provider answered {self.answer!r}")
        expect(isinstance(self.error, ApplicationErrorAnswer),
               f"{what} should fail with an application error, but the provider answered: {self.error}")
        assert isinstance(self.error, ApplicationErrorAnswer)
        return self.error


def attempt(call: Callable[[], Any]) -> Attempt:
    try:
        return Attempt(answer=call())
    except ProviderCallError as error:
        return Attempt(error=error)


@dataclass
class World:
    provider: ProviderAdapter
    start_fresh: Callable[..., ProviderAdapter]
    faker: Faker
    note_finding: Callable[[str, str, str], None] = lambda requirement, status, detail: None
    sandbox: SandboxHandle | None = None
    fresh: ProviderAdapter | None = None
    outcome: ExecOutcome | None = None
    last: Attempt = field(default_factory=Attempt)
    attempts: list[Attempt] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)

    # -- sandboxes -------------------------------------------------------------------------------

    def create_sandbox(self, **request: Any) -> SandboxHandle:
        self.sandbox = self.provider.create(SandboxRequest(**request))
        return self.sandbox

    def require_sandbox(self) -> SandboxHandle:
        expect(self.sandbox is not None, "the scenario has no sandbox yet (a Given step is missing)")
        assert self.sandbox is not None
        return self.sandbox

    def working_directory(self) -> str:
        """The sandbox's working directory, as its handle names it (some dialects name none)."""
        directory = self.require_sandbox().working_directory
        if not directory:
            raise NotExpressible(self.provider.dialect, "the sandbox's working directory")
        return directory

    def require_report(self, field: str) -> None:
        """Skip, as not expressible, a check of an exec result field this dialect cannot carry."""
        if field not in self.provider.exec_reports:
            raise NotExpressible(self.provider.dialect, f"an exec result's {field}")

    def token(self, prefix: str = CONFORMANCE_PREFIX) -> str:
        return f"{prefix}-{self.faker.pystr(min_chars=10, max_chars=10).lower()}"

    # -- commands --------------------------------------------------------------------------------

    def run(self, command: str, **options: Any) -> ExecOutcome:
        sandbox = self.require_sandbox()
        self.outcome = self.provider.exec(sandbox.id, ExecRequest(command=command, **options))
        return self.outcome

    def ran(self) -> ExecOutcome:
        expect(self.outcome is not None, "no command has run yet")
        assert self.outcome is not None
        expect(self.outcome.outcome == "ran",
               f"the command should have run, but the provider could not run it: {self.outcome.error}")
        return self.outcome
