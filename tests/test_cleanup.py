"""The suite never leaks a sandbox: on a green run, a failing run, a call that never gets an answer, a
plugin that freezes or dies mid-run, and Ctrl-C. And ``sandbox-conformance sweep`` deletes what a run
that was killed outright left behind.

The proof does not trust results.json: the reference plugin keeps its sandboxes in a registry
directory (``SANDBOX_CONFORMANCE_HOST_REGISTRY``) that outlives every plugin process, and each test
counts the records there that carry its run's label. A record whose state is not ``deleted`` is a
sandbox still alive.

A green run, a failing run and an unanswered call run in this process (``tests/inprocess.py``); a plugin
process that dies, freezes or refuses restarts, Ctrl-C and SIGTERM, and the ``sweep`` command run the CLI
as a process.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from conformance.adapter import SandboxRequest
from conformance.dialects.rest import load_profile, open_rest_adapter
from conformance.errors import ApplicationErrorAnswer
from conformance.providers import open_provider
from conformance.reference.rest_server import Forkd052App
from tests import inprocess
from tests.helpers import REPO, SuiteRun, cli_main, mutant_command, one_usage_line, plugin_command, run_cli

REGISTRY_ENV = "SANDBOX_CONFORMANCE_HOST_REGISTRY"
RUN_LABEL = "sandbox-conformance.run"
SHORT_CALL_TIMEOUT = "2"  # seconds: a hanging call costs this much, not the default 30
LIVE_WAIT_S = 60.0


# -- counting sandboxes in the registry ---------------------------------------------------------


def records(registry: Path, run_id: str) -> list[dict[str, Any]]:
    """Every sandbox record of the run, as the reference backend keeps it."""
    found = []
    for path in registry.glob("*/record.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue  # being replaced at this very moment
        if record.get("labels", {}).get(RUN_LABEL) == run_id:
            found.append(record)
    return found


def live(registry: Path, run_id: str) -> list[str]:
    return sorted(r["id"] for r in records(registry, run_id) if r["state"] != "deleted")


def run_in_process(tmp_path: Path, run_id: str, mutant: str | None = None, call_timeout_s: float = 30.0,
                   **selection: Any) -> inprocess.InProcessRun:
    """The suite in this process against the reference plugin (or ``mutant``) served on a thread, with
    the registry and the run id the CLI runs below get through ``--env`` and ``--run-id``."""
    provider = inprocess.plugin(mutant=mutant, env={REGISTRY_ENV: str(tmp_path / "registry")}, run_id=run_id,
                                call_timeout_s=call_timeout_s)
    return inprocess.run_suite(provider, tmp_path / "reports", **selection)


def run_cli_suite(tmp_path: Path, run_id: str, *args: str, mutant: str | None = None) -> SuiteRun:
    """``sandbox-conformance run`` as a process, its plugin (or ``mutant``) a process too."""
    plugin = mutant_command(mutant) if mutant else plugin_command()
    return run_cli("run", "--plugin", plugin, "--env", f"{REGISTRY_ENV}={tmp_path / 'registry'}",
                   "--run-id", run_id, *args, report_dir=tmp_path / "reports", timeout=300)


def assert_nothing_leaked(run: SuiteRun | inprocess.InProcessRun, registry: Path, run_id: str,
                          swept: int = 0) -> dict[str, Any]:
    """No sandbox of the run is alive, results.json reports no leak, and every sandbox the registry
    holds for the run is counted: created by a scenario, or (``swept``) found by the run label only."""
    created = records(registry, run_id)
    assert created, f"the run created no sandbox at all\n{run.stdout[-2000:]}{run.stderr[-2000:]}"
    assert live(registry, run_id) == [], f"sandboxes still alive after the run:\n{run.stdout[-3000:]}"
    accounts = run.results["sandboxes"]
    assert accounts["leaked"] == [], accounts
    assert len(accounts["swept"]) == swept, accounts
    assert accounts["created"] + swept == len(created), (accounts, len(created))
    assert set(accounts["swept"]) <= {r["id"] for r in created}, accounts
    return accounts


@pytest.fixture
def run_id() -> str:
    return f"cleanup-{uuid.uuid4().hex[:12]}"


# -- the five proofs ----------------------------------------------------------------------------


def test_a_green_run_deletes_every_sandbox(tmp_path: Path, run_id: str) -> None:
    run = run_in_process(tmp_path, run_id, features=("exec.feature", "delete.feature"))
    assert run.exit_code == 0, run.stdout[-3000:] + run.stderr[-2000:]
    accounts = assert_nothing_leaked(run, tmp_path / "registry", run_id)
    assert accounts["deleted"] == accounts["created"]


def test_a_run_with_failures_deletes_every_sandbox(tmp_path: Path, run_id: str) -> None:
    # A scenario whose assertion fails while its sandbox is alive, among scenarios that pass.
    run = run_in_process(tmp_path, run_id, scenarios=("exec-bash-contract", "exec-env"), mutant="exec-login-shell")
    assert run.exit_code == 1, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.with_outcome("failed") == {"exec-bash-contract[not-a-login-shell]"}, run.outcomes()
    assert_nothing_leaked(run, tmp_path / "registry", run_id)


def _assert_unanswered_call_cleaned_up(run: SuiteRun | inprocess.InProcessRun, tmp_path: Path, run_id: str) -> None:
    assert run.exit_code == 1, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.outcomes()["exec-timeout"] == "failed"
    assert "got no answer" in next(s["message"] for s in run.results["scenarios"] if s["id"] == "exec-timeout")
    assert run.outcomes()["exec-relative-working-dir"] == "passed", run.outcomes()
    assert_nothing_leaked(run, tmp_path / "registry", run_id)


UNANSWERED = ("exec-timeout", "exec-relative-working-dir")


def test_a_call_that_never_gets_an_answer_leaks_nothing(tmp_path: Path, run_id: str) -> None:
    # The exec of exec-timeout is never answered; the delete that follows is, and the next scenario runs
    # as if nothing had happened.
    run = run_in_process(tmp_path, run_id, scenarios=UNANSWERED, call_timeout_s=float(SHORT_CALL_TIMEOUT),
                         mutant="timed-out-exec-never-answered")
    _assert_unanswered_call_cleaned_up(run, tmp_path, run_id)


def test_a_frozen_plugin_is_ended_and_leaks_nothing(tmp_path: Path, run_id: str) -> None:
    """Subprocess: the suite kills a frozen plugin process and restarts it."""
    # The exec of exec-timeout is never answered and the frozen plugin does not even read the delete that
    # follows, so the suite ends it and deletes through a restarted plugin, which then serves the next
    # scenario as if nothing had happened.
    run = run_cli_suite(tmp_path, run_id, "--scenario", "exec-timeout", "--scenario", "exec-relative-working-dir",
                        "--call-timeout", SHORT_CALL_TIMEOUT, mutant="timed-out-exec-freezes-plugin")
    _assert_unanswered_call_cleaned_up(run, tmp_path, run_id)


def test_a_plugin_that_dies_mid_scenario_leaks_nothing(tmp_path: Path, run_id: str) -> None:
    """Subprocess: a plugin process that exits mid-scenario."""
    # The plugin exits while exec-foreign-signal's sandbox is alive; a restarted plugin deletes it.
    run = run_cli_suite(tmp_path, run_id, "--scenario", "exec-env", "--scenario", "exec-foreign-signal",
                        "--scenario", "exec-relative-working-dir", mutant="signalled-exec-crashes-plugin")
    assert run.exit_code == 1, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.with_outcome("failed") == {"exec-foreign-signal"}, run.outcomes()
    assert run.with_outcome("passed") == {"exec-env", "exec-relative-working-dir"}, run.outcomes()
    assert_nothing_leaked(run, tmp_path / "registry", run_id)


def test_a_plugin_that_dies_before_answering_a_create_leaks_nothing(tmp_path: Path, run_id: str) -> None:
    """Subprocess: a plugin process that exits before it answers."""
    # The suite never learns that sandbox's id: only the sweep by run label at the end finds it.
    run = run_cli_suite(tmp_path, run_id, "--scenario", "create-with-name", "--scenario", "create-describe-delete",
                        mutant="named-create-crashes-unanswered")
    assert run.exit_code == 1, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.with_outcome("failed") == {"create-with-name"}, run.outcomes()
    accounts = assert_nothing_leaked(run, tmp_path / "registry", run_id, swept=1)
    (named,) = [r for r in records(tmp_path / "registry", run_id) if r["name"]]
    assert accounts["swept"] == [named["id"]]


# The CLI as `python -m conformance.cli` runs it, with Ctrl-C raising KeyboardInterrupt even where this
# test itself runs with SIGINT ignored (a background job), which the child would otherwise inherit.
CLI_WITH_CTRL_C = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                   "from conformance.cli import main; sys.exit(main(sys.argv[1:]))")


def test_a_plugin_that_dies_for_good_has_its_leak_reported_and_swept_later(tmp_path: Path, run_id: str) -> None:
    """Subprocess: a plugin process that dies and a wrapping script that refuses restarts; the sweep command."""
    # The plugin dies mid-scenario and refuses to start again (after the one start whose handshake
    # serves the run): the suite cannot delete the sandbox, so it says so, and `sweep` removes it later.
    registry = tmp_path / "registry"
    starts = tmp_path / "starts"
    script = (f'n=0; [ -e {starts} ] && read -r n < {starts}; n=$((n + 1)); echo "$n" > {starts}; '
              f'[ "$n" -gt 1 ] && {{ echo "refusing to start again" >&2; exit 3; }}; '
              f'exec {mutant_command("signalled-exec-crashes-plugin")}')
    plugin = shlex.join([shutil.which("bash") or "/bin/bash", "-c", script])
    # The dialect is given: detection would spend the one start on the v2 initialize the plugin refuses.
    run = run_cli("run", "--plugin", plugin, "--dialect", "sandbox-driver-v1", "--env", f"{REGISTRY_ENV}={registry}",
                  "--run-id", run_id, "--scenario", "exec-foreign-signal", report_dir=tmp_path / "reports", timeout=120)
    assert run.exit_code == 1, run.stdout[-3000:] + run.stderr[-2000:]
    (alive,) = live(registry, run_id)
    accounts = run.results["sandboxes"]
    assert accounts["leaked"] == [alive] and accounts["created"] == 1, accounts
    failure = next(s for s in run.results["scenarios"] if s["id"] == "exec-foreign-signal")
    assert failure["outcome"] == "failed"

    swept = sweep(registry, run_id)
    assert swept.exit_code == 0, swept.stdout + swept.stderr
    assert swept.stdout.splitlines()[0] == f"deleted {alive}"
    assert live(registry, run_id) == []


def _start_suite(tmp_path: Path, run_id: str, *args: str, mutant: str | None = None) -> subprocess.Popen[str]:
    plugin = mutant_command(mutant) if mutant else plugin_command()
    command = [sys.executable, "-c", CLI_WITH_CTRL_C, "run", "--plugin", plugin,
               "--env", f"{REGISTRY_ENV}={tmp_path / 'registry'}", "--run-id", run_id,
               "--report-dir", str(tmp_path / "reports"), *args]
    # Its own session, so the signal reaches the suite's process group as Ctrl-C in a terminal would.
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _wait_for_a_live_sandbox(process: subprocess.Popen[str], registry: Path, run_id: str) -> None:
    deadline = time.monotonic() + LIVE_WAIT_S
    while not live(registry, run_id):
        if process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f"the suite ended (exit {process.returncode}) before creating a sandbox\n{out}{err}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            raise AssertionError(f"no live sandbox within {LIVE_WAIT_S:.0f} s")
        time.sleep(0.01)


@pytest.mark.parametrize("moment", ["first-sandbox", "hung-call", "twice", "sigterm"])
def test_ctrl_c_leaks_nothing(tmp_path: Path, run_id: str, moment: str) -> None:
    """Subprocess: Ctrl-C and SIGTERM to the suite's process group."""
    registry = tmp_path / "registry"
    if moment in ("twice", "sigterm"):  # an impatient second Ctrl-C lands in the cleanup; a CI runner's SIGTERM
        process = _start_suite(tmp_path, run_id, "--feature", "exec.feature", "--feature", "fs.feature",
                               "--feature", "lifecycle.feature")
        _wait_for_a_live_sandbox(process, registry, run_id)
    elif moment == "first-sandbox":  # the instant the first sandbox exists, wherever the suite is
        # More scenarios than it will reach: the signal must land mid-run even on a busy machine.
        process = _start_suite(tmp_path, run_id, "--feature", "exec.feature", "--feature", "fs.feature",
                               "--feature", "lifecycle.feature")
        _wait_for_a_live_sandbox(process, registry, run_id)
    else:  # while the suite waits (up to 60 s) for an exec/run answer that never comes
        process = _start_suite(tmp_path, run_id, "--scenario", "exec-timeout", "--call-timeout", "60",
                               mutant="timed-out-exec-never-answered")
        _wait_for_a_live_sandbox(process, registry, run_id)
        time.sleep(1.5)  # the command's 1 s timeout has passed: the plugin now sits on the answer
    os.killpg(process.pid, signal.SIGTERM if moment == "sigterm" else signal.SIGINT)
    if moment == "twice":
        time.sleep(0.05)
        os.killpg(process.pid, signal.SIGINT)
    try:
        out, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    assert process.returncode == 1, out[-3000:] + err[-2000:]
    assert "interrupted" in err, err[-2000:]
    assert records(registry, run_id)
    assert live(registry, run_id) == [], out[-3000:] + err[-2000:]
    accounts = json.loads((tmp_path / "reports" / "results.json").read_text())["sandboxes"]
    assert accounts["leaked"] == [], accounts
    # The interrupted scenario's own cleanup runs when pytest ends the session; its teardown never
    # reports, so its sandboxes are counted from the adapter's ledger: every record is accounted for.
    assert accounts["created"] + len(accounts["swept"]) == len(records(registry, run_id)), accounts


def test_an_interrupt_pytest_cannot_render_still_ends_as_an_interrupted_run() -> None:
    """A Ctrl-C that lands on a bytecode without a line number made pytest's terminal reporter raise
    TypeError while rendering it, then assert at the session's end (both seen in CI). The plugin unlinks
    such frames first; should rendering fail anyway, the run stays interrupted and the reporter gets a line."""
    from types import SimpleNamespace

    from conformance import interrupts
    from conformance.plugin import ConformancePlugin, drop_lineless_frames

    # frames without a line are unlinked, in the middle, at the end and at the head
    tail = SimpleNamespace(tb_lineno=None, tb_next=None)
    last = SimpleNamespace(tb_lineno=9, tb_next=tail)
    middle = SimpleNamespace(tb_lineno=None, tb_next=last)
    second = SimpleNamespace(tb_lineno=5, tb_next=middle)
    head = SimpleNamespace(tb_lineno=None, tb_next=second)
    excinfo = SimpleNamespace(tb=head, type=KeyboardInterrupt, value=KeyboardInterrupt(), _excinfo=None,
                              _traceback="stale")
    drop_lineless_frames(excinfo)
    assert excinfo._excinfo[2] is second and excinfo._traceback is None
    assert second.tb_next is last and last.tb_next is None

    reporter = SimpleNamespace(_keyboardinterrupt_memo=None)
    plugin = ConformancePlugin(config=None)  # type: ignore[arg-type]
    plugin.pytest_config = SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda name: reporter))
    interrupts.INTERRUPTED.clear()
    wrapper = plugin.pytest_keyboard_interrupt(excinfo=SimpleNamespace(tb=None))
    next(wrapper)
    with pytest.raises(StopIteration) as ended:
        wrapper.throw(TypeError("unsupported operand type(s) for -: 'NoneType' and 'int'"))
    assert ended.value.value is None
    assert interrupts.INTERRUPTED.is_set()
    assert reporter._keyboardinterrupt_memo.reprcrash.message == "KeyboardInterrupt"
    interrupts.INTERRUPTED.clear()

    rendered = plugin.pytest_keyboard_interrupt(excinfo=SimpleNamespace(tb=None))
    next(rendered)
    with pytest.raises(StopIteration):
        rendered.send(None)  # rendered as usual: nothing changes
    assert not interrupts.INTERRUPTED.is_set()


# -- sandbox-conformance sweep ------------------------------------------------------------------
# Subprocess, all of them: the sweep command itself.


def _create_labelled(registry: Path, run_id: str, count: int) -> list[str]:
    """Sandboxes labelled for ``run_id``, created through the reference plugin (served in this process)
    and left alive."""
    config = inprocess.plugin(env={REGISTRY_ENV: str(registry)}, run_id=run_id)
    adapter = open_provider(config)
    try:
        return [adapter.create(SandboxRequest()).id for _ in range(count)]
    finally:
        adapter.close()


def sweep(registry: Path, run_id: str, *args: str) -> SuiteRun:
    return run_cli("sweep", "--run-id", run_id, "--plugin", plugin_command(),
                   "--env", f"{REGISTRY_ENV}={registry}", *args, timeout=120)


def test_sweep_deletes_a_past_runs_sandboxes_and_only_those(tmp_path: Path, run_id: str) -> None:
    registry = tmp_path / "registry"
    ours = _create_labelled(registry, run_id, 3)
    theirs = _create_labelled(registry, f"{run_id}-other", 1)
    assert live(registry, run_id) == sorted(ours)

    first = sweep(registry, run_id)
    assert first.exit_code == 0, first.stdout + first.stderr
    lines = first.stdout.splitlines()
    assert sorted(lines[:-1]) == sorted(f"deleted {sid}" for sid in ours)
    assert lines[-1] == f"swept {RUN_LABEL}={run_id}: 3 deleted, 0 left"
    assert live(registry, run_id) == []
    assert live(registry, f"{run_id}-other") == theirs  # another run's sandbox is none of its business

    second = sweep(registry, run_id)
    assert second.exit_code == 0, second.stdout + second.stderr
    assert second.stdout.splitlines() == [f"swept {RUN_LABEL}={run_id}: nothing to delete"]


def test_sweep_cleans_up_after_a_run_killed_outright(tmp_path: Path, run_id: str) -> None:
    # SIGKILL leaves the suite no chance to clean up: the sandbox alive at that moment stays alive.
    registry = tmp_path / "registry"
    process = _start_suite(tmp_path, run_id, "--scenario", "exec-timeout", "--call-timeout", "60",
                           mutant="timed-out-exec-never-answered")
    _wait_for_a_live_sandbox(process, registry, run_id)
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    left = live(registry, run_id)
    assert left, "the killed run should have left its sandbox behind"

    swept = sweep(registry, run_id)
    assert swept.exit_code == 0, swept.stdout + swept.stderr
    assert swept.stdout.splitlines()[:-1] == [f"deleted {sid}" for sid in left]
    assert live(registry, run_id) == []


def test_sweep_names_what_it_could_not_delete(tmp_path: Path, run_id: str) -> None:
    registry = tmp_path / "registry"
    stuck, fine = _create_labelled(registry, run_id, 2)
    # The backend writes a record through <id>/record.tmp: a directory there makes its delete fail.
    (registry / stuck / "record.tmp").mkdir()
    result = sweep(registry, run_id)
    assert result.exit_code == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert f"deleted {fine}" in lines
    assert any(line.startswith(f"not deleted {stuck}: ") for line in lines), lines
    assert lines[-1] == f"swept {RUN_LABEL}={run_id}: 1 deleted, 1 left"
    assert live(registry, run_id) == [stuck]


@pytest.mark.parametrize("args, says", [
    ([], "give --run-id (sweep by the run's label) or --from-results PATH"),
    (["--run-id", "r", "--from-results", "results.json"], "not allowed with argument --run-id"),
    (["--run-id", "r", "--all-recorded"], "--all-recorded applies to --from-results only"),
    (["--run-id", "r", "--provider-moved"], "--provider-moved applies to --from-results only"),
    (["--run-id", " "], "--run-id is empty"),
    (["--run-id", "r", "--plugin", "/nonexistent/plugin"], "/nonexistent/plugin"),
    (["--run-id", "r", "--plugin", "true"], "did not complete the handshake"),
    (["--run-id", "r", "--env", "NOT-A-PAIR"], "--env expects NAME=VALUE"),
    (["--run-id", "r", "--profile", "forkd"], "--profile applies to REST providers only"),
    (["--run-id", "r", "--rest", "http://127.0.0.1:1", "--plugin", "x"], "not allowed with argument --rest"),
    (["--run-id", "r", "--dialect", "fabro-sketch",
      "--plugin", plugin_command("--dialect", "fabro-sketch")], "cannot be swept"),
])
def test_sweep_bad_input_is_one_line_and_exit_2(args: list[str], says: str) -> None:
    result = run_cli("sweep", *args, timeout=60)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sandbox-conformance: error: ") and says in lines[0], lines


def _results_recording(path: Path, url: str, ids: list[str], **sandboxes: Any) -> Path:
    path.write_text(json.dumps({"provider": {"kind": "forkd", "command": url},
                                "sandboxes": {"created": len(ids), "deleted": 0, "leaked": [], "ids": ids,
                                              **sandboxes}}))
    return path


def test_sweep_from_results_deletes_what_the_run_left_through_the_provider_it_used(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """In process: forkd 0.5.2 (no labels to list by) on a thread, the sweep command called as a function."""
    token = f"sweep-token-{uuid.uuid4().hex}"
    monkeypatch.setenv("FORKD_TOKEN", token)
    with inprocess.rest_server(token, Forkd052App, log=[]) as url:
        forkd = open_rest_adapter(load_profile("forkd"), url)
        try:
            left, created, deleted_before = (forkd.create(SandboxRequest()).id for _ in range(3))
            forkd.delete(deleted_before)
            results = _results_recording(tmp_path / "results.json", url, [left, created, deleted_before],
                                         leaked=[left])
            # by default only what the run says it left: a sandbox it deleted is not touched again
            code, out, err = cli_main(capsys, "sweep", "--from-results", str(results), "--rest", url)
            assert code == 0, out + err
            assert out.splitlines() == [f"deleted {left}",
                                        f"swept the sandboxes {results} records as left: 1 deleted, 0 left"]
            assert forkd.describe(created).state == "running"
            # every sandbox the run created, where its deletes may not have taken effect
            code, out, err = cli_main(capsys, "sweep", "--from-results", str(results), "--rest", url, "--all-recorded")
            assert code == 0, out + err
            assert out.splitlines() == [f"deleted {created}", f"already gone {left}", f"already gone {deleted_before}",
                                        f"swept the sandboxes {results} records: 1 deleted, 2 already gone, 0 left"]
            for sandbox_id in (left, created):
                with pytest.raises(ApplicationErrorAnswer, match="not found"):
                    forkd.describe(sandbox_id)
            # a label sweep says what it cannot do, and what to do instead
            code, _out, err = cli_main(capsys, "sweep", "--run-id", "r", "--rest", url)
            line = one_usage_line(code, err)
            assert "cannot be swept by its run label" in line and "labels" in line and "--from-results" in line
            # only through the provider the run used: another kind, or another address unless it moved
            other = tmp_path / "other.json"
            other.write_text(json.dumps({"provider": {"kind": "host", "command": url}, "sandboxes": {"leaked": [left]}}))
            code, _out, err = cli_main(capsys, "sweep", "--from-results", str(other), "--rest", url)
            assert "records a run against provider 'host'; this provider is 'forkd'" in one_usage_line(code, err)
            moved = _results_recording(tmp_path / "moved.json", "http://forkd.elsewhere.test:8889", [], leaked=[left])
            code, _out, err = cli_main(capsys, "sweep", "--from-results", str(moved), "--rest", url)
            line = one_usage_line(code, err)
            assert "records a run against http://forkd.elsewhere.test:8889" in line and "--provider-moved" in line
            code, out, err = cli_main(capsys, "sweep", "--from-results", str(moved), "--rest", url, "--provider-moved")
            assert code == 0 and out.splitlines()[-1].endswith("0 deleted, 1 already gone, 0 left"), out + err
        finally:
            forkd.close()


@pytest.mark.parametrize("content, says", [
    (None, "does not exist"),
    ("{not json", "is not valid JSON"),
    ("[]", "has no sandboxes section"),
    ('{"provider": {"kind": "forkd", "command": "http://x"}, "sandboxes": {"leaked": [1, 2]}}',
     "sandboxes.leaked is not a list of sandbox ids"),
    ('{"provider": "forkd", "sandboxes": {"leaked": ["sb-1"]}}', "does not say which provider its run used"),
    ('{"sandboxes": {"leaked": ["sb-1"]}}', "does not say which provider its run used"),
])
def test_sweep_from_results_bad_input_is_one_line_and_exit_2(content: str | None, says: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    code, out, err = cli_main(capsys, "sweep", "--from-results", str(path), "--rest", "http://127.0.0.1:9")
    assert says in one_usage_line(code, err) and out == ""


def test_sweep_refuses_a_rest_provider_that_cannot_list_by_label() -> None:
    token = f"sweep-token-{uuid.uuid4().hex}"
    with inprocess.rest_server(token) as url:  # the server on a thread; the sweep command a process
        result = run_cli("sweep", "--run-id", "r", "--rest", url, env={**os.environ, "FORKD_TOKEN": token}, timeout=60)
    assert result.exit_code == 2, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "cannot be swept" in lines[0] and "labels" in lines[0], lines


def test_a_sandbox_the_restarted_provider_no_longer_knows_is_no_leak(tmp_path: Path) -> None:
    """A plugin restarted with a registry of its own answers not_found for the sandboxes of the process before
    (upstream's v1 host): nothing is left to delete, so the scenario passes and nothing is counted as leaked;
    the sandbox is listed as unknown at its delete, with a warning naming the delete-idempotency finding."""
    provider = inprocess.plugin(mutant="upstream-delete-unknown-not-found", run_id=f"cleanup-{uuid.uuid4().hex[:12]}")
    run = inprocess.run_suite(provider, tmp_path / "reports", scenarios=("exit-on-input-closed-while-streaming",))
    assert run.exit_code == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.outcomes()["exit-on-input-closed-while-streaming"] == "passed", run.outcomes()
    accounts = run.results["sandboxes"]
    assert accounts["leaked"] == [] and len(accounts["unknown_at_delete"]) == 1, accounts
    assert accounts["deleted"] == accounts["created"] - 1, accounts
    warnings = run.results["verdict"]["warnings"]
    assert any("unknown to the provider" in w and "delete-unknown" in w for w in warnings), warnings
