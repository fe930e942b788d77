"""Hostile plugins on the stdio JSON-RPC path (issue 24): one that stops reading its input, one whose
answers are JSON the suite cannot read (too deep, an integer too long, a 40 MB number), one that exits with
status 0 in the middle of a call. Each run ends in bounded time, names the cause, writes its results, and
leaves nothing running; each is served in this process except where a process is the point (Ctrl-C, memory).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.providers import ProviderConfig
from conformance.reporting.model import HELD_BY_ENDED
from conformance.transports import json_text
from conformance.transports.base import FrameWriter, InputStalled
from tests import inprocess
from tests.helpers import REPO

HOSTILE = REPO / "tests" / "hostile"
BIG_WRITE = "fs-binary-round-trip[2048-kib-of-patterned-bytes]"


@pytest.fixture
def thread_failures(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every exception that ended a thread meanwhile (a reader that died on a line)."""
    failures: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: failures.append(repr(args.exc_value)))
    yield failures


def served_threads(module: str) -> list[str]:
    return [t.name for t in threading.enumerate() if t.is_alive() and module in t.name]


def ended(module: str, timeout_s: float = 10.0) -> bool:
    """Whether every thread serving ``module`` in process has ended (a plugin "process" left running)."""
    deadline = time.monotonic() + timeout_s
    while served_threads(module):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie is dead


def scenario(run: inprocess.InProcessRun, scenario_id: str) -> dict:
    return next(s for s in run.results["scenarios"] if s["id"] == scenario_id)


# -- a plugin that stops reading its input ------------------------------------------------------------------


def test_a_plugin_that_stops_reading_fails_the_call_at_its_deadline_naming_why(tmp_path: Path) -> None:
    """The 2 MiB fs/write backs up in the plugin's input pipe: the write gets the call's deadline (the suite
    used to block in the kernel for ever), the scenario fails saying so, and the wedged plugin is ended."""
    provider = ProviderConfig(in_process=("tests.hostile.stops_reading:serve",), call_timeout_s=2.0)
    started = time.monotonic()
    run = inprocess.run_suite(provider, tmp_path / "reports", scenarios=(BIG_WRITE,))
    elapsed = time.monotonic() - started
    result = scenario(run, BIG_WRITE)
    assert result["outcome"] == "failed", result
    assert "the plugin stopped reading its input" in result["message"], result["message"]
    assert "fs/write" in result["message"] or "fs/" in result["message"], result["message"]
    assert elapsed < 30, f"the run took {elapsed:.1f}s against a 2 s call timeout"
    assert (tmp_path / "reports" / "results.json").is_file()
    assert ended("tests.hostile.stops_reading"), served_threads("tests.hostile.stops_reading")


def test_a_frame_writer_keeps_its_deadline_and_refuses_to_frame_after_a_partial_frame() -> None:
    read_end, write_end = os.pipe()
    writer = FrameWriter(write_end)
    try:
        started = time.monotonic()
        with pytest.raises(InputStalled, match="stopped reading its input") as stalled:
            writer.write(b"x" * (4 << 20) + b"\n", timeout_s=0.3)  # nobody reads: the pipe takes 64 KiB of it
        assert 0.3 <= time.monotonic() - started < 5
        assert stalled.value.broken and "holds part of a frame" in str(stalled.value)
        started = time.monotonic()
        with pytest.raises(InputStalled, match="holds part of a frame"):
            writer.write(b"{}\n", timeout_s=10)  # at once: whatever follows would be read as the cut frame's rest
        assert time.monotonic() - started < 1
    finally:
        os.close(read_end)
        writer.close(lambda: os.close(write_end))
    # a peer that is gone is a broken pipe, not a stall: the crash is reported as a crash
    read_end, write_end = os.pipe()
    os.close(read_end)
    writer = FrameWriter(write_end)
    with pytest.raises(BrokenPipeError):
        writer.write(b"x" * (1 << 20), timeout_s=5)
    assert writer.broken is None
    writer.close(lambda: os.close(write_end))
    with pytest.raises(BrokenPipeError, match="input is closed"):
        writer.write(b"{}\n", timeout_s=5)


def test_ctrl_c_while_a_write_is_blocked_ends_the_run_at_once_with_its_report(tmp_path: Path) -> None:
    """A real run, a real plugin, a real SIGINT while the suite's write of the 2 MiB request waits on the
    plugin's full input pipe (the plugin says when it is full): the first Ctrl-C ends the run, which cleans
    up and writes its report as interrupted; the plugin does not outlive it."""
    marker = tmp_path / "input-full"
    plugin = shlex.join([sys.executable, str(HOSTILE / "stops_reading.py"), "--full-marker", str(marker)])
    reports = tmp_path / "reports"
    command = [sys.executable, "-m", "conformance.cli", "run", "--plugin", plugin, "--dialect", "sandbox-driver-v1",
               "--call-timeout", "120", "--scenario", BIG_WRITE, "--report-dir", str(reports), "--seed", "1"]
    cli = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():  # the plugin's own word that the suite's write is now blocked
            assert cli.poll() is None, cli.communicate()
            assert time.monotonic() < deadline, "the plugin's input never filled"
            time.sleep(0.05)
        interrupted_at = time.monotonic()
        cli.send_signal(signal.SIGINT)
        stdout, stderr = cli.communicate(timeout=60)
        took = time.monotonic() - interrupted_at
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.communicate()
    plugin_pid = int(marker.read_text())
    assert took < 30, f"the run ended {took:.1f}s after Ctrl-C (its call timeout is 120 s)"
    assert "Traceback" not in stderr, stderr[-3000:]
    results = json.loads((reports / "results.json").read_text())
    assert results["run"]["interrupted"] is True, results["run"]
    assert not running(plugin_pid), "the plugin outlived the run"
    assert cli.returncode != 0, stdout[-2000:]


# -- answers the suite cannot read --------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "says"), [
    ("deep", "nested too deeply to read"),
    ("long-int", "carries an integer of 5000 digits"),
])
def test_an_unreadable_answer_is_named_and_blames_nothing_else(tmp_path: Path, thread_failures: list[str],
                                                               mode: str, says: str) -> None:
    """exec/run's answer is well-formed JSON Python cannot read: the call fails at once naming why (not "the
    provider's stdout closed" after a dead reader), the connection goes on, and the sandbox is deleted
    through the same plugin (nobody "died holding" it)."""
    provider = ProviderConfig(in_process=("tests.hostile.wire_unreadable:serve", mode), call_timeout_s=20.0)
    started = time.monotonic()
    run = inprocess.run_suite(provider, tmp_path / "reports", scenarios=("exec-env",))
    elapsed = time.monotonic() - started
    result = scenario(run, "exec-env")
    assert result["outcome"] == "failed", result
    assert says in result["message"] and "exec/run" in result["message"], result["message"]
    assert elapsed < 15, f"the call waited out its deadline ({elapsed:.1f}s) for an answer that had come"
    everything = json.dumps(run.results) + run.output + run.stderr
    assert "stdout closed" not in everything and "RecursionError" not in everything
    sandboxes = run.results["sandboxes"]
    assert sandboxes["died_holding"] == [] and sandboxes["deleted"] == sandboxes["created"] == 1, sandboxes
    assert thread_failures == [], thread_failures
    assert ended("tests.hostile.wire_unreadable")


def test_an_answer_too_deep_for_its_schema_check_fails_its_call_and_the_reader_goes_on(
        thread_failures: list[str]) -> None:
    """Parsed, but a check that walks it recurses past the limit (as a schema validator may, deeper than the
    parser): the call fails naming why, and the next answer is still read."""
    from conformance.dialects.jsonrpc import JsonRpcConnection
    from conformance.dialects.sandbox_driver_v1 import V1Rules
    from conformance.errors import WireViolation
    from tests.test_transport import FakeTransport

    class Bottomless(V1Rules):
        def result_problems(self, method: str, result: object) -> list:
            return self.result_problems(method, result) if result == "deep" else super().result_problems(method, result)

    answers = iter(["deep", {"health": {"status": "ok"}}])
    transport = FakeTransport(lambda t, m: t.emit({"jsonrpc": "2.0", "id": m["id"], "result": next(answers)}))
    connection = JsonRpcConnection(transport, Bottomless())
    connection.start()
    with pytest.raises(WireViolation, match=r"answer to provider/health \(id 1\) is nested too deeply"):
        connection.call("provider/health", None, timeout_s=5)
    assert connection.call("provider/health", None, timeout_s=5) == {"health": {"status": "ok"}}
    assert thread_failures == []


def test_unreadable_json_is_told_apart_from_what_the_parser_reads() -> None:
    deep = b'{"jsonrpc":"2.0","id":5,"result":' + b"[" * 3000 + b"]" * 3000 + b"}"
    with pytest.raises(json_text.UnreadableJson, match="nested too deeply"):
        json_text.loads(deep)
    assert json_text.top_level_id(deep) == 5
    with pytest.raises(json_text.UnreadableJson, match="integer of 4301 digits"):
        json_text.loads(b'{"id":3,"exit_code":' + b"1" * 4301 + b"}")
    padding = b" " * json_text.LONG_INT_SEARCH_FROM  # long enough to be searched before it is parsed
    with pytest.raises(json_text.UnreadableJson, match="integer of 70000 digits"):
        json_text.loads(padding + b"-" + b"7" * 70000)
    # what the parser reads stays readable: digits in a string, a long fraction or exponent, a 4300-digit int
    assert json_text.loads(b'{"a":"' + b"1" * 70000 + b'"}' + padding)["a"] == "1" * 70000
    assert json_text.loads(padding + b"[1." + b"1" * 70000 + b"]") == [pytest.approx(10 / 9)]
    assert json_text.loads(padding + b"[1e-" + b"0" * 70000 + b"1]") == [pytest.approx(0.1)]
    assert json_text.loads(padding + b"1" * 4300) == int("1" * 4300)
    assert json_text.top_level_id(b'{"method":"id","x":[{"id":4}],"id" : 12}') == 12
    with pytest.raises(json.JSONDecodeError):
        json_text.loads(b"{not json")


def test_a_huge_number_costs_the_suite_about_one_line_of_memory_and_is_named(tmp_path: Path) -> None:
    """A 40 MB number on one line, under a 48 MiB --max-message-bytes: the suite used to hold it three times
    over (the line, its text, the number's digits) and then call it the end of the stream. Measured in a
    fresh interpreter (its peak resident set is this line's cost alone)."""
    size = 40 * 1024 * 1024
    completed = subprocess.run([sys.executable, str(HOSTILE / "wire_huge_number.py"), str(size)], capture_output=True,
                               text=True, cwd=REPO, timeout=120, check=False)
    out = completed.stdout
    assert "GROWN_MB" in out, completed.stderr[-3000:]
    grown = float(out.split("GROWN_MB")[1].split()[0])
    assert "RAISED WireViolation" in out and f"integer of {size} digits" in out, out
    assert "stdout closed" not in out, out
    # the line itself (42 MB, gathered in a growing buffer) and no second copy of it: 121 MB before
    assert grown < 1.6 * size / 1e6, f"reading a {size / 1e6:.0f} MB line grew the suite {grown:.0f} MB"


# -- an exit with status 0 in the middle of a call ---------------------------------------------------------


def test_an_exit_0_in_the_middle_of_a_call_died_holding_its_sandbox(tmp_path: Path) -> None:
    """A restarted plugin answering the delete of a sandbox it never knew proves nothing, whatever the status
    its predecessor exited with: the sandbox is reported as held by a provider process that ended, not deleted."""
    marker = tmp_path / "exited"
    provider = ProviderConfig(in_process=("tests.hostile.exit0_mid_call:serve", str(marker)), call_timeout_s=10.0)
    run = inprocess.run_suite(provider, tmp_path / "reports", scenarios=("exec-env",))
    assert marker.exists(), "the plugin never exited: the test proves nothing"
    assert scenario(run, "exec-env")["outcome"] == "failed"
    sandboxes = run.results["sandboxes"]
    assert len(sandboxes["died_holding"]) == 1 and sandboxes["deleted"] == 0, sandboxes
    assert sandboxes["died_holding"][0] in run.output and HELD_BY_ENDED in run.output
    assert ended("tests.hostile.exit0_mid_call")
