"""No pass without a check: what a scenario is about must have happened, and its deadlines run from the request.

- A step that starts, in the background, the operation a scenario is about (a streamed command, a long
  command, a follow) hands it to ``expect_under_way``: once the provider has taken the request in, the
  operation must still run. Refused outright (the method unknown to the provider, or ``unsupported``) the
  scenario fails naming what was refused, or skips when the capability that gates it is not declared;
  ended any other way, it fails: whatever the scenario then observes is not about that operation. The
  step keeps it (``UnderWay``) and the verdict step checks again (``expect_none_refused``), so a refusal
  that arrives after the provider caught up still fails the scenario.
- A deadline a scenario states ("exits within 5 seconds" of a shutdown, of the end of its input, of a
  stop) runs from the moment the host sent the request (``Asked``, noted before sending), never from the
  answer: a provider that holds its answer back cannot stretch the deadline by as long as it holds it.

Step modules import this like ``_shared`` and ``_state``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conformance.adapter import ExecOutcome, ProviderAdapter
from conformance.errors import (
    ApplicationErrorAnswer,
    CapabilityNotDeclared,
    ProtocolErrorAnswer,
    ProviderCallError,
    ProviderViolation,
    WrongAnswer,
)

from ._shared import Attempt, caught_up, expect

# JSON-RPC 2.0's "method not found": the provider does not know the operation at all.
METHOD_NOT_FOUND = -32601
# How long a provider may take to take in a request before a step looks whether it is still under way.
TAKEN_IN_S = 0.3


def refused_outright(error: Any) -> bool:
    """Does ``error`` say the provider does not do the operation at all: a method it does not know
    (-32601), or an ``unsupported`` refusal?"""
    if isinstance(error, ProtocolErrorAnswer):
        return error.code == METHOD_NOT_FOUND
    return isinstance(error, ApplicationErrorAnswer) and error.kind == "unsupported"


def error_of(outcome: Attempt) -> ProviderCallError | None:
    """The error an operation ended with: raised by its call, or carried by a command's result as an
    infrastructure failure (how a command that never ran is reported)."""
    if outcome.error is not None:
        return outcome.error
    result = getattr(outcome.answer, "result", outcome.answer)
    return result.error if isinstance(result, ExecOutcome) and result.outcome == "infra" else None


def expect_not_refused(provider: ProviderAdapter, error: Any, what: str, capability: str | None = None) -> None:
    """Fail the scenario if ``error`` refuses ``what`` outright: it is what the scenario is about, so it cannot
    pass without it. When ``capability`` gates it and the provider does not declare it, skip instead (as a
    ``@cap:`` gate would), saying what was refused."""
    if not refused_outright(error):
        return
    if capability is not None and not provider.capabilities.declares(capability):
        raise CapabilityNotDeclared(capability, f"{what}: {error}")
    raise WrongAnswer(f"the provider refused {what}: {error}. The scenario is about it, so it cannot pass "
                      "without it" + (f" ({capability} is declared)" if capability else ""),
                      error if isinstance(error, ProviderCallError) else None)


@dataclass
class UnderWay:
    """An operation a scenario started in the background and is about: ``done`` says whether it has ended,
    ``ended`` how (its answer or error, once done)."""

    what: str
    provider: ProviderAdapter
    done: Callable[[], bool]
    ended: Callable[[], Attempt]
    capability: str | None = None
    # an operation that may end by itself at once and still have happened (a follow of a log that has
    # ended answers at once): only a refusal fails it
    may_end: bool = False

    def outcome(self) -> Attempt | ProviderViolation:
        """How it ended (once done): its answer or error, or the violation that ended the call (the provider
        crashed, went silent or exited: a session's end, which the verdict step judges)."""
        try:
            return self.ended()
        except ProviderViolation as violation:
            return violation

    def expect_not_refused(self) -> None:
        outcome = self.outcome() if self.done() else None
        if isinstance(outcome, Attempt):
            expect_not_refused(self.provider, error_of(outcome), self.what, self.capability)


def expect_under_way(operation: UnderWay, kept: list[UnderWay]) -> None:
    """Wait until the provider has taken in every request sent so far (``caught_up``: a health call behind
    it, or ``TAKEN_IN_S`` for a provider busy with it), then require that ``operation`` still runs: refused
    outright it fails or skips (``expect_not_refused``), ended otherwise it fails (unless it ``may_end``).
    Kept in ``kept`` for the verdict step's ``expect_none_refused``."""
    kept.append(operation)
    caught_up(operation.provider, TAKEN_IN_S)
    if not operation.done():
        return
    operation.expect_not_refused()
    if operation.may_end:
        return
    outcome = operation.outcome()
    how = (str(outcome) if isinstance(outcome, ProviderViolation)
           else str(error_of(outcome) or outcome.error or _describe(outcome.answer)))
    raise AssertionError(f"{operation.what} should still run, but it had already ended when the scenario went on: "
                         f"{how}. What the scenario then observes is not about it")


def expect_none_refused(kept: list[UnderWay]) -> None:
    """At the verdict: none of the operations the scenario is about was refused outright, whenever the
    refusal arrived."""
    for operation in kept:
        operation.expect_not_refused()


def _describe(answer: Any) -> str:
    result = getattr(answer, "result", answer)
    return result.describe() if isinstance(result, ExecOutcome) else repr(answer)


@dataclass(frozen=True)
class Asked:
    """When the host sent the request a scenario's deadline runs from (noted before sending), and when its
    answer came (None: no answer is awaited, as for the end of the input)."""

    at: float
    answered_at: float | None = None

    @staticmethod
    def now() -> Asked:
        return Asked(time.monotonic())

    def answered(self) -> Asked:
        return Asked(self.at, time.monotonic())

    def left(self, seconds: float) -> float:
        """What is left of a deadline of ``seconds`` from the request (never negative)."""
        return max(0.0, self.at + seconds - time.monotonic())

    def since(self) -> float:
        return time.monotonic() - self.at

    def expect_answered_within(self, seconds: float, what: str) -> None:
        """What must happen within ``seconds`` of the request and after its answer cannot have, when the
        answer itself came later than that."""
        if self.answered_at is not None:
            took = self.answered_at - self.at
            expect(took <= seconds, f"{what} within {seconds:g} s of the request, after answering it; the answer "
                                    f"alone came {took:.1f} s after the request")
