"""What a run shows while and after it runs: the live line on a terminal and failure lines as they happen,
skips grouped by reason, another dialect's scenarios counted apart, plain count lines where stdout is no
terminal (a CI log), and a run stopped by --maxfail/-x.

In-process (tests/inprocess.py), on small selections: the suite's own start-up is not what is tested. The
live line is tested on a rich console kept in memory, on a pseudo-terminal, and once through the CLI under a
pseudo-terminal (a real process: its stdout being a terminal is the point)."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from conformance import cli
from conformance.reporting import markdown, progress, terminal
from conformance.reporting.model import is_other_dialect_skip
from tests import inprocess

# Two scenarios of the v2 dialect (features/v2/), skipped against the v1 reference plugin as another
# dialect's; the rest skip (a capability the reference does not declare) or pass.
V2_ONLY = ("v2-drain-stop-in-force", "v2-drain-kill-abandons")
MIXED = ("volume-lifecycle", "snapshot-list-by-name", "snapshot-unknown-not-found", "delete-unknown", *V2_ONLY)
# exec-working-dir-ignored fails these two fast (tests/mutants/catalogue/v1-core.yaml); exec-env passes.
TWO_FAILURES = ("exec-working-dir", "exec-relative-working-dir", "exec-env")


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory: pytest.TempPathFactory) -> inprocess.InProcessRun:
    return inprocess.run_suite(inprocess.plugin(), tmp_path_factory.mktemp("mixed"), scenarios=MIXED)


def test_skips_are_grouped_by_reason_with_count_and_ids(mixed_run: inprocess.InProcessRun) -> None:
    own_skips = [s for s in mixed_run.results["scenarios"]
                 if s["outcome"] == "skipped" and not is_other_dialect_skip(s)]
    assert own_skips, "the selection was meant to include skips of the provider's own"
    reasons = {s["message"] for s in own_skips}
    skip_lines = [line for line in mixed_run.output.splitlines() if line.startswith("skipped ")]
    assert len(skip_lines) == len(reasons)  # one line per reason, not one per scenario
    for reason in reasons:
        ids = [s["id"] for s in own_skips if s["message"] == reason]
        line = next(line for line in skip_lines if f": {reason} (" in line)
        assert line.startswith(f"skipped {len(ids)}: ")
        assert all(i in line for i in ids[:terminal.SKIPPED_IDS_SHOWN])


def test_another_dialects_scenarios_are_counted_apart(mixed_run: inprocess.InProcessRun) -> None:
    outcomes = mixed_run.outcomes()
    assert all(outcomes[i] == "skipped" for i in V2_ONLY)
    summary = mixed_run.results["summary"]
    assert summary["other_dialect"] == len(V2_ONLY)
    assert summary["skipped"] + summary["other_dialect"] == sum(1 for i in MIXED if outcomes[i] == "skipped")
    assert f"not for this dialect {len(V2_ONLY)}," in mixed_run.output  # the count line's word
    assert not any(i in line for line in mixed_run.output.splitlines() if line.startswith("skipped ")
                   for i in V2_ONLY)
    summary_md = markdown.render_markdown(mixed_run.results)
    all_row = next(line for line in summary_md.splitlines() if line.startswith("| **all** |"))
    header = next(line for line in summary_md.splitlines() if line.startswith("| level |"))
    words = [cell.strip() for cell in header.strip("|").split("|")]
    assert [cell.strip() for cell in all_row.strip("|").split("|")][words.index("not for this dialect")] == \
        str(len(V2_ONLY))
    assert not any(f"`{i}`" in summary_md for i in V2_ONLY)


def test_counts_are_plain_lines_when_stdout_is_no_terminal(mixed_run: inprocess.InProcessRun,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for forcing in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(forcing, raising=False)
    assert not terminal.is_terminal(io.StringIO())
    # The in-process run printed into a buffer, as a CI job prints into a log.
    lines = mixed_run.output.splitlines()
    summary = mixed_run.results["summary"]
    assert (f"all: passed {summary['passed']}, failed {summary['failed']}, errors {summary['errors']}, "
            f"xfail {summary['xfailed']}, xpass {summary['xpassed']}, skipped {summary['skipped']}, "
            f"not for this dialect {summary['other_dialect']}, not selected {summary['disabled']}, "
            f"total {summary['total']}") in lines
    assert "│" not in mixed_run.output and "…" not in lines[2]
    narrow_table = terminal.render_summary(mixed_run.results, width=60)
    assert "│" in narrow_table  # a terminal still gets the table
    assert "│" not in terminal.render_summary(mixed_run.results, width=60, plain=True)


def test_maxfail_stops_after_the_first_failure_and_still_reports_and_cleans_up(tmp_path) -> None:
    run = inprocess.run_suite(inprocess.plugin(mutant="exec-working-dir-ignored"), tmp_path,
                              scenarios=TWO_FAILURES, maxfail=1)
    assert run.exit_code == 1
    outcomes = run.outcomes()
    failed = [i for i in TWO_FAILURES if outcomes[i] == "failed"]
    assert len(failed) == 1, {i: outcomes[i] for i in TWO_FAILURES}
    assert (tmp_path / "results.json").is_file() and (tmp_path / "junit.xml").is_file()
    assert run.results["sandboxes"]["leaked"] == []
    assert run.results["sandboxes"]["created"] == run.results["sandboxes"]["deleted"] > 0
    assert "stopped after 1 failed scenario(s)" in run.stderr


@pytest.mark.parametrize("argv, problem", [
    (["run", "--maxfail", "0"], "--maxfail: must be at least 1, not 0"),
    (["run", "--maxfail", "few"], "--maxfail: not a whole number: 'few'"),
    (["run", "-x", "--maxfail", "2"], "not allowed with argument -x/--exitfirst"),
    (["list", "--", "-q"], "arguments after -- go to pytest, which only `run` starts"),
])
def test_bad_stop_options_exit_2_with_one_line(argv, problem, capsys) -> None:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert problem in captured.err and len(captured.err.strip().splitlines()) == 1


def test_arguments_after_double_dash_reach_pytest_last() -> None:
    from conformance.config import RunConfig
    from conformance.runner import pytest_arguments

    own, passed_on = cli.split_pytest_arguments(["run", "-x", "--", "-p", "no:randomly", "--", "x"])
    assert own == ["run", "-x"] and passed_on == ["-p", "no:randomly", "--", "x"]
    argv = pytest_arguments(RunConfig(maxfail=1, pytest_args=tuple(passed_on)))
    assert "--maxfail=1" in argv and argv[-len(passed_on):] == passed_on


# -- while the run goes: the live line on a terminal, failure lines in a CI log ---------------------------

FAILING = {"id": "exec-working-dir", "outcome": "failed", "level": "must", "requirements": ["SDP1-S03"],
           "message": "expected stdout b'/work/wd\\n', got b'/work\\n'\nsecond line of the message"}
LIVE_FRAME = re.compile(r"\[\s*\d+/\d+\] \d+:\d\d:\d\d")  # how the live line begins: [done/total] elapsed


class _TerminalBuffer(io.StringIO):
    """What rich takes for a terminal, kept in memory."""

    def isatty(self) -> bool:
        return True


def _final_screen(raw: str) -> list[str]:
    """The lines a terminal shows after ``raw``: carriage return, newline, cursor up (CSI n A) and erase line
    (CSI 2K) are applied; other escape sequences (colours, cursor visibility) change no text."""
    lines, row, column = [[]], 0, 0
    for token in re.findall(r"\x1b\[[0-9;?]*[A-Za-z]|\r|\n|[^\x1b\r\n]", raw):
        if token == "\r":
            column = 0
        elif token == "\n":
            row += 1
            lines.extend([] for _ in range(row + 1 - len(lines)))
        elif token.startswith("\x1b["):
            if token.endswith("A"):
                row = max(0, row - int(token[2:-1] or 1))
            elif token == "\x1b[2K":
                lines[row] = []
        else:
            line = lines[row]
            line.extend(" " for _ in range(column + 1 - len(line)))
            line[column] = token
            column += 1
    return ["".join(line).rstrip() for line in lines]


def test_the_live_line_counts_done_of_total_and_names_the_running_scenarios() -> None:
    state = progress.ProgressState()
    state.expect(3)
    state.started("exec-env")
    state.started("fs-read")
    assert progress.render_progress(state, 120, 65) == "[0/3] 0:01:05 · running exec-env, fs-read"
    state.finished("exec-env", "failed")
    state.finished("fs-read", "passed")
    # between scenarios: the one that finished last
    assert progress.render_progress(state, 120, 3725) == "[2/3] 1:02:05 · 1 failed · finished fs-read"


def test_another_dialects_scenarios_leave_the_total_known_ahead_or_as_they_arrive() -> None:
    ahead = progress.ProgressState()
    ahead.expect(4, other_dialect={"v2-drain-kill-abandons"})
    ahead.finished("v2-drain-kill-abandons", "skipped", other_dialect=True)
    assert (ahead.total, ahead.done) == (3, 0)  # left out once, not twice
    arriving = progress.ProgressState()  # under xdist the controller knows only how many node ids
    arriving.expect(4)
    arriving.finished("v2-drain-kill-abandons", "skipped", other_dialect=True)
    arriving.finished("exec-env", "skipped")  # this provider's own skip is done, and counted
    assert (arriving.total, arriving.done) == (3, 1)


def test_the_live_line_is_cut_to_the_terminal_width() -> None:
    state = progress.ProgressState()
    state.expect(140)
    state.started("a-very-long-scenario-id[with an outline row]")
    whole = progress.render_progress(state, 200, 0)
    assert whole.endswith("[with an outline row]")  # control: a wide terminal shows all of it
    cut = progress.render_progress(state, 30, 0)
    assert len(cut) == 30 and cut.endswith("…") and whole.startswith(cut[:-1])


def test_a_failure_line_names_the_scenario_its_requirements_and_the_first_line_of_the_cause() -> None:
    line = progress.failure_line(FAILING)
    assert line == "FAILED exec-working-dir [SDP1-S03] expected stdout b'/work/wd\\n', got b'/work\\n'"
    cut = progress.failure_line(FAILING, width=40)
    assert len(cut) == 40 and cut.startswith("FAILED exec-working-dir [SDP1-S03] ") and cut.endswith("…")
    assert progress.failure_line({**FAILING, "outcome": "error"}).startswith("ERROR exec-working-dir ")
    assert progress.failure_line({**FAILING, "level": "gap"}).startswith("GAP FINDING exec-working-dir ")
    assert progress.failure_line(FAILING, expected=True).startswith("XFAIL exec-working-dir ")
    assert progress.failure_line({**FAILING, "message": None}) == "FAILED exec-working-dir [SDP1-S03] failed"


def test_only_a_cursor_moving_terminal_without_verbose_gets_the_live_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for forcing in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(forcing, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert terminal.wants_live_display(_TerminalBuffer())
    assert not terminal.wants_live_display(_TerminalBuffer(), verbose=True)  # -v prints a line per scenario
    assert not terminal.wants_live_display(io.StringIO())  # a CI log
    monkeypatch.setenv("TERM", "dumb")
    assert not terminal.wants_live_display(_TerminalBuffer())


@pytest.mark.parametrize("no_color", [False, True])
def test_the_live_line_is_erased_and_the_cursor_shown_when_the_run_is_interrupted(
        no_color: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    screen = _TerminalBuffer()
    console = Console(file=screen, force_terminal=True, width=60)
    state = progress.ProgressState()
    state.expect(2)
    state.started("exec-working-dir")
    with pytest.raises(KeyboardInterrupt), progress.LiveDisplay(console, state) as display:
        display.refresh()
        state.finished("exec-working-dir", "failed")
        display.failure(FAILING)
        raise KeyboardInterrupt
    raw = screen.getvalue()
    assert LIVE_FRAME.search(raw), "the live line was never drawn"
    assert raw.rfind("\x1b[?25h") > raw.rfind("\x1b[?25l"), "the cursor stays hidden"
    shown = [line for line in _final_screen(raw) if line]
    assert shown == [progress.failure_line(FAILING, width=60)]  # the failure stays; the live line is gone
    assert ("\x1b[1;31m" in raw) is not no_color  # NO_COLOR: the same display, without colour


def test_a_run_on_a_terminal_shows_each_failure_above_the_live_line_and_leaves_no_frame(tmp_path) -> None:
    """The CLI under a pseudo-terminal (a real process: what is tested is its stdout being a terminal)."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import subprocess
    import sys
    import termios
    import time

    from tests.helpers import mutant_command

    controller, child_end = pty.openpty()
    fcntl.ioctl(child_end, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 100, 0, 0))
    env = {key: value for key, value in os.environ.items()
           if key not in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    arguments = ["run", "--plugin", mutant_command("exec-working-dir-ignored"), "--report-dir", str(tmp_path)]
    for scenario in (*TWO_FAILURES, "delete-unknown"):
        arguments += ["--scenario", scenario]
    process = subprocess.Popen([sys.executable, "-m", "conformance.cli", *arguments], stdin=subprocess.DEVNULL,
                               stdout=child_end, stderr=subprocess.PIPE, env=env)
    os.close(child_end)
    chunks, deadline = [], time.monotonic() + 120
    while True:
        if not select.select([controller], [], [], max(0.0, deadline - time.monotonic()))[0]:
            process.kill()
            pytest.fail(f"the run wrote nothing for too long; so far: {b''.join(chunks)[-2000:]!r}")
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stderr.decode()
    raw = b"".join(chunks).decode("utf-8", "replace")
    assert LIVE_FRAME.search(raw), "no live line was drawn on a terminal"
    assert "[100%]" not in raw  # pytest's own progress is silenced
    screen = _final_screen(raw)
    summary_start = next(number for number, line in enumerate(screen) if "sandbox-conformance" in line and "─" in line)
    live_failures = [number for number, line in enumerate(screen) if re.match(r"FAILED \S+ \[SDP1-[^]]+\] ", line)]
    assert len(live_failures) == 2 and all(number < summary_start for number in live_failures), screen[:10]
    assert screen[live_failures[0]].startswith(("FAILED exec-working-dir [SDP1-S03] expected stdout",
                                                "FAILED exec-relative-working-dir [SDP1-081] expected stdout"))
    assert all(len(screen[number]) <= 100 for number in live_failures)  # cut to the terminal's width
    assert not any(LIVE_FRAME.search(line) for line in screen), "a live frame was left on the screen"
    assert raw.rfind("\x1b[?25h") > raw.rfind("\x1b[?25l"), "the cursor stays hidden"


def test_a_ci_log_gets_each_failure_as_one_plain_line_as_it_happens(tmp_path) -> None:
    run = inprocess.run_suite(inprocess.plugin(mutant="exec-working-dir-ignored"), tmp_path, scenarios=TWO_FAILURES)
    lines = run.output.splitlines()
    failure_lines = [line for line in lines if re.match(r"FAILED \S+ \[", line)]
    failed = {s["id"]: s for s in run.results["scenarios"] if s["outcome"] == "failed"}
    assert sorted(failure_lines) == sorted(progress.failure_line(s) for s in failed.values())
    summary_start = next(number for number, line in enumerate(lines) if line.startswith("─"))
    assert all(lines.index(line) < summary_start for line in failure_lines)  # printed before the run ended
    assert "\x1b" not in run.output  # no live line, no colour
    assert not any(re.fullmatch(r"[.FEs]+\s*(\[\s*\d+%\])?", line.strip()) for line in lines if line.strip())


def test_the_baseline_says_which_failures_it_expects(tmp_path) -> None:
    from conformance.reporting.baseline import Baseline

    listed = tmp_path / "known.yaml"
    listed.write_text("expected_failures:\n  - {id: exec-env, reason: r1}\n  - {id: SDP1-081, reason: r2}\n"
                      "  - {id: optional-operation, reason: r3}\n")
    baseline = Baseline.load(listed)
    assert baseline.expects("exec-env", ["SDP1-S02"])
    assert baseline.expects("exec-relative-working-dir", ["SDP1-081"])  # by a requirement it verifies
    assert baseline.expects("optional-operation[refresh-activity]", [])  # the bare id covers every row
    assert not baseline.expects("exec-working-dir", ["SDP1-S03"])  # control: listed by nothing


def test_ctrl_c_during_the_run_leaves_the_terminal_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin's run-loop wrapper on a real pseudo-terminal, interrupted as Ctrl-C interrupts pytest's loop."""
    import os
    import pty
    import select
    from types import SimpleNamespace

    from conformance.plugin.progress import RunProgress

    for forcing in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(forcing, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    controller, child_end = pty.openpty()
    terminal_file = os.fdopen(child_end, "w", encoding="utf-8")
    reporter = SimpleNamespace(_tw=SimpleNamespace(_file=terminal_file), write_line=print)
    config = SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda name: reporter))
    state = SimpleNamespace(config=SimpleNamespace(verbose=False), facts=SimpleNamespace(results={}), baseline=None)
    run_progress = RunProgress(state, config)
    run_progress.progress.expect(3)
    loop = run_progress.pytest_runtestloop(session=None)
    next(loop)  # the scenarios run now
    assert run_progress._shown
    run_progress.display.refresh()  # a frame drawn for certain, not only when rich's refresh thread wakes
    with pytest.raises(KeyboardInterrupt):
        loop.throw(KeyboardInterrupt)
    terminal_file.close()
    raw = b""
    while select.select([controller], [], [], 0.5)[0]:
        try:
            chunk = os.read(controller, 65536)
        except OSError:
            break
        if not chunk:
            break
        raw += chunk
    os.close(controller)
    text = raw.decode()
    assert LIVE_FRAME.search(text), "the live line was never drawn"
    assert text.rfind("\x1b[?25h") > text.rfind("\x1b[?25l"), "the cursor stays hidden"
    assert not [line for line in _final_screen(text) if line.strip()], "the live line was left on the screen"
    assert run_progress._own_stream is None  # its own descriptor of the terminal is closed
