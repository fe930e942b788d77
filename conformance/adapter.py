"""The shared adapter: the one seam every step uses to drive a provider.

Steps speak in provider-neutral terms (create a sandbox, run a Bash command, delete it). A dialect
implements ``ProviderAdapter`` for one wire protocol and maps those terms onto its messages; a
transport underneath moves the bytes. Nothing above this module knows which dialect or transport is
in use, except through ``identity`` (for reports) and ``capabilities`` (for gating).

The adapter has a small core every dialect implements (handshake, create, describe, list, delete,
exec, attach/start/stop, health, shutdown, and the harness members the session and the plugin use),
and optional **facets**: attributes that are an object when the dialect has that kind of thing and
``None`` when it has not — ``files``, ``processes``, ``terminals``, ``streams``, ``operations``,
``events``, ``credentials``, ``wire`` and ``channels`` (per-operation data channels). A step that needs a facet the dialect lacks skips the
scenario as not expressible (``steps/_shared.py``: ``World.facet``).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from conformance.errors import ApplicationErrorAnswer, HarnessError, NotExpressible, ProviderCallError
from conformance.transcript import Transcript


@dataclass(frozen=True)
class Capabilities:
    """What a provider (or one sandbox) declares, by canonical dotted name.

    Canonical names are the sandbox-driver capability names (``lifecycle.pause``, ``exec.stdin``,
    ``access.preview_urls.signed``, ``snapshots``, ...) plus every boolean leaf of the declaration
    by its path (``exec.live_streaming``). Each dialect maps its own declaration onto them.
    """

    raw: Any
    flags: Mapping[str, bool]
    # Other spellings of a canonical name that name the same flag (v1: the capability object's field path
    # ``access.ssh_revoke`` beside the enum name ``access.ssh.revoke``); both are accepted where a provider
    # names a capability, e.g. in an unsupported refusal.
    spellings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # How the provider isolates sandboxes from the host that runs it ("none", "container", "vm"), where its
    # dialect declares it; None where it does not.
    isolation: str | None = None

    def names_of(self, name: str) -> set[str]:
        """Every spelling of the capability ``name``: itself and its aliases, whichever way round."""
        names = {name, *self.spellings.get(name, ())}
        names.update(other for other, aliases in self.spellings.items() if name in aliases)
        return names

    def declares(self, name: str) -> bool:
        return bool(self.flags.get(name, False))

    def known(self, name: str) -> bool:
        return name in self.flags

    def declared(self) -> list[str]:
        return sorted(name for name, value in self.flags.items() if value)


@dataclass(frozen=True)
class ProviderIdentity:
    kind: str
    version: str
    protocol_version: Any
    dialect: str
    transport: str  # "stdio" or "http"
    command: str  # how the suite reaches it: a command line or a URL (secrets redacted on output)
    # How the dialect was settled, in words for the report: what the suite asked and what the provider
    # answered ("v2 (asked v2)", "v1 (negotiated: the plugin offers v1, not v2)"); empty where nothing was
    # negotiated. Information, never an error: the refusal's own words are the detail, kept apart.
    negotiation: str = ""
    negotiation_detail: str = ""  # the refusal that settled it, in the plugin's words ("" when none)


@dataclass
class ReceivedEvent:
    """A control-plane event as it arrived: its place in the inbound order, and the event itself."""

    sequence: int  # position among every message received on the connection
    at: float
    route_id: Any
    event: dict[str, Any]

    @property
    def type(self) -> str | None:
        return self.event.get("type")

    @property
    def action(self) -> str | None:
        return self.event.get("action")


@dataclass
class EventRoute:
    """Asks an operation to emit events, and collects what arrives for it.

    ``answers`` records, per operation, the inbound position of its response, so scenarios can tell
    whether an event arrived before or after the answer.
    """

    route_id: str
    correlation_id: str | None = None
    received: list[ReceivedEvent] = field(default_factory=list)
    answers: list[tuple[str, int]] = field(default_factory=list)

    def of_action(self, action: str) -> list[ReceivedEvent]:
        return [e for e in self.received if e.action == action]


# The network policies a sandbox can be asked for (sandbox-driver's NetworkPolicy), each with the capability
# flag that offers it; "provider_default" is what a create that asks for none gets, offered by every provider.
NETWORK_POLICY_FLAGS: dict[str, str | None] = {
    "provider_default": None,
    "allow_all": "network.allow_all",
    "block": "network.block_all",  # the flag is block_all, the policy block
    "cidr_allow_list": "network.cidr_allow_list",
    "domain_allow_list": "network.domain_allow_list",
}
NETWORK_FLAGS = tuple(flag for flag in NETWORK_POLICY_FLAGS.values() if flag) + ("network.outbound_proxy",)


@dataclass(frozen=True)
class NetworkPolicy:
    """A sandbox's network policy in neutral terms: ``kind`` is a key of ``NETWORK_POLICY_FLAGS`` (or, read
    from a provider, whatever it reported); ``allowed`` the CIDRs or domain names of an allow-list."""

    kind: str
    allowed: tuple[str, ...] = ()

    @property
    def capability(self) -> str | None:
        """The capability flag that offers this policy (None for the provider's default)."""
        return NETWORK_POLICY_FLAGS.get(self.kind)

    def describe(self) -> str:
        return f"{self.kind} {list(self.allowed)}" if self.kind.endswith("_allow_list") else self.kind


@dataclass
class SandboxRequest:
    """What a scenario asks of a new sandbox, merged by the dialect into its own creation spec."""

    labels: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    memory_mb: int | None = None
    cpu_cores: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # dialect-level fields a scenario sets on purpose
    events: EventRoute | None = None
    from_snapshot: str | None = None  # start from this snapshot (by name, or a sketch snapshot tag)
    network: NetworkPolicy | None = None  # None: the create asks for no policy (the provider's default)
    # The scenario asks for something the protocol does not define on purpose (a provider must refuse it): the
    # dialect sends the spec as it is instead of refusing to send what its own schema rejects.
    unchecked: bool = False


@dataclass(frozen=True)
class SandboxStatus:
    id: str
    state: str
    name: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    raw: Any = None
    # the network policy the status reports, where the dialect's status carries one and it reports it
    network: NetworkPolicy | None = None


@dataclass(frozen=True)
class SandboxHandle:
    id: str
    status: SandboxStatus
    working_directory: str | None
    runtime_directory: str | None
    capabilities: Capabilities | None  # per-sandbox set, when the dialect has one
    raw: Any = None


@dataclass(frozen=True)
class ExecRequest:
    """A Bash command to run in a sandbox."""

    command: str
    timeout_s: float = 30.0
    env: Mapping[str, str] = field(default_factory=dict)
    working_dir: str | None = None
    stdin: bytes | None = None
    sanitization: str | None = None  # raw | strip_ansi | strip_all; None leaves it out
    # The scenario asks for something the protocol does not define on purpose (a provider must refuse it): the
    # dialect sends the request as it is instead of refusing to send params its own schema rejects.
    unchecked: bool = False
    # Run exactly this argument vector, no shell (``command`` is then unused): the program gets ``env`` as
    # given. Only dialects that run argument vectors can express it.
    argv: tuple[str, ...] | None = None
    # How long the provider's own stops (its timeout) wait between asking the command to end and killing it.
    stop_grace_s: float | None = None
    # Send the command and its environment and no timeout, leaving it (and every optional field the request
    # does not set) to the provider's defaults, as the dialect's earliest writers did.
    minimal_spec: bool = False
    # Fields the protocol does not define, sent on purpose beside the command's spec and inside it: a reader
    # must ignore what it does not know.
    undefined_fields: Mapping[str, Any] = field(default_factory=dict)
    # Feed the command's input while it runs, through ``RunningExec.write_stdin`` and ``close_stdin`` (a
    # streaming exec only; ``stdin`` is then unused): whole input sent up front cannot tell a provider that
    # streams it from one that collects it to the host's end of file first. Only dialects that stream a
    # command's input can express it.
    live_stdin: bool = False


Outcome = Literal["ran", "infra"]


@dataclass(frozen=True)
class ExecOutcome:
    """A normalized exec result.

    ``outcome`` is ``ran`` when the command ran and its exit code or termination is a verdict on the
    command, ``infra`` when the sandbox could not run it (the provider answered an error; ``error``
    holds it and ``stage`` says where it broke when the dialect can tell).
    """

    outcome: Outcome
    termination: str | None
    exit_code: int | None
    signal: int | None
    stdout: bytes
    stderr: bytes
    duration_s: float | None
    stage: str | None = None
    error: ProviderCallError | None = None
    raw: Any = None

    def describe(self) -> str:
        if self.outcome == "infra":
            return f"infra failure ({self.error})"
        parts = [f"termination={self.termination}", f"exit_code={self.exit_code}"]
        if self.signal is not None:
            parts.append(f"signal={self.signal}")
        parts.append(f"stdout={_preview(self.stdout)}")
        parts.append(f"stderr={_preview(self.stderr)}")
        return "ran: " + ", ".join(parts)


@dataclass(frozen=True, slots=True)
class OutputChunk:
    """One piece of streamed output, with its arrival time and place in the inbound order."""

    at: float
    sequence: int
    stream: str
    data: bytes


# One chunk is made per frame or notification of a stream (32 768 for 256 MiB of 8 KiB v2 frames). A frozen
# dataclass's own __init__ sets each field through object.__setattr__, three times slower than setting the
# slots directly, which this one does; the instance is as frozen as before to everyone else.
_set_at, _set_sequence, _set_stream, _set_data = (getattr(OutputChunk, name).__set__
                                                  for name in ("at", "sequence", "stream", "data"))


def _output_chunk_init(self: OutputChunk, at: float, sequence: int, stream: str, data: bytes) -> None:
    _set_at(self, at)
    _set_sequence(self, sequence)
    _set_stream(self, stream)
    _set_data(self, data)


OutputChunk.__init__ = _output_chunk_init  # type: ignore[method-assign]


@dataclass(frozen=True)
class CaptureStats:
    observed_bytes: int
    retained_bytes: int
    omitted_bytes: int
    truncated: bool


# What a StreamRecord keeps, whatever the volume: the first chunks with their bytes (enough for every
# scenario that reads chunks one by one or joins a small output), a few late ones, and per stream its
# length and edges. A scenario that judges a large volume does it as the chunks arrive (an observer).
STREAM_CHUNKS_KEPT = 4096
STREAM_BYTES_KEPT = 1 << 20
STREAM_LATE_KEPT = 64
STREAM_EDGE_BYTES = 4096

# Called with every chunk that arrived before the response, on the thread that reads it: it must be quick.
ChunkObserver = Callable[[OutputChunk], None]


@dataclass
class StreamTotals:
    """One output stream's chunks that came before the response: how many, how long, its first and last bytes."""

    chunks: int = 0
    length: int = 0
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)

    def add(self, data: bytes, edge: int) -> None:
        self.chunks += 1
        size = len(data)
        self.length += size
        if len(self.head) < edge:
            self.head += data[:edge - len(self.head)]
        if size >= edge:  # the chunk alone is the tail: overwritten in place, nothing allocated
            self.tail[:] = memoryview(data)[size - edge:]
            return
        self.tail += data
        if len(self.tail) > 2 * edge:  # trimmed now and then, so a tail costs O(1) a byte
            del self.tail[:-edge]

    def last(self, edge: int = STREAM_EDGE_BYTES) -> bytes:
        return bytes(self.tail[-edge:])


class StreamRecord:
    """A stream's output as it arrives, in bounded memory, shared by the reader that fills it and the
    scenario that reads it: late chunks (after the response) keep landing in it after the answer."""

    def __init__(self, observers: tuple[ChunkObserver, ...] = (), chunks_kept: int = STREAM_CHUNKS_KEPT,
                 bytes_kept: int = STREAM_BYTES_KEPT, late_kept: int = STREAM_LATE_KEPT,
                 edge_bytes: int = STREAM_EDGE_BYTES) -> None:
        self._observers = observers
        self._chunks_kept, self._bytes_kept, self._late_kept, self._edge = chunks_kept, bytes_kept, late_kept, edge_bytes
        self._kept: list[OutputChunk] = []
        self._late: list[OutputChunk] = []
        self._kept_bytes = 0
        self.dropped = 0  # chunks before the response whose bytes were counted but not kept
        self.count = 0
        self.late_count = 0
        self.late_lengths: dict[str, int] = {}
        self.tags: set[str] = set()
        self.totals: dict[str, StreamTotals] = {}
        self.observer_error: BaseException | None = None
        # Per chunk, the lock is taken directly and waiters are woken only when there are some: a
        # Condition's own enter and notify are Python code, paid for every frame of a large stream.
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._waiters = 0

    def add(self, at: float, sequence: int, stream: str, data: bytes, late: bool = False) -> None:
        chunk = OutputChunk(at, sequence, stream, data)
        with self._lock:
            self.count += 1
            self.tags.add(stream)
            if late:
                self.late_count += 1
                self.late_lengths[stream] = self.late_lengths.get(stream, 0) + len(data)
                if len(self._late) < self._late_kept:
                    self._late.append(chunk)
            else:
                totals = self.totals.get(stream)
                if totals is None:  # (not setdefault: that would build a StreamTotals for every chunk)
                    totals = self.totals[stream] = StreamTotals()
                totals.add(data, self._edge)
                if (not self.dropped and len(self._kept) < self._chunks_kept
                        and self._kept_bytes + len(data) <= self._bytes_kept):
                    self._kept.append(chunk)
                    self._kept_bytes += len(data)
                else:
                    self.dropped += 1
            if self._waiters:
                self._changed.notify_all()
        if not late and self.observer_error is None:
            try:
                for observer in self._observers:
                    observer(chunk)
            except Exception as error:  # noqa: BLE001 - the suite's own bug, raised where the scenario reads the stream
                self.observer_error = error

    def chunks(self) -> list[OutputChunk]:
        """The kept chunks in arrival order: the first ones before the response, then the first late ones."""
        with self._changed:
            return self._kept + self._late

    def streamed(self, stream: str | None = None) -> bytes:
        """Every byte that came before the response (of one stream, or all), joined; only while it fit."""
        with self._changed:
            if self.dropped:
                lengths = {tag: totals.length for tag, totals in self.totals.items()}
                raise HarnessError(f"the stream carried {self.count} chunks ({lengths} bytes), more than a record "
                                   f"keeps whole ({self._chunks_kept} chunks, {self._bytes_kept} bytes): a scenario "
                                   f"judging that much output does it as it arrives, with an observer")
            return b"".join(c.data for c in self._kept if stream is None or c.stream == stream)

    def check_observers(self) -> None:
        if self.observer_error is not None:
            raise HarnessError(f"a stream observer failed: {self.observer_error!r}") from self.observer_error

    def wait_until(self, condition: Callable[[StreamRecord], bool], timeout_s: float) -> bool:
        """Wait (on arrivals, not a clock) until ``condition(self)`` holds; False at the deadline."""
        with self._changed:
            self._waiters += 1
            try:
                return self._changed.wait_for(lambda: condition(self), timeout_s)
            finally:
                self._waiters -= 1


@dataclass
class StreamOutcome:
    """A streaming exec: the final outcome, its output record (bounded; late chunks keep arriving in it)
    and the provider's claims."""

    result: ExecOutcome
    record: StreamRecord
    started_at: float
    answered_at: float | None
    answer_sequence: int | None
    live_streaming: bool | None = None
    streams_separated: bool | None = None
    stdout_capture: CaptureStats | None = None
    stderr_capture: CaptureStats | None = None

    @property
    def chunks(self) -> list[OutputChunk]:
        return self.record.chunks()

    @property
    def late_chunks(self) -> int:
        """Chunks that arrived after the response, so far."""
        return self.record.late_count

    def streamed(self, stream: str | None = None) -> bytes:
        return self.record.streamed(stream)

    def await_late(self, timeout_s: float, unstated_s: float = 0.3) -> bool:
        """Wait until the chunks, before and after the response, carry as many bytes of each stream as the
        provider's capture statistics say it observed: output it wrote after its answer is on the wire
        behind it and may arrive any time later. Returns at once when nothing is missing; False when the
        bytes are still missing at the deadline. A result without statistics (they are optional) says
        nothing of what may still come: then wait ``unstated_s``, or until a late chunk shows up."""
        wanted = {tag: capture.observed_bytes for tag, capture in
                  (("stdout", self.stdout_capture), ("stderr", self.stderr_capture)) if capture is not None}
        if not wanted:
            self.record.wait_until(lambda record: record.late_count > 0, unstated_s)
            return True

        def complete(record: StreamRecord) -> bool:
            return all((record.totals[tag].length if tag in record.totals else 0) + record.late_lengths.get(tag, 0)
                       >= observed for tag, observed in wanted.items())

        return self.record.wait_until(complete, timeout_s)


@dataclass(frozen=True)
class FileInfo:
    kind: str
    size: int | None
    mode: int | None
    raw: Any = None


@dataclass(frozen=True)
class DirEntryInfo:
    path: str
    kind: str
    size: int | None


@dataclass(frozen=True)
class HealthInfo:
    status: str
    message: str | None
    raw: Any = None


@dataclass(frozen=True)
class ProcessExit:
    termination: str | None
    exit_code: int | None
    stderr_tail: str


def _preview(data: bytes, limit: int = 120) -> str:
    text = repr(data[:limit])
    return text + (f"… ({len(data)} bytes)" if len(data) > limit else "")


@dataclass(frozen=True)
class OperationInfo:
    """An optional operation of the dialect: what it is called and which capability gates it."""

    name: str
    capability: str
    needs_sandbox: bool = True
    # Other capabilities the operation is served through, which a refusal may name when they are undeclared
    # (v1: a signed preview URL is served by the preview-URL service; upstream refuses it naming
    # access.preview_urls when that is absent).
    served_through: tuple[str, ...] = ()


class RunningExec(Protocol):
    """A streaming exec that has been started and not yet awaited."""

    exec_id: str

    def wait(self, timeout_s: float | None = None) -> StreamOutcome: ...

    def chunks_so_far(self) -> list[OutputChunk]:
        """The chunks kept so far (``StreamRecord.chunks``)."""
        ...

    def done(self) -> bool: ...

    def write_stdin(self, data: bytes) -> None:
        """Send ``data`` to the command's input now (an exec started with ``ExecRequest.live_stdin``)."""
        ...

    def close_stdin(self) -> None:
        """End the command's input (the host's end of file); once, later calls do nothing."""
        ...


class RunningFollow(Protocol):
    """A log follow that has been started; it answers once the stream ends."""

    stream_id: str

    def wait(self, timeout_s: float | None = None) -> Any: ...

    def chunks_so_far(self) -> list[OutputChunk]: ...

    def done(self) -> bool: ...

    def await_output(self, timeout_s: float) -> bool:
        """Wait (on arrivals) until some output has come, before or after the answer; False at the deadline."""
        ...

    @property
    def answer_sequence(self) -> int | None: ...


class SandboxLedger:
    """Every sandbox the adapter created and whether it was deleted: the source of leak accounting."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.created: dict[str, str] = {}  # id -> label of who created it
        self.deleted: set[str] = set()

    def record_created(self, sandbox_id: str, owner: str) -> None:
        with self._lock:
            self.created[sandbox_id] = owner

    def record_deleted(self, sandbox_id: str) -> None:
        with self._lock:
            self.deleted.add(sandbox_id)

    def record_restored(self, sandbox_id: str, owner: str) -> None:
        """An undeleted sandbox exists again and needs deleting again."""
        with self._lock:
            self.deleted.discard(sandbox_id)
            self.created[sandbox_id] = owner

    def owned(self, owner: str) -> list[str]:
        with self._lock:
            return [sid for sid, who in self.created.items() if who == owner]

    def outstanding(self, owner: str | None = None) -> list[str]:
        with self._lock:
            return [
                sid for sid, who in self.created.items()
                if sid not in self.deleted and (owner is None or who == owner)
            ]


# -- typed results of optional operations ------------------------------------------------------------


@dataclass(frozen=True)
class OperationResult:
    """What an optional operation answered. Subclasses carry what a scenario reads; ``raw`` is the
    dialect's own answer, for failure messages only."""

    raw: Any = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:  # failure messages show the provider's answer
        return f"{type(self).__name__}({self.raw!r})"


@dataclass(frozen=True, repr=False)
class Done(OperationResult):
    """An operation whose answer carries nothing a scenario reads."""


@dataclass(frozen=True, repr=False)
class SnapshotRef(OperationResult):
    id: str | None = None


@dataclass(frozen=True, repr=False)
class SnapshotInfo(OperationResult):
    id: str | None = None
    state: str | None = None
    regions: tuple[str, ...] | None = None  # where the snapshot is available; None: the answer names none


@dataclass(frozen=True, repr=False)
class SnapshotList(OperationResult):
    snapshots: tuple[SnapshotInfo, ...] = ()


@dataclass(frozen=True, repr=False)
class VolumeRef(OperationResult):
    id: str | None = None


@dataclass(frozen=True, repr=False)
class VolumeInfo(OperationResult):
    id: str | None = None
    state: str | None = None


@dataclass(frozen=True, repr=False)
class VolumeList(OperationResult):
    volumes: tuple[VolumeInfo, ...] = ()


@dataclass(frozen=True, repr=False)
class PreviewUrl(OperationResult):
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)  # what a request to the URL must carry


@dataclass(frozen=True, repr=False)
class SandboxEnvironment(OperationResult):
    """The environment a command in the sandbox starts with, as the provider reports it."""

    variables: Mapping[str, str] | None = None  # None: the answer carries no such map


@dataclass(frozen=True, repr=False)
class AccessUrl(OperationResult):
    """A web terminal or a VNC connection: where to connect, and the password when there is one."""

    url: str | None = None
    password: str | None = None


@dataclass(frozen=True, repr=False)
class SshAccess(OperationResult):
    command: str | None = None
    token: str | None = None
    expires_at: Any = None  # the dialect's timestamp as it was written (text or structural)


@dataclass(frozen=True)
class PlatformInfo:
    os: Any
    arch: Any
    version: Any = None
    raw: Any = None


# -- facets: what only some dialects have ------------------------------------------------------------


class Files(ABC):
    """The sandbox filesystem, addressed by path."""

    @abstractmethod
    def read(self, sandbox_id: str, path: str, offset: int | None = None, length: int | None = None) -> bytes: ...

    @abstractmethod
    def write(self, sandbox_id: str, path: str, data: bytes, append: bool | None = None) -> None: ...

    @abstractmethod
    def exists(self, sandbox_id: str, path: str) -> bool: ...

    @abstractmethod
    def metadata(self, sandbox_id: str, path: str) -> FileInfo: ...

    @abstractmethod
    def list_dir(self, sandbox_id: str, path: str, depth: int) -> list[DirEntryInfo]: ...

    @abstractmethod
    def mkdir(self, sandbox_id: str, path: str) -> None: ...

    @abstractmethod
    def rename(self, sandbox_id: str, source: str, target: str) -> None: ...

    @abstractmethod
    def delete_path(self, sandbox_id: str, path: str, recursive: bool) -> None: ...


class Processes(ABC):
    """Interactive processes with piped stdio."""

    @abstractmethod
    def open(self, sandbox_id: str, command: str, env: Mapping[str, str] | None = None,
             working_dir: str | None = None, process_id: str | None = None) -> str: ...

    @abstractmethod
    def write(self, process_id: str, data: bytes) -> None: ...

    @abstractmethod
    def close_input(self, process_id: str) -> None: ...

    @abstractmethod
    def read(self, process_id: str, timeout_s: float = 10.0) -> bytes | None:
        """The next chunk of the process's stdout; ``None`` at end of output."""

    @abstractmethod
    def terminate(self, process_id: str) -> None: ...

    @abstractmethod
    def wait(self, process_id: str, timeout_s: float = 30.0) -> ProcessExit: ...


class Terminals(ABC):
    """Pseudo-terminals."""

    @abstractmethod
    def open(self, sandbox_id: str, rows: int = 24, cols: int = 80, env: Mapping[str, str] | None = None,
             working_dir: str | None = None, pty_id: str | None = None) -> str: ...

    @abstractmethod
    def write(self, pty_id: str, data: bytes) -> None: ...

    @abstractmethod
    def read(self, pty_id: str, timeout_s: float = 10.0) -> bytes | None: ...

    @abstractmethod
    def resize(self, pty_id: str, rows: int, cols: int) -> None: ...

    @abstractmethod
    def close(self, pty_id: str) -> None: ...


class Streams(ABC):
    """Output that arrives while an operation runs: streaming exec and log follows, and cancelling them."""

    dialect: str = "unknown"  # named in what the facet cannot express

    @abstractmethod
    def start_exec(self, sandbox_id: str, request: ExecRequest, retained_limit: int | None = None,
                   exec_id: str | None = None, observers: tuple[ChunkObserver, ...] = ()) -> RunningExec:
        """Start ``request``; every chunk that comes before the response also goes to each of ``observers``
        as it arrives (what a scenario judging a large volume compares as it comes)."""

    def exec(self, sandbox_id: str, request: ExecRequest, retained_limit: int | None = None) -> StreamOutcome:
        return self.start_exec(sandbox_id, request, retained_limit).wait()

    @abstractmethod
    def cancel_exec(self, exec_id: str) -> None: ...

    def stop_exec(self, exec_id: str, level: Literal["term", "kill"]) -> None:
        """Stop a running exec: ``term`` asks it to end (the cancellation ``cancel_exec`` sends), ``kill``
        ends it outright. A dialect whose only stop is a cancellation cannot express ``kill``."""
        if level != "term":
            raise NotExpressible(self.dialect, f"stopping an exec at level {level!r}")
        self.cancel_exec(exec_id)

    @abstractmethod
    def start_log_follow(self, sandbox_id: str, source: str, stream_id: str | None = None) -> RunningFollow: ...

    @abstractmethod
    def cancel_stream(self, stream_id: str) -> None: ...


class Operations(ABC):
    """The dialect's optional operations, by neutral name (``pause``, ``create a snapshot``, ...)."""

    # Does an ``unsupported`` refusal name the capability (``detail.capability``)?
    refusal_names_capability: bool = True
    # Operations another dialect gates that this one has as core methods, never refused: name -> where
    # this dialect has it (a skip says so, instead of "cannot express").
    core_here: Mapping[str, str] = {}

    @property
    @abstractmethod
    def catalogue(self) -> Mapping[str, OperationInfo]:
        """Every optional operation this dialect can express, by neutral name."""

    @abstractmethod
    def invoke(self, operation: str, sandbox_id: str | None, events: EventRoute | None = None,
               **arguments: Any) -> OperationResult | SandboxHandle:
        """Invoke an operation of the ``catalogue``; ``arguments`` (neutral names) override the defaults
        the dialect sends; ``events`` asks for control-plane events where the operation can carry them.
        A fork or an undelete answers a ``SandboxHandle``; everything else a typed ``OperationResult``.
        Raises ``ProviderCallError`` on an error answer and ``NotExpressible`` for a name it lacks."""


class Events(ABC):
    """Control-plane events. Routes are asked for per operation (``SandboxRequest.events``, the
    ``events`` argument of delete/attach/invoke); this facet watches all of them at once."""

    @abstractmethod
    def watch(self) -> list[ReceivedEvent]:
        """Every control-plane event from now on, whatever its route; the list fills as they arrive."""


class Credentials(ABC):
    """The same provider reached with other credentials, for scenarios about authentication."""

    @abstractmethod
    def with_credentials(self, kind: str) -> ProviderAdapter:
        """No credentials (``"none"``), wrong ones (``"wrong"``), or a near miss of the real ones (``"one
        character short"``, ``"one character too many"``); it records into this adapter's
        transcript and its sandboxes are cleaned up with this adapter's ledger."""


@dataclass(frozen=True)
class ChannelRecord:
    """What one byte-moving call did on its data channel, as the suite saw it (metadata, never bytes)."""

    method: str
    opened: bool  # the plugin connected and sent a matching ``open`` frame
    acknowledge_asked: bool  # its ``open`` asked for the host's acknowledgment
    ack_offered: bool  # the suite announced ``open_ack: true`` at initialize
    ack_sent_at: float | None  # when the suite sent its acknowledgment (monotonic), if it did
    first_data_at: float | None  # when the plugin's first data frame arrived (monotonic)
    frames: tuple[tuple[str, int], ...]  # every inbound frame after ``open``: (kind name, payload length)
    plugin_eofs: int
    eof_before_answer: bool | None  # the plugin's eof was on the wire before the response (None: unknown yet)
    answered_ok: bool | None  # the response was a success (None: not answered yet)
    problems: tuple[str, ...]  # the channel rules the plugin broke on this channel


@dataclass(frozen=True)
class HostChannelFaults:
    """Host-side faults the next byte-moving call commits on purpose, to see the provider refuse them."""

    withhold_ack: bool = False  # never acknowledge an ``open`` that asks for it
    ack_delay_s: float = 0.0  # acknowledge this late
    extra_frame_kind: int | None = None  # a frame of this kind byte, sent before the input
    # A stdin header announcing one byte more than the frame limit, followed by that many bytes, before the
    # input: a plugin that wrongly accepts it reads a whole frame and carries on.
    oversized_header: bool = False
    data_after_eof: bool = False  # a stdin frame right behind the host's eof (in the same write)
    close_before_eof: bool = False  # close the channel without sending the host's eof
    content_length_delta: int = 0  # a file write declares this many bytes more (or fewer) than it sends
    # What the extra frame and the frame after the eof carry, so a step can see it never became data.
    extra_frame_payload: bytes = b"conformance-injected-frame"


class DataChannels(ABC):
    """The per-operation data channels of a dialect that moves bytes off the control connection: what
    each byte-moving call did on its channel, host-side faults to commit on the next one, and the
    handshake variations only such a dialect has."""

    @property
    @abstractmethod
    def offer_open_ack(self) -> bool:
        """Whether the suite announces ``open_ack: true`` (channels wait for its acknowledgment)."""

    @offer_open_ack.setter
    @abstractmethod
    def offer_open_ack(self, value: bool) -> None:
        """Announce this instead at the next handshake (only before the first one)."""

    @abstractmethod
    def records(self) -> list[ChannelRecord]:
        """One record per byte-moving call of this adapter, oldest first, as things stand now."""

    @abstractmethod
    def faults(self, faults: HostChannelFaults) -> AbstractContextManager[None]:
        """While the block runs, the next byte-moving call commits ``faults`` on its channel."""

    @abstractmethod
    def unbound_problems(self) -> list[str]:
        """Problems of connections that never bound a channel, seen so far (a copy: they are still
        reported as wire violations when the scenario ends)."""

    @abstractmethod
    def initialize_without_transport(self) -> Any:
        """An ``initialize`` naming the suite's version and no data transport; its result, or the error
        answer raised."""

    @abstractmethod
    def initialize_with_frame_limit(self, max_frame_bytes: int) -> Any:
        """An ``initialize`` whose data transport names this frame limit (same socket)."""

    @abstractmethod
    def initialize_naming_another_socket(self) -> Any:
        """A further ``initialize`` whose data transport names a decoy socket (see ``decoy_connections``)."""

    @abstractmethod
    def decoy_connections(self) -> int:
        """How many connections the decoy socket of ``initialize_naming_another_socket`` accepted so far."""

    @abstractmethod
    def call_removed(self, name: str, sandbox_id: str) -> Any:
        """A request of a method an earlier version had and this one removed (``exec/run``, ``pty/input``,
        ...), with plausible params of that version; its result, or the error answer raised. The answer is
        checked against no method schema of this version."""

    @abstractmethod
    def call_in_earlier_shape(self, name: str, sandbox_id: str, path: str) -> Any:
        """A method this version still has, asked in an earlier version's shape: ``fs/read`` of ``path``
        without a channel, ``fs/write`` of a few bytes to ``path`` as base64 in the request. Its result, or
        the error answer raised; checked against no method schema of this version."""

    @abstractmethod
    def transport_diagnostics(self) -> Any:
        """The plugin's own transport counters (``transport/diagnostics``), as answered; the error answer
        raised (a plugin without them answers "method not found")."""

    @abstractmethod
    def tokens_in(self, value: Any) -> list[str]:
        """Which channel tokens of this connection appear anywhere in ``value`` (its JSON text), each named
        by its channel and method, never by the token itself."""


# The encodings of a point in time a dialect's readers may decode (``WireVocabulary.timestamp_forms``).
TIMESTAMP_SINCE_EPOCH = "seconds and nanoseconds since the epoch"  # {secs_since_epoch, nanos_since_epoch}
TIMESTAMP_RFC3339_UTC = "an RFC 3339 string in UTC"


@dataclass(frozen=True)
class WireVocabulary:
    """What a wire-level scenario needs to say in the dialect's own words instead of literals."""

    jsonrpc: str  # the envelope's version member value
    version_field: str  # the initialize params/answer field naming the protocol version
    protocol_version: Any  # the version this suite speaks
    application_error_code: int | None  # the error code of application failures, if the dialect has one
    sandbox_field: str  # the params field naming a sandbox
    methods: Mapping[str, str]  # neutral name → method ("initialize", "describe", "exec", ...)
    notifications: tuple[str, ...] = ()  # every notification method the provider may send
    event_notification: str | None = None  # the notification carrying control-plane events
    log_notification: str | None = None  # the (reserved) log notification
    # Further members every initialize of this connection must carry (v2: its data transport).
    initialize_extra: Mapping[str, Any] = field(default_factory=dict)
    # Every kind an application failure's report may name (the dialect's stable error kinds).
    error_kinds: frozenset[str] = frozenset()
    # How the dialect writes a point in time: the TIMESTAMP_* forms its readers decode.
    timestamp_forms: tuple[str, ...] = ()

    def method(self, name: str) -> str:
        return self.methods[name]

    def initialize_params(self, version: Any = None) -> dict[str, Any]:
        return {self.version_field: self.protocol_version if version is None else version,
                **self.initialize_extra}


class Wire(ABC):
    """Raw protocol access for scenarios about framing and envelopes (JSON-RPC dialects)."""

    vocabulary: WireVocabulary

    @property
    @abstractmethod
    def handshake_problems(self) -> list[Any]:
        """Schema problems of the latest initialize answer (kept, not raised, by a non-strict handshake)."""

    @property
    @abstractmethod
    def initialize_result(self) -> Any:
        """The first successful initialize answer, as it was sent."""

    @abstractmethod
    def keep_messages(self) -> Any:
        """Start keeping every inbound message for ``next_message`` (idempotent; any raw use does too)."""

    @abstractmethod
    def send_line(self, line: bytes) -> None:
        """Send bytes as one line, exactly as given."""

    @abstractmethod
    def call(self, method: str, params: Any, timeout_s: float = 10.0) -> Any:
        """Send a request without checking its params; return the result or raise the error answer."""

    @abstractmethod
    def notify(self, method: str, params: Any) -> None:
        """Send a notification (a request without an id)."""

    @abstractmethod
    def next_message(self, timeout_s: float) -> Any:
        """The next message the provider sends (parsed JSON, or the raw text when it is not JSON), or
        ``None`` when nothing arrives before the deadline. The first use starts keeping every inbound
        message."""

    @abstractmethod
    def list_params(self, labels: Mapping[str, str] | None) -> Any:
        """The params of a list request whose label filter is exactly ``labels``, sent as given: a map (an
        empty one too), or null for ``None`` (the adapter's own ``list`` leaves an empty filter out)."""

    @abstractmethod
    def described(self, answer: Any) -> SandboxStatus:
        """A describe answer received raw, read as the dialect reads it (an empty id where it names none)."""

    @abstractmethod
    def listed(self, answer: Any) -> list[SandboxStatus]:
        """A list answer received raw, read as the dialect reads it (no statuses where it lists none)."""

    def hold_reading(self, seconds: float) -> None:
        """Read nothing the provider sends for ``seconds`` (then everything that waited), as a host slow to
        read would: the provider's writes back up meanwhile."""

    @abstractmethod
    def close_input(self) -> None:
        """Close the provider's input (EOF)."""

    @abstractmethod
    def wait_exit(self, timeout_s: float) -> int | None:
        """The provider's exit code once it exits, or ``None`` if it is still running at the deadline."""

    def wait_output_closed(self, timeout_s: float) -> bool:
        """True once the provider's stdout has ended and every line on it has been read (each then waits for
        ``next_message``); False at the deadline, or at once where the wire cannot tell."""
        return False

    @property
    def ended_mid_call(self) -> bool:
        """Whether the provider's output ended while a call was outstanding: however it exited then (status 0
        too), it did not end on its own terms."""
        return False


FACETS = ("files", "processes", "terminals", "streams", "operations", "events", "credentials", "wire", "channels")


# -- the adapter ---------------------------------------------------------------------------------------


class ProviderAdapter(ABC):
    """A connected provider. Implemented once per dialect."""

    dialect: str = "unknown"
    # What an exec result of this dialect can carry beyond exit code, termination and text output:
    # "bytes" (any byte value), "signal", "duration", "stage" and "outcome_kind".
    exec_reports: frozenset[str] = frozenset()
    # What a sandbox handle of this dialect can carry beyond its id and status: "working_directory" and
    # "runtime_directory" (a dialect without them answers None, which then says nothing about the provider).
    handle_reports: frozenset[str] = frozenset()

    # Optional facets: an object when the dialect has the thing, None when it has not.
    files: Files | None = None
    processes: Processes | None = None
    terminals: Terminals | None = None
    streams: Streams | None = None
    operations: Operations | None = None
    events: Events | None = None
    credentials: Credentials | None = None
    wire: Wire | None = None
    channels: DataChannels | None = None
    # What the dialect has a message for although this adapter offers no facet for it, by the neutral
    # words steps ask a facet with ("streaming exec", "read a file"): (method, the capability gating it).
    # A missing facet is then "capability X not declared" when X is declared false, never "cannot express".
    wire_methods_without_facet: Mapping[str, tuple[str, str]] = {}
    # Capabilities a provider of this dialect may declare (the forkd plugin declares `exec.cancel: false`)
    # although the dialect has no message to exercise them, with the neutral words of what is missing: a
    # scenario gated on one is "capability X not declared" when X is declared false (the flag exists and
    # says no), and "the <dialect> dialect cannot express: <words>" when it is declared true.
    capabilities_without_method: Mapping[str, str] = {}
    # Capabilities other dialects gate that this one has as core methods, with no flag to declare (v1's
    # sandbox/stop is core, the sketch's is gated by lifecycle.stop): a @cap: gate on one always applies.
    core_capabilities: frozenset[str] = frozenset()
    # The neutral error kinds with which this dialect refuses a create that names something that does not
    # exist (a snapshot): "not found" or "invalid spec". Any other failure (an internal error relaying a 404)
    # says the provider broke, not that the thing is missing.
    missing_reference_kinds: frozenset[str] = frozenset({"not_found", "invalid_spec"})
    # The creation-spec fields that carry a snapshot to start from: a provider that takes no snapshot
    # sources at all honestly refuses the field (invalid_spec naming it) instead of the snapshot.
    snapshot_spec_fields: frozenset[str] = frozenset()
    # Whether the dialect requires an operation's terminal event on the wire before the operation's answer
    # (v1 does; v2 lets the answer come first). Where it is not known, no order is asked.
    terminal_event_precedes_answer: bool = False

    def __init__(self) -> None:
        self.ledger = SandboxLedger()
        self.owner = "session"
        self._transcript: Transcript | None = None
        self._transcript_lock = threading.Lock()

    # -- identity and capabilities ---------------------------------------------------------------

    @abstractmethod
    def handshake(self, protocol_version: Any = None, timeout_s: float | None = None, strict: bool = True) -> Any:
        """Open the session (``initialize`` or its equivalent) and return the provider's answer.

        The first successful answer fixes ``identity`` and ``capabilities``. Not ``strict``: schema
        problems in the answer are kept (``wire.handshake_problems``) instead of being raised.
        """

    @property
    @abstractmethod
    def identity(self) -> ProviderIdentity: ...

    @property
    @abstractmethod
    def capabilities(self) -> Capabilities: ...

    def settle(self) -> None:
        """Find out, once after the first handshake, what the dialect must know before scenarios run
        (e.g. whether a plugin process owns one sandbox or many)."""

    def settled(self) -> dict[str, Any]:
        """What ``settle`` found, as ``ProviderConfig`` fields: fresh processes and restarts reuse it."""
        return {}

    def creation_spec_problems(self, spec: Any) -> list[Any]:
        """Why ``spec`` is not a valid creation spec of this dialect (empty when it is)."""
        return []

    # -- core operations -------------------------------------------------------------------------

    @abstractmethod
    def create(self, request: SandboxRequest) -> SandboxHandle: ...

    @abstractmethod
    def describe(self, sandbox_id: str) -> SandboxStatus: ...

    @abstractmethod
    def list(self, labels: Mapping[str, str] | None = None) -> list[SandboxStatus]: ...

    @abstractmethod
    def delete(self, sandbox_id: str, events: EventRoute | None = None) -> None: ...

    @abstractmethod
    def exec(self, sandbox_id: str, request: ExecRequest) -> ExecOutcome: ...

    # -- core lifecycle a dialect may lack: the default says it cannot express it -----------------

    def attach(self, sandbox_id: str, events: EventRoute | None = None) -> SandboxHandle:
        raise NotExpressible(self.dialect, "attach to a sandbox")

    def start(self, sandbox_id: str) -> None:
        raise NotExpressible(self.dialect, "start a sandbox")

    def stop(self, sandbox_id: str) -> None:
        raise NotExpressible(self.dialect, "stop a sandbox")

    def platform_info(self, sandbox_id: str) -> PlatformInfo:
        raise NotExpressible(self.dialect, "platform info")

    def health(self) -> HealthInfo:
        raise NotExpressible(self.dialect, "provider health")

    def shutdown(self) -> Any:
        raise NotExpressible(self.dialect, "shutdown")

    @contextmanager
    def alongside(self, sandbox_id: str) -> Iterator[None]:
        """While active, a call naming a sandbox this adapter never saw goes where ``sandbox_id``'s calls go:
        to the process that owns it, for a dialect with one sandbox per process (so a plugin that ignores the
        id it is given shows it). Elsewhere every call goes the same way, and this changes nothing."""
        yield

    def says_unknown_sandbox(self, error: BaseException, sandbox_id: str) -> bool:
        """Does ``error`` say that ``sandbox_id`` names no sandbox this provider knows? In the dialect's
        not_found where it has that kind; a dialect without one (the fabro sketch, whose known implementation
        answers -32602 for an id it does not hold) says it with one of its missing-reference kinds, naming
        the id."""
        if not isinstance(error, ApplicationErrorAnswer):
            return False
        if "not_found" in self.missing_reference_kinds:
            return error.kind == "not_found"
        return error.kind in self.missing_reference_kinds and sandbox_id in error.message

    # -- diagnostics -----------------------------------------------------------------------------

    def stderr_tail(self, since: int | None = None) -> str:
        """The provider's newest stderr output, or what it wrote after ``stderr_position()`` was taken."""
        return ""

    def stderr_position(self) -> int:
        return 0

    def take_violations(self) -> list[Any]:
        """Wire and schema violations seen since the last call."""
        return []

    @property
    def alive(self) -> bool:
        return True

    def release(self, owner: str) -> None:
        """Let go of what ``owner`` (a scenario) held once its sandboxes are deleted (e.g. the plugin
        processes of a dialect that runs one sandbox per process)."""

    @contextmanager
    def recording(self, transcript: Transcript) -> Iterator[Transcript]:
        """Record every message exchanged while the block runs."""
        with self._transcript_lock:
            previous, self._transcript = self._transcript, transcript
        try:
            yield transcript
        finally:
            with self._transcript_lock:
                self._transcript = previous

    def add_transcript(self, transcript: Transcript) -> None:
        """Record into ``transcript`` from now on (a fresh provider that lives for one scenario)."""
        with self._transcript_lock:
            self._transcript = transcript

    def _observe(self, channel: str, direction: str, text: str) -> None:
        transcript = self._transcript
        if transcript is not None:
            transcript.record(channel, direction, text)

    @abstractmethod
    def close(self) -> None: ...
