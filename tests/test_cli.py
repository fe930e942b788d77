"""The command line: exit codes, one-line errors, selection, and diagnostics a provider author can use."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import SuiteRun, cli_main, mutant_command, one_usage_line, plugin_command, run_cli

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
        (["--repeat", "0"], "argument --repeat: must be from 1 to 1000, not 0"),
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

    # The command names the executable as it was invoked, keeps the seed, and pastes into a shell as is;
    # its reports go beside the run's, in repro/<id>/, never over them (issue 25: a pasted command replaced
    # the whole run's results.json, report.html and badge with one scenario's).
    reproduce = failure["reproduce"]
    assert reproduce.startswith(shlex.join([sys.executable, "-m", "conformance.cli"]) + " run ")
    assert f"--seed {run.results['run']['seed']}" in reproduce and reproduce.endswith("--scenario exec-env")
    assert f"--report-dir {run.report_dir / 'repro' / 'exec-env'} " in reproduce
    reports = {path.name: path.read_bytes() for path in run.report_dir.iterdir() if path.is_file()}
    pasted = subprocess.run(["bash", "-c", reproduce], check=False, capture_output=True, text=True, timeout=120)
    again = SuiteRun(pasted.returncode, pasted.stdout, pasted.stderr, run.report_dir / "repro" / "exec-env")
    assert again.exit_code == 1, again.stderr
    assert again.with_outcome("failed") == {"exec-env"}
    assert again.results["summary"]["selected"] == 1
    assert {path.name: path.read_bytes() for path in run.report_dir.iterdir() if path.is_file()} == reports
    assert {"results.json", "report.html", "badge.svg"} <= set(reports)
    # the reproduction's own command writes where it did: pasted again, it replaces only itself
    again_failure = next(s for s in again.results["scenarios"] if s["id"] == "exec-env")
    assert f"--report-dir {again.report_dir} " in again_failure["reproduce"]


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


# -- bad input, in process: each value a conversion deep inside Python would have raised on --------------

_DIGITS = "9" * 5000


def _bad_input_files(root: Path) -> None:
    (root / "deep.json").write_text("[" * 100_000)
    (root / "deep.yaml").write_text("[" * 100_000)
    (root / "latin1.toml").write_bytes("[providers.mine]\nplugin = \"caf\xe9\"\n".encode("latin-1"))
    (root / "huge-int.toml").write_text(f"[providers.mine]\nplugin = \"p\"\ncall-timeout = {_DIGITS}\n")
    (root / "deep.toml").write_text("x = " + "[" * 100_000)
    (root / "forever.toml").write_text("[providers.mine]\nplugin = \"p\"\ncall-timeout = 1e308\n")
    script = root / "no-interpreter"
    script.write_text("#!/nonexistent/python9\nprint('never')\n")
    script.chmod(0o755)
    (root / "a-directory").mkdir()


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (["run", "--call-timeout", "1e308"], "--call-timeout must be at most 604800 (a week) seconds, not 1e+308"),
        (["run", "--startup-timeout", "1e308"], "--startup-timeout must be at most 604800 (a week) seconds"),
        (["run", "--startup-timeout", "nan"], "--startup-timeout must be a positive number of seconds, not nan"),
        (["run", "--startup-timeout", "inf"], "--startup-timeout must be a positive number of seconds, not inf"),
        (["run", "--startup-timeout", "-2"], "--startup-timeout must be a positive number of seconds, not -2"),
        (["run", "--max-message-bytes", _DIGITS], "--max-message-bytes must be at most 4GiB"),
        (["run", "--create-spec", f'{{"x": {_DIGITS}}}'], "--create-spec holds a number of 5000 digits"),
        (["run", "--create-spec", "@{tmp}/deep.json"], "deep.json nests arrays or objects more than 100 levels"),
        (["run", "--create-spec", "@/dev/zero"], "--create-spec file /dev/zero is larger than 1048576 bytes"),
        (["report", "merge", "{tmp}/deep.json", "--out", "{tmp}/merged"], "nests arrays or objects more than 100"),
        (["sweep", "--from-results", "{tmp}/deep.json", "--rest", "http://127.0.0.1:9"], "more than 100 levels"),
        (["run", "--config", "{tmp}/latin1.toml"], "latin1.toml is not UTF-8 text (byte 30 is 0xe9)"),
        (["run", "--config", "{tmp}/huge-int.toml"], "huge-int.toml holds an integer too long to read"),
        (["run", "--config", "{tmp}/deep.toml"], "deep.toml nests tables or lists too deeply"),
        (["run", "--config", "{tmp}/forever.toml"], "key 'providers.mine.call-timeout' must be at most 604800"),
        (["run", "--config", "{tmp}/a-directory"], "--config {tmp}/a-directory is a directory"),
        (["run", "--config", "/dev/zero"], "--config /dev/zero is not a regular file"),
        (["run", "-n", "abc"], "argument -n: must be a whole number from 0 to 256, 'auto' or 'logical', not 'abc'"),
        (["run", "-n", "-3"], "argument -n: must be a whole number from 0 to 256, 'auto' or 'logical', not '-3'"),
        (["run", "-n", _DIGITS], "argument -n: must be a whole number from 0 to 256"),
        (["run", "--maxfail", _DIGITS], "argument --maxfail: a number of 5000 digits is out of range"),
        (["run", "--seed", _DIGITS], "argument --seed: a number of 5000 digits is out of range"),
        (["run", "--seed", "-1"], "argument --seed: must be at least 0, not -1"),
        (["run", "--repeat", _DIGITS], "argument --repeat: a number of 5000 digits is out of range"),
        (["run", "--shard", f"1/{_DIGITS}"], "--shard must be i/n (e.g. 2/3), not a number of 5000 digits"),
        (["run", "--tags", "(" * 100_000], "--tags nests parentheses too deeply"),
        (["run", "--expected-failures", "{tmp}/deep.yaml"], "deep.yaml nests lists or mappings too deeply"),
        (["run", "--expected-failures", "{tmp}/latin1.toml"], "latin1.toml is not UTF-8 text"),
        (["run", "--expected-failures", "/dev/zero"], "--expected-failures /dev/zero is larger than 16777216 bytes"),
        (["run", "--rest", "http://127.0.0.1:9", "--profile", "{tmp}/deep.yaml"], "deep.yaml nests lists or mappings"),
        (["run", "--pass-env", ""], "--pass-env '' is no variable name"),
        (["run", "--pass-env", "A B"], "--pass-env 'A B' is no variable name"),
        (["doctor", "--pass-env", "A=B"], "--pass-env 'A=B' is no variable name"),
        (["run", "--run-id", "a\nb"], "--run-id 'a\\nb' must be letters, digits, '.', '_' and '-'"),
        (["run", "--run-id", "a" * 100_000], "--run-id is 100000 characters long; a label value holds at most 63"),
        (["run", "--run-id", "a=b/../c"], "--run-id 'a=b/../c' must be letters, digits"),
        (["run", "--run-id", ""], "--run-id is empty"),
        (["run", "--run-id", "r" * 61, "--repeat", "2"], "with the '-r2' each repetition adds"),
        (["sweep", "--run-id=-rf"], "--run-id '-rf' must be letters, digits"),
        (["run", "--plugin", "{tmp}/no-interpreter"],
         "plugin {tmp}/no-interpreter names the interpreter /nonexistent/python9 in its #! line, which does not exist"),
        (["serve", "forkd", "--port", "99999"], "argument --port: must be from 0 to 65535, not 99999"),
    ],
    ids=lambda value: value[:40] if isinstance(value, str) else None,
)
def test_bad_values_end_with_exit_2_and_one_line_naming_them(arguments, fragment, tmp_path, capsys,
                                                             monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no configuration file found by walking up
    monkeypatch.delenv("FORKD_TOKEN", raising=False)  # a serve that got past its port check stops at once
    _bad_input_files(tmp_path)
    argv = [argument.replace("{tmp}", str(tmp_path)) for argument in arguments]
    if argv[0] == "run":  # should a check be missing, one scenario runs, not the suite
        argv += ["--scenario", "delete-unknown", "--report-dir", str(tmp_path / "reports")]
    line = one_usage_line(*cli_main(capsys, *argv)[::2])
    assert fragment.replace("{tmp}", str(tmp_path)) in line
    assert len(line) < 300, line  # a 100,000-character value is never echoed whole


def test_the_run_ids_the_suite_and_its_tests_make_are_accepted() -> None:
    from conformance import user_input

    for run_id in ("run-1a2b3c4d5e6f", "cleanup-0123456789ab", "docker-0123456789ab", "run-image-0123456789",
                   "mutant-upstream-delete-unknown-not-found-abcdef", "self-check", "run-x", "r", "v1.2_ci-7"):
        assert user_input.run_id(run_id, suffix="-r10") == run_id


@pytest.mark.parametrize(("workers", "passed"), [("auto", "auto"), ("logical", "logical"), ("0", "0"), ("2", "2")])
def test_n_hands_xdist_a_checked_worker_count(workers: str, passed: str, tmp_path: Path, monkeypatch) -> None:
    from conformance import cli
    from conformance.config import RunConfig
    from conformance.runner import pytest_arguments

    monkeypatch.chdir(tmp_path)
    args = cli.build_parser().parse_args(["run", "-n", workers, "--report-dir", str(tmp_path)])
    args.pytest_args = []
    argv = pytest_arguments(RunConfig.from_arguments(args))
    assert argv[argv.index("-n") + 1] == passed


def test_the_standalone_rest_server_names_a_port_out_of_range(capsys, monkeypatch) -> None:
    from conformance.reference import rest_server

    monkeypatch.setenv("SC_PORT_TOKEN", "t0k3n")  # with a token, the port is all that is wrong
    assert rest_server.main(["--port", "99999", "--token-env", "SC_PORT_TOKEN"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--port must be from 0 to 65535, not 99999" in lines[0], lines
