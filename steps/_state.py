"""The typed state one scenario carries from step to step, one dataclass per area of the steps.

``World`` (``steps/_shared.py``) holds one instance of each, created with the world: ``world.stream``,
``world.wire_probe``, ``world.lifecycle``, ... A field is ``None`` until the step that provides it has
run; a step that needs it asks ``world.require(field, "what it is")``, which fails the scenario with a
message naming what is missing instead of a traceback. A value more than one area's steps use lives in
``CommonState``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from conformance.adapter import (
    ChannelRecord,
    EventRoute,
    ExecOutcome,
    NetworkPolicy,
    PlatformInfo,
    RunningExec,
    RunningFollow,
    SandboxHandle,
    SandboxStatus,
    SshAccess,
    StreamOutcome,
    Wire,
)
from conformance.errors import ProviderCallError, ProviderViolation

if TYPE_CHECKING:
    from ._shared import Attempt, BlockComparison
    from ._subject import Asked, UnderWay


class Background:
    """A call running on its own thread, so the scenario can do other things while it waits."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: Exception | None = None
        self._done = threading.Event()
        threading.Thread(target=self._run, args=(call,), daemon=True).start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self.result = call()
        except Exception as error:  # noqa: BLE001 -- re-raised on the scenario thread by value()
            self.error = error
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout_s: float) -> bool:
        return self._done.wait(timeout_s)

    def value(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


@dataclass(frozen=True)
class RawReply:
    """What came back for a line the host wrote on a raw channel: the first answer, or ``None`` when the
    provider answered nothing at all."""

    message: Any


@dataclass
class CommonState:
    """Values that steps of more than one area hand to one another."""

    # "I list the sandboxes ..." (lifecycle), read by the lifecycle and REST verdicts
    listed: list[SandboxStatus] | None = None
    # the generated content of the marker file "a sandbox with a marker file" wrote (lifecycle, gaps)
    marker_file_content: str | None = None
    # "I run `...` with a timeout of N seconds" (exec): the timeout asked for, and how long the answer took
    command_timeout_s: float | None = None
    command_answered_after_s: float | None = None
    # "a sandbox created through that provider" (wire), used by the raw requests of errors.feature
    fresh_sandbox: SandboxHandle | None = None
    # the answer to a raw line (errors, handshake), judged by "the answer is the JSON-RPC error ..."
    raw_reply: RawReply | None = None
    # the operations in flight the scenario is about (a streamed or long command, a follow), checked again at
    # the verdict (steps/_subject.py)
    under_way: list[UnderWay] = field(default_factory=list)
    # when the host sent the last lifecycle verb (pause, resume, archive): a later "within N seconds" of what
    # it sets going runs from the request, not from its answer (steps/_subject.py)
    verb_sent_at: float | None = None


@dataclass
class CommandsState:
    """Running commands (exec.feature)."""

    # the generated value handed to the command as an environment variable
    generated_value: str | None = None
    # the absolute path of the directory the scenario made in the sandbox
    directory: str | None = None
    # the absolute path of the Bash startup file the scenario wrote
    startup_file: str | None = None
    # the SHA-256 (hex) of the stdin the scenario gave a command
    stdin_digest: str | None = None
    # a second sandbox, created without the first one's variables
    other_sandbox: SandboxHandle | None = None
    # where a command wrote the pid of a background process it started
    pid_file: str | None = None
    # the answers to a buffered and a streamed command asking for an undefined output sanitization, by kind
    undefined_sanitization: dict[str, Any] = field(default_factory=dict)


@dataclass
class StreamState:
    """Streamed commands (streaming.feature, streaming-volume.feature)."""

    # the last stream that finished, and the command started with "I start streaming ..."
    outcome: StreamOutcome | None = None
    running: RunningExec | None = None
    # the last number `seq 1 N` prints in the retention and volume scenarios, and per output tag the
    # comparison of its chunks against that, made as they arrived
    last_number: int | None = None
    comparisons: dict[str, BlockComparison] | None = None
    # the concurrency scenario: the slow command while it runs, then what it and the fast one answered,
    # and when the describe sent meanwhile came back (time.monotonic())
    slow: RunningExec | None = None
    slow_outcome: StreamOutcome | None = None
    fast_outcome: StreamOutcome | None = None
    described_at: float | None = None
    # the buffered run of the command the scenario also streamed
    buffered: ExecOutcome | None = None
    # when the running command was cancelled (time.monotonic()), and the exec id a cancel named
    cancelled_at: float | None = None
    cancelled_exec_id: str | None = None


@dataclass
class WireProbeState:
    """Wire-level probes through a fresh provider's raw channel, and concurrency on the shared connection
    (wire.feature)."""

    # every message the provider wrote during the representative session
    session_messages: list[Any] | None = None
    # every message received after the host's last raw frame
    exchange: list[Any] | None = None
    # the id of the request the host sent after the lines under test
    marker_request_id: int | None = None
    # the requests sent together in one write, by id: (method, params)
    requests: dict[int, tuple[str, Any]] | None = None
    # a large file, and what each of the reads sent at once returned (bytes, or the exception)
    large_file: tuple[str, bytes] | None = None
    large_reads: list[Any] | None = None
    # the 3-second streamed command, when the describe sent while it ran came back (time.monotonic()),
    # and whether the command was still running then
    long_command: RunningExec | None = None
    described_at: float | None = None
    still_running: bool | None = None


@dataclass
class LifecycleState:
    """The sandbox lifecycle: listing, optional verbs, snapshots, volumes, SSH access, creation specs
    (lifecycle.feature, delete.feature)."""

    # every state a describe reported while waiting for a sandbox to settle
    states_seen: list[str] = field(default_factory=list)
    # listing: the two generated labels, the second sandbox carrying only the first, the filter listed by
    labels: dict[str, str] | None = None
    other_sandbox: SandboxHandle | None = None
    # a buffered command running on its own thread in the other sandbox
    other_command: Background | None = None
    listing_filter: dict[str, str] | None = None
    # a second sandbox made from the first (fork, snapshot)
    new_sandbox: SandboxHandle | None = None
    # set labels: the label the sandbox was created with, the new one, and every label it should carry after
    old_label: dict[str, str] | None = None
    new_label: dict[str, str] | None = None
    new_labels: dict[str, str] | None = None
    # snapshots: the name and id of the one the scenario took
    snapshot_name: str | None = None
    snapshot_id: str | None = None
    # a second snapshot, the names both were given, and a listing by name
    other_snapshot_id: str | None = None
    snapshot_names: list[str] | None = None
    snapshot_listing: Any = None
    # what a create (or a snapshot) asked for the spec field under test
    spec_asked: Any = None
    # the service whose snapshots or volumes were listed
    listed_service: str | None = None
    platform: PlatformInfo | None = None
    # the generated name the sandbox was created with
    name: str | None = None
    # the timers a "set timers" step sent, in words
    timers_described: str | None = None
    # the number of CPU cores the sandbox was resized to
    resized_cpu_cores: int | None = None
    # the network policy the sandbox was changed to
    network_policy: str | None = None
    volume_name: str | None = None
    volume_id: str | None = None
    # a volume mounted at create time: where it was mounted, and the sandboxes that mounted it, in order
    volume_mount: str | None = None
    volume_sandboxes: list[str] = field(default_factory=list)
    # what `pwd -P` printed in the sandbox, run after run (before and after attaching by id)
    directories_printed: list[bytes] = field(default_factory=list)
    # SSH access: the access handed out, and the lifetime asked for and when (time.time())
    ssh: SshAccess | None = None
    ssh_ttl_s: int | None = None
    ssh_asked_at: float | None = None
    # the per-sandbox call made for a sandbox id that was never issued
    unknown_call: str | None = None
    # the handle a freshly started provider answered when it attached by id
    attached_elsewhere: SandboxHandle | None = None


@dataclass
class GapsState:
    """The four gaps (features/gaps/)."""

    # the sandbox created from a filesystem snapshot of the scenario's sandbox
    branch: SandboxHandle | None = None
    # the generated content of the hidden file "the sandbox holds a hidden file and a symbolic link to it" wrote
    hidden_file_content: str | None = None
    # the generated name of a snapshot that does not exist
    missing_snapshot: str | None = None
    # the resources the create asked for
    memory_mb: int | None = None
    cpu_cores: int | None = None
    # what the command was sent to: "a sandbox id that was never issued" or "a deleted sandbox"
    exec_target: str | None = None
    # the network policy the create (or the change of a running sandbox's policy) asked for
    network: NetworkPolicy | None = None
    # the label only the create asking for that policy carried, where the dialect could carry one: a refused
    # create must leave no sandbox with it
    network_probe: dict[str, str] | None = None
    # before a running sandbox's network was changed: whether it had one (an interface up besides loopback, a
    # route, or the suite's own network), and whether it shared the suite's network; None where not seen
    networked_before: bool | None = None
    shared_suite_before: bool | None = None


@dataclass
class FilesState:
    """The filesystem methods (fs.feature)."""

    # what each path should hold, by the path the scenario used for it
    written: dict[str, bytes] = field(default_factory=dict)
    # an append: what the file held before, and what was appended
    appended: tuple[bytes, bytes] | None = None
    # a generated path the scenario created by appending or read while it did not exist
    generated_path: str | None = None
    # the last read with offset and length, in words
    read_request: str | None = None
    # a directory the scenario filled: (its path, the names of its files)
    tree: tuple[str, list[str]] | None = None
    # the last listing: (the path listed, the depth, the entries)
    listing: tuple[str, int, list[Any]] | None = None
    # the last deletion, in words
    deletion: str | None = None
    # another sandbox holding other bytes at the same path: (its id, the path, the bytes)
    other_file: tuple[str, str, bytes] | None = None


@dataclass
class InteractiveState:
    """Stdio processes, terminals and log follows (interactive.feature)."""

    process_id: str | None = None
    # when the host sent its terminate: "its output ends within N seconds" runs from the request
    terminated_at: float | None = None
    # the stderr tail waiting for the process reported
    stderr_tail: str | None = None
    # the bytes last sent to the process
    sent: bytes | None = None
    # a read (of a process or a terminal) left waiting on its own thread
    waiting_read: Background | None = None
    # a second stdio process beside the first
    second_process_id: str | None = None
    # reads left waiting on several processes at once
    waiting_reads: list[Background] | None = None
    # input sent on its own thread to a process that does not read it
    waiting_input: Background | None = None
    pty_id: str | None = None
    # everything the terminal showed, and how much of it the scenario has judged
    screen: bytes = b""
    judged: int = 0
    # the text last typed into the terminal, and the directory a terminal was opened in
    typed: str | None = None
    directory: str | None = None
    # a stream id cancelled before any follow used it
    stream_id: str | None = None
    # a log follow, the log it follows (provision or entrypoint), and how its call ended
    log_follow: RunningFollow | None = None
    log_source: str | None = None
    follow_answer: Attempt | None = None
    # a second follow of the same log beside the first, and whether it had ended before the first's cancel
    second_follow: RunningFollow | None = None
    second_ended_before_cancel: bool = False


@dataclass
class EventsState:
    """Control-plane events (events.feature)."""

    # every operation that asked for events: (its action, its route), in order
    operations: list[tuple[str, EventRoute]] = field(default_factory=list)
    # whether every operation so far has had its chance to send its terminal event
    settled: bool = False
    # the raw channel the host watches every message on, and the host/event params seen there
    watch: Wire | None = None
    watched_events: list[dict[str, Any]] | None = None
    # the generated marker the command printed
    output_marker: str | None = None
    # the snapshot created asking for events
    snapshot_id: str | None = None


@dataclass
class ErrorsState:
    """Error answers, encodings and tolerant reading (errors.feature)."""

    # the generated id describe was asked about
    never_issued_id: str | None = None
    # the generated marker the command wrote before failing or timing out
    output_marker: str | None = None
    # the file written before the launch-era read: (its path, its content)
    launch_era_file: tuple[str, bytes] | None = None
    # the event route the sandbox was created with
    route: EventRoute | None = None
    # calls made in a stopped sandbox: (which, how each was answered)
    refusals: list[tuple[str, Any]] | None = None
    # lists sent with an empty and with a null label map: (which, how each was answered)
    listings: list[tuple[str, Any]] | None = None
    # the optional operation asked for although its capability is not declared: (its name, the capability)
    undeclared: tuple[str, str] | None = None
    # the call an every-call outline made (steps/every_call.py): its words, and the capability gating it
    every_call: tuple[str, str | None] | None = None


@dataclass
class HandshakeState:
    """The handshake (handshake.feature)."""

    asked_version: int | None = None


@dataclass
class RestState:
    """REST providers (rest.feature)."""

    # the ids listed before a refused create
    listed_before: set[str] | None = None
    # each request made without credentials, by what it was, and the error it got (None: no error)
    refusals: dict[str, ProviderCallError | None] | None = None
    # what the exec without credentials answered
    exec_outcome: ExecOutcome | None = None


@dataclass
class SessionState:
    """How a session ends (session.feature)."""

    # the violation a shutdown that got no answer raised
    shutdown_violation: ProviderViolation | None = None
    # when the host asked the provider to end (shutdown, or the end of its input), and when it answered:
    # the exit deadline runs from the request (steps/_subject.py Asked)
    asked: Asked | None = None
    # a running command's host process, seen while it ran: its pid and its start time (field 22 of
    # /proc/<pid>/stat), so a later process reusing the pid is never mistaken for it
    command_process: tuple[int, str] | None = None


@dataclass
class CapabilitiesState:
    """Capability honesty (capabilities.feature)."""

    # the optional operation the scenario asked for, by its neutral name
    operation: str | None = None


@dataclass
class ChannelsState:
    """Version 2 data channels, commands and limits (features/v2/)."""

    # "the host moves bytes through it both ways": each operation's name, how it ended, and how long it
    # took; then the channel records of those operations
    traffic: list[tuple[str, Attempt, float]] = field(default_factory=list)
    records: list[ChannelRecord] | None = None
    # the bytes a host fault injected, and the path and text of the write it disturbed
    injected: bytes | None = None
    fault: str | None = None  # in words, for failure messages
    fault_path: str | None = None
    fault_text: bytes | None = None
    # the byte-moving call made under a fault: how it ended, how long it took, and its channel record
    faulted: Attempt | None = None
    faulted_after_s: float | None = None
    faulted_record: ChannelRecord | None = None
    # a command started with "I start streaming ... and it has printed ...", and when the host stopped it
    running: RunningExec | None = None
    # when the host sent its stop (a deadline "within N seconds of the stop" runs from it), and when the stop
    # was answered (a "still running N seconds later" runs from that, the later and stricter point)
    stopped_at: float | None = None
    stop_answered_at: float | None = None
    # the input fed to a running command while its input stays open, and when it was sent
    fed: bytes | None = None
    fed_at: float | None = None
    # how a command with a stop grace ended, and how long after its start
    ran_for_s: float | None = None
    # patterned contents written, by path
    contents: dict[str, bytes] = field(default_factory=dict)
    # the range a read asked for: (path, offset, end)
    read_range: tuple[str, int, int] | None = None
    # a streamed command's outcome (retention), and the retained output limit it asked for (None: none)
    stream_outcome: Attempt | None = None
    retained_limit: int | None = None
    # the request line sent on the raw channel, by its id
    raw_request_id: int | None = None
    # how many channel records the connection had before the operation a scenario judges
    records_before: int | None = None
    # a process a command left behind, holding its output open: (its pid file, its heartbeat file)
    leftover: tuple[str, str] | None = None
    # the bytes each way of "the host moves generated bytes ... every way", by what they were, and every
    # message the provider sent meanwhile
    moved: dict[str, bytes] = field(default_factory=dict)
    control_messages: list[Any] | None = None
    # the provider's answer about a sandbox's environment, and what a command there started with
    environment: Attempt | None = None
    printed_environment: str | None = None
    # a server in the sandbox: its running command, the port it listens on and the page it serves
    server: RunningExec | None = None
    server_port: int | None = None
    server_page: bytes | None = None
    # a git repository in the sandbox: its path and its commits, oldest first
    repository: str | None = None
    commits: list[str] = field(default_factory=list)
    # the password a clone was given
    clone_password: str | None = None
    # an event route a call was given; the routes of creates made together, and how each create ended (None: no
    # answer yet)
    route: EventRoute | None = None
    event_routes: list[EventRoute] = field(default_factory=list)
    creates: list[Attempt | None] = field(default_factory=list)
    # what a stdio process printed after the output an earlier step read
    rest_of_output: bytes | None = None
