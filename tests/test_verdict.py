"""Verdicts people can trust: every outcome kind, MUST/SHOULD levels, expected-failure baselines (stale
entries included), the silent-green guard, seed replay, flake detection and the redaction canary.

Most tests run the suite in this process (``tests/inprocess.py``: the runner's ``run(config)`` against
the reference plugin or one of its mutants served on a thread) and read the exit code the CLI would
return, the ``FAIL:`` lines it would print and the results document. What only a real process shows —
the CLI's exit 2 and its one line, a plugin process that cannot be restarted, signals — runs the CLI
as a user would.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from conformance.reporting.catalogue import all_scenarios
from tests import inprocess
from tests.helpers import REPO, mutant_command, plugin_command, run_cli

SCENARIO_IDS_FILE = Path(__file__).resolve().parent / "data" / "scenario-ids.txt"


def _reasons(run) -> list[str]:
    return run.results["verdict"]["reasons"]


@pytest.fixture
def run_in_process(tmp_path: Path):
    """Run the suite in this process against ``provider`` (default: the reference plugin), reports in a
    private directory: ``run_in_process(provider, scenarios=..., features=..., strict=..., ...)``."""

    def run(provider=None, **options) -> inprocess.InProcessRun:
        return inprocess.run_suite(provider or inprocess.plugin(), tmp_path / "reports", **options)

    return run


# -- outcomes ------------------------------------------------------------------------------------


def test_passed_skipped_and_disabled_are_told_apart_and_a_skip_names_the_capability(run_in_process) -> None:
    run = run_in_process(scenarios=("volume-lifecycle", "delete-unknown"))
    assert run.exit_code == 0, run.stdout[-2000:]
    outcomes = run.outcomes()
    assert outcomes["delete-unknown"] == "passed"
    assert outcomes["volume-lifecycle"] == "skipped"
    skipped = next(s for s in run.results["scenarios"] if s["id"] == "volume-lifecycle")
    assert skipped["message"] == "capability volumes not declared"
    assert outcomes["exec-env"] == "disabled"  # not selected: neither passed nor skipped
    summary = run.results["summary"]
    assert summary["passed"] == 1 and summary["skipped"] == 1
    assert summary["disabled"] == summary["total"] - 2
    assert run.results["verdict"] == {"passed": True, "reasons": [], "warnings": []}


def test_a_declared_capability_that_does_not_work_fails_and_is_never_skipped(run_in_process) -> None:
    run = run_in_process(inprocess.plugin(mutant="stdin-dropped"), scenarios=("exec-stdin",))
    assert run.exit_code == 1, run.stdout[-2000:]
    assert run.outcomes()["exec-stdin"] == "failed"
    assert "exec.stdin" in run.results["provider"]["declared"]


def _refusing_restart_plugin(tmp_path: Path, execs_answered: int) -> str:
    """A plugin whose first start (the preflight handshake, which then serves the run) is the reference
    plugin, killed mid-run once it has answered ``execs_answered`` exec/run requests (its stderr log says
    so: an event, not a clock, so a loaded machine kills it at the same point); every later start fails at
    once."""
    counter = tmp_path / "starts"
    script = tmp_path / "plugin.py"
    script.write_text(textwrap.dedent(f"""\
        import subprocess, sys
        from pathlib import Path
        counter = Path({str(counter)!r})
        n = int(counter.read_text() or 0) + 1 if counter.exists() else 1
        counter.write_text(str(n))
        if n > 1:
            print(f"refusing to start (start number {{n}})", file=sys.stderr)
            sys.exit(3)
        plugin = subprocess.Popen({shlex.split(plugin_command())!r}, stderr=subprocess.PIPE)
        answered = 0
        for line in plugin.stderr:
            sys.stderr.buffer.write(line)
            sys.stderr.flush()
            answered += b" exec/run: ok" in line
            if answered >= {execs_answered}:
                plugin.kill()
                break
        sys.exit(plugin.wait())
        """))
    return shlex.join([sys.executable, str(script)])


def test_a_provider_that_cannot_be_restarted_is_an_error_not_a_failure(suite, tmp_path: Path) -> None:
    """Subprocess: a plugin process killed mid-run whose restarts a wrapping script refuses."""
    # The dialect is given: detection would spend the first start on the v2 initialize the plugin refuses.
    run = suite("--plugin", _refusing_restart_plugin(tmp_path, execs_answered=5), "--dialect", "sandbox-driver-v1",
                "--feature", "exec.feature", "--feature", "streaming.feature", timeout=600)
    assert run.exit_code == 1, run.stdout[-2000:]
    errors = [s for s in run.results["scenarios"] if s["outcome"] == "error"]
    assert errors, run.outcomes()
    for scenario in errors:
        assert "refusing to start" in (scenario["message"] + (scenario.get("stderr") or "")) or \
            "exited" in scenario["message"] or "start" in scenario["message"], scenario["message"]
    assert run.results["summary"]["errors"] == len(errors)
    assert any("could not be checked" in reason for reason in _reasons(run))
    # Only the scenario running when the plugin died may be blamed on the provider.
    assert len([s for s in run.results["scenarios"] if s["outcome"] == "failed"]) <= 1


# -- levels --------------------------------------------------------------------------------------


def test_a_should_failure_is_a_warning_unless_strict(run_in_process) -> None:
    broken = {"scenarios": ("wire-no-host-log", "delete-unknown")}
    lenient = run_in_process(inprocess.plugin(mutant="logs-through-host-log"), **broken)
    assert lenient.exit_code == 0, lenient.stdout[-2000:]
    assert lenient.outcomes()["wire-no-host-log"] == "failed"
    verdict = lenient.results["verdict"]
    assert verdict["passed"] and not verdict["reasons"]
    assert any("SHOULD" in warning and "wire-no-host-log" in warning for warning in verdict["warnings"])
    levels = lenient.results["summary"]["levels"]
    assert levels["should"]["failed"] == 1 and levels["must"]["passed"] == 1
    assert "warning: 1 SHOULD scenario(s) failed" in " ".join(lenient.stdout.split())

    strict = run_in_process(inprocess.plugin(mutant="logs-through-host-log"), **broken, strict=True)
    assert strict.exit_code == 1
    assert any("SHOULD" in reason and "--strict" in reason for reason in _reasons(strict))
    assert "FAIL: 1 SHOULD scenario(s) failed" in strict.stderr


def test_a_must_failure_fails_the_run_and_is_counted_under_its_level(run_in_process) -> None:
    run = run_in_process(_mutant(), features=("delete.feature",))
    assert run.exit_code == 1
    assert run.results["summary"]["levels"]["must"] == {"disabled": run.results["summary"]["levels"]["must"]["disabled"],
                                                         "failed": 1, "passed": 2}
    assert _reasons(run) == ["1 MUST scenario(s) failed: delete-unknown"]


# -- baselines -----------------------------------------------------------------------------------


def _baseline(tmp_path: Path, *entries: tuple[str, str]) -> str:
    path = tmp_path / "baseline.yaml"
    path.write_text(yaml.safe_dump({"expected_failures": [{"id": i, "reason": r} for i, r in entries]}))
    return str(path)


def _mutant():
    """The mutant whose delete of an unknown sandbox errors (one MUST failure in delete.feature)."""
    return inprocess.plugin(mutant="delete-unknown-errors")


DELETE = {"features": ("delete.feature",)}


@pytest.mark.parametrize("key", ["delete-unknown", "SDP1-059"], ids=["by-scenario-id", "by-requirement-id"])
def test_a_baselined_failure_is_xfail_and_the_run_passes(run_in_process, tmp_path: Path, key: str) -> None:
    run = run_in_process(_mutant(), **DELETE, expected_failures=_baseline(tmp_path, (key, "upstream issue 12")))
    assert run.exit_code == 0, run.stdout[-2000:] + run.stderr[-1000:]
    scenario = next(s for s in run.results["scenarios"] if s["id"] == "delete-unknown")
    assert scenario["outcome"] == "xfail"
    assert "upstream issue 12" in scenario["message"]
    assert scenario["transcript"], "an expected failure keeps its diagnostics"
    assert run.results["summary"]["xfailed"] == 1
    entry = run.results["baseline"]["entries"][0]
    assert entry["status"] == "holds" and "delete-unknown" in entry["scenarios"]
    junit = (run.report_dir / "junit.xml").read_text()
    assert 'message="xfail: ' in junit


def test_a_baselined_scenario_that_passes_is_xpass_and_fails_the_run(run_in_process, tmp_path: Path) -> None:
    run = run_in_process(**DELETE, expected_failures=_baseline(tmp_path, ("delete-unknown", "bug")))
    assert run.exit_code == 1
    assert run.outcomes()["delete-unknown"] == "xpass"
    assert run.results["summary"]["xpassed"] == 1
    assert run.results["baseline"]["entries"][0]["status"] == "stale"
    assert any("baseline is stale" in reason for reason in _reasons(run))
    assert "<failure" in (run.report_dir / "junit.xml").read_text()


def test_a_baseline_entry_that_names_nothing_fails_the_run(run_in_process, tmp_path: Path) -> None:
    run = run_in_process(**DELETE, expected_failures=_baseline(tmp_path, ("delete-unknwon", "typo")))
    assert run.exit_code == 1
    assert run.results["baseline"]["entries"][0]["status"] == "names nothing"
    assert "FAIL: the baseline entry delete-unknwon names no scenario or requirement" in run.stderr


def test_a_baseline_entry_for_a_scenario_not_run_is_neither_stale_nor_an_error(run_in_process, tmp_path: Path) -> None:
    run = run_in_process(**DELETE, expected_failures=_baseline(tmp_path, ("exec-env", "later")))
    assert run.exit_code == 0
    assert run.results["baseline"]["entries"][0]["status"] == "not checked in this run"


@pytest.mark.parametrize("content, fragment", [
    ("expected_failures: [{id: delete-unknown}]", "needs a reason"),
    ("expected_failures: [{reason: x}]", "needs an id"),
    ("failures: []", "a list under expected_failures"),
    ("expected_failures: [{id: a, reason: x}, {id: a, reason: y}]", "more than once"),
    ("expected_failures: [{id: a, reason: x, until: 2027}]", "unknown key(s) until"),
    ("expected_failures: [", "not valid YAML"),
])
def test_a_malformed_baseline_is_a_one_line_usage_error(tmp_path: Path, content: str, fragment: str) -> None:
    """Subprocess: the CLI's exit 2 and its one line."""
    path = tmp_path / "baseline.yaml"
    path.write_text(content)
    run = run_cli("run", "--expected-failures", str(path), report_dir=tmp_path / "reports")
    assert run.exit_code == 2
    assert run.stderr.count("\n") == 1 and fragment in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_update_baseline_writes_the_failures_and_a_rerun_with_it_passes(run_in_process, tmp_path: Path) -> None:
    path = tmp_path / "known.yaml"
    first = run_in_process(_mutant(), **DELETE, update_baseline=str(path))
    assert first.exit_code == 1  # writing a baseline does not change this run's verdict
    written = yaml.safe_load(path.read_text())["expected_failures"]
    assert [entry["id"] for entry in written] == ["delete-unknown"]
    assert written[0]["reason"].startswith("baselined ")
    again = run_in_process(_mutant(), **DELETE, expected_failures=str(path))
    assert again.exit_code == 0, again.stdout[-2000:]
    assert again.outcomes()["delete-unknown"] == "xfail"


# -- the silent-green guard ----------------------------------------------------------------------


def test_a_selection_that_matches_nothing_is_refused(suite) -> None:
    """Subprocess: the CLI's exit 2 and its one line. (A tag no scenario carries: an unknown --scenario id is
    refused earlier, naming the closest ids.)"""
    run = suite("--tags", "req:NO-SUCH-1")
    assert run.exit_code == 2
    assert "no scenario matched the selection" in run.stderr


def test_a_run_whose_every_scenario_is_skipped_fails(run_in_process) -> None:
    run = run_in_process(features=("sketch.feature",))  # the sketch's scenarios, against a v1 provider
    assert run.exit_code == 1, run.stdout[-2000:]
    summary = run.results["summary"]
    assert summary["skipped"] + summary["other_dialect"] == summary["selected"] > 0
    assert summary["other_dialect"] > 0  # the sketch's scenarios are not for a v1 provider's dialect
    assert _reasons(run) == ["every selected scenario was skipped or not for this dialect: nothing was verified"]
    assert "FAIL: every selected scenario was skipped" in run.stderr


def test_a_provider_that_cannot_be_started_is_refused_in_one_line(suite, tmp_path: Path) -> None:
    """Subprocess: a plugin command that is no process; the CLI's exit 2 and its one line."""
    run = suite("--plugin", str(tmp_path / "no-such-plugin"))
    assert run.exit_code == 2
    assert run.stderr.count("\n") == 1 and "no-such-plugin" in run.stderr, run.stderr


def test_a_provider_that_fails_the_handshake_is_refused_in_one_line(suite, tmp_path: Path) -> None:
    """Subprocess: a plugin script that is not a plugin; the CLI's exit 2 and its one line."""
    script = tmp_path / "mute.sh"
    script.write_text("#!/bin/sh\necho 'not json' \nexit 0\n")
    script.chmod(0o755)
    run = suite("--plugin", str(script), "--call-timeout", "5")
    assert run.exit_code == 2
    assert run.stderr.count("\n") == 1, run.stderr
    assert "Traceback" not in run.stderr


def test_an_interrupted_run_fails_and_says_so(tmp_path: Path) -> None:
    """Subprocess: SIGINT to a real CLI process."""
    reports = tmp_path / "reports"
    # -v: pytest's line per scenario says when scenarios are running (without it, a CI log gets failures only)
    process = subprocess.Popen([sys.executable, "-m", "conformance.cli", "run", "-v", "--report-dir", str(reports),
                                "--feature", "exec.feature", "--feature", "streaming.feature",
                                "--feature", "streaming-volume.feature", "--feature", "fs.feature"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    assert process.stdout is not None
    seen = b""
    # the first scenario's outcome word: it reported, and its teardown is running (as the first progress dot
    # told before the dots were silenced)
    while not re.search(rb"::test_\S* (PASSED|FAILED|SKIPPED|ERROR)", seen):
        byte = process.stdout.read(1)
        assert byte, process.stderr.read().decode() if process.stderr else ""
        seen += byte
    process.send_signal(signal.SIGINT)
    stdout, stderr = (stream.decode() for stream in process.communicate(timeout=120))
    assert process.returncode == 1, stdout[-2000:] + stderr[-2000:]
    assert "interrupted" in stderr
    results = json.loads((reports / "results.json").read_text())
    assert results["run"]["interrupted"] is True
    assert any("interrupted" in reason for reason in results["verdict"]["reasons"])
    assert results["sandboxes"]["leaked"] == []
    assert results["summary"]["disabled"] < results["summary"]["total"]
    cut_short = [s for s in results["scenarios"] if s["message"] == "the run was interrupted before this scenario finished"]
    assert cut_short and all("--scenario" in s["reproduce"] for s in cut_short), "a command re-runs what was cut short"
    assert "reproduce: None" not in stdout


# -- identity and reproducibility ----------------------------------------------------------------


def test_scenario_ids_never_disappear() -> None:
    """Baselines, filters and reports key on scenario ids, so an id, once published, stays. A new
    scenario's id is appended to tests/data/scenario-ids.txt; a rename of a title changes nothing."""
    lines = [line for line in SCENARIO_IDS_FILE.read_text().splitlines() if line and not line.startswith("#")]
    retired = {line.removeprefix("retired ") for line in lines if line.startswith("retired ")}
    published = {line for line in lines if not line.startswith("retired ")}
    current = {entry.id for entry in all_scenarios()}
    assert not current & retired, f"retired scenario ids reused: {sorted(current & retired)}"
    gone = sorted(published - current)
    assert not gone, f"published scenario ids that no longer exist (baselines naming them break): {gone}"
    new = sorted(current - published)
    assert not new, f"scenario ids not yet in {SCENARIO_IDS_FILE.name} (append them): {new}"


def _generated_env_values(run) -> list[str]:
    """The generated env values the exec-env scenario sent (the transcript of its failure)."""
    scenario = next(s for s in run.results["scenarios"] if s["id"] == "exec-env")
    values = []
    for line in scenario["transcript"]:
        values += re.findall(r'"env":\{[^}]*\}', line)
    return values


def test_the_seed_is_reported_and_replays_the_generated_data(run_in_process) -> None:
    def broken(seed):
        return run_in_process(inprocess.plugin(mutant="exec-env-ignored"), scenarios=("exec-env",), seed=seed)

    # Each run writes the same report directory: read what it wrote before the next one starts.
    first = broken(4242)
    assert first.results["run"]["seed"] == 4242
    assert "--seed 4242" in first.stdout
    assert first.outcomes()["exec-env"] == "failed", first.stdout[-2000:]
    values = _generated_env_values(first)
    assert values, "the failure's transcript shows the generated env"
    assert _generated_env_values(broken(4242)) == values
    assert _generated_env_values(broken(4243)) != values
    unseeded = broken(None)  # no --seed: the run draws one
    assert isinstance(unseeded.results["run"]["seed"], int)


def test_repeat_reports_a_scenario_whose_outcome_changes_as_flaky(run_in_process, tmp_path: Path) -> None:
    state = tmp_path / "flake-state"
    flaky = inprocess.plugin(mutant="flaky-delete-unknown", env={"SANDBOX_CONFORMANCE_FLAKE_STATE": str(state)})
    run = run_in_process(flaky, **DELETE, repeat=3, seed=11)
    assert run.exit_code == 1, run.stdout[-2000:]
    results = run.results
    assert results["run"]["repeat"] == 3 and results["run"]["seed"] == 11
    assert results["flaky"] == [{"id": "delete-unknown", "outcomes": ["failed", "passed", "failed"]}]
    assert any("changed outcome between repeats" in reason for reason in results["verdict"]["reasons"])
    steady = next(s for s in results["scenarios"] if s["id"] == "delete-twice")
    assert steady["outcomes"] == ["passed"] * 3
    for number in (1, 2, 3):
        assert (run.report_dir / f"repeat-{number}" / "results.json").exists()
    assert "flaky: delete-unknown (failed → passed → failed)" in run.stdout


def test_repeat_of_a_steady_provider_passes(run_in_process) -> None:
    run = run_in_process(**DELETE, repeat=2)
    assert run.exit_code == 0, run.stdout[-2000:]
    assert run.results["flaky"] == [] and run.results["run"]["repeat"] == 2
    assert run.results["sandboxes"]["created"] == run.results["sandboxes"]["deleted"] > 0


# -- diagnostics and redaction -------------------------------------------------------------------


def test_a_planted_token_never_appears_in_any_report(run_in_process) -> None:
    canary = f"canary-{secrets.token_hex(12)}"
    run = run_in_process(inprocess.plugin(mutant="secret-echoing", env={"CANARY_TOKEN": canary}), **DELETE)
    assert run.exit_code == 1
    failure = next(s for s in run.results["scenarios"] if s["id"] == "delete-unknown")
    # The leak happened and the diagnostics carry it — redacted.
    assert "credentials" in "\n".join(failure["transcript"])
    assert "authenticating with" in failure["stderr"]
    for where, text in (("results.json", (run.report_dir / "results.json").read_text()),
                        ("junit.xml", (run.report_dir / "junit.xml").read_text()),
                        ("summary.md", (run.report_dir / "summary.md").read_text()),
                        ("report.html", (run.report_dir / "report.html").read_text()),
                        ("stdout", run.stdout), ("stderr", run.stderr)):
        assert canary not in text, f"the canary token appears in {where}"
    assert '--env "CANARY_TOKEN=${CANARY_TOKEN:?export CANARY_TOKEN first}"' in failure["reproduce"]


def test_every_value_handed_to_the_plugin_is_redacted_whatever_its_name(tmp_path: Path) -> None:
    """A value given with --env under a name that does not look secret, and one forwarded with
    --pass-env, are secrets all the same: the plugin echoes both, no report or terminal line shows them,
    and the reproduce command refers to the --env value by its variable, never by its value.

    Subprocess: the CLI's own --env and --pass-env, and what a real CLI process writes on stdout and
    stderr."""
    plain, forwarded = f"plain-{secrets.token_hex(12)}", f"forwarded-{secrets.token_hex(12)}"
    run = run_cli("run", "--plugin", mutant_command("secret-echoing"), "--env", f"CANARY_PLAIN={plain}",
                  "--pass-env", "CANARY_FORWARDED", "--feature", "delete.feature",
                  report_dir=tmp_path / "reports", env={**os.environ, "CANARY_FORWARDED": forwarded})
    assert run.exit_code == 1, run.stderr
    failure = next(s for s in run.results["scenarios"] if s["id"] == "delete-unknown")
    assert "[REDACTED]" in failure["stderr"] and "[REDACTED]" in failure["message"], "the leak happened"
    for where, text in (("results.json", (run.report_dir / "results.json").read_text()),
                        ("junit.xml", (run.report_dir / "junit.xml").read_text()),
                        ("stdout", run.stdout), ("stderr", run.stderr)):
        for canary in (plain, forwarded):
            assert canary not in text, f"a value handed to the plugin appears in {where}"
    assert '--env "CANARY_PLAIN=${CANARY_PLAIN:?export CANARY_PLAIN first}"' in failure["reproduce"]
    assert "--pass-env CANARY_FORWARDED" in failure["reproduce"]


def test_a_signal_while_the_report_is_written_is_noted_not_raised() -> None:
    """The end-of-run sweep and report run shielded: Ctrl-C there must still leave a results.json that
    says the run was interrupted. Outside the shield, the first signal interrupts and the second (during
    cleanup) is ignored. Subprocess: signals to a real interpreter."""
    probe = textwrap.dedent("""\
        import os, signal
        from conformance import interrupts
        with interrupts.trapped():
            with interrupts.shielded():
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGTERM)
            assert interrupts.INTERRUPTED.is_set()
            try:
                os.kill(os.getpid(), signal.SIGINT)   # the third signal: not shielded, interrupts
            except KeyboardInterrupt:
                print("third interrupts")
        """)
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "third interrupts"
    assert completed.stderr.count("finishing the cleanup and the report first") == 2
