"""The command line: exit codes, one-line errors, selection, and diagnostics a provider author can use."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import SuiteRun, mutant_command, plugin_command, run_cli

ONE_LINE = "sandbox-conformance: error: "


def _assert_one_line_error(run, fragment: str) -> None:
    assert run.exit_code == 2, (run.exit_code, run.stdout[-500:], run.stderr[-500:])
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(ONE_LINE), lines[0]
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in run.stderr + run.stdout


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (["--plugin", "/nonexistent/plugin"], "not found: /nonexistent/plugin"),
        (["--plugin", "'unbalanced"], "--plugin is not a valid command line"),
        (["--plugin", "false"], "did not complete the handshake"),
        (["--plugin", "sleep 30", "--startup-timeout", "1"], "no answer within 1.0s"),
        (["--startup-timeout", "0"], "--startup-timeout must be a positive number of seconds"),
        (["--create-spec", "{not json"], "--create-spec is not valid JSON"),
        (["--create-spec", "@/nonexistent/spec.json"], "--create-spec file /nonexistent/spec.json cannot be read"),
        (["--create-spec", '{"source": 7}'], "at /source"),
        (["--create-spec", "[1]"], "must be a JSON object"),
        (["--env", "NOEQUALS"], "--env expects NAME=VALUE"),
        (["--dialect", "klingon"], "invalid choice: 'klingon'"),
        (["--tags", "must and ("], "--tags"),
        (["--scenario", "no-such-scenario"], "--scenario 'no-such-scenario' is not a scenario id"),
        (["--feature", "exec.featur"], "closest: exec.feature"),
        (["--report-dir", "/proc/forbidden"], "--report-dir /proc/forbidden is not writable"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["--call-timeout", "0"], "--call-timeout must be a positive number of seconds"),
        (["--call-timeout", "-1"], "--call-timeout must be a positive number of seconds"),
        (["--call-timeout", "nan"], "--call-timeout must be a positive number of seconds"),
        (["--repeat", "0"], "--repeat must be at least 1"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_bad_input_ends_with_exit_2_and_one_line(arguments, fragment, tmp_path) -> None:
    run = run_cli("run", *arguments, report_dir=None if "--report-dir" in arguments else tmp_path, timeout=60)
    _assert_one_line_error(run, fragment)


def test_scenario_selection_runs_only_what_was_asked(suite) -> None:
    run = suite("--scenario", "exec-env", "--scenario", "delete-unknown")
    assert run.exit_code == 0
    assert run.with_outcome("passed") == {"exec-env", "delete-unknown"}
    assert run.results["summary"]["disabled"] == run.results["summary"]["total"] - 2


def test_tag_expressions_select_by_requirement_and_level(suite) -> None:
    run = suite("--tags", "req:SDP1-059 and must")
    assert run.exit_code == 0
    # attach-deleted cites SDP1-S05 (a deleted id was issued; SDP1-059 is about deleting, SDP1-S17 never-issued ids)
    assert run.with_outcome("passed") == {"delete-unknown", "delete-twice", "delete-while-deleting",
                                             "events-repeated-delete"}


def test_an_outline_row_can_be_selected_by_its_stable_id(suite) -> None:
    run = suite("--scenario", "optional-operation[refresh-activity]")
    assert run.with_outcome("passed") == {"optional-operation[refresh-activity]"}


def test_list_names_every_scenario_with_its_tags() -> None:
    listing = subprocess.run([sys.executable, "-m", "conformance.cli", "list", "--json"],
                             capture_output=True, text=True, check=True)
    entries = json.loads(listing.stdout)
    ids = [entry["id"] for entry in entries]
    assert len(ids) == len(set(ids))
    assert {"handshake-identity", "exec-exit-code[42]", "optional-operation[pause]"} <= set(ids)
    assert all(entry["requirements"] and entry["level"] in ("must", "should", "may", "gap") for entry in entries)


def test_a_failure_carries_requirement_step_transcript_stderr_and_a_working_reproduction(suite, tmp_path) -> None:
    plugin = mutant_command("exec-env-ignored")
    run = suite("--plugin", plugin, "--feature", "exec.feature")
    assert run.exit_code == 1
    failure = next(s for s in run.results["scenarios"] if s["id"] == "exec-env")
    assert failure["outcome"] == "failed"
    assert failure["requirements"] == ["SDP1-S02"] and failure["level"] == "must"
    assert failure["step"].startswith("Then stdout is exactly that generated value")
    assert "expected stdout" in failure["message"]
    assert any('"method":"exec/run"' in line for line in failure["transcript"])
    assert "exec/run: ok" in failure["stderr"], "the provider's stderr tail belongs in the failure"
    assert "FAILED exec-env" in run.stdout and "reproduce: " in run.stdout

    # The command names the executable as it was invoked, keeps the seed, and pastes into a shell as is.
    reproduce = failure["reproduce"]
    assert reproduce.startswith(shlex.join([sys.executable, "-m", "conformance.cli"]) + " run ")
    assert f"--seed {run.results['run']['seed']}" in reproduce and reproduce.endswith("--scenario exec-env")
    pasted = subprocess.run(["bash", "-c", f"{reproduce} --report-dir {tmp_path / 'again'}"], check=False,
                            capture_output=True, text=True, timeout=120)
    again = SuiteRun(pasted.returncode, pasted.stdout, pasted.stderr, tmp_path / "again")
    assert again.exit_code == 1, again.stderr
    assert again.with_outcome("failed") == {"exec-env"}
    assert again.results["summary"]["selected"] == 1


def test_a_run_of_failures_only_reports_diagnostics_for_failures(suite) -> None:
    run = suite("--plugin", mutant_command("delete-unknown-errors"), "--feature", "delete.feature")
    scenarios = {s["id"]: s for s in run.results["scenarios"]}
    assert "transcript" in scenarios["delete-unknown"]
    assert "transcript" not in scenarios["delete-twice"]


def test_the_default_report_dir_is_reports_in_the_working_directory(tmp_path: Path) -> None:
    run = run_cli("run", "--scenario", "delete-unknown", cwd=tmp_path)
    assert run.exit_code == 0, run.stderr
    assert (tmp_path / "reports" / "results.json").is_file()
    assert (tmp_path / "reports" / "junit.xml").is_file()


@pytest.mark.parametrize(("plugin_arguments", "starts"), [
    pytest.param(("--dialect", "sandbox-driver-v2"), 1, id="v2: the handshake that checks the setup serves the run"),
    # Detection asks in v2 first; the v1 plugin refuses it and a fresh process is asked in v1.
    pytest.param((), 2, id="v1: plus the process that refused the v2 initialize"),
    pytest.param(("--dialect", "fabro-sketch"), 2, id="sketch: plus the throwaway one-or-many probe"),
])
def test_a_one_scenario_run_starts_the_plugin_once(tmp_path: Path, plugin_arguments: tuple[str, ...],
                                                   starts: int) -> None:
    counter = tmp_path / "starts"
    script = tmp_path / "counting-plugin.sh"
    script.write_text(f"#!/bin/sh\necho started >> {counter}\nexec {plugin_command()} \"$@\"\n")
    script.chmod(0o755)
    run = run_cli("run", "--plugin", shlex.join([str(script), *plugin_arguments]), "--scenario", "delete-unknown",
                  report_dir=tmp_path / "reports")
    assert run.exit_code == 0, run.stderr
    assert len(counter.read_text().splitlines()) == starts
    assert run.results["summary"]["passed"] == 1
    if "fabro-sketch" in plugin_arguments:  # the detected mode is reported, in results.json and in the run header
        assert run.results["provider"]["sandboxes_per_process"] == "one"
        assert "one sandbox per process" in run.stdout
    assert f"run {run.results['run']['id']}" in run.stdout
    assert f"protocol {run.results['provider']['negotiation']}" in run.stdout  # how the dialect was settled
