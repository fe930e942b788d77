"""Hangs cost what the timeouts say, no more: a plugin whose exec/stream is never answered costs a scenario
the command's fitted timeout plus the call timeout (not a flat 30 s plus it), and a REST port that accepts
and never answers is given --call-timeout, not the profile's longer request timeout. Both run as real
processes (the CLI, the plugin, a listening socket)."""

from __future__ import annotations

import os
import shlex
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from conformance.config import DEFAULT_CALL_TIMEOUT_S, call_timeout
from conformance.dialects.rest.adapter import request_timeout
from conformance.dialects.rest.profile import load_profile
from conformance.errors import UsageError
from steps._shared import COMMAND_TIMEOUT_MARGIN_S, fitted_timeout
from tests.helpers import REPO, run_cli

HOSTILE = REPO / "tests" / "hostile"


def hostile_command(script: str) -> str:
    return shlex.join([sys.executable, str(HOSTILE / script)])


# -- a hung exec/stream ------------------------------------------------------------------------------


def test_a_hung_exec_stream_costs_its_command_timeout_plus_the_call_timeout(tmp_path: Path) -> None:
    call_timeout_s = 3.0
    started = time.monotonic()
    run = run_cli("run", "--plugin", hostile_command("hang_exec_stream.py"), "--call-timeout", str(call_timeout_s),
                  "--scenario", "stream-stderr-tagged", report_dir=tmp_path, timeout=120)
    elapsed = time.monotonic() - started
    assert run.exit_code == 1, run.stdout + run.stderr
    scenario = next(s for s in run.results["scenarios"] if s["id"] == "stream-stderr-tagged")
    assert scenario["outcome"] == "failed"
    # What hung, in the results and in the terminal summary: the method, under the scenario that waited.
    assert "exec/stream" in scenario["message"] and "got no answer" in scenario["message"]
    assert "stream-stderr-tagged" in run.stdout and "exec/stream" in run.stdout
    # The command prints and exits at once, so its timeout is the margin alone: the wait for the answer is
    # that plus the call timeout (13 s), where a flat 30 s command timeout made it 33 s. Generous slack for
    # a busy machine, still well under the old cost.
    bound = COMMAND_TIMEOUT_MARGIN_S + call_timeout_s
    assert bound - 0.5 <= scenario["duration_s"] <= bound + 8.0, scenario["duration_s"]
    # The run as the suite timed it (from its start to its report), under the old cost: the process's own
    # start (an interpreter importing everything, seconds on a loaded machine) is no part of what is checked.
    assert run.results["run"]["duration_s"] < 30 + call_timeout_s, (run.results["run"]["duration_s"], elapsed)


def test_a_scenario_command_gets_a_timeout_that_fits_its_sleeps() -> None:
    assert fitted_timeout("printf 'to stdout'") == COMMAND_TIMEOUT_MARGIN_S
    assert fitted_timeout("echo first; sleep 2; echo second") == COMMAND_TIMEOUT_MARGIN_S + 4
    assert fitted_timeout("printf started; sleep 10; printf finished") == COMMAND_TIMEOUT_MARGIN_S + 20
    assert fitted_timeout("sleep 0.3; printf x; sleep 0.2") == pytest.approx(COMMAND_TIMEOUT_MARGIN_S + 1.0)
    assert fitted_timeout("printf 'nosleep 5'") == COMMAND_TIMEOUT_MARGIN_S  # a word ending in sleep is no sleep


# -- REST: a port that accepts and never answers -------------------------------------------------------


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts every connection and never writes a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        for connection in held:
            connection.close()
        thread.join(5)


def test_an_explicit_call_timeout_bounds_a_rest_request_the_profile_gives_longer(silent_port: int,
                                                                                   tmp_path: Path) -> None:
    assert load_profile("forkd").request_timeout_s == 30  # the profile's own deadline, which used to win
    started = time.monotonic()
    run = run_cli("run", "--rest", f"http://127.0.0.1:{silent_port}", "--call-timeout", "2", report_dir=tmp_path,
                  env={**os.environ, "FORKD_TOKEN": "conformance-test-token"}, timeout=60)
    elapsed = time.monotonic() - started
    assert run.exit_code == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "got no answer within 2.0s" in lines[0], run.stderr
    assert elapsed < 15, elapsed  # 2 s and the CLI's own start, where the profile's 30 s applied before


def test_request_timeout_is_the_profile_s_unless_a_call_timeout_was_given() -> None:
    profile = load_profile("forkd")
    assert request_timeout(profile, DEFAULT_CALL_TIMEOUT_S, call_timeout_given=False) == 30
    assert request_timeout(profile, 5.0, call_timeout_given=False) == 30  # the default call timeout is no choice
    assert request_timeout(profile, 5.0, call_timeout_given=True) == 5.0
    assert request_timeout(profile, 60.0, call_timeout_given=True) == 60.0  # the user's word, longer too


def test_call_timeout_is_the_default_unless_given_and_checked_when_given() -> None:
    assert call_timeout(SimpleNamespace(call_timeout=None)) == DEFAULT_CALL_TIMEOUT_S
    assert call_timeout(SimpleNamespace(call_timeout=5.0)) == 5.0
    with pytest.raises(UsageError):
        call_timeout(SimpleNamespace(call_timeout=0.0))
