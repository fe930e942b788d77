"""Everything step modules share: the state one scenario carries from step to step (``World``, with the
typed state of each area from ``steps/_state.py``), its access to the adapter's optional facets, and the
helpers more than one step module uses (running a command that must succeed, cleanups, raw wire
exchanges). Step modules import from here, from ``steps/_state.py`` and from ``conformance.adapter`` /
``conformance.errors`` only — never from one another.
"""

from __future__ import annotations

import datetime
import itertools
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from faker import Faker

from conformance.adapter import (
    Credentials,
    DataChannels,
    Events,
    ExecOutcome,
    ExecRequest,
    Files,
    Operations,
    OutputChunk,
    Processes,
    ProviderAdapter,
    RunningExec,
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
    ProviderViolation,
    WrongAnswer,
)

from ._state import (
    Background,
    CapabilitiesState,
    ChannelsState,
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


def expect(condition: bool, message: str, answer: ProviderCallError | None = None,
           expected: str | None = None) -> None:
    """Fail the scenario with ``message`` unless ``condition`` holds. A check of a call's error ``answer``
    passes it (and what the rule ``expected`` instead): the run groups its failures by those facts."""
    if not condition:
        if answer is None and expected is None:
            raise AssertionError(message)
        raise WrongAnswer(message, answer if isinstance(answer, ProviderCallError) else None, expected)


@dataclass
class Attempt:
    """One call's outcome: a result, or the error the provider answered with."""

    answer: Any = None
    error: ProviderCallError | None = None

    def expect_success(self, what: str) -> Any:
        expect(self.error is None, f"{what} should succeed, but the provider answered: {self.error}", self.error)
        return self.answer

    def expect_application_error(self, what: str, expected: str = "an application error") -> ApplicationErrorAnswer:
        """The application error the call was answered with; ``expected`` names the refusal the rule asks for
        (``"unsupported"`` where the capability is not declared), for the run's grouping of failures."""
        expect(self.error is not None, f"{what} should fail, but the provider answered {self.answer!r}",
               expected=expected)
        expect(isinstance(self.error, ApplicationErrorAnswer),
               f"{what} should fail with an application error, but the provider answered: {self.error}", self.error,
               expected)
        assert isinstance(self.error, ApplicationErrorAnswer)
        return self.error


def names_field(error: ApplicationErrorAnswer, wanted: str) -> bool:
    """Does a refusal's ``detail.field`` name ``wanted``, itself or a part of it (``wanted.x``, ``wanted[0]``)?"""
    named = error.detail.get("field") if isinstance(error.detail, dict) else None
    return isinstance(named, str) and (named == wanted or named.startswith((wanted + ".", wanted + "[")))


def invalid_spec_naming(error: Any, wanted: str) -> bool:
    """Is ``error`` a refusal as invalid_spec naming the field ``wanted``?"""
    return isinstance(error, ApplicationErrorAnswer) and error.kind == "invalid_spec" and names_field(error, wanted)


def lacks_volume_permission(error: Any) -> bool:
    """Upstream's volume_round_trip reads a volume create refused as kind auth, or as a provider error coded 401
    or 403, as "the credential lacks volume permissions": a skip, not the provider failing."""
    if not isinstance(error, ApplicationErrorAnswer):
        return False
    provider = error.detail.get("provider") if isinstance(error.detail, dict) else None
    code = provider.get("code") if isinstance(provider, dict) else None
    return error.kind == "auth" or (error.kind == "provider" and str(code) in ("401", "403"))


def create_volume(world: World, request: pytest.FixtureRequest) -> str:
    """Create a volume for the scenario (deleted at its end) and return its id; a create refused for the
    credential's permissions skips the scenario, saying so (``lacks_volume_permission``)."""
    name = world.token("conformance-volume")
    created = attempt(lambda: world.invoke("create a volume", None, name=name))
    if lacks_volume_permission(created.error):
        pytest.skip(f"the credential lacks volume permissions: creating volume {name!r} was refused: {created.error}")
    volume_id = created.expect_success(f"creating volume {name!r}").id
    world.lifecycle.volume_name, world.lifecycle.volume_id = name, volume_id
    cleanup(request, lambda: world.invoke("delete a volume", None, volume_id=volume_id))
    return volume_id


def attempt(call: Callable[[], Any]) -> Attempt:
    try:
        return Attempt(answer=call())
    except ProviderCallError as error:
        return Attempt(error=error)


def timed_attempt(call: Callable[[], Any]) -> tuple[Attempt, float]:
    """``attempt(call)``, and how many seconds it took."""
    started = time.monotonic()
    outcome = attempt(call)
    return outcome, time.monotonic() - started



class BlockComparison:
    """Compares the chunks of one output tag, as they arrive, with the blocks of what was written: a
    stream of any size is judged without keeping it. ``difference`` is None while they agree, else (offset
    of the first difference, what came there, what was expected); ``finished`` adds a missing end."""

    def __init__(self, tag: str, expected: Iterable[bytes]) -> None:
        self.tag = tag
        self._expected = iter(expected)
        self._pending = memoryview(b"")
        self.received = 0
        self.difference: tuple[int, bytes, bytes] | None = None

    def __call__(self, chunk: OutputChunk) -> None:
        if chunk.stream != self.tag or self.difference is not None:
            return
        view = memoryview(chunk.data)
        while view:
            if not self._pending:
                block = next(self._expected, None)
                if block is None:
                    self.difference = (self.received, bytes(view[:32]), b"(end of output)")
                    return
                self._pending = memoryview(block)
            size = min(len(view), len(self._pending))
            if view[:size] != self._pending[:size]:
                at = next(i for i in range(size) if view[i] != self._pending[i])
                self.difference = (self.received + at, bytes(view[at:at + 32]), bytes(self._pending[at:at + 32]))
                return
            view, self._pending, self.received = view[size:], self._pending[size:], self.received + size

    def finished(self) -> tuple[int, bytes, bytes] | None:
        """The first difference once the stream has ended: an output that stopped short differs at its end."""
        if self.difference is None:
            missing = bytes(self._pending[:32]) or next(self._expected, b"")[:32]
            if missing:
                return self.received, b"(end of output)", missing
        return self.difference


def printed_so_far(running: RunningExec, stream: str = "stdout") -> bytes:
    """What a streaming command has printed on ``stream`` until now."""
    return b"".join(chunk.data for chunk in running.chunks_so_far() if chunk.stream == stream)


def how_it_ended(running: RunningExec) -> str:
    """A streaming command's end, for a failure message: its refusal or its result."""
    outcome = attempt(lambda: running.wait(1.0))
    return str(outcome.error) if outcome.error is not None else outcome.answer.result.describe()


def await_printed(running: RunningExec, text: bytes, within_s: float, what: str) -> None:
    """Wait until the streaming command ``what`` has printed ``text`` on stdout; fail if it ends first or
    takes longer than ``within_s``."""
    deadline = time.monotonic() + within_s
    while text not in printed_so_far(running):
        if running.done():
            ended = attempt(lambda: running.wait(1.0))
            raise WrongAnswer(f"{what} ended before it printed {text.decode(errors='replace')!r}: "
                              f"{how_it_ended(running)}", ended.error)
        expect(time.monotonic() < deadline,
               f"{what} did not print {text.decode(errors='replace')!r} within {within_s:.0f}s")
        time.sleep(0.02)

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
    channels_state: ChannelsState = field(default_factory=ChannelsState)

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

    def channels(self, provider: ProviderAdapter | None = None, what: str = "per-operation data channels"
                 ) -> DataChannels:
        return self.facet("channels", what, provider)

    def require_report(self, field: str) -> None:
        """Skip, as not expressible, a check of an exec result field this dialect cannot carry."""
        if field not in self.provider.exec_reports:
            raise NotExpressible(self.provider.dialect, f"an exec result's {field}")

    def token(self, prefix: str = CONFORMANCE_PREFIX) -> str:
        return f"{prefix}-{self.faker.pystr(min_chars=10, max_chars=10).lower()}"

    # -- commands --------------------------------------------------------------------------------

    def run(self, command: str, **options: Any) -> ExecOutcome:
        sandbox = self.require_sandbox()
        self.outcome = self.provider.exec(sandbox.id, fitted_request(command, **options))
        return self.outcome

    def ran(self) -> ExecOutcome:
        expect(self.outcome is not None, "no command has run yet")
        assert self.outcome is not None
        expect(self.outcome.outcome == "ran",
               f"the command's result should have come back, but the provider answered an error instead: "
               f"{self.outcome.error}")
        return self.outcome


# -- shared helpers --------------------------------------------------------------------------------


# A scenario command's timeout: a margin for a busy machine or a slow provider, plus twice what its sleeps
# add up to. A command that prints and exits in milliseconds needs no 30 s: a provider that never answers
# it costs this timeout plus the call timeout (the host's deadline for the answer), no more.
COMMAND_TIMEOUT_MARGIN_S = 10.0
_SLEEP = re.compile(r"\bsleep\s+(\d+(?:\.\d+)?)\b")


def fitted_timeout(command: str) -> float:
    """The timeout a scenario command gets: ``COMMAND_TIMEOUT_MARGIN_S`` plus twice its sleeps."""
    return COMMAND_TIMEOUT_MARGIN_S + 2 * sum(float(seconds) for seconds in _SLEEP.findall(command))


def fitted_request(command: str, **options: Any) -> ExecRequest:
    """A request to run ``command`` with the timeout that fits it (``fitted_timeout``), unless ``options``
    name one."""
    return ExecRequest(command=command, **{"timeout_s": fitted_timeout(command), **options})



def run_ok(world: World, sandbox_id: str, command: str) -> bytes:
    """Run ``command`` and require that it exits 0; its stdout."""
    outcome = world.provider.exec(sandbox_id, fitted_request(command))
    expect(outcome.outcome == "ran" and outcome.termination == "exited" and outcome.exit_code == 0,
           f"`{command}` in sandbox {sandbox_id} should run and exit 0; it gave {outcome.describe()}")
    return outcome.stdout


def await_file(world: World, sandbox_id: str, name: str, what: str, within_s: float = 5.0,
               ended: Callable[[], str | None] = lambda: None) -> None:
    """Wait until ``name`` exists in the sandbox's working directory: how a scenario knows that a command
    which prints nothing (or runs where its output cannot be watched) is running. ``ended`` says how the
    command ended once it has (its refusal, say), which fails the wait at once."""
    deadline = time.monotonic() + within_s
    while True:
        how = ended()
        expect(how is None, f"{what} ended before it created {name!r}: {how}")
        outcome = world.provider.exec(sandbox_id, ExecRequest(command=f"test -e '{name}'"))
        if outcome.outcome == "ran" and outcome.exit_code == 0:
            return
        expect(time.monotonic() < deadline, f"{what} should have created {name!r} in its sandbox within "
                                            f"{within_s:.0f} s; it did not (the last check gave {outcome.describe()})")
        time.sleep(0.05)


def stream_refusal(outcome: Attempt) -> ProviderCallError | None:
    """The error a streamed command was refused with: raised by the call, or carried by its result as an
    infrastructure failure (how a streams facet reports an exec that never ran)."""
    if outcome.error is not None:
        return outcome.error
    result = getattr(outcome.answer, "result", None)
    return result.error if isinstance(result, ExecOutcome) and result.outcome == "infra" else None


def expect_limit_exceeded(error: Any, limit: str, max_bytes: int | None = None) -> None:
    """``error`` refuses a value beyond the transport limit ``limit`` (of ``max_bytes``, when given), as
    kind limit_exceeded naming it."""
    expect(isinstance(error, ApplicationErrorAnswer) and error.kind == "limit_exceeded",
           f"a value beyond a transport limit is refused with kind limit_exceeded naming the limit; got {error}",
           error if isinstance(error, ProviderCallError) else None, "limit_exceeded")
    assert isinstance(error, ApplicationErrorAnswer)
    expect(error.detail.get("limit") == limit,
           f"the refusal should name the limit {limit}; it names {error.detail.get('limit')!r} ({error})")
    if max_bytes is not None:
        expect(error.detail.get("max_bytes") == max_bytes,
               f"the refusal should say the limit is {max_bytes} bytes; it says {error.detail.get('max_bytes')!r}")


def cleanup(request: pytest.FixtureRequest, call: Callable[[], Any]) -> None:
    """Undo something the ledger does not track (snapshots, volumes, undeleted sandboxes, terminals), even
    if the scenario fails; a failing cleanup is not the scenario's verdict."""
    request.addfinalizer(lambda: attempt(call))


def patterned_bytes(size: int) -> bytes:
    """``size`` bytes in which no two nearby 64 KiB blocks are alike (a period of 251 bytes, shifted by one at
    every block), so a lost, repeated or reordered frame of a data channel shows in a comparison."""
    block = bytes(i % 251 for i in range(65536 + 251))
    return b"".join(block[n % 251: n % 251 + 65536] for n in range(size // 65536 + 1))[:size]


def first_difference(got: bytes, expected: bytes) -> str:
    """Where two byte strings part, for a failure message."""
    if got == expected:
        return "they are equal"
    offset = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
    return (f"{len(got)} bytes instead of {len(expected)}, first differing at offset {offset} "
            f"(got {got[offset:offset + 8]!r}, expected {expected[offset:offset + 8]!r})")


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
    passes), then whatever else the provider writes about it (``settle``).

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
    received.extend(settle(wire, quiet_s))
    return received


# Raw sentinel requests (``settle``) carry ids of their own, above every other raw id.
SENTINEL_ID_BASE = RAW_ID_BASE + 900_000
_sentinel_ids = itertools.count(SENTINEL_ID_BASE)
# After the sentinel's answer, how long output the provider wrote out of order may still trail it, where a
# step waits for something to arrive (not where it judges that nothing else came: there the full quiet
# period follows the answer, since a provider working on threads may write later than its sentinel answer).
SENTINEL_TRAIL_S = 0.05


def settle(wire: Wire, quiet_s: float = QUIET_S) -> list[Any]:
    """Every message the provider still writes about what it was sent so far, without the fixed wait of a
    quiet period: a sentinel request (health, or initialize where a dialect has no health) goes after it,
    and the provider, reading its lines in order, has written what it had to say about the earlier ones
    by the time it answers the sentinel; a short trail after that answer keeps what a provider answering
    on threads wrote a moment late. Until the sentinel's answer, ``quiet_s`` of silence still ends the
    wait, as it did without one (a provider that ignores the sentinel costs no more than that). The
    sentinel's own answer is not among the messages returned.

    The callers judge that nothing else came (a second answer, an unwanted message), so after the
    sentinel's answer the quiet period still runs in full: a provider answering on threads may write
    later than its answer to the sentinel. A dialect without a health call gets no sentinel (any other
    request would change the provider's state mid-scenario): a quiet period alone, as before.
    """
    received: list[Any] = []
    sentinel: int | None = None
    if "health" in wire.vocabulary.methods:
        sentinel = next(_sentinel_ids)
        try:
            wire.send_line(request_line(wire, sentinel, wire.vocabulary.method("health"), None))
        except (OSError, ProviderViolation):  # the provider stopped reading: only a quiet period is left
            sentinel = None
    while (message := wire.next_message(quiet_s)) is not None:
        if isinstance(message, dict) and "method" not in message and _is_sentinel(message.get("id")):
            continue  # this sentinel's answer, or a late one of an earlier settle
        received.append(message)
    return received


def _is_sentinel(request_id: Any) -> bool:
    return isinstance(request_id, int) and not isinstance(request_id, bool) and request_id >= SENTINEL_ID_BASE


def caught_up(provider: ProviderAdapter, wait_s: float, trail_s: float = SENTINEL_TRAIL_S) -> bool:
    """Wait for what the fixed wait of ``wait_s`` was for, ending it as soon as ``provider`` has taken in
    every request sent so far and written what it had to say about them (events, output, answers): a
    provider works through its input in order, so its answer to a health call sent now comes after all
    that, and the reader has handed everything before it on by then; a short trail after the answer
    keeps what a provider working on threads writes a moment late (``trail_s``: a step that then judges
    that nothing else came passes the whole quiet period). True then; False after the whole ``wait_s``
    when the health call was not answered (or failed) within it."""
    started = time.monotonic()
    health = Background(provider.health)
    if health.wait(wait_s) and health.error is None:
        time.sleep(trail_s)
        return True
    time.sleep(max(0.0, started + wait_s - time.monotonic()))
    return False


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
