"""SIGTERM to a run under ``-n 2`` (pytest-xdist workers), once and three times: every sandbox the run
created is counted and its fate accounted, no worker or plugin outlives the suite, and results.json is
written and says the run was interrupted.

As in ``test_cleanup.py``, the proof does not trust results.json: the reference plugin keeps its sandboxes
in a registry directory that outlives its processes, and every process of the run — the CLI, its workers,
the plugins and what they start — carries a mark in its environment, found in ``/proc/*/environ``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers import REPO, plugin_command
from tests.test_cleanup import CLI_WITH_CTRL_C, REGISTRY_ENV, live, records
from tests.test_hostile_process import end, processes_marked

MARK = "SANDBOX_CONFORMANCE_TEST_MARK"
EVENT_WAIT_S = 60.0  # generous: a loaded machine starts workers and plugins slowly; the events end the waits


class Suite:
    """The CLI as a process of its own, its stderr read line by line so a test can wait for a line."""

    def __init__(self, tmp_path: Path, run_id: str, mark: str) -> None:
        self.registry = tmp_path / "registry"
        self.reports = tmp_path / "reports"
        command = [sys.executable, "-c", CLI_WITH_CTRL_C, "run", "--plugin", plugin_command(),
                   "--env", f"{REGISTRY_ENV}={self.registry}", "--env", f"{MARK}={mark}", "--run-id", run_id,
                   "--report-dir", str(self.reports), "-n", "2",
                   # more scenarios than it will reach: the signals land mid-run even on a busy machine
                   "--feature", "exec.feature", "--feature", "fs.feature", "--feature", "lifecycle.feature"]
        self.process = subprocess.Popen(command, cwd=REPO, env={**os.environ, MARK: mark}, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.stderr: list[str] = []
        self._line = threading.Condition()
        self._stdout: list[str] = []
        threading.Thread(target=self._read, args=(self.process.stderr, self.stderr), daemon=True).start()
        threading.Thread(target=self._read, args=(self.process.stdout, self._stdout), daemon=True).start()

    def _read(self, stream, into: list[str]) -> None:
        for line in stream:
            with self._line:
                into.append(line)
                self._line.notify_all()
        with self._line:
            self._line.notify_all()

    def wait_for_stderr(self, text: str, timeout_s: float) -> bool:
        with self._line:
            return self._line.wait_for(lambda: any(text in line for line in self.stderr)
                                       or self.process.poll() is not None, timeout=timeout_s) \
                and any(text in line for line in self.stderr)

    def wait_for_a_live_sandbox(self, run_id: str) -> None:
        """Until a scenario holds a sandbox (a record appears in the registry)."""
        deadline = time.monotonic() + EVENT_WAIT_S
        while not live(self.registry, run_id):
            if self.process.poll() is not None:
                raise AssertionError(f"the suite ended (exit {self.process.returncode}) before creating a "
                                     f"sandbox\n{self.output()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no live sandbox within {EVENT_WAIT_S:.0f} s\n{self.output()}")
            time.sleep(0.01)

    def output(self) -> str:
        return "".join(self._stdout)[-3000:] + "".join(self.stderr)[-2000:]

    def finish(self) -> int:
        try:
            return self.process.wait(timeout=EVENT_WAIT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            raise AssertionError(f"the suite did not end within {EVENT_WAIT_S:.0f} s of the signals\n{self.output()}")


@pytest.mark.parametrize("signals", [1, 3])
def test_sigterm_under_xdist_accounts_every_sandbox_and_leaves_no_process(tmp_path: Path, signals: int) -> None:
    """Subprocesses: the CLI with two xdist workers and their reference plugins; SIGTERM to the CLI alone, as a
    CI runner sends it."""
    run_id = f"xdist-{uuid.uuid4().hex[:12]}"
    mark = uuid.uuid4().hex
    suite = Suite(tmp_path, run_id, mark)
    try:
        suite.wait_for_a_live_sandbox(run_id)
        os.kill(suite.process.pid, signal.SIGTERM)
        if signals == 3:
            # Signals of one kind that arrive before the first is handled count once: the second is sent again
            # until the suite says it heard it, then the third. At once, not after a second's wait: on an idle
            # machine the cleanup after the first signal can end the run within that second.
            while not suite.wait_for_stderr("interrupt again to abandon the cleanup", 0.05):
                assert suite.process.poll() is None, f"the run ended before a second signal\n{suite.output()}"
                os.kill(suite.process.pid, signal.SIGTERM)
            os.kill(suite.process.pid, signal.SIGTERM)
        code = suite.finish()
        left = processes_marked(mark)
    finally:
        if suite.process.poll() is None:
            os.killpg(suite.process.pid, signal.SIGKILL)
        for line in processes_marked(mark):
            end(int(line.split(":")[0]))
    assert code == 1, suite.output()
    assert left == [], f"processes of the run outlived it (workers, plugins, what they started): {left}"
    results = json.loads((suite.reports / "results.json").read_text())
    assert results["run"]["interrupted"] is True
    accounts = results["sandboxes"]
    made = {record["id"] for record in records(suite.registry, run_id)}
    # every sandbox the run made is accounted: created by a scenario (finished or interrupted, on either worker)
    # or found by the run label at the end
    assert made == set(accounts["ids"]) | set(accounts["swept"]), (sorted(made), json.dumps(accounts))
    assert accounts["created"] == len(accounts["ids"]), accounts
    still = live(suite.registry, run_id)
    reported_left = set(accounts["leaked"]) | set(accounts.get("unknown_fate", []))
    assert set(still) <= reported_left, f"sandboxes alive but not reported as left: {still}; {accounts}"
    if signals == 1:  # nothing abandoned: every cleanup ran
        assert still == [] and reported_left == set(), accounts
        assert accounts["deleted"] == accounts["created"], accounts


def test_a_signal_in_another_plugins_session_finish_still_gets_a_report(tmp_path: Path) -> None:
    """In process: the report is written by a wrapper around the whole session finish, not only by the suite's own
    part of it, which a signal landing earlier in the hook (xdist's teardown) would skip."""
    from conformance import interrupts, runner
    from conformance.config import RunConfig, Selection
    from tests import inprocess

    config = RunConfig(provider=inprocess.plugin(run_id=f"finish-{uuid.uuid4().hex[:8]}"),
                       selection=Selection(scenarios=("exec-env",)), report_dir=str(tmp_path / "r"), seed=1,
                       pytest_args=("-p", "tests.interrupt_at_session_finish"))
    outcome = None
    try:
        outcome = runner.run(config)
    except KeyboardInterrupt:
        pass  # it escaped the run: asserted below, without ending this test session
    finally:
        interrupted = interrupts.INTERRUPTED.is_set()
        interrupts.INTERRUPTED.clear()  # a process-wide fact: the next in-process run starts afresh
    assert outcome is not None, "the signal escaped the run, which ended without finishing its session"
    assert interrupted and outcome.exit_code == 1, outcome
    assert (tmp_path / "r" / "results.json").exists(), "no report was written"
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["run"]["interrupted"] is True
    assert results["sandboxes"]["created"] == results["sandboxes"]["deleted"] == 1, results["sandboxes"]
