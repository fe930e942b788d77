"""What a run shows while and after it runs: skips grouped by reason, another dialect's scenarios counted
apart, plain count lines where stdout is no terminal (a CI log), and a run stopped by --maxfail/-x.

In-process (tests/inprocess.py), on small selections: the suite's own start-up is not what is tested."""

from __future__ import annotations

import io

import pytest

from conformance import cli
from conformance.reporting import markdown, terminal
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
    assert summary["skipped"] == sum(1 for i in MIXED if outcomes[i] == "skipped")  # still every skip (JUnit's)
    assert f"not for this dialect: {len(V2_ONLY)}" in mixed_run.output
    assert not any(i in line for line in mixed_run.output.splitlines() if line.startswith("skipped ")
                   for i in V2_ONLY)
    summary_md = markdown.render_markdown(mixed_run.results)
    assert f"Not for this dialect: {len(V2_ONLY)} " in summary_md
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
            f"skipped {summary['skipped']}, disabled {summary['disabled']}, xfail {summary['xfailed']}, "
            f"xpass {summary['xpassed']}, total {summary['total']}") in lines
    assert "│" not in mixed_run.output and "disab…" not in mixed_run.output
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
