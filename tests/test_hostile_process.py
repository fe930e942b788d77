"""Hostile plugins about processes, run as real processes: a grandchild that keeps the plugin's output
open, a plugin that will not exit, a plugin that crashes holding sandboxes; and the reference plugin's
promise that a run leaves no process of its own behind."""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest

from conformance.reporting.model import HELD_BY_ENDED
from conformance.transports.process import ProcessTransport, scrubbed_environment
from tests.helpers import REPO, plugin_command, run_cli

HOSTILE = REPO / "tests" / "hostile"
CALL_TIMEOUT_S = 3.0
HELD_OUTPUT_CALL_TIMEOUT_S = 30.0


def hostile_command(name: str, *args: str) -> str:
    return shlex.join([sys.executable, str(HOSTILE / f"{name}.py"), *args])


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie is dead


def end(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def named_pids(texts: list[str]) -> list[int]:
    return [int(pid) for text in texts for pid in re.findall(r"pid (\d+): sleep", text)]


# -- closing never blocks on output a descendant holds ----------------------------------------------


def test_a_transport_close_returns_promptly_and_names_the_grandchild_holding_its_output() -> None:
    transport = ProcessTransport([sys.executable, str(HOSTILE / "proc_setsid_grandchild.py"), "60"],
                                 scrubbed_environment())
    ended = []
    transport.start(lambda line: None, lambda: ended.append(True))
    time.sleep(1.0)  # the plugin is up and its grandchild forked
    started = time.monotonic()
    transport.close(grace_s=2.0)
    took = time.monotonic() - started
    outcome = transport.close_outcome
    leftovers = named_pids(outcome.leftovers)
    try:
        assert took < 2.0 + 1.0 + 2.0, f"close took {took:.1f}s: it waited on output the grandchild holds"
        assert outcome.exited_on_eof, "the plugin itself exits on EOF; it was killed"
        assert len(leftovers) == 1 and alive(leftovers[0]), f"the grandchild was not named: {outcome.leftovers}"
        assert ended == [True], "the connection was never told the output is over"
    finally:
        for pid in leftovers:
            end(pid)


def test_an_honest_plugin_is_reaped_as_soon_as_it_exits() -> None:
    transport = ProcessTransport([sys.executable, "-S", "-c", "import sys\nwhile sys.stdin.buffer.read(65536): pass"],
                                 scrubbed_environment())
    transport.start(lambda line: None, lambda: None)
    time.sleep(0.3)
    started = time.monotonic()
    transport.close(grace_s=10.0)
    took = time.monotonic() - started
    assert transport.close_outcome.exited_on_eof and transport.close_outcome.leftovers == []
    assert took < 2.0, f"closing a plugin that exits on EOF took {took:.2f}s of a 10 s grace"


def test_a_run_whose_plugin_leaves_a_grandchild_on_its_output_ends_and_names_it(tmp_path: Path) -> None:
    # A long call timeout: a suite that waited one out for the held output would take 30 s longer, far beyond
    # what a loaded machine adds between two runs (a 3 s one was outrun by load: 17.1 s against 9.7 s)
    selection = ["--dialect", "sandbox-driver-v1", "--call-timeout", str(HELD_OUTPUT_CALL_TIMEOUT_S),
                 "--scenario", "exec-env", "--scenario", "create-describe-delete"]
    started = time.monotonic()
    baseline = run_cli("run", "--plugin", plugin_command(), *selection, report_dir=tmp_path / "plain", timeout=120)
    plain_s = time.monotonic() - started
    started = time.monotonic()
    hostile = run_cli("run", "--plugin", hostile_command("proc_setsid_grandchild", "300"), *selection,
                      report_dir=tmp_path / "hostile", timeout=120)
    hostile_s = time.monotonic() - started
    results = hostile.results  # written: the run ended
    leftovers = named_pids(results["wire_violations_outside_scenarios"])
    try:
        assert baseline.exit_code == 0, baseline.stdout[-2000:]
        assert hostile.exit_code == 0, hostile.stdout[-2000:]
        assert leftovers, results["wire_violations_outside_scenarios"]
        assert f"pid {leftovers[0]}: sleep 300" in hostile.stdout, "the terminal summary does not name the leftover"
        # it carries the run's mark: the end of the run found it again and ended it
        assert [entry["pid"] for entry in results["processes_left"]["found"]] == leftovers, results["processes_left"]
        assert not any(alive(pid) for pid in leftovers), "the leftover outlived the run"
        assert hostile_s - plain_s < HELD_OUTPUT_CALL_TIMEOUT_S, (
            f"the run took {hostile_s:.1f}s against {plain_s:.1f}s with an honest plugin: it waited out a "
            f"--call-timeout for the grandchild's output")
    finally:
        for pid in leftovers:
            end(pid)


# -- a plugin that ignores shutdown and EOF --------------------------------------------------------


def test_a_plugin_that_will_not_exit_is_killed_and_reported(tmp_path: Path) -> None:
    pid_file = tmp_path / "plugin.pid"
    run = run_cli("run", "--dialect", "sandbox-driver-v1", "--plugin", hostile_command("proc_ignore_eof", str(pid_file)),
                  "--scenario", "exec-env", "--call-timeout", str(CALL_TIMEOUT_S), report_dir=tmp_path / "r",
                  timeout=120)
    pid = int(pid_file.read_text())
    try:
        found = run.results["wire_violations_outside_scenarios"]
        assert any("SDP1-096" in text and "SDP1-097" in text and "SIGKILL" in text for text in found), found
        assert "did not exit" in run.stdout, "the terminal summary does not say it was killed"
        assert not alive(pid), "the plugin outlived the run"
    finally:
        end(pid)


# -- a plugin that crashes holding sandboxes ---------------------------------------------------------


def test_a_crash_holding_sandboxes_is_not_counted_as_deleted(tmp_path: Path) -> None:
    marker = tmp_path / "crashed"
    run = run_cli("run", "--dialect", "sandbox-driver-v1",
                  "--plugin", hostile_command("proc_crash_on_delete", str(marker)),
                  "--scenario", "exec-env", "--scenario", "create-describe-delete",
                  "--call-timeout", str(CALL_TIMEOUT_S), report_dir=tmp_path / "r", timeout=120)
    assert marker.exists(), "the plugin never crashed: the test proves nothing"
    sandboxes = run.results["sandboxes"]
    assert len(sandboxes["died_holding"]) == 1, sandboxes
    assert sandboxes["deleted"] == sandboxes["created"] - 1, sandboxes
    assert sandboxes["died_holding"][0] in run.stdout and HELD_BY_ENDED in run.stdout


def test_an_honest_run_reports_nothing_held_by_a_dead_provider(tmp_path: Path) -> None:
    run = run_cli("run", "--dialect", "sandbox-driver-v1", "--plugin", plugin_command(),
                  "--scenario", "exec-env", "--scenario", "create-describe-delete", report_dir=tmp_path / "r",
                  timeout=120)
    assert run.exit_code == 0, run.stdout[-2000:]
    sandboxes = run.results["sandboxes"]
    assert sandboxes["died_holding"] == [] and sandboxes["deleted"] == sandboxes["created"] > 0, sandboxes
    assert run.results["wire_violations_outside_scenarios"] == []


# -- the reference plugin leaves no process behind ---------------------------------------------------

# Scenarios that start processes meant to outlive their command: a background sleep (fork-copy), children
# of a timed-out command, stdio processes and terminals, streams.
PROCESS_SCENARIOS = ("fork-copy", "exec-timeout-ends-children", "stdio-round-trip", "stdio-raw",
                     "stdio-long-poll", "pty-echo-resize", "pty-raw", "stream-timeout", "stream-cancel",
                     "stream-cancel-term-first", "stream-concurrent", "stream-stdin")


def processes_marked(mark: str) -> list[str]:
    needle = f"SANDBOX_CONFORMANCE_TEST_MARK={mark}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry.name}/environ").read_bytes()
            if needle in environ.split(b"\0"):
                found.append(f"{entry.name}: {Path(f'/proc/{entry.name}/cmdline').read_bytes()!r}")
        except OSError:
            continue
    return found


@pytest.mark.parametrize("dialect", ["sandbox-driver-v1", "sandbox-driver-v2"])
def test_no_process_the_reference_started_outlives_the_run(tmp_path: Path, dialect: str) -> None:
    # The plugin's environment carries the mark and the reference passes it to every command, so
    # anything the run started, however it detached, still carries it afterwards.
    mark = uuid.uuid4().hex
    selection = [argument for sid in PROCESS_SCENARIOS for argument in ("--scenario", sid)]
    run = run_cli("run", "--plugin", plugin_command("--dialect", dialect), "--dialect", dialect,
                  "--env", f"SANDBOX_CONFORMANCE_TEST_MARK={mark}", *selection, report_dir=tmp_path / "r",
                  timeout=600)
    assert run.exit_code == 0, run.stdout[-3000:]
    ran = run.with_outcome("passed")
    assert "fork-copy" in ran or dialect == "sandbox-driver-v2", "fork-copy did not run: nothing was left to find"
    deadline = time.monotonic() + 5.0  # SIGKILLed processes may take a moment to be reaped by init
    while processes_marked(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = processes_marked(mark)
    for line in left:
        end(int(line.split(":")[0]))
    assert left == [], f"processes the run started are still running after it: {left}"


def test_a_dead_reference_plugins_sandboxes_and_processes_are_swept_at_the_next_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess
    import tempfile

    from conformance.reference.host_backend import HostBackend

    env = scrubbed_environment()
    env["TMPDIR"] = str(tmp_path)
    # a plugin whose backend starts a background process in a sandbox, then is killed before it can clean up
    script = ("import os, sys\n"
              "from conformance.reference.host_backend import HostBackend\n"
              "backend = HostBackend()\n"
              "box = backend.create(None, {}, {})\n"
              "backend.run(box, '(sleep 300 &) ; echo started', {})\n"
              "print(backend.root, flush=True)\n"
              "os.kill(os.getpid(), 9)\n")
    completed = subprocess.run([sys.executable, "-c", script], check=False, env=env, capture_output=True, text=True,
                               cwd=REPO, timeout=60)
    root = Path(completed.stdout.strip())
    assert root.is_dir(), completed.stderr

    def sleepers() -> list[int]:
        found = []
        for entry in os.scandir("/proc"):
            try:
                if entry.name.isdigit() and Path(os.readlink(f"/proc/{entry.name}/cwd")).is_relative_to(root):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    left_by_the_dead = sleepers()
    try:
        assert left_by_the_dead, "the dead plugin left no process: the sweep has nothing to prove"
        monkeypatch.setenv("TMPDIR", str(tmp_path))
        monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
        HostBackend().close()  # starting is when it sweeps
        assert not root.exists(), "the dead plugin's registry is still on disk"
        deadline = time.monotonic() + 5.0
        while any(alive(pid) for pid in left_by_the_dead) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(pid) for pid in left_by_the_dead), "the dead plugin's process still runs"
    finally:
        for pid in left_by_the_dead:
            end(pid)


# -- a dead plugin's registry is swept at the next start ----------------------------------------------


def test_only_registries_of_dead_owners_in_this_pid_namespace_are_swept(tmp_path: Path) -> None:
    import subprocess

    from conformance.reference import host_backend

    namespace = os.readlink("/proc/self/ns/pid")
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that named a process of ours, now dead
    alive_identity = host_backend._process_identity(os.getpid())
    registries = {
        "dead": f"{gone.pid} 12345 {namespace}",
        "alive": f"{alive_identity} {namespace}",
        "elsewhere": f"{gone.pid} 12345 pid:[1]",  # another pid namespace: its pid means nothing here
        "unowned": "",
    }
    for name, owner in registries.items():
        root = tmp_path / f"{host_backend.ROOT_PREFIX}{name}"
        root.mkdir()
        (root / host_backend.OWNER_FILE).write_text(owner)
    host_backend.sweep_dead_registries(tmp_path)
    left = sorted(p.name.removeprefix(host_backend.ROOT_PREFIX) for p in tmp_path.iterdir())
    assert left == ["alive", "elsewhere", "unowned"]


# -- processes that escape the plugin's process group are found by the run's mark, and ended ----------------


def test_processes_a_plugin_detached_are_found_by_the_runs_mark_reported_and_ended(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    count = 100  # half daemonized (nothing ties them to the plugin's pipes), half holding its stderr; +1 ignores TERM
    run = run_cli("run", "--dialect", "sandbox-driver-v1", "--scenario", "exec-env",
                  "--plugin", hostile_command("proc_setsid_daemons", str(pid_file), str(count), "300"),
                  report_dir=tmp_path / "r", timeout=120)
    started = [int(line) for line in pid_file.read_text().split()]
    try:
        assert run.exit_code == 0, run.stdout[-3000:]  # a warning, not a failure: the provider's behaviour passed
        left = run.results["processes_left"]
        assert left["checked"] is True, left
        assert sorted(entry["pid"] for entry in left["found"]) == sorted(started), left
        assert all(entry["command"] == "sleep 300" for entry in left["found"]), left
        fates = {entry["pid"]: entry["fate"] for entry in left["found"]}
        assert sorted(fates.values()).count("killed with SIGKILL") == len(started) // (count + 1), fates
        assert set(fates.values()) == {"ended by SIGTERM", "killed with SIGKILL"}, fates
        assert not [pid for pid in started if alive(pid)], "a process the run found is still running"
        warning = next(w for w in run.results["verdict"]["warnings"] if "still running after it had closed" in w)
        assert f"{len(started)} process(es)" in warning and "SANDBOX_CONFORMANCE_RUN" in warning, warning
        assert "process(es) started by this run were still running" in run.stdout, run.stdout[-3000:]
        assert f"pid {left['found'][0]['pid']}: sleep 300" in run.stdout, run.stdout[-3000:]
    finally:
        for pid in started:
            end(pid)


def test_the_leftover_check_ends_only_its_own_runs_processes(tmp_path: Path) -> None:
    """In process: a process carrying another run's mark (a concurrent shard with the same run id) and one
    carrying this run's are told apart by the token; only this run's is ended."""
    import subprocess

    from conformance import leftovers

    def marked(token: str) -> subprocess.Popen[bytes]:
        name, value = leftovers.mark_entry("shared-run-id", token)
        return subprocess.Popen(["sleep", "60"], env={**scrubbed_environment(), name: value}, start_new_session=True)

    ours, theirs = marked("ours"), marked("theirs")
    try:
        found = leftovers.end_marked("shared-run-id", "ours")
        assert [(left.pid, left.command, left.fate) for left in found] == [(ours.pid, "sleep 60", "ended by SIGTERM")]
        assert ours.wait(timeout=5) == -signal.SIGTERM
        assert theirs.poll() is None, "another run's process was ended"
    finally:
        for process in (ours, theirs):
            process.kill()
            process.wait()
