"""The sandbox-driver v2 dialect's mapping: what each neutral call sends, how its data channel is used,
how channel problems become wire violations, and how the protocol version is negotiated.

The plugin is ``tests/fake_v2_plugin.py`` served in this process (it records every request and can
misbehave on purpose); the version negotiation also meets the v1 reference plugin.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from conformance.adapter import ExecRequest, HostChannelFaults, SandboxRequest
from conformance.config import RunConfig
from conformance.dialects.sandbox_driver_v2 import (
    SandboxDriverV2Adapter,
    capability_flags,
    refusal_names_version,
)
from conformance.dialects.sandbox_driver_v2.facets import retained_copy
from conformance.dialects.sandbox_driver_v2.rules import refusal_versions
from conformance.errors import ApplicationErrorAnswer, ProtocolErrorAnswer, UsageError
from conformance.providers import ProviderConfig, open_provider
from conformance.transcript import Transcript
from tests import fake_v2_plugin, inprocess

FAKE = "tests.fake_v2_plugin:serve"


def _fake(*argv: str, **fields) -> ProviderConfig:
    return ProviderConfig(in_process=(FAKE, *argv), **fields)


@pytest.fixture
def fake():
    """A connected adapter on the well-behaved fake plugin, and a sandbox on it."""
    adapter = open_provider(_fake())
    try:
        yield adapter, adapter.create(SandboxRequest())
    finally:
        adapter.close()


def _sent(method: str) -> list[dict]:
    return [params for name, params in fake_v2_plugin.REQUESTS if name == method]


# -- the mapping of each call ------------------------------------------------------------------------


def test_a_bash_command_runs_as_exec_stream_of_bash_with_an_empty_bash_env(fake) -> None:
    adapter, sandbox = fake
    outcome = adapter.exec(sandbox.id, ExecRequest("echo out; echo err >&2; exit 3", env={"GREETING": "hi"}))
    assert (outcome.outcome, outcome.exit_code, outcome.stdout, outcome.stderr) == ("ran", 3, b"out\n", b"err\n")
    params = _sent("exec/stream")[-1]
    assert params["spec"] == {"program": "bash", "args": ["-c", "echo out; echo err >&2; exit 3"],
                              "env": {"BASH_ENV": "", "GREETING": "hi"}, "timeout_ms": 30_000}
    assert params["stdin"] is False and "retained_output_limit" not in params
    assert set(params["channel"]) == {"channel_id", "token"} and re.fullmatch(r"[0-9a-f]{64}", params["channel"]["token"])
    assert outcome.raw == {"exit_code": 3, "termination": "exited", "duration_ms": 1}


def test_stdin_rides_the_channel_and_an_argument_vector_runs_as_given(fake) -> None:
    adapter, sandbox = fake
    assert adapter.exec(sandbox.id, ExecRequest("cat", stdin=b"piped bytes")).stdout == b"piped bytes"
    assert _sent("exec/stream")[-1]["stdin"] is True
    outcome = adapter.exec(sandbox.id, ExecRequest("", argv=("printf", "%s", "raw"), env={"BASH_ENV": "/x"},
                                                   stop_grace_s=0.25))
    assert outcome.stdout == b"raw"
    spec = _sent("exec/stream")[-1]["spec"]
    assert (spec["program"], spec["args"], spec["env"], spec["stop_grace_ms"]) == ("printf", ["%s", "raw"],
                                                                                   {"BASH_ENV": "/x"}, 250)


def test_a_file_write_declares_its_length_and_sends_the_content_then_the_hosts_eof(fake) -> None:
    adapter, sandbox = fake
    adapter.files.write(sandbox.id, "notes.txt", b"x" * 70_000)  # more than one frame
    params = _sent("fs/write")[-1]
    assert params["content_length"] == 70_000 and "append" not in params and "content_b64" not in params
    assert adapter.files.read(sandbox.id, "notes.txt") == b"x" * 70_000
    write, read = adapter.channels.records()[-2:]
    assert (write.method, write.plugin_eofs, write.eof_before_answer, write.answered_ok) == ("fs/write", 1, True, True)
    assert read.frames == (("stdout", 65_536), ("stdout", 4_464), ("eof", 0))
    assert adapter.take_violations() == []


def test_streamed_output_is_ordered_before_the_response_by_the_wire(fake) -> None:
    adapter, sandbox = fake
    stream = adapter.streams.exec(sandbox.id, ExecRequest("echo one; echo two >&2"))
    assert [(c.stream, c.data) for c in stream.chunks] == [("stdout", b"one\n"), ("stderr", b"two\n")]
    assert [c.sequence for c in stream.chunks] == [1, 2] and stream.answer_sequence == 3 and stream.late_chunks == 0
    assert stream.stdout_capture is not None and stream.stdout_capture.observed_bytes == 4
    record = adapter.channels.records()[-1]
    assert record.opened and record.acknowledge_asked and record.ack_offered and record.ack_sent_at is not None
    assert record.first_data_at is not None and record.problems == ()


def test_the_retained_copy_keeps_head_and_tail() -> None:
    data = bytes(range(100))
    assert retained_copy(data, None) == data and retained_copy(data, 200) == data
    assert retained_copy(data, 10) == data[:5] + data[-5:]
    assert retained_copy(data, 9) == data[:4] + data[-5:]
    assert retained_copy(data, 1) == data[-1:] and retained_copy(data, 0) == b""


def test_a_stdio_process_keeps_its_channel_for_the_session(fake) -> None:
    adapter, sandbox = fake
    process = adapter.processes.open(sandbox.id, "while read line; do echo \"got $line\"; done")
    assert _sent("exec/stdio_open")[-1]["spec"]["program"] == "bash"
    adapter.processes.write(process, b"one\n")
    assert adapter.processes.read(process) == b"got one\n"
    adapter.processes.close_input(process)
    assert adapter.processes.read(process) is None
    assert adapter.processes.wait(process).exit_code == 0


def test_a_log_follow_collects_its_frames_and_stop_is_exec_stop(fake) -> None:
    adapter, sandbox = fake
    follow = adapter.streams.start_log_follow(sandbox.id, "provision")
    follow.wait()
    assert b"".join(c.data for c in follow.chunks_so_far()) == b"provisioned\n" and follow.answer_sequence == 2
    adapter.streams.stop_exec("x-1", "kill")
    adapter.streams.cancel_exec("x-2")
    assert _sent("exec/stop")[-2:] == [{"exec_id": "x-1", "level": "kill"}, {"exec_id": "x-2", "level": "term"}]


def test_channel_tokens_never_reach_a_transcript(fake) -> None:
    adapter, sandbox = fake
    with adapter.recording(Transcript()) as transcript:
        adapter.exec(sandbox.id, ExecRequest("true"))
    sent = [e.text for e in transcript.entries() if e.direction == "sent"]
    assert sent and all('"token":"[REDACTED]"' in text for text in sent)
    assert not any(re.search(r"[0-9a-f]{64}", text) for text in sent)


# -- channel problems are wire violations ------------------------------------------------------------


@pytest.fixture
def short_grace(monkeypatch):
    monkeypatch.setattr(SandboxDriverV2Adapter, "late_channel_grace_s", 0.3)


@pytest.mark.parametrize(("fault", "words", "rule"), [
    ("eof-after-response", "came after the response", "SDP2-129"),
    ("answer-without-channel", "without opening its data channel within 0.3 s", "SDP2-129"),
    ("unknown-kind", "unknown kind byte 9", "SDP2-S26"),
])
def test_a_channel_rule_broken_is_a_wire_violation_naming_the_rule(short_grace, fault, words, rule) -> None:
    adapter = open_provider(_fake("--fault", fault))
    try:
        adapter.take_violations()
        adapter.exec(adapter.create(SandboxRequest()).id, ExecRequest("echo hi"))
        found = [str(v) for v in adapter.take_violations()]
        assert any(words in v and rule in v for v in found), found
        assert adapter.take_violations() == []  # each is reported once
    finally:
        adapter.close()


def test_asking_for_an_acknowledgment_the_host_did_not_offer_breaks_a_rule() -> None:
    adapter = open_provider(_fake("--fault", "always-ack", open_ack=False))
    try:
        adapter.exec(adapter.create(SandboxRequest()).id, ExecRequest("true"))
        found = [str(v) for v in adapter.take_violations()]
        assert any("did not offer" in v and "SDP2-S30" in v for v in found), found
    finally:
        adapter.close()


def test_an_open_that_comes_after_the_call_failed_is_no_violation() -> None:
    """The host let the channel go when the refusal came, as upstream's host does; a late open is then
    closed unanswered, and that is all."""
    adapter = open_provider(_fake("--fault", "refuse-then-open"))
    try:
        outcome = adapter.exec(adapter.create(SandboxRequest()).id, ExecRequest("true"))
        assert outcome.outcome == "infra" and outcome.error is not None
        time.sleep(0.5)  # the late open arrives and is closed
        assert any("after the host stopped waiting" in p for p in adapter.channels.unbound_problems())
        assert adapter.take_violations() == []
    finally:
        adapter.close()


def test_a_well_behaved_plugin_breaks_no_channel_rule(fake) -> None:
    adapter, sandbox = fake
    adapter.exec(sandbox.id, ExecRequest("cat", stdin=b"in"))
    adapter.files.write(sandbox.id, "f", b"x")
    assert adapter.take_violations() == []


# -- the handshake and the version negotiation -------------------------------------------------------


def test_open_ack_off_is_announced_and_channels_then_open_without_acknowledgement() -> None:
    adapter = open_provider(_fake(open_ack=False))
    try:
        assert _sent("initialize")[-1]["data_transport"]["open_ack"] is False
        adapter.exec(adapter.create(SandboxRequest()).id, ExecRequest("true"))
        record = adapter.channels.records()[-1]
        assert (record.ack_offered, record.acknowledge_asked, record.ack_sent_at) == (False, False, None)
        with pytest.raises(Exception, match="handshaken already"):
            adapter.channels.offer_open_ack = True
    finally:
        adapter.close()


def test_the_wire_vocabulary_initialize_carries_the_data_transport(fake) -> None:
    adapter, _ = fake
    params = adapter.wire.vocabulary.initialize_params(7)
    assert params["protocol_version"] == 7 and params["data_transport"]["max_frame_bytes"] == 65536
    assert params["data_transport"]["socket_path"] == adapter.channel_server.socket_path


@pytest.mark.parametrize(("provider", "dialect", "negotiation", "detail"), [
    (_fake(), "sandbox-driver-v2", "v2 (asked v2)", ""),
    (inprocess.plugin(), "sandbox-driver-v1", "v1 (negotiated: the plugin offers v1, not v2)",
     "its answer to the v2 initialize: "),
    (_fake(dialect="sandbox-driver-v1"), "sandbox-driver-v2", "v2 (negotiated: the plugin offers v2, not v1)",
     "its answer to the v1 initialize: "),
    (_fake("--fault", "refuse-as-v1", dialect="sandbox-driver-v2"), "sandbox-driver-v1",
     "v1 (negotiated: the plugin offers v1, not v2)", "its answer to the v2 initialize: "),
    # v1 plugins that refuse the v2 initialize without naming a version, or answer it as version 1
    (inprocess.plugin(mutant="version-mismatch-unnamed"), "sandbox-driver-v1",
     "v1 (negotiated: the plugin offers v1, not v2)", "its answer to the v2 initialize: unsupported protocol version"),
    (inprocess.plugin(mutant="accepts-any-protocol-version"), "sandbox-driver-v1",
     "v1 (the plugin answered v2's initialize as protocol version 1)", ""),
    # ... or decode its params strictly, or echo the version asked without v2's capabilities
    (inprocess.plugin(mutant="b2_initialize_rejects_unknown_fields"), "sandbox-driver-v1",
     "v1 (negotiated: the plugin offers v1, not v2)",
     "its answer to the v2 initialize: invalid params for initialize: unknown field `data_transport`"),
    (inprocess.plugin(mutant="hs_echo_protocol_version"), "sandbox-driver-v1",
     "v1 (the plugin answered v2's initialize as protocol version 2)", ""),
], ids=["auto-v2", "auto-v1-reference", "asked-v1-got-v2", "asked-v2-got-v1", "auto-unnamed-refusal",
        "auto-v1-answer", "auto-strict-v1-decoder", "auto-v1-echoing-2"])
def test_the_protocol_version_is_negotiated(provider, dialect, negotiation, detail) -> None:
    """The negotiation reads as information; the refusal that settled it is its detail, in the plugin's words."""
    adapter = open_provider(provider)
    try:
        assert adapter.dialect == dialect and adapter.identity.dialect == dialect
        assert adapter.identity.negotiation == negotiation, adapter.identity.negotiation
        assert adapter.identity.negotiation_detail.startswith(detail) and bool(detail) == bool(
            adapter.identity.negotiation_detail), adapter.identity.negotiation_detail
    finally:
        adapter.close()


def _refusal(message: str, reason: str, field: str = "protocol_version", kind: str = "invalid_spec"):
    return ApplicationErrorAnswer(method="initialize", code=-32000, message=message, kind=kind,
                                  detail={"field": field, "reason": reason})


def test_a_version_refusal_is_read_from_its_kind_field_and_numbers_whatever_the_wording() -> None:
    upstream = _refusal("invalid spec: protocol_version: plugin speaks protocol version 1 but the host asked for 2",
                        "plugin speaks protocol version 1 but the host asked for 2")
    assert refusal_names_version(upstream, 1) and not refusal_names_version(upstream, 3)
    assert refusal_names_version(_refusal("unsupported protocol", "only v1 here"), 1)
    assert not refusal_names_version(_refusal("nope", "version 1 only", field="data_transport"), 1)
    assert not refusal_names_version(_refusal("nope", "version 1 only", kind="unsupported"), 1)
    assert not refusal_names_version(_refusal("we speak 3, you asked 2", "speaks 3"), 1)
    assert refusal_versions(_refusal("unsupported protocol version", "unsupported")) == set()


def test_exec_stop_and_its_v1_name_are_one_capability() -> None:
    assert capability_flags({"exec": {"cancel": True}})["exec.stop"] is True
    flags = capability_flags({"exec": {"stop": True}, "one_shot": {"build": False}})
    assert flags["exec.cancel"] and flags["exec.stop"] and flags["one_shot"]
    assert capability_flags({"exec": {}, "one_shot": None})["one_shot"] is False


def test_open_ack_off_is_reproduced_and_refused_where_it_means_nothing() -> None:
    config = RunConfig(provider=ProviderConfig(plugin="my-plugin", open_ack=False))
    assert "--open-ack off" in config.reproduce()
    assert "--open-ack" not in RunConfig(provider=ProviderConfig(plugin="my-plugin")).reproduce()
    assert RunConfig.from_json(config.to_json()).provider.open_ack is False
    for wrong in (ProviderConfig(rest_url="http://127.0.0.1:1", open_ack=False, profile="forkd"),
                  ProviderConfig(plugin="p", dialect="sandbox-driver-v1", open_ack=False)):
        with pytest.raises(UsageError, match="--open-ack applies to sandbox-driver-v2"):
            wrong.validate()


# -- the facet's handshake variations and host faults, against the v2 reference ----------------------


@pytest.fixture
def reference():
    adapter = open_provider(inprocess.plugin("--dialect", "sandbox-driver-v2"))
    try:
        yield adapter, adapter.create(SandboxRequest())
    finally:
        adapter.close()


def test_the_handshake_variations_reach_the_plugin_as_asked(reference) -> None:
    adapter, sandbox = reference
    channels = adapter.channels
    with pytest.raises(ProtocolErrorAnswer) as missing:
        channels.initialize_without_transport()
    assert missing.value.code == -32600
    with pytest.raises(ApplicationErrorAnswer) as limit:
        channels.initialize_with_frame_limit(4096)
    assert limit.value.detail.get("field") == "data_transport.max_frame_bytes"
    channels.initialize_naming_another_socket()
    assert adapter.exec(sandbox.id, ExecRequest("printf still-here")).stdout == b"still-here"
    assert channels.decoy_connections() == 0
    with pytest.raises(ProtocolErrorAnswer) as removed:
        channels.call_removed("exec/run", sandbox.id)
    assert removed.value.code == -32601
    assert adapter.take_violations() == []


def test_host_faults_apply_to_the_next_byte_moving_call_only(reference) -> None:
    adapter, sandbox = reference
    with adapter.recording(Transcript()) as transcript, adapter.channels.faults(HostChannelFaults(content_length_delta=1)):
        with pytest.raises(ApplicationErrorAnswer) as short:
            adapter.files.write(sandbox.id, "short.txt", b"four")
        adapter.files.write(sandbox.id, "whole.txt", b"four")
    assert short.value.kind == "io"
    declared = [json.loads(e.text)["params"]["content_length"] for e in transcript.entries()
                if e.direction == "sent" and '"fs/write"' in e.text]
    assert declared == [5, 4]
    assert adapter.files.read(sandbox.id, "whole.txt") == b"four"
    assert adapter.take_violations() == []


def test_a_faulted_write_declares_the_injected_bytes_and_its_early_end_is_no_violation(reference) -> None:
    adapter, sandbox = reference
    faults = HostChannelFaults(extra_frame_kind=1)  # stdout, the plugin's kind, sent by the host
    with adapter.recording(Transcript()) as transcript, adapter.channels.faults(faults), \
            pytest.raises(ApplicationErrorAnswer) as refused:
        adapter.files.write(sandbox.id, "faulted.txt", b"four")
    assert refused.value.kind == "invalid_spec" and refused.value.detail.get("field") == "frame"
    (sent,) = [json.loads(e.text) for e in transcript.entries() if e.direction == "sent" and '"fs/write"' in e.text]
    assert sent["params"]["content_length"] == 4 + len(faults.extra_frame_payload)
    assert adapter.take_violations() == []
