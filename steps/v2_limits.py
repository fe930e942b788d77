"""Steps for what version 2 removed and the transport limits a provider enforces."""

from __future__ import annotations

from pytest_bdd import given, parsers, then, when

from conformance.adapter import ExecRequest, SandboxRequest

from ._shared import (
    RAW_ID_BASE,
    World,
    answered,
    attempt,
    exchange,
    expect,
    expect_limit_exceeded,
    is_answer,
    raw_channel,
    request_line,
    stream_refusal,
)
from ._subject import Asked

MIB = 1024 * 1024
CONTROL_LINE_LIMIT = MIB  # newline included
RETAINED_OUTPUT_LIMIT = 16 * MIB
# Each sandbox's bulk label: together the two make a listing of them longer than one control line may be.
BULK_LABEL_BYTES = 600 * 1024


@when(parsers.re(r"the host makes the version 1 call (?P<method>[a-z_]+/[a-z_]+)$"))
def _(world: World, method: str) -> None:
    sandbox_id = world.require_sandbox().id
    channels = world.channels()
    world.last = attempt(lambda: channels.call_removed(method, sandbox_id))


# -- control lines ---------------------------------------------------------------------------------------


def _line_of(world: World, total: int) -> bytes:
    """A health request padded to ``total`` bytes with its newline (the unit the limit counts)."""
    wire = raw_channel(world)
    world.channels_state.raw_request_id = RAW_ID_BASE
    method = wire.vocabulary.method("health")
    bare = len(request_line(wire, RAW_ID_BASE, method, {"conformance_padding": ""})) + 1
    return request_line(wire, RAW_ID_BASE, method, {"conformance_padding": "x" * (total - bare)})


@when(parsers.re(r"the host sends a request line of (?P<size>1 MiB and 1 byte|exactly 1 MiB, newline included)$"))
def _(world: World, size: str) -> None:
    total = CONTROL_LINE_LIMIT + (1 if size.startswith("1 MiB and") else 0)
    line = _line_of(world, total)
    assert len(line) + 1 == total
    world.session.asked = Asked.now()  # a line past the limit ends the session: its exit is timed from here
    world.wire_probe.exchange = exchange(raw_channel(world), line, answered(RAW_ID_BASE))


@then("the provider answered that request")
def _(world: World) -> None:
    received = world.require(world.wire_probe.exchange, "messages after the long request line")
    request_id = world.channels_state.raw_request_id
    expect(any(is_answer(m) and isinstance(m, dict) and m.get("id") == request_id for m in received),
           f"a control line of exactly {CONTROL_LINE_LIMIT} bytes, newline included, is within the limit and is "
           f"answered; the provider answered nothing ({len(received)} other messages)")


# -- answers -----------------------------------------------------------------------------------------------


@given("two sandboxes whose labels together hold more than 1 MiB")
def _(world: World) -> None:
    group = {"conformance-group": world.token("large-listing")}
    for index in range(2):
        world.provider.create(SandboxRequest(labels={**group, "conformance-bulk": str(index) * BULK_LABEL_BYTES}))
    world.lifecycle.listing_filter = group


@when("I list the sandboxes carrying their shared label")
def _(world: World) -> None:
    labels = world.require(world.lifecycle.listing_filter, "shared label of the sandboxes")
    world.last = attempt(lambda: world.provider.list(labels))
    # Delete them at once: other scenarios' listings should never meet answers this large.
    for sandbox_id in world.provider.ledger.outstanding(world.provider.owner):
        world.provider.delete(sandbox_id)


@then(parsers.re(r"the listing is refused as exceeding the limit (?P<limit>[a-z_]+) of (?P<size>\d+) bytes$"))
def _(world: World, limit: str, size: str) -> None:
    error = world.last.expect_application_error("a listing longer than one control message may be")
    expect_limit_exceeded(error, limit, int(size))


# -- retention ---------------------------------------------------------------------------------------------


@when("I stream a command writing 16 MiB and 1 KiB, asking to retain 16 MiB and 1 byte")
def _(world: World) -> None:
    streams = world.streams("streaming exec")
    sandbox_id = world.require_sandbox().id
    request = ExecRequest(f"head -c {RETAINED_OUTPUT_LIMIT + 1024} /dev/zero", timeout_s=60.0)
    world.channels_state.stream_outcome = attempt(
        lambda: streams.start_exec(sandbox_id, request, RETAINED_OUTPUT_LIMIT + 1).wait(60.0))


@then("either that was refused as exceeding the limit retained_output_bytes, or the provider retained at most "
      "16 MiB")
def _(world: World) -> None:
    outcome = world.require(world.channels_state.stream_outcome, "streamed command asking for a large retention")
    refusal = stream_refusal(outcome)
    if refusal is not None:
        expect_limit_exceeded(refusal, "retained_output_bytes")
        return
    for name in ("stdout", "stderr"):
        capture = getattr(outcome.answer, f"{name}_capture")
        retained = capture.retained_bytes if capture is not None else 0
        expect(retained <= RETAINED_OUTPUT_LIMIT,
               f"a provider retains at most {RETAINED_OUTPUT_LIMIT} bytes of a stream (retained_output_bytes), or "
               f"refuses a larger limit; it retained {retained} bytes of {name}")
