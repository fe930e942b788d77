"""Steps for REST providers (features/rest.feature): credentials, HTTP statuses, error bodies.

Like every step module they speak to the adapter interface only: ``with_credentials`` gives the same
provider reached without a credential or with a wrong one, and an error answer carries its HTTP status.
"""

from __future__ import annotations

import time

from pytest_bdd import parsers, then, when

from conformance.adapter import ExecOutcome, ExecRequest, ProviderAdapter, SandboxRequest
from conformance.errors import ApplicationErrorAnswer, ProviderCallError

from ._shared import World, attempt, expect

REFUSED_STATUSES = (401, 403)
# Another scenario's sandbox may show up in a listing for as long as that scenario runs; a sandbox a
# refused request created stays. Poll this long for newcomers to go before blaming the refused request.
SETTLE_S = 12.0


def _listed_ids(provider: ProviderAdapter) -> set[str]:
    return {status.id for status in provider.list(None)}


def _refused(error: ProviderCallError | None, what: str) -> None:
    expect(error is not None, f"{what} without a valid credential should be refused, but it succeeded")
    assert error is not None
    expect(error.http_status in REFUSED_STATUSES,
           f"{what} without a valid credential must be refused with HTTP 401 or 403; it answered: {error}")


# -- credentials -----------------------------------------------------------------------------------


@when("I note every sandbox the provider lists")
def _(world: World) -> None:
    world.rest.listed_before = _listed_ids(world.provider)


@when(parsers.re(r"I create a sandbox (?P<how>without credentials|with a wrong credential)$"))
def _(world: World, how: str) -> None:
    kind = "none" if how == "without credentials" else "wrong"
    other = world.credentials(kind).with_credentials(kind)
    world.last = attempt(lambda: other.create(SandboxRequest()))


@when(parsers.re(r"I create a sandbox with a credential (?P<kind>one character short|one character too "
                 r"many)$"))
def _(world: World, kind: str) -> None:
    # a server that compares only a prefix, or only as many characters as it was sent, takes a near miss
    other = world.credentials(kind).with_credentials(kind)
    world.last = attempt(lambda: other.create(SandboxRequest()))


@then("the request is refused with HTTP status 401 or 403")
def _(world: World) -> None:
    _refused(world.last.error, "a create")


@then("no sandbox was created by it")
def _(world: World) -> None:
    """Whatever the listing shows now and did not before, and that does not go away while other
    scenarios finish theirs, was created by the refused request."""
    before = world.require(world.rest.listed_before, "listing taken before the request")
    deadline = time.monotonic() + SETTLE_S
    newcomers = _listed_ids(world.provider) - before
    while newcomers and time.monotonic() < deadline:
        time.sleep(0.5)
        newcomers &= _listed_ids(world.provider)
    for sandbox_id in newcomers:  # deleted with real credentials when the scenario ends
        world.provider.ledger.record_created(sandbox_id, world.provider.owner)
    expect(not newcomers, f"the request was refused, yet sandbox(es) {sorted(newcomers)} appeared: a refused "
                          "request must have no effect")


@when("I list, describe, run a command in and delete the sandbox without credentials")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    other = world.credentials("none").with_credentials("none")
    outcome: ExecOutcome = other.exec(sandbox_id, ExecRequest("true"))
    world.rest.refusals = {
        "list": attempt(lambda: other.list(None)).error,
        "describe": attempt(lambda: other.describe(sandbox_id)).error,
        "exec": outcome.error if outcome.outcome == "infra" else None,
        "delete": attempt(lambda: other.delete(sandbox_id)).error,
    }
    world.rest.exec_outcome = outcome


@then("each of those requests is refused with HTTP status 401 or 403")
def _(world: World) -> None:
    for what, error in world.require(world.rest.refusals, "requests made without credentials").items():
        if what == "exec" and error is None:
            outcome = world.require(world.rest.exec_outcome, "exec made without credentials")
            raise AssertionError(f"an exec without a valid credential must be refused with HTTP 401 or 403; "
                                 f"it {outcome.describe()}")
        _refused(error, f"a {what}")


@then("the sandbox still runs commands")
def _(world: World) -> None:
    outcome = world.run("printf still-here")
    expect(outcome.outcome == "ran" and outcome.exit_code == 0 and outcome.stdout == b"still-here",
           f"after requests without a credential, the sandbox should be untouched; a command {outcome.describe()}")


@when("I ask the provider for its health without credentials")
def _(world: World) -> None:
    world.last = attempt(world.credentials("none").with_credentials("none").health)


@then("the health status is ok")
def _(world: World) -> None:
    health = world.last.expect_success("a health check")
    expect(health.status == "ok", f"the health endpoint answered status {health.status!r}: {health.message}")


# -- answers ---------------------------------------------------------------------------------------


@then("the list does not include the deleted sandbox")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    listed = [status.id for status in world.require(world.common.listed, "listing of sandboxes")]
    expect(sandbox_id not in listed, f"the deleted sandbox {sandbox_id} is still listed: {listed}")


@then("the describe is refused as not_found")
def _(world: World) -> None:
    error = world.last.expect_application_error("describing a sandbox id that was never issued")
    expect(error.kind == "not_found", f"describing an id never issued must be refused as not_found; it answered: {error}")


@then("the answer's body says what went wrong in its error field")
def _(world: World) -> None:
    error = world.last.error
    assert isinstance(error, ApplicationErrorAnswer)
    expect(error.message.strip() != "",
           f"the error answer (HTTP {error.http_status}) has no message in its error field; its body was "
           f"{error.detail.get('body', '')!r}")


@then("the error says the sandbox was not found")
def _(world: World) -> None:
    outcome = world.outcome
    assert outcome is not None and outcome.error is not None
    error = outcome.error
    expect(isinstance(error, ApplicationErrorAnswer) and error.kind == "not_found",
           f"a command for a sandbox that does not exist must be answered as missing (not_found); it answered: {error}")


@then(parsers.parse("the answer came within {seconds:d} seconds of the timeout"))
def _(world: World, seconds: int) -> None:
    timeout_s = world.require(world.common.command_timeout_s, "command run with a timeout")
    answered_after_s = world.require(world.common.command_answered_after_s, "command run with a timeout")
    expect(answered_after_s <= timeout_s + seconds,
           f"a command with a {timeout_s:g} s timeout was answered after {answered_after_s:.1f} s: the provider "
           "did not stop it at its timeout")
