"""The one error taxonomy of sandbox-conformance.

Every exception the suite raises on purpose belongs to this tree. Where an exception lands decides
the scenario's outcome and the command's exit code::

    ConformanceError
    ├── UsageError                 bad command line, config, profile, path or URL   → exit 2, one line
    ├── HarnessError               the suite or its environment broke               → outcome "error"
    │   └── ProviderStartError     the provider could not be started or handshaken  → exit 2 / "error"
    ├── NotExpressible             the dialect has no way to ask for this          → outcome "skipped"
    │   ├── NotDriven              the dialect has the message, the suite does not drive it yet
    │   └── NotOptional            the dialect has it as a core method, gated by no capability
    ├── CapabilityNotDeclared      the dialect has it, the provider declares it false → outcome "skipped"
    ├── ProviderViolation          the provider broke a rule                        → outcome "failed"
    │   ├── WireViolation          a line that is not a JSON-RPC message, a batch, a bad envelope
    │   ├── SchemaViolation        a message that does not match the dialect's JSON Schema
    │   ├── CallTimeout            no answer within the call's deadline
    │   └── ProviderCrashed        the provider process exited while a call was outstanding
    └── ProviderCallError          a well-formed error answer (not a violation by itself;
        │                          the scenario decides whether it was the right answer)
        ├── ProtocolErrorAnswer    JSON-RPC level: -32600 invalid request, -32601 unknown method, ...
        └── ApplicationErrorAnswer a typed provider failure: kind (not_found, unsupported, ...) + detail

A step's plain ``AssertionError`` also counts as "failed": the provider answered, but not as the
requirement says. Any other exception is the harness's fault and becomes "error".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class ConformanceError(Exception):
    """Root of every error the suite raises on purpose."""


class UsageError(ConformanceError):
    """The user asked for something impossible; the message is the one line they will read."""


class HarnessError(ConformanceError):
    """The suite or its environment broke; never blamed on the provider."""


class ProviderStartError(HarnessError):
    """The provider could not be started, or did not complete the handshake."""


class NotExpressible(ConformanceError):
    """The provider's dialect has no way to express what a scenario asks; the scenario does not apply."""

    def __init__(self, dialect: str, operation: str) -> None:
        self.dialect = dialect
        self.operation = operation
        super().__init__(f"the {dialect} dialect cannot express: {operation}")


class NotDriven(NotExpressible):
    """The dialect has a message for this (``method``) and the provider declares it, but the suite's
    adapter of that dialect does not drive it yet: skipped, saying so, never "cannot express"."""

    def __init__(self, dialect: str, operation: str, method: str) -> None:
        super().__init__(dialect, operation)
        self.method = method
        ConformanceError.__init__(self, f"the suite does not drive the {dialect} dialect's {method} yet: {operation}")


class NotOptional(NotExpressible):
    """Another dialect's optional operation that this dialect has as a core method: no capability gates
    it here, so there is nothing to refuse (its own scenarios check it)."""

    def __init__(self, dialect: str, operation: str, where: str) -> None:
        super().__init__(dialect, operation)
        self.where = where
        ConformanceError.__init__(self, f"on the {dialect} dialect, {operation} is no optional operation: {where}")


class CapabilityNotDeclared(ConformanceError):
    """The dialect can ask for this, but the provider declares the capability that gates it false:
    the scenario does not apply (skipped as ``capability X not declared``, as a ``@cap:`` gate would)."""

    def __init__(self, capability: str, refused: str | None = None) -> None:
        self.capability = capability
        # ``refused``: what the provider refused when a step asked anyway (the skip then says so)
        super().__init__(f"capability {capability} not declared" + (f": the provider refused {refused}" if refused else ""))


class ProviderViolation(ConformanceError, AssertionError):
    """The provider broke a rule of its protocol. Subclasses AssertionError so pytest shows it as a failure."""


class WireViolation(ProviderViolation):
    """Something on the wire that is not a well-formed message of the dialect."""

    @classmethod
    def during_scenario(cls, violations: list[object]) -> WireViolation:
        """The violations a connection kept while a scenario ran, as the failure of that scenario."""
        body = "\n".join(f"  - {v}" for v in violations[:10])
        more = f"\n  … and {len(violations) - 10} more" if len(violations) > 10 else ""
        return cls(f"the provider broke wire rules during this scenario:\n{body}{more}")


class SchemaViolation(ProviderViolation):
    """A message that does not match its JSON Schema; names the JSON pointer and shows the message."""

    def __init__(self, what: str, pointer: str, reason: str, message: Any) -> None:
        self.what = what
        self.pointer = pointer or "/"
        self.reason = reason
        self.offending_message = message
        super().__init__(f"{what} violates its schema at {self.pointer}: {reason}")


class CallTimeout(ProviderViolation):
    """The provider did not answer a call within its deadline; ``method`` names the call where one was
    outstanding (the run's failure causes group by it)."""

    def __init__(self, message: str, method: str | None = None) -> None:
        super().__init__(message)
        self.method = method


class ProviderCrashed(ProviderViolation):
    """The provider process ended while the suite was still talking to it (``method``: the call outstanding)."""

    def __init__(self, message: str, method: str | None = None) -> None:
        super().__init__(message)
        self.method = method


class WrongAnswer(AssertionError):
    """A step's check of a call's answer failed: ``answer`` is the error the provider gave (None when the call
    succeeded where it should have failed), ``expected`` what the rule asks instead (``"unsupported"``). The
    run's failure causes read these facts, never the message."""

    def __init__(self, message: str, answer: ProviderCallError | None = None, expected: str | None = None) -> None:
        super().__init__(message)
        self.answer = answer
        self.expected = expected


@dataclass
class ProviderCallError(ConformanceError):
    """The provider answered a call with an error. Whether that was right is up to the scenario."""

    method: str
    code: int | None
    message: str
    data: Any = None
    http_status: int | None = None

    def __post_init__(self) -> None:
        super().__init__(self.describe())

    def describe(self) -> str:
        where = f"HTTP {self.http_status}" if self.http_status is not None else f"code {self.code}"
        return f"{self.method} answered an error ({where}): {self.message}"


@dataclass
class ProtocolErrorAnswer(ProviderCallError):
    """A JSON-RPC level error: the request itself was refused."""


@dataclass
class ApplicationErrorAnswer(ProviderCallError):
    """A typed provider failure, normalized across dialects.

    ``kind`` is one of the protocol's stable kinds (``not_found``, ``unsupported``, ``invalid_spec``,
    ``invalid_state``, ...); ``detail`` holds the kind's fields (``capability``, ``field``, ...).
    """

    kind: str = "unknown"
    detail: dict[str, Any] = field(default_factory=dict)
    retryable: bool = False

    def describe(self) -> str:
        extra = ", ".join(f"{k}={v!r}" for k, v in sorted(self.detail.items()) if not isinstance(v, dict))
        suffix = f" ({extra})" if extra else ""
        return f"{self.method} failed with kind {self.kind!r}{suffix}: {self.message}"


def is_provider_fault(exc: BaseException) -> bool:
    """True when an exception means the provider broke a rule (outcome "failed" rather than "error").

    An error answer nobody expected (``ProviderCallError`` escaping a step) is the provider's failure
    too: the scenario needed that call to succeed.
    """
    return isinstance(exc, AssertionError | ProviderViolation | ProviderCallError)
