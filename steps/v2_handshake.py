"""Steps for the version 2 handshake: the data transport an initialize announces, and the stop capability."""

from __future__ import annotations

from pytest_bdd import parsers, then, when

from conformance.adapter import ChannelRecord
from conformance.errors import ApplicationErrorAnswer

from ._shared import World, attempt, expect, fresh_provider, timed_attempt

FRAME_LIMIT_FIELD = "data_transport.max_frame_bytes"


@when("the host initializes it without announcing a data transport")
def _(world: World) -> None:
    channels = world.channels(fresh_provider(world))
    world.last = attempt(channels.initialize_without_transport)


@when(parsers.parse("the host initializes it announcing a frame limit of {limit:d} bytes"))
def _(world: World, limit: int) -> None:
    channels = world.channels(fresh_provider(world))
    world.last = attempt(lambda: channels.initialize_with_frame_limit(limit))


@then(f"the handshake is refused as an invalid spec naming {FRAME_LIMIT_FIELD}")
def _(world: World) -> None:
    error = world.last.expect_application_error("an initialize announcing a frame limit other than 65,536 bytes")
    assert isinstance(error, ApplicationErrorAnswer)
    expect(error.kind == "invalid_spec" and error.detail.get("field") == FRAME_LIMIT_FIELD,
           f"the refusal should be kind invalid_spec naming the field {FRAME_LIMIT_FIELD}; it is {error}")


@when("the host initializes it again, announcing another data socket")
def _(world: World) -> None:
    channels = world.channels(fresh_provider(world))
    attempt(channels.initialize_naming_another_socket).expect_success("a second initialize naming another socket")


@when("the host writes a file through that provider and reads it back")
def _(world: World) -> None:
    fresh = fresh_provider(world)
    sandbox = world.require(world.common.fresh_sandbox, "sandbox created through the freshly started provider")
    files = world.files("write a file", fresh)
    channels = world.channels(fresh)
    content = world.faker.sentence(nb_words=8).encode("utf-8")
    path = f"{world.token('second-initialize')}.txt"
    before = len(channels.records())
    state = world.channels_state
    state.traffic = [("a file write", *timed_attempt(lambda: files.write(sandbox.id, path, content))),
                     ("its read", *timed_attempt(lambda: files.read(sandbox.id, path)))]
    state.records = channels.records()[before:]
    state.contents[path] = content


@then("the write and the read succeeded, each through a data channel opened on the first socket")
def _(world: World) -> None:
    state = world.channels_state
    for what, outcome, _ in state.traffic:
        outcome.expect_success(f"{what} after a second initialize naming another socket")
    (path, content), = state.contents.items()
    read = state.traffic[1][1].answer
    expect(read == content, f"reading back {path!r} gave {read!r} instead of the {len(content)} bytes written")
    records: list[ChannelRecord] = world.require(state.records, "channel records of the write and the read")
    expect(len(records) >= 2 and all(record.opened for record in records),
           "a second initialize keeps the first data transport: both channels should have opened on the first "
           f"socket; the host saw {_opened(records)}")


def _opened(records: list[ChannelRecord]) -> str:
    return ", ".join(f"{r.method}: {'opened' if r.opened else 'never opened'}" for r in records) or "no channel"


@then("nothing ever connected to the other socket")
def _(world: World) -> None:
    connections = world.channels(fresh_provider(world)).decoy_connections()
    expect(connections == 0, f"the provider connected {connections} time(s) to the socket the second initialize "
                             "named: a second initialize must keep the first data transport")


# Hosts read the version 1 name as an alias of the version 2 one; both in one declaration is a field given twice.
STOP_NAMES = ("stop", "cancel")


@then("the provider's exec capabilities carry the stop flag exactly once, as exec.stop or by its alias "
      "exec.cancel, and it is a boolean")
def _(world: World) -> None:
    declaration = world.provider.capabilities.raw
    exec_group = declaration.get("exec") if isinstance(declaration, dict) else None
    expect(isinstance(exec_group, dict), f"the capability declaration has no exec group: {declaration!r}")
    named = [name for name in STOP_NAMES if name in exec_group]
    expect(named != [], "the exec capabilities should carry the stop flag (exec.stop); they carry neither stop nor "
                        f"its alias cancel: {exec_group!r}")
    expect(len(named) == 1, "the exec capabilities carry both stop and its alias cancel: hosts read them as one "
                            "field and refuse a declaration that gives it twice")
    value = exec_group[named[0]]
    expect(isinstance(value, bool), f"exec.{named[0]} should be a boolean; it is {value!r}")
