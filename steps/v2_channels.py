"""Steps for version 2 data channels: what the provider sends on them, and the host faults it must refuse."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import pytest
from pytest_bdd import given, parsers, then, when

from conformance.adapter import ChannelRecord, ExecRequest, HostChannelFaults, ProviderAdapter, SandboxRequest
from conformance.errors import ApplicationErrorAnswer

from ._shared import World, expect, first_difference, fresh_provider, patterned_bytes, timed_attempt
from ._subject import error_of, expect_not_refused

MAX_FRAME_BYTES = 65536
# What the traffic moves: a command's output on each stream, and a file written then read back.
OUTPUT_BYTES = 200 * 1024
FILE_BYTES = 300 * 1024
DATA_KINDS = ("stdout", "stderr")
EOF_KIND = "eof"
ACK_DELAY_S = 0.5
# The frame kinds a host may put on a write channel by mistake, by the byte that names them.
FRAME_KIND_BYTES = {"open": 0, "stdout": 1, "stderr": 2, "undefined": 9}
# The protocol's open timeout, and what the scenario allows beyond it.
OPEN_TIMEOUT_S = 10.0


def _records(world: World) -> list[ChannelRecord]:
    return world.require(world.channels_state.records, "data channels of the operations the host ran")


def _traffic_note(world: World) -> str:
    """How each operation of the traffic ended, for failure messages."""
    parts = []
    for what, outcome, seconds in world.channels_state.traffic:
        ended = "succeeded" if outcome.error is None else f"failed ({outcome.error})"
        parts.append(f"{what} {ended} after {seconds:.1f}s")
    return "; ".join(parts)


def _channel_note(record: ChannelRecord) -> str:
    frames = ", ".join(f"{kind}:{length}" for kind, length in record.frames[:6])
    more = f", … {len(record.frames) - 6} more" if len(record.frames) > 6 else ""
    problems = f"; problems: {'; '.join(record.problems)}" if record.problems else ""
    return (f"{record.method} (opened: {record.opened}, frames {frames}{more}, eof before the answer: "
            f"{record.eof_before_answer}{problems})")


# -- a provider offered (or not) open acknowledgements, and bytes moved through it ------------------------------


@given(parsers.re(r"a freshly started provider, initialized with open acknowledgements (?P<offer>offered|not offered)$"))
def _(world: World, offer: str) -> None:
    fresh = world.start_fresh(handshake=False, ahead=True)
    world.fresh = fresh
    world.channels(fresh).offer_open_ack = offer == "offered"
    fresh.handshake(strict=False)


def _move_bytes(world: World, provider: ProviderAdapter, faults: Callable[[], Any]) -> None:
    """A command's output on both streams, a file written and the same file read back: channels in both
    directions. Each call runs under ``faults()`` (a context manager); how it ended is kept for the checks."""
    channels = world.channels(provider)
    files = world.files("write a file", provider)
    sandbox_id = provider.create(SandboxRequest()).id
    content = patterned_bytes(FILE_BYTES)
    path = f"{world.token('channel-traffic')}.bin"
    command = (f"head -c {OUTPUT_BYTES} /dev/zero | tr '\\0' o; "
               f"head -c {OUTPUT_BYTES} /dev/zero | tr '\\0' e >&2")
    before = len(channels.records())

    def run(what: str, call: Callable[[], Any]) -> None:
        with faults():
            world.channels_state.traffic.append((what, *timed_attempt(call)))

    run("a command writing to both outputs", lambda: provider.exec(sandbox_id, ExecRequest(command)))
    run("a file write", lambda: files.write(sandbox_id, path, content))
    run("that file's read", lambda: files.read(sandbox_id, path))
    world.channels_state.records = channels.records()[before:]
    world.channels_state.contents[path] = content
    # A call refused outright moved no bytes: the channels judged would not be those of this traffic.
    for what, outcome, _ in world.channels_state.traffic:
        expect_not_refused(provider, error_of(outcome), what)


@when("the host moves bytes through it both ways")
def _(world: World) -> None:
    _move_bytes(world, fresh_provider(world), nullcontext)


@when("the host moves bytes through it both ways, acknowledging every open half a second late")
def _(world: World) -> None:
    fresh = fresh_provider(world)
    channels = world.channels(fresh)
    _move_bytes(world, fresh, lambda: channels.faults(HostChannelFaults(ack_delay_s=ACK_DELAY_S)))


# -- the rules of a channel, over every channel the traffic used ----------------------------------------------


def _every_channel(world: World, broken: Callable[[ChannelRecord], bool], rule: str) -> None:
    records = _records(world)
    expect(len(records) >= len(world.channels_state.traffic),
           f"every byte-moving call opens a data channel; the host saw {len(records)} for "
           f"{len(world.channels_state.traffic)} calls ({_traffic_note(world)})")
    offenders = [record for record in records if broken(record)]
    expect(not offenders, f"{rule}; it did not on: " + "; ".join(_channel_note(r) for r in offenders)
           + f" ({_traffic_note(world)})")


@then("every data channel was opened, with an open frame naming exactly its request's channel and token")
def _(world: World) -> None:
    _every_channel(world, lambda record: not record.opened,
                   "the provider connects for every byte-moving call and opens with the request's channel id and "
                   "token")


@then("no other connection reached the host's data socket")
def _(world: World) -> None:
    problems = world.channels(fresh_provider(world)).unbound_problems()
    expect(not problems, "connections the host could bind to no channel reached its data socket: "
                         + "; ".join(problems[:5]))


@then("on every data channel the provider's end of file was on the wire before the operation's answer")
def _(world: World) -> None:
    _every_channel(world, lambda record: record.eof_before_answer is not True,
                   "the provider closes its side of a channel (its eof) before it answers the operation")


@then("no frame the provider sent carried more than 65,536 bytes")
def _(world: World) -> None:
    _every_channel(world, lambda record: any(length > MAX_FRAME_BYTES for _, length in record.frames)
                   or any("exceed" in problem or "longer" in problem for problem in record.problems),
                   f"a sender splits its bytes into frames of at most {MAX_FRAME_BYTES} bytes")


@then("the frames carried every byte: 200 KB on each of the command's outputs and 300 KB of the file read")
def _(world: World) -> None:
    exec_record, _, read_record = _records(world)[:3]
    carried = {kind: sum(length for name, length in exec_record.frames if name == kind) for kind in DATA_KINDS}
    expect(carried == {"stdout": OUTPUT_BYTES, "stderr": OUTPUT_BYTES},
           f"the command wrote {OUTPUT_BYTES} bytes to each output; its channel carried {carried} "
           f"({_channel_note(exec_record)})")
    read = sum(length for name, length in read_record.frames if name == "stdout")
    expect(read == FILE_BYTES, f"the file read should carry the file's {FILE_BYTES} bytes in stdout frames; it "
                               f"carried {read} ({_channel_note(read_record)})")


def _eof_problem(record: ChannelRecord) -> bool:
    kinds = [kind for kind, _ in record.frames]
    eofs = [index for index, kind in enumerate(kinds) if kind == EOF_KIND]
    return (record.plugin_eofs != 1 or len(eofs) != 1 or eofs[0] != len(kinds) - 1
            or record.frames[eofs[0]][1] != 0)


@then("every data channel carried exactly one end of file from the provider, empty, and no frame after it")
def _(world: World) -> None:
    _every_channel(world, _eof_problem, "the provider ends each channel with exactly one empty eof frame, the last "
                                        "frame it sends")


@then("every frame the provider sent was an open, a stdout, a stderr or an end of file frame")
def _(world: World) -> None:
    _every_channel(world, lambda record: any(kind not in (*DATA_KINDS, EOF_KIND) for kind, _ in record.frames),
                   "a provider sends only stdout, stderr and eof frames after its open")


@then("every data channel's open asked for the host's acknowledgement")
def _(world: World) -> None:
    _every_channel(world, lambda record: not record.acknowledge_asked,
                   "offered acknowledgements, the provider's open asks for one (acknowledge: true)")


@then("no data frame arrived on any channel before the host's acknowledgement of it")
def _(world: World) -> None:
    def early(record: ChannelRecord) -> bool:
        return record.first_data_at is not None and (record.ack_sent_at is None
                                                     or record.first_data_at < record.ack_sent_at)

    _every_channel(world, early, "a provider that asked for an acknowledgement sends no data before it, "
                                 f"even {ACK_DELAY_S}s late")


@then("no data channel's open asked for an acknowledgement")
def _(world: World) -> None:
    _every_channel(world, lambda record: record.acknowledge_asked,
                   "a host that offers no acknowledgements sends none, so the provider must not ask for one")


@then(parsers.parse("every one of those operations was answered within {seconds:d} seconds"))
def _(world: World, seconds: int) -> None:
    slow = [(what, took) for what, _, took in world.channels_state.traffic if took > seconds]
    expect(not slow, "a provider that was offered no acknowledgement must not wait for one: "
                     + ", ".join(f"{what} took {took:.1f}s" for what, took in slow))


# -- host faults the provider must refuse ---------------------------------------------------------------


def _faulted_write(world: World, path: str, fault: str, **faults: Any) -> None:
    sandbox_id = world.require_sandbox().id
    channels = world.channels()
    state = world.channels_state
    state.injected = f"conformance-injected-{world.token('frame')}".encode()
    state.fault_path = path
    state.fault = fault
    state.fault_text = world.faker.sentence(nb_words=8).encode("utf-8")
    files = world.files("write a file")
    with channels.faults(HostChannelFaults(extra_frame_payload=state.injected, **faults)):
        state.faulted, state.faulted_after_s = timed_attempt(lambda: files.write(sandbox_id, path, state.fault_text))
    # Refused outright, the write never met the fault: its failure would say nothing about it.
    expect_not_refused(world.provider, state.faulted.error, f"the write to {path!r}")
    state.faulted_record = channels.records()[-1]


@when(parsers.re(r'I write generated text to "(?P<path>[^"]+)", the host first sending a frame of kind '
                 r'(?P<kind>open|stdout|stderr|undefined) on the channel$'))
def _(world: World, path: str, kind: str) -> None:
    _faulted_write(world, path, f"a frame of kind {kind} before the content", extra_frame_kind=FRAME_KIND_BYTES[kind])


@when(parsers.re(r'I write generated text to "(?P<path>[^"]+)", the host first sending a frame of 65,537 bytes$'))
def _(world: World, path: str) -> None:
    _faulted_write(world, path, "a frame of 65,537 bytes", oversized_header=True)


@when(parsers.re(r'I write generated text to "(?P<path>[^"]+)", the host sending more bytes after its end of file$'))
def _(world: World, path: str) -> None:
    _faulted_write(world, path, "a stdin frame after its eof", data_after_eof=True)


@when(parsers.re(r'I write generated text to "(?P<path>[^"]+)", the host closing the channel without an end of '
                 r'file$'))
def _(world: World, path: str) -> None:
    _faulted_write(world, path, "no eof: it closed the channel instead", close_before_eof=True)


@when(parsers.re(r'I write generated text to "(?P<path>[^"]+)", declaring one byte (?P<more>more|fewer) than it '
                 r'sends$'))
def _(world: World, path: str, more: str) -> None:
    _faulted_write(world, path, f"a content_length one byte {more} than the content",
                   content_length_delta=1 if more == "more" else -1)


def _faulted(world: World) -> Any:
    return world.require(world.channels_state.faulted, "byte-moving call made under a host fault")


@then("the write failed")
def _(world: World) -> None:
    state = world.channels_state
    expect(_faulted(world).error is not None,
           f"the write to {state.fault_path!r} should fail: the host sent {state.fault} on purpose, and a provider "
           f"that accepts that stores what the host never meant to send ({_channel_note_of(world)})")


def _channel_note_of(world: World) -> str:
    record = world.channels_state.faulted_record
    return _channel_note(record) if record is not None else "no channel record"


def _stored(world: World, path: str) -> bytes | None:
    """What ``path`` holds now, or None when it cannot be read (it was never created)."""
    outcome, _ = timed_attempt(lambda: world.files("read a file").read(world.require_sandbox().id, path))
    return outcome.answer if outcome.error is None else None


@then(parsers.re(r'"(?P<path>[^"]+)" does not hold the bytes of that frame$'))
def _(world: World, path: str) -> None:
    stored = _stored(world, path)
    injected = world.require(world.channels_state.injected, "bytes a host fault injected")
    if stored is None:
        return  # the file was never written: nothing of the frame became content
    expect(injected not in stored,
           f"{path!r} holds the bytes of a frame that does not belong on a write channel: such a frame must never "
           f"become data (the file holds {stored[:80]!r})")


@then(parsers.re(r'either the write failed, or "(?P<path>[^"]+)" holds exactly the text sent before the end of '
                 r'file$'))
def _(world: World, path: str) -> None:
    if _faulted(world).error is not None:
        return
    sent = world.require(world.channels_state.fault_text, "text written under a host fault")
    stored = _stored(world, path)
    expect(stored == sent, "bytes after the host's eof must never reach the file; "
                           f"{path!r} holds {first_difference(stored or b'', sent)}")


@then(parsers.re(r"the write failed with (?P<failure>an I/O failure|an invalid spec naming content_length)$"))
def _(world: World, failure: str) -> None:
    error = _faulted(world).expect_application_error("a write that sends another length than it declared")
    assert isinstance(error, ApplicationErrorAnswer)
    if failure == "an I/O failure":
        expect(error.kind == "io", f"a write that ends before its declared length fails with kind io; it failed "
                                   f"with {error}")
    else:
        expect(error.kind == "invalid_spec" and error.detail.get("field") == "content_length",
               f"a write that sends more than its declared length fails as invalid_spec naming content_length; "
               f"it failed with {error}")


@when(parsers.re(r'I read "(?P<path>[^"]+)", the host never acknowledging the channel\'s open$'))
def _(world: World, path: str) -> None:
    channels = world.channels()
    if not channels.offer_open_ack:
        pytest.skip("this run's host offers no open acknowledgements, so there is none to withhold")
    sandbox_id = world.require_sandbox().id
    files = world.files("read a file")
    state = world.channels_state
    with channels.faults(HostChannelFaults(withhold_ack=True)):
        state.faulted, state.faulted_after_s = timed_attempt(lambda: files.read(sandbox_id, path))
    state.faulted_record = channels.records()[-1]


@then(parsers.parse("the read failed with the error kind transport within {seconds:d} seconds"))
def _(world: World, seconds: int) -> None:
    state = world.channels_state
    error = _faulted(world).expect_application_error("a read whose channel open the host never acknowledged")
    assert isinstance(error, ApplicationErrorAnswer)
    expect(error.kind == "transport", f"an open that is never acknowledged ends as a transport failure; the read "
                                      f"failed with {error}")
    took = world.require(state.faulted_after_s, "time the read took")
    expect(took <= seconds, f"the read should fail within the {OPEN_TIMEOUT_S:.0f}s open timeout and a margin "
                            f"({seconds}s); it took {took:.1f}s")


@then("no data frame arrived on that channel")
def _(world: World) -> None:
    record = world.require(world.channels_state.faulted_record, "channel of the unacknowledged read")
    data = [(kind, length) for kind, length in record.frames if kind in DATA_KINDS]
    expect(not data, "a provider waiting for an acknowledgement sends no data before it, and the acknowledgement "
                     f"never came; the channel carried {data[:4]}")
