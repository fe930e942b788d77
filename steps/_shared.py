"""Everything step modules share: the state one scenario carries from step to step (``World``, with the
typed state of each area from ``steps/_state.py``), its access to the adapter's optional facets, and the
helpers more than one step module uses (running a command that must succeed, cleanups, raw wire
exchanges). Step modules import from here, from ``steps/_state.py`` and from ``conformance.adapter`` /
``conformance.errors`` only — never from one another.
"""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from faker import Faker

from conformance.adapter import (
    Credentials,
    Events,
    ExecOutcome,
    ExecRequest,
    Files,
    Operations,
    Processes,
    ProviderAdapter,
    SandboxHandle,
    SandboxRequest,
    Streams,
    Terminals,
    Wire,
)
from conformance.errors import (
    ApplicationErrorAnswer,
    CapabilityNotDeclared,
    NotDriven,
    NotExpressible,
    ProtocolErrorAnswer,
    ProviderCallError,
)

from ._state import (
    CapabilitiesState,
    CommandsState,
    CommonState,
    ErrorsState,
    EventsState,
    FilesState,
    GapsState,
    HandshakeState,
    InteractiveState,
    LifecycleState,
    RestState,
    SessionState,
    StreamState,
    WireProbeState,
)

T = TypeVar("T")

CONFORMANCE_PREFIX = "conformance"
MARKER_FILE = "conformance-marker"


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
    # what the steps of each area hand to one another (steps/_state.py)
    common: CommonState = field(default_factory=CommonState)
    commands: CommandsState = field(default_factory=CommandsState)
    stream: StreamState = field(default_factory=StreamState)
    wire_probe: WireProbeState = field(default_factory=WireProbeState)
    lifecycle: LifecycleState = field(default_factory=LifecycleState)
    gaps: GapsState = field(default_factory=GapsState)
    fs: FilesState = field(default_factory=FilesState)
    interactive: InteractiveState = field(default_factory=InteractiveState)
    event_watch: EventsState = field(default_factory=EventsState)
    errors: ErrorsState = field(default_factory=ErrorsState)
    handshake: HandshakeState = field(default_factory=HandshakeState)
    rest: RestState = field(default_factory=RestState)
    session: SessionState = field(default_factory=SessionState)
    capability: CapabilitiesState = field(default_factory=CapabilitiesState)

    # -- state an earlier step provides -----------------------------------------------------------

    @staticmethod
    def require(value: T | None, what: str) -> T:
        """``value``, which an earlier step provides; fails the scenario naming ``what`` when no step did."""
        expect(value is not None, f"the scenario has no {what} yet (a step that provides it is missing)")
        assert value is not None
        return value

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

    # -- facets: a dialect without one cannot express the scenario ---------------------------------

    def facet(self, name: str, what: str, provider: ProviderAdapter | None = None) -> Any:
        """The facet ``name`` of ``provider`` (the shared one by default); a dialect without it skips the
        scenario as "the <dialect> dialect cannot express: <what>"."""
        provider = provider or self.provider
        found = getattr(provider, name)
        if found is None:
            method, capability = provider.wire_methods_without_facet.get(what, (None, None))
            if method is None:
                raise NotExpressible(provider.dialect, what)
            if not provider.capabilities.declares(capability):
                raise CapabilityNotDeclared(capability)
            raise NotDriven(provider.dialect, what, method)
        return found

    def files(self, what: str, provider: ProviderAdapter | None = None) -> Files:
        return self.facet("files", what, provider)

    def processes(self, what: str) -> Processes:
        return self.facet("processes", what)

    def terminals(self, what: str) -> Terminals:
        return self.facet("terminals", what)

    def streams(self, what: str, provider: ProviderAdapter | None = None) -> Streams:
        return self.facet("streams", what, provider)

    def operations(self, what: str) -> Operations:
        return self.facet("operations", what)

    def invoke(self, operation: str, sandbox_id: str | None, **arguments: Any) -> Any:
        """An optional operation by its neutral name, on the shared provider (a typed result)."""
        return self.operations(operation).invoke(operation, sandbox_id, **arguments)

    def events(self, what: str = "control-plane events") -> Events:
        return self.facet("events", what)

    def credentials(self, kind: str) -> Credentials:
        return self.facet("credentials", f"a request with {'no' if kind == 'none' else 'wrong'} credentials")

    def wire(self, provider: ProviderAdapter | None = None, what: str = "a wire-level channel") -> Wire:
        return self.facet("wire", what, provider)

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
               f"the command's result should have come back, but the provider answered an error instead: "
               f"{self.outcome.error}")
        return self.outcome


# -- shared helpers --------------------------------------------------------------------------------


def run_ok(world: World, sandbox_id: str, command: str) -> bytes:
    """Run ``command`` and require that it exits 0; its stdout."""
    outcome = world.provider.exec(sandbox_id, ExecRequest(command=command))
    expect(outcome.outcome == "ran" and outcome.termination == "exited" and outcome.exit_code == 0,
           f"`{command}` in sandbox {sandbox_id} should run and exit 0; it gave {outcome.describe()}")
    return outcome.stdout


def await_file(world: World, sandbox_id: str, name: str, what: str, within_s: float = 5.0) -> None:
    """Wait until ``name`` exists in the sandbox's working directory: how a scenario knows that a command
    which prints nothing (or runs where its output cannot be watched) is running."""
    deadline = time.monotonic() + within_s
    while True:
        outcome = world.provider.exec(sandbox_id, ExecRequest(command=f"test -e '{name}'"))
        if outcome.outcome == "ran" and outcome.exit_code == 0:
            return
        expect(time.monotonic() < deadline, f"{what} should have created {name!r} in its sandbox within "
                                            f"{within_s:.0f} s; it did not (the last check gave {outcome.describe()})")
        time.sleep(0.05)


def cleanup(request: pytest.FixtureRequest, call: Callable[[], Any]) -> None:
    """Undo something the ledger does not track (snapshots, volumes, undeleted sandboxes, terminals), even
    if the scenario fails; a failing cleanup is not the scenario's verdict."""
    request.addfinalizer(lambda: attempt(call))


def unescape(text: str) -> bytes:
    """Gherkin strings may spell newlines and tabs as \\n and \\t."""
    return text.replace("\\n", "\n").replace("\\t", "\t").encode("utf-8")


def sanitization_mode(spelled: str) -> str | None:
    return None if spelled == "not given" else spelled


# -- the freshly started provider and its wire -------------------------------------------------------


def fresh_provider(world: World) -> ProviderAdapter:
    expect(world.fresh is not None, "the scenario has no freshly started provider (a Given step is missing)")
    assert world.fresh is not None
    return world.fresh


def raw_channel(world: World) -> Wire:
    """The freshly started provider's wire, keeping every inbound message from now on.

    Wire-level probes go through a freshly started provider, never the shared connection: keeping the
    inbound messages lasts for the rest of the connection's life, and raw sends switch off the check
    for answers nobody asked for.
    """
    wire = world.wire(fresh_provider(world))
    wire.keep_messages()
    return wire


# Raw requests carry ids far above the connection's own counter, so no answer is mistaken for another.
RAW_ID_BASE = 7_340_032
ANSWER_DEADLINE_S = 5.0
# After the awaited answers, listen this long for answers that should never come.
QUIET_S = 0.5
NEVER_ISSUED_ID = "conformance-never-issued-sandbox"


def is_notification(message: Any) -> bool:
    return isinstance(message, dict) and "method" in message and "id" not in message


def is_answer(message: Any) -> bool:
    """Anything on stdout that is not a notification: responses, and whatever else does not belong there."""
    return not is_notification(message)


def request_line(wire: Wire, request_id: Any, method: str, params: Any) -> bytes:
    return json.dumps({"jsonrpc": wire.vocabulary.jsonrpc, "id": request_id, "method": method, "params": params},
                      separators=(",", ":")).encode("utf-8")


def notification_line(wire: Wire, method: str, params: Any) -> bytes:
    return json.dumps({"jsonrpc": wire.vocabulary.jsonrpc, "method": method, "params": params},
                      separators=(",", ":")).encode("utf-8")


def epoch_seconds(value: Any) -> float | None:
    """Seconds since the Unix epoch of a timestamp: the structural form (v1) or RFC 3339 text; None for neither."""
    if isinstance(value, dict) and isinstance(value.get("secs_since_epoch"), int):
        nanos = value.get("nanos_since_epoch", 0)
        return value["secs_since_epoch"] + (nanos if isinstance(nanos, int) else 0) / 1e9
    if isinstance(value, str):
        try:
            return datetime.datetime.fromisoformat(value).timestamp()
        except ValueError:
            return None
    return None


def preview(message: Any, limit: int = 300) -> str:
    text = message if isinstance(message, str) else json.dumps(message, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


def first(offenders: list[Any]) -> str:
    """The first offending message, for a failure message."""
    return preview(offenders[0]) if offenders else ""


def flush(wire: Wire) -> None:
    """Forget what arrived before this point (answers to earlier adapter calls)."""
    while wire.next_message(0.0) is not None:
        pass


def exchange(wire: Wire, frame: bytes, done: Callable[[list[Any]], bool],
             deadline_s: float = ANSWER_DEADLINE_S, quiet_s: float = QUIET_S) -> list[Any]:
    """Send ``frame`` in a single write and collect every message until ``done`` holds (or the deadline
    passes), then until the provider has been silent for ``quiet_s``.

    One write matters: lines a test sends back to back in separate writes may or may not reach the
    provider in one read, which would make a provider's read-loop bugs show up only sometimes.
    """
    flush(wire)
    wire.send_line(frame)
    received: list[Any] = []
    deadline = time.monotonic() + deadline_s
    while not done(received):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        message = wire.next_message(left)
        if message is None:
            break
        received.append(message)
    while (message := wire.next_message(quiet_s)) is not None:
        received.append(message)
    return received


def answered(request_id: Any) -> Callable[[list[Any]], bool]:
    return lambda received: any(isinstance(m, dict) and m.get("id") == request_id and "method" not in m
                                for m in received)


def answers_counted(count: int) -> Callable[[list[Any]], bool]:
    return lambda received: sum(1 for m in received if is_answer(m)) >= count


def answered_error_code(world: World) -> int | None:
    """The JSON-RPC error code of the last answer: the raw reply's when a raw probe ran, else the last call's."""
    if world.common.raw_reply is not None:
        reply = world.common.raw_reply.message
        expect(reply is not None, "the provider did not answer at all")
        expect(isinstance(reply, dict) and isinstance(reply.get("error"), dict),
               f"the provider should answer with an error object, it sent {reply!r}")
        return reply["error"].get("code")
    error = world.last.error
    expect(error is not None, f"the call should fail, but it succeeded with {world.last.answer!r}")
    expect(isinstance(error, ProtocolErrorAnswer | ApplicationErrorAnswer), f"unexpected answer {error}")
    return error.code
