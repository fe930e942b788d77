"""Pairing a control request with its data channel, the way upstream's host does it.

Every byte-moving request names a fresh channel (``ChannelServer.expect``) and is sent at once; the
channel is pumped alongside: the plugin's frames are handed to the call on the channel's reader thread as
they are read (nothing buffers them in between, so a consumer that stops stalls the plugin), and the host's input — stdin frames,
then its eof — is written on a thread of its own. Upstream's host sends an eof only where it has input to
end, so a channel without host input gets nothing at all.

An answered operation is judged on its channel: one that answered success without opening it within
``late_channel_grace_s`` (upstream: 10 s), and one whose eof came after the response, broke a channel
rule. Those findings join the channel's own problems and become wire violations of the connection
(``V2DataChannels.take_violations``), naming the rule each one breaks.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from conformance.adapter import ChannelRecord, DataChannels, HostChannelFaults, OutputChunk, StreamRecord
from conformance.dialects.jsonrpc import PendingCall, Violation
from conformance.dialects.sandbox_driver_v2.rules import (
    CHANNEL_RULES,
    channel_rule,
    late_open_channel,
    server_rule,
)
from conformance.errors import HarnessError
from conformance.transports.channels import (
    EOF,
    MAX_FRAME_BYTES,
    OPEN,
    STDERR,
    STDIN,
    STDOUT,
    DataChannel,
    Frame,
    kind_name,
)

if TYPE_CHECKING:
    from conformance.dialects.sandbox_driver_v2.adapter import SandboxDriverV2Adapter

# How long the suite waits, after a plugin answered, for a channel it had not opened yet (upstream's host: 10 s).
LATE_CHANNEL_GRACE_S = 10.0
# How long a plugin waits for an asked-for acknowledgement before it fails the operation (v2's open_timeout).
# A call whose acknowledgement the host delays or withholds on purpose may take that long on top of its own
# deadline: the run's --call-timeout alone would turn the plugin's correct wait into a missed answer.
PLUGIN_OPEN_TIMEOUT_S = 10.0
# How long a write channel is still read after a successful answer, to record the plugin's eof.
WRITE_CHANNEL_RECORD_S = 1.0
STREAM_NAMES = {STDOUT: "stdout", STDERR: "stderr"}


@dataclass
class Finding:
    """A channel rule a plugin broke: the rule's key (see ``rules.CHANNEL_RULES``) and what happened."""

    rule: str
    text: str


class ChannelUse:
    """One byte-moving call's channel as the suite tracks it: the answer's outcome, what the pairing
    found, and which findings were reported already."""

    def __init__(self, method: str, channel: DataChannel, ack_offered: bool, answer_follows_eof: bool,
                 host_reads: bool) -> None:
        self.method = method
        self.channel = channel
        self.ack_offered = ack_offered
        # Whether the response must come after the plugin's eof (an exec, a read, a follow) or only opens
        # a session whose eof comes much later (a stdio process, a terminal).
        self.answer_follows_eof = answer_follows_eof
        # Whether upstream's host reads this channel at all: it reads nothing back on a write channel, so
        # how (or whether) the plugin ends that one breaks nothing upstream reads.
        self.host_reads = host_reads
        self.faulted = False  # the host broke a channel rule on it on purpose (HostChannelFaults)
        self.answered_ok: bool | None = None
        self.found: list[Finding] = []
        self._reported: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def note(self, rule: str, text: str) -> None:
        with self._lock:
            self.found.append(Finding(rule, text))

    def findings(self) -> list[Finding]:
        own = [Finding(channel_rule(text), text) for text in self.channel.problems]
        with self._lock:
            found = own + list(self.found)
        if self.channel.acknowledge_asked and not self.ack_offered:
            found.append(Finding("unoffered ack", "the plugin's open asked for an acknowledgment the host did not "
                                                  "offer (open_ack false)"))
        if self.answered_ok is False or not self.host_reads or self.faulted:
            # Upstream's host drops the channel of a failed call unread, and never reads a write channel
            # back: how the plugin ends those breaks nothing upstream reads. On a channel the host broke on
            # purpose, ending it early is the right answer.
            found = [f for f in found if f.rule not in ("eof", "incomplete")]
        return found

    def take_new(self) -> list[Finding]:
        new = []
        for finding in self.findings():
            key = (finding.rule, finding.text)
            if key not in self._reported:
                self._reported.add(key)
                new.append(finding)
        return new

    def summary(self) -> str:
        """One line for the transcript: what crossed the channel (never its bytes). From the channel's
        running totals: a large transfer's frames are not walked again."""
        channel = self.channel
        frames, data_bytes = channel.data_totals()
        ack = " after the host's acknowledgement" if channel.ack_sent_at is not None else ""
        order = {True: " before the response", False: " after the response", None: ""}[channel.eof_before_answer]
        return (f"{self.method}: opened{ack}; {frames} data frames ({data_bytes} bytes); "
                f"{channel.plugin_eofs} eof from the plugin{order if channel.plugin_eofs else ''}")

    def record(self) -> ChannelRecord:
        channel = self.channel
        inbound = channel.records[1:]  # every frame after the open
        data = [r for r in inbound if r.kind in STREAM_NAMES]
        return ChannelRecord(
            method=self.method, opened=channel.opened_at is not None, acknowledge_asked=channel.acknowledge_asked,
            ack_offered=self.ack_offered, ack_sent_at=channel.ack_sent_at,
            first_data_at=data[0].at if data else None,
            frames=tuple((kind_name(r.kind), r.length) for r in inbound), plugin_eofs=channel.plugin_eofs,
            eof_before_answer=channel.eof_before_answer, answered_ok=self.answered_ok,
            problems=tuple(f.text for f in self.findings()),
        )


class V2DataChannels(DataChannels):
    """The ``channels`` facet: every channel of this adapter, the faults to commit next, and the v2
    handshake variations."""

    def __init__(self, adapter: SandboxDriverV2Adapter, offer_open_ack: bool) -> None:
        self._adapter = adapter
        self._offer_open_ack = offer_open_ack
        self._uses: list[ChannelUse] = []
        self._unbound: list[str] = []
        self._unbound_reported = 0
        self._next_faults: HostChannelFaults | None = None
        self._lock = threading.Lock()

    # -- the facet -------------------------------------------------------------------------------

    @property
    def offer_open_ack(self) -> bool:
        return self._offer_open_ack

    @offer_open_ack.setter
    def offer_open_ack(self, value: bool) -> None:
        if self._adapter.initialize_result is not None:
            raise HarnessError("open_ack is announced at initialize; this connection has handshaken already")
        self._offer_open_ack = value
        self._adapter.refresh_vocabulary()

    def records(self) -> list[ChannelRecord]:
        with self._lock:
            uses = list(self._uses)
        return [use.record() for use in uses]

    @contextlib.contextmanager
    def faults(self, faults: HostChannelFaults) -> Iterator[None]:
        with self._lock:
            self._next_faults = faults
        try:
            yield
        finally:
            with self._lock:
                self._next_faults = None

    def unbound_problems(self) -> list[str]:
        self._collect_unbound()
        with self._lock:
            return list(self._unbound)

    def initialize_without_transport(self) -> Any:
        return self._adapter.raw_initialize({"protocol_version": self._adapter.vocabulary.protocol_version})

    def initialize_with_frame_limit(self, max_frame_bytes: int) -> Any:
        params = self._adapter.initialize_params()
        params["data_transport"] = {**params["data_transport"], "max_frame_bytes": max_frame_bytes}
        return self._adapter.raw_initialize(params)

    def initialize_naming_another_socket(self) -> Any:
        return self._adapter.raw_initialize(self._adapter.initialize_params(self._adapter.decoy().socket_path))

    def decoy_connections(self) -> int:
        return self._adapter.decoy_connections()

    def call_removed(self, name: str, sandbox_id: str) -> Any:
        return self._adapter.call_removed(name, sandbox_id)

    def call_in_earlier_shape(self, name: str, sandbox_id: str, path: str) -> Any:
        return self._adapter.call_in_earlier_shape(name, sandbox_id, path)

    def transport_diagnostics(self) -> Any:
        return self._adapter.connection.request("transport/diagnostics", {}, self._adapter.call_timeout_s).result()

    def tokens_in(self, value: Any) -> list[str]:
        text = value if isinstance(value, str) else json.dumps(value)
        with self._lock:
            uses = list(self._uses)
        return [f"the token of data channel {use.channel.channel_id} ({use.method})" for use in uses
                if use.channel.token in text]

    # -- what byte-moving calls use ---------------------------------------------------------------

    def take_faults(self) -> HostChannelFaults:
        """The faults the next byte-moving call commits (none outside a ``faults`` block); once only."""
        with self._lock:
            faults, self._next_faults = self._next_faults, None
        return faults or HostChannelFaults()

    def track(self, method: str, channel: DataChannel, answer_follows_eof: bool, host_reads: bool) -> ChannelUse:
        use = ChannelUse(method, channel, self._offer_open_ack, answer_follows_eof, host_reads)
        with self._lock:
            self._uses.append(use)
        return use

    # -- violations -------------------------------------------------------------------------------

    def _collect_unbound(self) -> None:
        taken = self._adapter.channel_server.take_violations()
        with self._lock:
            self._unbound.extend(taken)

    def take_violations(self) -> list[Violation]:
        """Every channel problem not reported yet, as a wire violation naming the rule it breaks."""
        self._collect_unbound()
        with self._lock:
            unbound, self._unbound_reported = self._unbound[self._unbound_reported:], len(self._unbound)
            uses = list(self._uses)
        # The host lets a channel go when its call failed (as upstream's host does, which then closes a late
        # open unanswered) or when its grace ran out (reported on the channel itself): an open that comes
        # after that is no further rule broken.
        ours = {use.channel.channel_id for use in uses}
        unbound = [text for text in unbound if late_open_channel(text) not in ours]
        found = [Violation("data channels", f"{text} (breaks {CHANNEL_RULES[server_rule(text)]})") for text in unbound]
        for use in uses:
            found += [Violation(f"data channel {use.channel.channel_id} of {use.method}",
                                f"{finding.text} (breaks {CHANNEL_RULES[finding.rule]})") for finding in use.take_new()]
        return found


class ChannelCall:
    """One byte-moving request paired with its channel: sent at once, its frames read and its input
    written alongside, judged once answered."""

    def __init__(self, adapter: SandboxDriverV2Adapter, method: str, answer_follows_eof: bool = True,
                 host_reads: bool = True, record: StreamRecord | None = None) -> None:
        self.adapter = adapter
        # Output read into a bounded record as it comes (a stream), instead of every frame kept (a file).
        self.record = record
        self.method = method
        self.facet = adapter.data_channels
        self.faults = self.facet.take_faults()
        self.channel = adapter.channel_server.expect(ack_delay_s=self.faults.ack_delay_s,
                                                     withhold_ack=self.faults.withhold_ack)
        self.use = self.facet.track(method, self.channel, answer_follows_eof, host_reads)
        # A delayed acknowledgment breaks no rule: the plugin must simply wait for it.
        self.use.faulted = replace(self.faults, ack_delay_s=0.0) != HostChannelFaults()
        self.frames: list[Frame] = []
        self.call: PendingCall | None = None
        self._frames_lock = threading.Lock()
        self._answer_lock = threading.Lock()
        self._answered = False
        self._collecting = False  # the plugin's frames are handed to _take_frame as the channel reads them
        self._writer: threading.Thread | None = None

    # -- starting ---------------------------------------------------------------------------------

    def send(self, params: dict[str, Any], timeout_s: float, *, collect: bool = True, host_input: bytes | None = None,
             check_params: bool = True) -> PendingCall:
        """Send the request naming this channel; read the plugin's frames (``collect``) and write
        ``host_input`` then the host's eof (``None``: no input, no eof) on threads of their own."""
        if self.faults.withhold_ack or self.faults.ack_delay_s:
            timeout_s += PLUGIN_OPEN_TIMEOUT_S + self.faults.ack_delay_s
        if collect:
            # Before the request: no frame can come before the plugin knows the channel's token.
            self.channel.hand_frames_to(self._take_frame)
            self._collecting = True
        call = self.adapter.connection.request(self.method, {**params, "channel": self.channel.request}, timeout_s,
                                               check_params=check_params)
        self.call = call
        call.future.add_done_callback(lambda _future: self.mark_answered())
        if host_input is not None or self._faults_need_sending():
            self._writer = threading.Thread(target=self._write_input, args=(host_input,), daemon=True,
                                            name=f"{self.method} channel writer")
            self._writer.start()
        return call

    def injected_bytes(self) -> int:
        """The payload bytes the faults add to the host's input (a write's content_length counts them, so
        the plugin judges the broken frame, not a length that no longer adds up)."""
        f = self.faults
        extra = len(f.extra_frame_payload) if f.extra_frame_kind not in (None, OPEN, EOF) else 0
        return extra + (MAX_FRAME_BYTES + 1 if f.oversized_header else 0) + (
            len(f.extra_frame_payload) if f.data_after_eof else 0)

    def _faults_need_sending(self) -> bool:
        f = self.faults
        return f.extra_frame_kind is not None or f.oversized_header or f.data_after_eof or f.close_before_eof

    def mark_answered(self) -> None:
        """The response arrived: fix the channel's answer mark, once, whichever thread gets here first —
        and the other waits until it is fixed, so no judgement reads the channel before its mark."""
        with self._answer_lock:
            if self._answered or self.call is None or not self.call.done():
                return
            self._answered = True
            self.use.answered_ok = self.call.future.exception() is None
            self.channel.mark_answered()

    # -- the pumps --------------------------------------------------------------------------------

    def _take_frame(self, kind: int, payload: bytes) -> None:
        """Each data frame before the plugin's eof, on the channel's reader thread as it is read."""
        record = self.record
        if record is not None:
            # Data frames before the plugin's eof, which the channel rules put before the response: a
            # frame's place is its number (an eof after the response is a channel violation of its own).
            record.add(time.monotonic(), record.count + 1, STREAM_NAMES[kind], payload)
            return
        with self._frames_lock:
            self.frames.append(Frame(kind, payload))

    def _write_input(self, data: bytes | None) -> None:
        """The host's side of the channel: faults before the input, the input, then the eof (or a fault
        in its place). A plugin that closed its side, or never opened, ends it quietly: the control
        answer says what happened."""
        faults, channel = self.faults, self.channel
        with contextlib.suppress(TimeoutError, HarnessError, OSError):
            if faults.extra_frame_kind is not None:
                # An open or an eof carries nothing, even out of place.
                payload = b"" if faults.extra_frame_kind in (OPEN, EOF) else faults.extra_frame_payload
                if not channel.send_frame(faults.extra_frame_kind, payload):
                    return
            if faults.oversized_header and not channel.send_frame(STDIN, bytes(MAX_FRAME_BYTES + 1)):
                return
            if data and not channel.send_stdin(data):
                return
            if faults.close_before_eof:
                channel.close()
                return
            if faults.data_after_eof:
                # Right behind the eof, in the same write: in two, a plugin could act on the eof before the
                # stray frame arrived, and one that reads past its eof would go unseen.
                channel.send_frames((EOF, b""), (STDIN, faults.extra_frame_payload))
                return
            channel.send_eof()

    # -- finishing --------------------------------------------------------------------------------

    def frames_so_far(self) -> list[Frame]:
        with self._frames_lock:
            return list(self.frames)

    def abandon(self) -> None:
        """The call failed: let the channel go (upstream's host drops it unread)."""
        self.channel.close()

    def settle(self, drain_timeout_s: float) -> None:
        """After a successful answer: give a channel not opened yet its grace, read it to the plugin's
        eof, and note what the plugin broke."""
        self.mark_answered()
        grace = self.adapter.late_channel_grace_s
        if not self.channel.wait_open(grace):
            self.use.note("opened", f"the plugin answered {self.method} without opening its data channel "
                                    f"within {grace:g} s")
            self.channel.close()
            return
        if self._collecting:
            # A write channel is read for the record only: an eof sent before the response is in the socket
            # by then, and upstream's host waits for nothing there.
            wait_s = drain_timeout_s if self.use.host_reads else WRITE_CHANNEL_RECORD_S
            if not self.channel.wait_handed_over(wait_s):
                self.use.note("eof", f"the plugin sent no eof within {wait_s:g} s of answering {self.method}")
                self.channel.close()
        if self._writer is not None:
            self._writer.join(drain_timeout_s)
        if self.use.answer_follows_eof and self.channel.eof_before_answer is False:
            self.use.note("eof", f"the plugin's eof on its {self.method} channel came after the response "
                                 f"(it must end the channel first)")
        if self._collecting:
            # Read to its end and answered: nothing more crosses it, and an open one holds a descriptor.
            self.channel.close()
        self.adapter.note(f"data channel {self.channel.channel_id}", self.use.summary())

    def chunks(self) -> tuple[list[OutputChunk], int]:
        """The plugin's data frames as chunks, ordered with the response, and the response's place among
        them (``answer_sequence``)."""
        if self.record is not None:
            return self.record.chunks(), self.record.count + 1
        frames = self.frames_so_far()
        # Every data frame before the plugin's eof was queued, in order: the n-th frame read is the n-th
        # data record before the eof (later ones are problems, never data).
        records = self.channel.records
        eof = next((r.offset for r in records if r.kind == EOF), None)
        data = [r for r in records if r.kind in STREAM_NAMES and (eof is None or r.offset < eof)][:len(frames)]
        answered_at = self.call.answered_at if self.call is not None else None
        if self.channel.eof_before_answer is False and answered_at is not None:
            # The eof came after the response (a violation of its own): which data frames did too is told
            # by when they were read, the best there is once the wire order is broken.
            before = sum(1 for r in data if r.at <= answered_at)
        else:
            # The data frames precede the eof, so they all came before the response (or it has not come).
            before = len(frames)
        chunks = [OutputChunk(record.at, index + 1 if index < before else index + 2, STREAM_NAMES[frame.kind],
                              frame.payload) for index, (frame, record) in enumerate(zip(frames, data, strict=True))]
        return chunks, before + 1

    def result(self, timeout_s: float | None = None) -> Any:
        """The answer once the channel is settled; an error answer abandons the channel and is raised."""
        assert self.call is not None
        try:
            result = self.call.result(timeout_s)
        except BaseException:
            self.abandon()
            raise
        self.settle(self.adapter.call_timeout_s)
        return result

