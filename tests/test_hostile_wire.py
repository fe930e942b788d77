"""The wire reader against hostile plugins (an endless line, bytes that are not UTF-8), and the cheap
checks it runs on every message proven to give the schema's own verdicts."""

from __future__ import annotations

import io
import json
import random
import re
import shlex
import subprocess
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance import schemas
from conformance.dialects.fabro_sketch import SketchRules
from conformance.dialects.jsonrpc import DEFAULT_MAX_MESSAGE_BYTES, JsonRpcConnection
from conformance.dialects.sandbox_driver_v1 import V1Rules
from conformance.dialects.sandbox_driver_v1.rules import plain_output_data
from conformance.dialects.sandbox_driver_v2 import V2Rules
from conformance.errors import WireViolation
from conformance.transports.base import pump_lines
from conformance.transports.process import ProcessTransport, scrubbed_environment

REPO = Path(__file__).resolve().parent.parent
HOSTILE = REPO / "tests" / "hostile"
EXAMPLES = REPO / "tests" / "schema_examples"
MIB = 1024 * 1024


# -- the fast checks give the schema's verdicts --------------------------------------------------


class _Loader(yaml.SafeLoader):
    """Safe YAML plus the examples files' ``!repeat [text, count]``."""


_Loader.add_constructor("!repeat", lambda loader, node: (lambda t, n: t * n)(*loader.construct_sequence(node)))


def _examples(folder: str) -> dict[str, list[Any]]:
    """Every example instance of a folder's examples file, by schema ref (absolute), valid and invalid alike."""
    entries = yaml.load((EXAMPLES / f"{folder}.yaml").read_text(encoding="utf-8"), Loader=_Loader) or {}
    return {f"{schemas.SCHEMA_BASE}{folder}/{ref}": [*(v.get("valid") or []), *(v.get("invalid") or [])]
            for ref, v in entries.items() if isinstance(v, dict)}


ODD_VALUES = (None, True, 0, -1, 1.0, 2**70, "", "x", "2.0", "YQ==", "YQ", "aGVsbG8K\n", "ok", [], {}, {"a": 1})
KEYS_TO_ADD = ("id", "error", "result", "method", "params", "jsonrpc", "stream", "data_b64", "exec_id", "extra")


def _mutations(instance: Any, rng: random.Random, count: int) -> Iterator[Any]:
    """``count`` random variants of ``instance``: a member removed, retyped or added, a string cut or
    lengthened, somewhere in its tree."""
    for _ in range(count):
        copy = json.loads(json.dumps(instance))
        yield _mutate(copy, rng)


def _mutate(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict) and value and rng.random() < 0.6:
        key = rng.choice(sorted(value))
        choice = rng.random()
        if choice < 0.25:
            del value[key]
        elif choice < 0.6:
            value[key] = rng.choice(ODD_VALUES)
        else:
            value[key] = _mutate(value[key], rng)
        return value
    if isinstance(value, dict):
        value[rng.choice(KEYS_TO_ADD)] = rng.choice(ODD_VALUES)
        return value
    if isinstance(value, list) and value:
        index = rng.randrange(len(value))
        value[index] = _mutate(value[index], rng)
        return value
    if isinstance(value, str) and rng.random() < 0.5:
        return rng.choice((value[:-1], value + "=", value + "\n", value + "A", value.upper()))
    return rng.choice(ODD_VALUES)


FOLDERS = ("sandbox-driver-v1", "sandbox-driver-v2", "fabro-sketch")


@pytest.mark.parametrize("folder", FOLDERS)
def test_inlined_schemas_give_the_verdicts_of_the_schemas_as_written(folder: str) -> None:
    """The fast verdict (refs inlined) and the explaining validator (refs resolved by the registry) agree on
    every example of the folder and on random mutations of each."""
    rng = random.Random(13)
    disagreements = []
    for ref, instances in _examples(folder).items():
        for instance in instances:
            for variant in [instance, *_mutations(instance, rng, 4)]:
                fast, written = schemas.is_valid(ref, variant), schemas._validator(ref).is_valid(variant)
                if fast != written:
                    disagreements.append(f"{ref}: fast {fast}, as written {written}: {json.dumps(variant)[:300]}")
    assert not disagreements, "\n".join(disagreements[:20])


RULES = {"sandbox-driver-v1": V1Rules, "sandbox-driver-v2": V2Rules, "fabro-sketch": SketchRules}


@pytest.mark.parametrize("folder", FOLDERS)
def test_envelope_and_notification_fast_paths_give_the_schemas_verdicts(folder: str) -> None:
    """What the rules answer for an inbound message (hand-written fast paths first) is what the schema of its
    form says, for every envelope and notification example and 25 mutations of each."""
    rules = RULES[folder]()
    rng = random.Random(13)
    envelope = f"{schemas.SCHEMA_BASE}{folder}/envelope.json#/$defs/"
    checked, disagreements = 0, []
    for ref, instances in _examples(folder).items():
        if ref.startswith(envelope):
            for variant in (v for instance in instances for v in [instance, *_mutations(instance, rng, 25)]):
                form = _form(variant)
                ours = not rules.envelope_problems(variant)
                theirs = schemas._validator(envelope + form).is_valid(variant)
                checked += 1
                if ours != theirs:
                    disagreements.append(f"{form}: rules {ours}, schema {theirs}: {json.dumps(variant)[:300]}")
        elif "/notifications/" in ref and ref.endswith("#/$defs/params"):
            method = ref.split("/notifications/")[1].split(".json")[0].replace(".", "/")
            for variant in (v for instance in instances for v in [instance, *_mutations(instance, rng, 25)]):
                problems, data = rules.checked_notification(method, variant)
                theirs = schemas._validator(ref).is_valid(variant)
                checked += 1
                if (not problems) != theirs or (data is not None and not theirs):
                    disagreements.append(f"{method}: rules {not problems} (decoded: {data is not None}), "
                                         f"schema {theirs}: {json.dumps(variant)[:300]}")
    assert checked > 100, f"only {checked} messages checked: the examples were not found"
    assert not disagreements, "\n".join(disagreements[:20])


def _form(message: Any) -> str:
    """The envelope form the rules judge a message by (as SchemaRules.envelope_problems picks it)."""
    if isinstance(message, dict):
        if "method" in message and "id" not in message:
            return "Notification"
        if "error" in message:
            return "Failure"
        if "result" in message:
            return "Success"
    return "FromPlugin"


def test_output_fast_path_decodes_what_it_accepts() -> None:
    assert plain_output_data("exec/output", {"exec_id": "x", "stream": "stderr", "data_b64": "aGVsbG8K"}) == b"hello\n"
    assert plain_output_data("logs/output", {"stream_id": "l", "data_b64": ""}) == b""
    assert plain_output_data("exec/output", {"exec_id": "x", "stream": "stdout", "data_b64": "aGVsbG8"}) is None
    assert plain_output_data("exec/output", {"exec_id": "x", "stream": "both", "data_b64": ""}) is None
    assert plain_output_data("host/log", {"stream_id": "l", "data_b64": ""}) is None


OLD_BASE64_PATTERN = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$(?!\n)")


def test_base64_format_accepts_exactly_what_the_old_pattern_did() -> None:
    """The decode-once format replaced a regex pattern; over random strings near the alphabet's edges the
    two agree, and the validators assert the format (a failing format is a schema problem)."""
    rng = random.Random(13)
    alphabet = "AQgw+/=\n -_é9z"
    disagreements = []
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 13)))
        if schemas.FORMATS.conforms(text, schemas.BASE64_FORMAT) != bool(OLD_BASE64_PATTERN.search(text)):
            disagreements.append(text)
    assert not disagreements, [repr(t) for t in disagreements[:10]]
    ref = f"{schemas.SCHEMA_BASE}sandbox-driver-v1/common.json#/$defs/Base64"
    assert schemas.problems(ref, "YQ") and schemas.problems(ref, "YQ==\n") and not schemas.problems(ref, "YQ==")


# -- the line reader -----------------------------------------------------------------------------


def _pieces(data: bytes, rng: random.Random) -> Any:
    stream = io.BytesIO(data)
    return lambda n: stream.read(rng.randint(1, 7))


def test_lines_are_split_across_any_chunking_and_a_last_unterminated_line_is_kept() -> None:
    rng = random.Random(13)
    data = b'{"a":1}\n\n{"b":"' + b"x" * 40 + b'"}\nlast'
    for _ in range(50):
        lines: list[bytes] = []
        assert pump_lines(_pieces(data, rng), lines.append, lambda: 100) is None
        assert lines == [b'{"a":1}', b"", b'{"b":"' + b"x" * 40 + b'"}', b"last"]


def test_a_line_of_exactly_the_limit_passes_and_one_byte_more_stops_the_reader() -> None:
    rng = random.Random(13)
    lines: list[bytes] = []
    assert pump_lines(_pieces(b"a" * 20 + b"\nb\n", rng), lines.append, lambda: 20) is None
    assert lines == [b"a" * 20, b"b"]
    lines.clear()
    assert pump_lines(_pieces(b"ok\n" + b"a" * 21 + b"\nnever\n", rng), lines.append, lambda: 20) == 20
    assert lines == [b"ok"]
    # crossing the limit without a newline at all is reported as soon as it happens
    endless = iter([b"x" * 8] * 10**6)
    assert pump_lines(lambda n: next(endless), lines.append, lambda: 20) == 20


# -- hostile plugins, as real processes ----------------------------------------------------------


def _connect(script: str, rules: Any, max_message_bytes: int | None = None) -> JsonRpcConnection:
    transport = ProcessTransport([sys.executable, str(HOSTILE / script)], scrubbed_environment())
    connection = JsonRpcConnection(transport, rules, max_message_bytes=max_message_bytes)
    connection.start()
    return connection


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize(("rules", "configured", "limit"), [
    (V1Rules, MIB, MIB),  # v1 sets no limit: the run's --max-message-bytes does
    (V2Rules, None, MIB - 1),  # v2's control_message_bytes (1 MiB with the newline), by default
    (V2Rules, 64 * MIB, MIB - 1),  # a run's setting lowers v2's limit, never raises it
], ids=["v1-configured", "v2-default", "v2-not-raised"])
def test_an_endless_line_is_reported_at_once_as_the_limit_it_crosses(rules: Any, configured: int | None,
                                                                     limit: int) -> None:
    connection = _connect("wire_long_line.py", rules(), configured)
    try:
        # the hostile plugin speaks v1 whatever the rules: what is judged here is the line, not the handshake
        connection.request("initialize", {"protocol_version": 1}, 30, check_params=False, check_result=False).result()
        before = _rss_mb()
        started = time.monotonic()
        with pytest.raises(WireViolation) as failure:
            connection.request("provider/health", None, timeout_s=60, check_result=False).result()
        elapsed = time.monotonic() - started
        grown = _rss_mb() - before
        violations = [v.summary for v in connection.take_violations()]
    finally:
        connection.close(grace_s=0.5)
    assert f"longer than {limit} bytes" in str(failure.value)
    assert any(f"longer than {limit} bytes" in v for v in violations), violations
    assert elapsed < 20, f"reported after {elapsed:.1f}s, against a 60s call timeout"
    assert grown < 48, f"the suite grew {grown:.0f} MB reading a line cut off at {limit} bytes"


def test_the_default_line_limit_of_a_protocol_without_one_leaves_room_for_large_legal_answers() -> None:
    """A 64 MiB buffered exec/run answer is an 85 MiB line: legal in v1, so well under the default."""
    assert DEFAULT_MAX_MESSAGE_BYTES >= 2 * (64 * MIB * 4 // 3)
    connection = JsonRpcConnection(ProcessTransport(["true"], {}), V1Rules())
    assert connection.line_limit == DEFAULT_MAX_MESSAGE_BYTES
    connection.rules = V2Rules()  # detection settles the dialect: its own limit applies from then on
    assert connection.line_limit == connection.transport.max_line_bytes == MIB - 1


def test_an_answer_that_is_not_utf8_fails_its_call_at_once() -> None:
    connection = _connect("wire_bad_utf8.py", V1Rules())
    try:
        connection.call("initialize", {"protocol_version": 1}, timeout_s=30)
        started = time.monotonic()
        with pytest.raises(WireViolation) as failure:
            connection.call("provider/health", None, timeout_s=60)
        elapsed = time.monotonic() - started
        violations = [v.summary for v in connection.take_violations()]
        # the framing held: the connection goes on serving
        again = connection.call("initialize", {"protocol_version": 1}, timeout_s=30)
    finally:
        connection.close(grace_s=0.5)
    assert "provider/health" in str(failure.value) and "not valid UTF-8 (byte 0xe9" in str(failure.value)
    assert elapsed < 10, f"failed after {elapsed:.1f}s, against a 60s call timeout"
    assert violations and all("not valid UTF-8 (byte 0xe9 at offset" in v for v in violations), violations
    assert again["protocol_version"] == 1


def test_a_run_against_an_endless_line_reports_it_and_ends_with_bounded_memory(tmp_path: Path) -> None:
    """The whole CLI: the scenario fails naming the limit, not by its call timeout (an hour: the run ends within
    the test's five minutes only if the limit ended the call), and neither the suite nor anything it waited for
    grew anywhere near the 64 MiB the plugin wrote."""
    plugin = shlex.join([sys.executable, str(HOSTILE / "wire_long_line.py")])
    cli = [sys.executable, "-m", "conformance.cli", "run", "--plugin", plugin, "--dialect", "sandbox-driver-v1",
           "--max-message-bytes", "1MiB", "--call-timeout", "3600", "--scenario", "health-status",
           "--report-dir", str(tmp_path / "reports"), "--seed", "1"]
    # A fresh parent, so the peak resident set it reports is of this run's processes only.
    measure = ("import resource, subprocess, sys, time; started = time.monotonic(); "
               "code = subprocess.run(sys.argv[1:], capture_output=True).returncode; "
               "print(code, time.monotonic() - started, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    completed = subprocess.run([sys.executable, "-c", measure, *cli], capture_output=True, text=True, cwd=REPO,
                               check=False, timeout=300)
    code, elapsed, peak_kb = completed.stdout.split()
    results = json.loads((tmp_path / "reports" / "results.json").read_text())
    scenario = next(s for s in results["scenarios"] if s["id"] == "health-status")
    assert int(code) == 1, completed.stderr[-2000:]
    assert scenario["outcome"] == "failed" and "longer than 1048576 bytes" in scenario["message"], scenario
    assert float(elapsed) < 3600 / 2, f"the run took {float(elapsed):.1f}s: its call timeout ended it, not the limit"
    assert int(peak_kb) / 1024 < 64 + 150, f"peak resident set {int(peak_kb) / 1024:.0f} MB"


def test_a_long_lines_excerpt_never_shows_part_of_a_secret_the_cut_went_through() -> None:
    from conformance.dialects.jsonrpc import EXCERPT_BYTES, EXCERPT_FROM_BYTES, _shown
    from conformance.transcript import REDACTOR

    secret = "s3cr3t-" + os.urandom(8).hex()
    REDACTOR.add(secret)
    raw = b"x" * (EXCERPT_BYTES - 5) + secret.encode() + b"y" * EXCERPT_FROM_BYTES
    shown = _shown(raw)
    assert secret[:5] not in shown and len(shown) < EXCERPT_BYTES + 100
