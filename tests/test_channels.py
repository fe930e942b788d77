"""The host side of v2 data channels (conformance/transports/channels.py), in process: the plugin side
of every conversation is a raw ``socket`` client written here, frame by frame."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator

import pytest

from conformance.errors import HarnessError
from conformance.transports import channels
from conformance.transports.channels import (
    EOF,
    HEADER,
    INBOUND_QUEUE_FRAMES,
    MAX_FRAME_BYTES,
    OPEN,
    STDERR,
    STDIN,
    STDOUT,
    ChannelServer,
    DataChannel,
    Frame,
)
from conformance.transports.memory import InProcessTransport
from conformance.transports.process import ProcessTransport, scrubbed_environment
from tests.fake_v2_plugin import recv_exactly

OURSELVES = {os.getpid()}


def eventually(predicate: Callable[[], object], timeout_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def frame(kind: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


class Plugin:
    """The plugin's end of one data channel connection."""

    def __init__(self, server: ChannelServer, timeout_s: float = 3.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout_s)
        self.sock.connect(server.socket_path)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def open(self, channel: DataChannel, then: bytes = b"", **members: object) -> None:
        """Send the open frame, and ``then`` in the same write (on the wire together before the host
        reads the open)."""
        self.send(frame(OPEN, json.dumps({**channel.request, **members}).encode()) + then)

    def recv_exactly(self, size: int) -> bytes:
        return recv_exactly(self.sock, size)

    def recv_frame(self) -> tuple[int, bytes]:
        kind, length = HEADER.unpack(self.recv_exactly(HEADER.size))
        return kind, self.recv_exactly(length)

    def closed_by_host(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server() -> Iterator[ChannelServer]:
    with ChannelServer(lambda: OURSELVES, open_timeout_s=2.0) as started:
        yield started


def drain(channel: DataChannel) -> list[Frame]:
    frames = []
    while (got := channel.read(3.0)) is not None:
        frames.append(got)
    return frames


# -- the listener --------------------------------------------------------------------------------------


def test_the_socket_lives_alone_in_a_private_directory_and_every_channel_is_fresh(server) -> None:
    assert os.path.basename(server.socket_path) == "data.sock"
    assert os.path.dirname(server.socket_path) == server.directory
    assert os.path.basename(server.directory).startswith("sandbox-conformance-v2-")
    assert stat.S_IMODE(os.stat(server.directory).st_mode) == 0o700
    assert stat.S_ISSOCK(os.stat(server.socket_path).st_mode)
    expected = [server.expect() for _ in range(50)]
    assert len({channel.channel_id for channel in expected}) == 50
    assert len({channel.token for channel in expected}) == 50
    assert all(len(c.token) == 64 and set(c.token) <= set("0123456789abcdef") for c in expected)
    assert expected[0].request == {"channel_id": expected[0].channel_id, "token": expected[0].token}
    assert expected[0].token not in repr(expected[0])


# -- honest conversations ---------------------------------------------------------------------------


def test_an_honest_channel_without_acknowledge_delivers_its_frames_then_ends(server) -> None:
    channel = server.expect()
    plugin = Plugin(server)
    plugin.open(channel)
    plugin.send(frame(STDOUT, b"out") + frame(STDERR, b"err") + frame(STDOUT, b"") + frame(EOF))
    assert channel.wait_open(2.0)
    assert drain(channel) == [Frame(STDOUT, b"out"), Frame(STDERR, b"err"), Frame(STDOUT, b"")]
    assert channel.read(0.1) is None  # stays ended
    assert not channel.acknowledge_asked and channel.ack_sent_at is None
    assert channel.open_payload == {"channel_id": channel.channel_id, "token": "<redacted>"}
    assert [(r.kind_name, r.length) for r in channel.records] == [
        ("open", len(json.dumps(channel.request))), ("stdout", 3), ("stderr", 3), ("stdout", 0), ("eof", 0)]
    assert [r.offset for r in channel.records] == [0, 5 + channel.records[0].length, *[
        r.offset for r in channel.records[2:]]]
    assert channel.plugin_eofs == 1 and channel.plugin_eof_at >= channel.opened_at
    plugin.close()
    eventually(lambda: channel.closed_before_eof is not None)
    assert channel.closed_before_eof is False
    assert channel.problems == [] and server.take_violations() == []


def test_an_acknowledge_request_is_answered_by_an_empty_open_frame_before_the_channel_is_used(server) -> None:
    channel = server.expect()
    plugin = Plugin(server)
    plugin.open(channel, acknowledge=True)
    assert plugin.recv_frame() == (OPEN, b"")
    assert channel.acknowledge_asked and channel.ack_sent_at is not None
    plugin.send(frame(STDOUT, b"after the ack") + frame(EOF))
    assert drain(channel) == [Frame(STDOUT, b"after the ack")]
    assert channel.problems == [] and server.take_violations() == []


def test_the_ack_can_be_delayed(server) -> None:
    channel = server.expect(ack_delay_s=0.3)
    plugin = Plugin(server)
    sent = time.monotonic()  # before the open: the host's delay may start before a busy test thread resumes
    plugin.open(channel, acknowledge=True)
    assert plugin.recv_frame() == (OPEN, b"")
    assert time.monotonic() - sent >= 0.3
    assert channel.ack_sent_at - channel.opened_at >= 0.3
    plugin.send(frame(EOF))
    assert drain(channel) == [] and channel.problems == []


def test_a_withheld_ack_never_comes_and_a_plugin_that_gives_up_did_nothing_wrong(server) -> None:
    channel = server.expect(withhold_ack=True)
    plugin = Plugin(server, timeout_s=0.4)
    plugin.open(channel, acknowledge=True)
    with pytest.raises(TimeoutError):
        plugin.recv_frame()
    assert channel.ack_sent_at is None
    plugin.close()  # what an honest plugin does when its ack never comes
    assert channel.read(2.0) is None
    assert channel.closed_before_eof is True
    assert channel.problems == []


def test_data_before_the_asked_for_ack_is_a_problem(server) -> None:
    channel = server.expect(ack_delay_s=0.5)
    plugin = Plugin(server)
    plugin.open(channel, acknowledge=True)
    plugin.send(frame(STDOUT, b"too early"))
    eventually(lambda: channel.problems)
    assert "before the host's open acknowledgement" in channel.problems[0]


def test_a_plugin_that_closed_its_side_makes_sends_answer_false(server) -> None:
    channel = server.expect()
    plugin = Plugin(server)
    plugin.open(channel)
    plugin.send(frame(EOF))
    assert channel.read(2.0) is None
    plugin.close()
    assert not channel.send_stdin(b"x" * (4 * MAX_FRAME_BYTES) * 16)


def test_a_plugin_that_ended_only_its_sending_half_still_gets_our_input(server) -> None:
    channel = server.expect()
    plugin = Plugin(server)
    plugin.open(channel)
    plugin.send(frame(EOF))
    plugin.sock.shutdown(socket.SHUT_WR)  # what upstream's dropped writing half does
    assert channel.read(2.0) is None
    eventually(lambda: channel.closed_before_eof is not None)
    assert channel.send_stdin(b"late input") and channel.send_eof()
    assert [plugin.recv_frame() for _ in range(2)] == [(STDIN, b"late input"), (EOF, b"")]
    assert channel.closed_before_eof is False and channel.problems == []


# -- the host's frames ------------------------------------------------------------------------------


def test_stdin_is_split_at_the_frame_limit_and_faults_go_out_as_asked(server) -> None:
    channel = server.expect()
    plugin = Plugin(server)
    plugin.open(channel)
    assert channel.send_stdin(b"a" * (2 * MAX_FRAME_BYTES + 1))
    assert [(kind, len(payload)) for kind, payload in (plugin.recv_frame() for _ in range(3))] == [
        (STDIN, 65536), (STDIN, 65536), (STDIN, 1)]
    assert channel.send_stdin(b"") and channel.send_eof() and channel.send_eof()  # a second eof: a fault
    assert channel.send_frame(STDOUT, b"odd") and channel.send_header(STDIN, 2**31)
    assert [plugin.recv_frame() for _ in range(3)] == [(EOF, b""), (EOF, b""), (STDOUT, b"odd")]
    assert plugin.recv_exactly(HEADER.size) == HEADER.pack(STDIN, 2**31)
    channel.close()  # before the plugin's eof: another fault
    assert plugin.closed_by_host()
    assert channel.problems == []  # the host's own close is nobody's violation
    with pytest.raises(HarnessError):
        channel.send_eof()


def test_frames_sent_together_arrive_in_one_read(server) -> None:
    channel = server.expect()
    plugin = Plugin(server)
    plugin.open(channel)
    assert channel.send_frames((EOF, b""), (STDIN, b"stray"))
    expected = HEADER.pack(EOF, 0) + HEADER.pack(STDIN, 5) + b"stray"
    assert plugin.recv_exactly(len(expected)) == expected


def test_sending_waits_for_the_open_and_gives_up_at_the_open_timeout() -> None:
    with ChannelServer(lambda: OURSELVES, open_timeout_s=0.2) as server:
        with pytest.raises(TimeoutError):
            server.expect().send_eof()
        channel = server.expect(ack_delay_s=0.2)
        plugin = Plugin(server)
        plugin.open(channel, acknowledge=True)
        assert channel.send_stdin(b"in")  # waits for the ack, so the ack stays the plugin's first frame
        assert plugin.recv_frame() == (OPEN, b"")
        assert plugin.recv_frame() == (STDIN, b"in")


def test_read_times_out_when_nothing_comes(server) -> None:
    channel = server.expect()
    with pytest.raises(TimeoutError):
        channel.read(0.05)


# -- the plugin's rule breaks on a bound channel ----------------------------------------------------------


@pytest.mark.parametrize(("frames", "closes", "says"), [
    (frame(9, b"??"), True, "unknown kind byte 9"),
    (frame(OPEN, b"{}"), False, "a second open frame"),
    (frame(EOF) + frame(STDOUT, b"late"), False, "after the plugin's eof"),
    (frame(EOF) + frame(EOF), False, "a second eof"),
    (frame(EOF, b"xyz"), False, "carries 3 bytes"),
    (frame(STDIN, b"mine?"), False, "stdin is the host's kind"),
], ids=["unknown-kind", "second-open", "frame-after-eof", "second-eof", "eof-with-payload", "stdin-from-plugin"])
def test_each_rule_break_on_a_bound_channel_is_a_problem(server, frames: bytes, closes: bool, says: str) -> None:
    channel = server.expect()
    plugin = Plugin(server)
    plugin.open(channel)
    plugin.send(frames)
    eventually(lambda: channel.problems)
    assert len(channel.problems) == 1 and says in channel.problems[0], channel.problems
    if closes:
        assert plugin.closed_by_host()
    assert server.take_violations() == []


@pytest.mark.parametrize(("tail", "says"), [
    (b"", "before its eof"),
    (HEADER.pack(STDOUT, 10) + b"abc", "inside a frame (3 of a stdout frame's 10 payload bytes arrived)"),
    (b"\x01\x00", "inside a frame (2 of a frame header's 5 bytes arrived)"),
], ids=["clean-close", "mid-payload", "mid-header"])
def test_a_connection_closed_before_the_plugins_eof_is_a_problem(server, tail: bytes, says: str) -> None:
    channel = server.expect()
    plugin = Plugin(server)
    plugin.open(channel)
    plugin.send(frame(STDOUT, b"partial") + tail)
    plugin.close()
    assert drain(channel) == [Frame(STDOUT, b"partial")]
    assert channel.closed_before_eof is True
    assert any(says in problem for problem in channel.problems), channel.problems
    assert any("before its eof" in problem for problem in channel.problems)


def test_a_flood_of_one_rule_break_is_one_problem(server) -> None:
    channel = server.expect()
    plugin = Plugin(server)
    plugin.open(channel)
    plugin.send(frame(EOF) + frame(STDOUT, b"x") * 100 + frame(EOF))
    eventually(lambda: len(channel.records) == 103)
    assert len(channel.problems) == 2  # frames after eof (once), a second eof


def test_an_oversized_header_is_rejected_from_the_header_alone(server) -> None:
    channel = server.expect()
    plugin = Plugin(server)
    plugin.open(channel)
    assert channel.wait_open(2.0)
    tracemalloc.start()
    try:
        plugin.send(HEADER.pack(STDOUT, 2**31))  # the payload never follows: nothing to wait for
        assert plugin.closed_by_host()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024, f"{peak} bytes allocated for an announced 2 GiB frame"
    assert len(channel.problems) == 1 and "announces 2147483648 bytes" in channel.problems[0]
    assert [r.kind_name for r in channel.records] == ["open"]  # never became a frame


# -- connections that never bind ------------------------------------------------------------------------


def _open_payload(channel: DataChannel, **members: object) -> bytes:
    return json.dumps({**channel.request, **members}).encode()


BAD_FIRST_FRAMES: dict[str, tuple[Callable[[DataChannel], bytes], str]] = {
    "wrong-token": (lambda c: frame(OPEN, json.dumps({"channel_id": c.channel_id, "token": "0" * 64}).encode()),
                    "with the wrong token"),
    "unknown-id": (lambda c: frame(OPEN, json.dumps({"channel_id": 999, "token": c.token}).encode()),
                   "unknown channel id 999"),
    "not-json": (lambda c: frame(OPEN, b"{channel"), "not UTF-8 JSON at line 1 column 2"),
    "not-an-object": (lambda c: frame(OPEN, b"[1]"), "not a JSON object"),
    "too-deep": (lambda c: frame(OPEN, b'{"channel_id":' + b"[" * 3000 + b"]" * 3000 + b"}"), "nested too deeply"),
    "integer-too-long": (lambda c: frame(OPEN, b'{"channel_id":' + b"1" * 5000 + b"}"), "integer of 5000 digits"),
    "id-not-u64": (lambda c: frame(OPEN, _open_payload(c, channel_id=-1)), "without a u64 channel_id"),
    "token-not-string": (lambda c: frame(OPEN, _open_payload(c, token=7)), "without a string token"),
    "acknowledge-not-bool": (lambda c: frame(OPEN, _open_payload(c, acknowledge="yes")), "not a boolean"),
    "not-open-first": (lambda c: frame(STDOUT, _open_payload(c)), "first frame is stdout, not open"),
    "open-too-long": (lambda c: HEADER.pack(OPEN, MAX_FRAME_BYTES + 1), "an open cannot span frames"),
    "unknown-kind-first": (lambda c: frame(7), "first frame is unknown kind 7"),
    "truncated-open": (lambda c: frame(OPEN, _open_payload(c))[:-3], "closed inside its open frame"),
}


@pytest.mark.parametrize("case", sorted(BAD_FIRST_FRAMES))
def test_a_bad_first_frame_is_closed_and_recorded_and_the_channel_still_binds(server, case: str) -> None:
    make, says = BAD_FIRST_FRAMES[case]
    channel = server.expect()
    intruder = Plugin(server)
    intruder.send(make(channel))
    if case == "truncated-open":
        intruder.sock.shutdown(socket.SHUT_WR)
    assert intruder.closed_by_host()
    violations = server.take_violations()
    assert len(violations) == 1 and says in violations[0], violations
    assert channel.token not in violations[0]
    assert not channel.wait_open(0.05)
    honest = Plugin(server)
    honest.open(channel)
    honest.send(frame(STDOUT, b"still mine") + frame(EOF))
    assert drain(channel) == [Frame(STDOUT, b"still mine")]
    assert server.take_violations() == [] and channel.problems == []


def test_a_bound_id_cannot_be_opened_again(server) -> None:
    channel = server.expect()
    first = Plugin(server)
    first.open(channel)
    assert channel.wait_open(2.0)
    replay = Plugin(server)
    replay.open(channel)
    assert replay.closed_by_host()
    assert server.take_violations() == [f"an open frame reusing channel id {channel.channel_id}, already bound; closed"]


def test_an_open_after_the_host_withdrew_the_channel_is_recorded(server) -> None:
    channel = server.expect()
    channel.close()
    assert channel.read(0.1) is None and not channel.wait_open(0) and channel.closed_before_eof is None
    late = Plugin(server)
    late.open(channel)
    assert late.closed_by_host()
    assert "after the host stopped waiting" in server.take_violations()[0]


def test_a_connection_that_sends_nothing_is_closed_at_the_open_timeout() -> None:
    with ChannelServer(lambda: OURSELVES, open_timeout_s=0.2) as server:
        idle = Plugin(server)
        assert idle.closed_by_host()
        assert server.take_violations() == ["a data channel connection sent no open frame within 0.2 s; closed"]
        Plugin(server).close()  # connecting and leaving without a byte breaks no frame rule
        time.sleep(0.1)
        assert server.take_violations() == []


def test_peer_credentials_decide_who_may_connect() -> None:
    with ChannelServer(lambda: {os.getpid() + 1_000_000}) as strangers_only:
        channel = strangers_only.expect()
        plugin = Plugin(strangers_only)
        # The host judges a peer by its credentials at accept: it may close before the open is even written.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            plugin.open(channel)
        assert plugin.closed_by_host()
        violations = strangers_only.take_violations()
        assert len(violations) == 1 and f"from pid {os.getpid()} (uid {os.getuid()}), not the plugin" in violations[0]
        assert not channel.wait_open(0.05)
    with ChannelServer(lambda: set(), peer_uid=os.getuid()) as same_user:
        channel = same_user.expect()
        plugin = Plugin(same_user)
        plugin.open(channel)
        plugin.send(frame(EOF))
        assert channel.wait_open(2.0) and channel.read(2.0) is None
        assert same_user.take_violations() == []


# -- flow: backpressure and memory ---------------------------------------------------------------------


def _writing_full_frames(server, channel, byte: bytes, total: int, last: bytes) -> tuple[threading.Thread, list[int]]:
    """A plugin that opens ``channel`` and writes ``total`` full stdout frames of ``byte``, then ``last``, on a
    thread of its own (started); the thread, and how many frames it has written so far."""
    plugin = Plugin(server, timeout_s=10.0)
    plugin.open(channel)
    chunk = frame(STDOUT, byte * MAX_FRAME_BYTES)
    written = [0]

    def write_all() -> None:
        for _ in range(total):
            plugin.send(chunk)
            written[0] += 1
        plugin.send(last)

    writer = threading.Thread(target=write_all, daemon=True)
    writer.start()
    return writer, written


def test_a_slow_consumer_backpressures_the_plugin_through_the_socket(server) -> None:
    channel = server.expect()
    total = 4 * INBOUND_QUEUE_FRAMES
    writer, written = _writing_full_frames(server, channel, b"z", total, frame(EOF))
    time.sleep(0.5)  # nobody reads meanwhile
    assert writer.is_alive() and written[0] < total, "the plugin's writes never blocked"
    assert len(channel.records) <= 1 + INBOUND_QUEUE_FRAMES + 1  # the open, the queue, the one waiting
    assert len(drain(channel)) == total
    writer.join(5.0)
    assert not writer.is_alive() and channel.problems == []


def test_records_keep_no_payload_so_a_large_transfer_costs_little_memory(server) -> None:
    channel = server.expect()
    plugin = Plugin(server, timeout_s=10.0)
    plugin.open(channel)
    frames = 16384  # 1 GiB
    chunk = frame(STDOUT, b"m" * MAX_FRAME_BYTES)

    def write_all() -> None:
        for _ in range(frames):
            plugin.send(chunk)
        plugin.send(frame(EOF))

    tracemalloc.start()
    try:
        writer = threading.Thread(target=write_all, daemon=True)
        writer.start()
        received = 0
        while (got := channel.read(5.0)) is not None:
            received += len(got.payload)
        writer.join(5.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert received == frames * MAX_FRAME_BYTES
    assert len(channel.records) == frames + 2
    # A full queue of payloads, slack for the frames in hand, and the records: metadata only (about 160
    # bytes each), yet 2.6 MB by the end here, when a consumer lagging behind the read-ahead reader can
    # find the queue full.
    bound = (INBOUND_QUEUE_FRAMES + 32) * MAX_FRAME_BYTES + len(channel.records) * 256
    assert peak < bound, f"peak {peak} bytes for {received} bytes"


def test_a_sink_gets_every_frame_on_the_reader_thread_and_stalls_the_plugin_while_it_waits(server) -> None:
    channel = server.expect()
    handed: list[tuple[int, bytes, str]] = []
    release = threading.Event()

    def sink(kind: int, payload: bytes) -> None:
        handed.append((kind, payload, threading.current_thread().name))
        release.wait(10.0)  # a consumer that stops: the reader stops with it

    channel.hand_frames_to(sink)
    total = 4 * INBOUND_QUEUE_FRAMES
    writer, written = _writing_full_frames(server, channel, b"s", total, frame(STDERR, b"last") + frame(EOF))
    eventually(lambda: handed)
    time.sleep(0.5)  # the sink holds the first frame meanwhile
    assert writer.is_alive() and written[0] < total, "the plugin's writes never blocked"
    assert not channel.wait_handed_over(0.0) and len(handed) == 1
    with pytest.raises(HarnessError, match="hands its frames to a sink"):
        channel.read(0.1)
    release.set()
    assert channel.wait_handed_over(10.0)
    writer.join(5.0)
    assert [(kind, len(payload)) for kind, payload, _ in handed] == [(STDOUT, MAX_FRAME_BYTES)] * total + [(STDERR, 4)]
    assert {name for _, _, name in handed} == {"data-channel-connection"}  # no thread of its own
    assert channel.data_totals() == (total + 1, total * MAX_FRAME_BYTES + 4)
    assert channel.problems == [] and not writer.is_alive()


def test_frames_go_to_a_sink_from_the_start_or_not_at_all(server) -> None:
    channel = server.expect()
    plugin = Plugin(server)
    plugin.open(channel)
    assert channel.wait_open(2.0)
    with pytest.raises(HarnessError, match="bound already"):
        channel.hand_frames_to(lambda kind, payload: None)
    plugin.send(frame(STDOUT, b"queued") + frame(EOF))
    assert drain(channel) == [Frame(STDOUT, b"queued")]


def test_a_sink_is_left_alone_once_the_channel_is_closed(server) -> None:
    channel = server.expect()
    handed: list[bytes] = []
    channel.hand_frames_to(lambda kind, payload: handed.append(payload))
    plugin = Plugin(server)
    plugin.open(channel)
    plugin.send(frame(STDOUT, b"before"))
    eventually(lambda: handed == [b"before"])
    channel.close()
    assert channel.wait_handed_over(0.0)  # a close ends the hand-over as an eof would
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        plugin.send(frame(STDOUT, b"after"))
    assert handed == [b"before"]


# -- order of eof and answer ------------------------------------------------------------------------------


def test_an_eof_sent_before_the_answer_is_judged_before_even_while_it_waits_unread(server) -> None:
    channel = server.expect()
    assert channel.eof_before_answer is None  # no answer yet
    plugin = Plugin(server, timeout_s=10.0)
    plugin.open(channel)
    # The queue's worth of frames and one more, which the reader holds while it waits for room: the eof
    # is then sent (in the socket) but unread when the "response" arrives.
    body = frame(STDOUT, b"q" * MAX_FRAME_BYTES) * (INBOUND_QUEUE_FRAMES + 1)
    plugin.send(body + frame(EOF))
    eventually(lambda: len(channel.records) == 1 + INBOUND_QUEUE_FRAMES + 1)
    channel.mark_answered()
    assert channel.eof_before_answer is None  # bytes before the mark are not read yet
    assert len(drain(channel)) == INBOUND_QUEUE_FRAMES + 1
    assert channel.eof_before_answer is True


def test_an_eof_read_ahead_but_not_parsed_yet_still_counts_as_on_the_wire(server) -> None:
    channel = server.expect()
    plugin = Plugin(server, timeout_s=10.0)
    plugin.open(channel)
    # Small frames: the whole burst and its eof fit the read-ahead buffer, while the parser waits for room
    # in the queue with most of them still unparsed there.
    count = INBOUND_QUEUE_FRAMES * 4
    plugin.send(b"".join(frame(STDOUT, b"%04d" % index) for index in range(count)) + frame(EOF))
    eventually(lambda: len(channel.records) == 1 + INBOUND_QUEUE_FRAMES + 1)
    channel.mark_answered()
    assert channel.eof_before_answer is None
    assert [got.payload for got in drain(channel)] == [b"%04d" % index for index in range(count)]
    assert channel.eof_before_answer is True and channel.problems == []


def test_an_eof_sent_after_the_answer_is_judged_after(server) -> None:
    channel = server.expect()
    plugin = Plugin(server)
    plugin.open(channel)
    plugin.send(frame(STDOUT, b"x"))
    assert channel.read(2.0) == Frame(STDOUT, b"x")
    channel.mark_answered()
    plugin.send(frame(EOF))
    assert channel.read(2.0) is None
    assert channel.eof_before_answer is False


def test_an_answer_before_the_bind_is_marked_when_the_channel_binds(server) -> None:
    channel = server.expect()
    channel.mark_answered()
    plugin = Plugin(server)
    # One write: the eof is on the wire when the host binds (sent apart, a busy host may bind first,
    # and an eof written after the bind rightly counts as after the answer).
    plugin.open(channel, then=frame(EOF))
    assert channel.read(2.0) is None
    assert channel.eof_before_answer is True  # lenient: what was on the wire at the bind counts as before


def test_no_eof_at_all_is_not_before_the_answer(server) -> None:
    channel = server.expect()
    plugin = Plugin(server)
    plugin.open(channel)
    assert channel.wait_open(2.0)
    channel.mark_answered()
    plugin.close()
    assert channel.read(2.0) is None
    assert channel.eof_before_answer is False


# -- teardown -------------------------------------------------------------------------------------------


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_close_ends_every_thread_closes_every_socket_and_removes_the_directory() -> None:
    threads_before, fds_before = set(threading.enumerate()), _open_fds()
    server = ChannelServer(lambda: OURSELVES).start()
    bound, acked, waiting = server.expect(), server.expect(ack_delay_s=30.0), server.expect()
    plugins = [Plugin(server) for _ in range(4)]
    plugins[0].open(bound)
    plugins[0].send(frame(STDOUT, b"unread"))
    plugins[1].open(acked, acknowledge=True)  # its ack thread sleeps
    plugins[2].send(b"\x00\x00")  # a handshake stuck in its header
    assert bound.wait_open(2.0) and acked.wait_open(2.0)
    eventually(lambda: len(threading.enumerate()) >= len(threads_before) + 5)
    started = time.monotonic()
    server.close()
    server.close()  # idempotent
    assert time.monotonic() - started < 2.0
    assert not os.path.exists(server.directory)
    assert set(threading.enumerate()) <= threads_before
    assert all(plugin.closed_by_host() for plugin in plugins[:3])
    for plugin in plugins:
        plugin.close()
    assert _open_fds() == fds_before
    assert waiting.read(0.1) is None and not waiting.wait_open(0)
    assert server.take_violations() == []
    with pytest.raises(HarnessError):
        server.expect()


def test_a_socket_path_too_long_is_a_harness_error_and_leaves_nothing(tmp_path, monkeypatch) -> None:
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    monkeypatch.setattr(channels.tempfile, "tempdir", str(deep))
    with pytest.raises(HarnessError, match="cannot listen for data channels"):
        ChannelServer(lambda: OURSELVES).start()
    assert list(deep.iterdir()) == []


# -- the pid a server trusts ---------------------------------------------------------------------------


def test_line_transports_name_the_pid_their_data_channels_come_from() -> None:
    assert InProcessTransport("conformance.reference.host_plugin:serve", [], {}).peer_pid == os.getpid()
    transport = ProcessTransport([sys.executable, "-c", "import sys; sys.stdin.read()"], scrubbed_environment())
    assert transport.peer_pid is None
    transport.start(lambda line: None, lambda: None)
    try:
        assert transport.peer_pid == transport.pid and transport.peer_pid != os.getpid()
    finally:
        transport.close()
