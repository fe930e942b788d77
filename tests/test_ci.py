"""The path into CI: the composite GitHub Action (action.yml), its run script (conformance.ci_action) and
the example GitHub and GitLab pipelines.

The YAML files are checked against the schemas GitHub and GitLab publish (vendored by check-jsonschema)
and against each other: every input the script reads is declared and handed over through the
environment, the examples use only declared inputs, and no `run:` script splices a value into its text.
The action's run step is then run as GitHub would run it (INPUT_* variables, GITHUB_OUTPUT,
GITHUB_STEP_SUMMARY) against the reference plugin and a mutant, and the examples' merge scripts join
the shards it wrote.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from conformance import ci_action
from tests.helpers import REPO, mutant_command, plugin_command

ACTION = REPO / "action.yml"
GITHUB_EXAMPLE = REPO / "examples" / "github" / "conformance-matrix.yml"
GITLAB_EXAMPLE = REPO / "examples" / "gitlab" / ".gitlab-ci.yml"
RUN_STEP_COMMAND = "python -m conformance.ci_action"
TWO_SCENARIOS = "--scenario delete-unknown --scenario delete-twice"
ACTION_TIMEOUT_S = 120


def _load(path: Path) -> dict[str, Any]:
    # PyYAML reads a bare `on:` key as the boolean True (YAML 1.1); GitHub reads it as "on".
    document = yaml.safe_load(path.read_text())
    if True in document:
        document["on"] = document.pop(True)
    return document


def _vendored_schema(name: str) -> dict[str, Any]:
    vendor = resources.files("check_jsonschema.builtin_schemas").joinpath("vendor")
    return json.loads(vendor.joinpath(f"{name}.json").read_text(encoding="utf-8"))


def schema_errors(document: dict[str, Any], schema_name: str) -> list[str]:
    schema = _vendored_schema(schema_name)
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in validator.iter_errors(document)]


def _steps(document: dict[str, Any]) -> list[dict[str, Any]]:
    if "runs" in document:
        return document["runs"]["steps"]
    return [step for job in document["jobs"].values() for step in job.get("steps", [])]


def spliced_run_scripts(document: dict[str, Any]) -> list[str]:
    """Every `run:` script with a `${{ ... }}` expression in its text (the value would become shell code)."""
    return [step["run"] for step in _steps(document) if "${{" in step.get("run", "")]


def undeclared_with_keys(workflow: dict[str, Any], action: dict[str, Any]) -> list[str]:
    """`with:` keys of the steps that use this repository's action which the action does not declare."""
    declared = set(action["inputs"])
    return [key for step in _steps(workflow) if step.get("uses") == "./" for key in step.get("with", {})
            if key not in declared]


def _run_step(action: dict[str, Any]) -> dict[str, Any]:
    (step,) = [step for step in action["runs"]["steps"] if step.get("id") == "run"]
    return step


def _gitlab_exports(document: dict[str, Any]) -> set[str]:
    script = "\n".join(document["conformance"]["script"])
    return set(re.findall(r"\b(INPUT_[A-Z_]+)=", script))


# --- the YAML files -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "schema_name"), [(ACTION, "github-actions"), (GITHUB_EXAMPLE, "github-workflows"),
                                                   (GITLAB_EXAMPLE, "gitlab-ci")], ids=lambda v: getattr(v, "name", v))
def test_each_file_is_valid_for_its_ci_system(path: Path, schema_name: str) -> None:
    assert schema_errors(_load(path), schema_name) == []


@pytest.mark.parametrize("schema_name", ["github-actions", "github-workflows", "gitlab-ci"])
def test_the_schemas_catch_a_broken_file(schema_name: str) -> None:
    broken = {"github-actions": {"name": "x", "description": "y", "runs": {"using": "composite", "steps": "no list"}},
              "github-workflows": {"on": "push", "jobs": {"one": {"steps": [{"run": "true"}]}}},  # no runs-on
              "gitlab-ci": {"job": {"script": "true", "parallel": {"matrix": "not a list"}}}}[schema_name]
    assert schema_errors(broken, schema_name)


def test_the_action_declares_every_input_the_run_script_reads_and_hands_each_over_by_environment() -> None:
    action = _load(ACTION)
    step = _run_step(action)
    assert step["run"].strip() == RUN_STEP_COMMAND
    assert set(ci_action.INPUTS) <= set(action["inputs"])
    for name in ci_action.INPUTS:
        assert step["env"][ci_action.env_name(name)] == f"${{{{ inputs.{name} }}}}", name
    assert set(action["outputs"]) == {"verdict", "exit-code", "report-dir"}
    assert all("steps.run.outputs." in output["value"] for output in action["outputs"].values())


def test_the_action_uploads_the_report_dir_even_after_a_failed_run() -> None:
    (upload,) = [s for s in _load(ACTION)["runs"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["if"] == "always()"
    assert upload["with"]["path"] == "${{ inputs.report-dir }}"


@pytest.mark.parametrize("path", [ACTION, GITHUB_EXAMPLE], ids=lambda p: p.name)
def test_no_run_script_splices_an_expression_into_its_text(path: Path) -> None:
    assert spliced_run_scripts(_load(path)) == []


def test_a_spliced_run_script_is_caught() -> None:
    workflow = {"jobs": {"one": {"steps": [{"run": "echo ${{ inputs.args }}"}, {"run": "echo $ARGS"}]}}}
    assert spliced_run_scripts(workflow) == ["echo ${{ inputs.args }}"]


def test_the_github_example_uses_only_declared_inputs() -> None:
    workflow = _load(GITHUB_EXAMPLE)
    assert any(step.get("uses") == "./" for step in _steps(workflow))
    assert undeclared_with_keys(workflow, _load(ACTION)) == []


def test_a_misspelled_input_in_a_workflow_is_caught() -> None:
    workflow = {"jobs": {"one": {"steps": [{"uses": "./", "with": {"plugin": "p", "reportdir": "r"}}]}}}
    assert undeclared_with_keys(workflow, _load(ACTION)) == ["reportdir"]


def test_the_gitlab_example_runs_the_same_script_with_inputs_it_reads() -> None:
    document = _load(GITLAB_EXAMPLE)
    assert RUN_STEP_COMMAND in document["conformance"]["script"]
    exported = _gitlab_exports(document)
    assert exported and exported <= {ci_action.env_name(name) for name in ci_action.INPUTS}
    assert document["conformance"]["artifacts"]["reports"]["junit"]


# --- the argument vector ------------------------------------------------------------------------------

def test_each_input_becomes_one_literal_argument() -> None:
    hostile = "x; rm -rf ~ $(touch pwned) `id`"
    argv = ci_action.run_arguments({"INPUT_PLUGIN": hostile, "INPUT_SHARD": "2/3", "INPUT_DIALECT": "-v",
                                    "INPUT_REPORT_DIR": "out", "INPUT_ARGS": '--scenario "a; b" $(c) --strict'})
    assert argv[0] == "run"
    assert f"--plugin={hostile}" in argv and "--shard=2/3" in argv and "--dialect=-v" in argv
    assert f"--report-dir={Path('out').resolve()}" in argv
    assert argv[-4:] == ["--scenario", "a; b", "$(c)", "--strict"]


def test_unset_and_empty_inputs_pass_no_option() -> None:
    argv = ci_action.run_arguments({"INPUT_CONFIG": "", "INPUT_PROVIDER": "  "})
    assert argv == ["run", f"--report-dir={Path(ci_action.DEFAULT_REPORT_DIR).resolve()}"]


def test_an_unbalanced_quote_in_args_is_named() -> None:
    with pytest.raises(ci_action.InputError, match="^args: "):
        ci_action.run_arguments({"INPUT_ARGS": '--scenario "exec-env'})


def test_a_report_dir_in_args_is_refused_for_the_input() -> None:
    with pytest.raises(ci_action.InputError, match="report-dir input"):
        ci_action.run_arguments({"INPUT_ARGS": "--strict --report-dir=elsewhere"})


@pytest.mark.parametrize("argv, says", [
    (["run", "--report-d", "elsewhere"], "unrecognized arguments: --report-d elsewhere"),
    (["run", "--stric"], "unrecognized arguments: --stric"),
    (["report", "merge", "results.json", "--ou", "elsewhere"], "required: --out"),
])
def test_the_cli_takes_no_abbreviated_option(tmp_path: Path, monkeypatch, capsys, argv: list[str], says: str) -> None:
    """An abbreviation would slip past the action's refusal of --report-dir in args (below), so none is taken."""
    from conformance import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
    assert not (tmp_path / "elsewhere").exists()


def test_an_abbreviated_report_dir_in_args_does_not_move_the_reports(tmp_path: Path, monkeypatch, capsys) -> None:
    """``--report-d`` in args would have been argparse's --report-dir: the reports elsewhere than the upload
    step looks, behind the refusal's back. It is an unknown option now: exit 2, nothing written."""
    monkeypatch.chdir(tmp_path)
    outputs_file = tmp_path / "github_output"
    code = ci_action.main({"INPUT_ARGS": "--scenario delete-unknown --report-d elsewhere",
                           "GITHUB_OUTPUT": str(outputs_file)})
    assert code == 2 and not (tmp_path / "elsewhere").exists()
    assert "unrecognized arguments: --report-d elsewhere" in capsys.readouterr().err
    assert _read_outputs(outputs_file)["verdict"] == "none"


# --- the run step, as GitHub runs it ------------------------------------------------------------------

def _run_action(tmp_path: Path, **inputs: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str], str]:
    """``python -m conformance.ci_action`` with the inputs as INPUT_* variables; (process, outputs, summary)."""
    outputs_file, summary_file = tmp_path / "github_output", tmp_path / "step_summary"
    summary_file.write_text("earlier steps' summary\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("INPUT_", "GITHUB_"))}
    env |= {ci_action.env_name(name): value for name, value in inputs.items()}
    env |= {"GITHUB_OUTPUT": str(outputs_file), "GITHUB_STEP_SUMMARY": str(summary_file),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))}
    process = subprocess.run([sys.executable, "-m", "conformance.ci_action"], check=False, cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=ACTION_TIMEOUT_S)
    return process, _read_outputs(outputs_file), summary_file.read_text()


def _read_outputs(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT's delimited form (``name<<DELIM`` … ``DELIM``), as the runner parses it."""
    outputs, lines = {}, path.read_text().splitlines() if path.exists() else []
    while lines:
        name, delimiter = lines.pop(0).split("<<", 1)
        end = lines.index(delimiter)
        outputs[name], lines = "\n".join(lines[:end]), lines[end + 1:]
    return outputs


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two shards of the reference plugin's run, written by the run step as the GitHub example names them."""
    work = tmp_path_factory.mktemp("action")
    for index in (1, 2):
        process, outputs, summary = _run_action(work, PLUGIN=plugin_command(), ARGS=TWO_SCENARIOS, SHARD=f"{index}/2",
                                                REPORT_DIR=f"reports/report-reference-v1-shard-{index}")
        (work / f"shard-{index}.json").write_text(json.dumps({"code": process.returncode, "stderr": process.stderr,
                                                              "outputs": outputs, "summary": summary}))
    # A second provider (the v2 reference, one shard), so the merge scripts' matrix branch runs too.
    process, _, _ = _run_action(work, PLUGIN=plugin_command("--dialect", "sandbox-driver-v2"), ARGS=TWO_SCENARIOS,
                                REPORT_DIR="reports/report-reference-v2-shard-1")
    assert process.returncode == 0, process.stderr
    return work


def test_the_run_step_runs_the_suite_writes_the_reports_outputs_and_job_summary(shards: Path) -> None:
    shard = json.loads((shards / "shard-1.json").read_text())
    assert shard["code"] == 0, shard["stderr"]
    reports = shards / "reports" / "report-reference-v1-shard-1"
    assert {"results.json", "junit.xml", "summary.md", "badge.svg"} <= {p.name for p in reports.iterdir()}
    assert shard["outputs"] == {"verdict": "pass", "exit-code": "0", "report-dir": str(reports)}
    assert shard["summary"].startswith("earlier steps' summary\n")
    assert (reports / "summary.md").read_text().strip() in shard["summary"]
    results = json.loads((reports / "results.json").read_text())
    assert results["run"]["shard"] == {"index": 1, "count": 2}
    assert [s["outcome"] for s in results["scenarios"] if s["outcome"] != "disabled"] == ["passed"]


def _run_merge_script(script: str, work: Path) -> subprocess.CompletedProcess[str]:
    """An example's merge script in ``work`` (which holds ``reports/``), with the CLI of this checkout."""
    bin_dir = work / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "sandbox-conformance"  # the console script, for this checkout
    launcher.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m conformance.cli \"$@\"\n")
    launcher.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    return subprocess.run(["bash", "-eo", "pipefail", "-c", script], check=False, cwd=work, env=env, capture_output=True,
                          text=True, timeout=ACTION_TIMEOUT_S)


@pytest.mark.parametrize("script_of", [
    lambda: _steps(_load(GITHUB_EXAMPLE))[-2]["run"],
    lambda: _load(GITLAB_EXAMPLE)["merge"]["script"][-1],
], ids=["github", "gitlab"])
def test_the_examples_merge_script_joins_each_providers_shards(shards: Path, tmp_path: Path, script_of) -> None:
    script = script_of()
    assert "report merge" in script
    shutil.copytree(shards / "reports", tmp_path / "reports")
    merged = _run_merge_script(script, tmp_path)
    assert merged.returncode == 0, merged.stderr
    for provider in ("reference-v1", "reference-v2"):
        results = json.loads((tmp_path / "merged" / provider / "results.json").read_text())
        assert {s["id"]: s["outcome"] for s in results["scenarios"] if s["outcome"] != "disabled"} == {
            "delete-unknown": "passed", "delete-twice": "passed"}, provider
    table = json.loads((tmp_path / "merged" / "matrix" / "matrix.json").read_text())
    assert [p["label"] for p in table["providers"]] == ["reference-v1", "reference-v2"]


@pytest.mark.parametrize("script_of", [
    lambda: _steps(_load(GITHUB_EXAMPLE))[-2]["run"],
    lambda: _load(GITLAB_EXAMPLE)["merge"]["script"][-1],
], ids=["github", "gitlab"])
def test_each_matrix_column_has_its_own_providers_label(shards: Path, tmp_path: Path, script_of) -> None:
    """Providers named ``ref`` and ``ref-a``: ``sort -u`` puts ``ref`` first, the glob of ``report-*/`` puts
    ``report-ref-a-shard-1`` first. Each column must still carry its own provider's label."""
    renamed = {"report-reference-v1-shard-1": "report-ref-shard-1", "report-reference-v1-shard-2": "report-ref-shard-2",
               "report-reference-v2-shard-1": "report-ref-a-shard-1"}
    for old, new in renamed.items():
        shutil.copytree(shards / "reports" / old, tmp_path / "reports" / new)
    merged = _run_merge_script(script_of(), tmp_path)
    assert merged.returncode == 0, merged.stderr
    table = json.loads((tmp_path / "merged" / "matrix" / "matrix.json").read_text())
    assert {p["label"]: p["dialect"] for p in table["providers"]} == {"ref": "sandbox-driver-v1",
                                                                       "ref-a": "sandbox-driver-v2"}


@pytest.mark.parametrize("hostile", [
    # args: split into literal words; the unknown scenario stops the run before any provider starts
    lambda canary: {"PLUGIN": plugin_command(), "ARGS": f'--scenario "nope; touch {canary}-semicolon" '
                                                        f'"$(touch {canary}-subst)" `touch {canary}-tick`'},
    # plugin: started without a shell, so `;`, `touch` and the path are arguments the plugin refuses
    lambda canary: {"PLUGIN": f"{plugin_command()} ; touch {canary}-plugin $(touch {canary}-plugin-subst)",
                    "ARGS": "--scenario delete-unknown"},
], ids=["args", "plugin"])
def test_hostile_inputs_stay_literal_arguments(tmp_path: Path, hostile) -> None:
    canary = tmp_path / "pwned"
    process, outputs, _ = _run_action(tmp_path, **hostile(canary))
    assert process.returncode == 2, process.stderr
    assert not list(tmp_path.glob("pwned*")), "an input ran as shell code"
    assert outputs == {"verdict": "none", "exit-code": "2", "report-dir": str(tmp_path / ci_action.DEFAULT_REPORT_DIR)}
    assert "Traceback" not in process.stderr


def _stale_results(report_dir: Path, passed: bool) -> None:
    """An earlier run's results.json left in the report directory (a self-hosted runner's workspace)."""
    report_dir.mkdir(parents=True)
    (report_dir / "results.json").write_text(json.dumps({"verdict": {"passed": passed}}))


def test_an_earlier_runs_results_json_never_answers_for_a_run_that_wrote_none(tmp_path: Path) -> None:
    _stale_results(tmp_path / ci_action.DEFAULT_REPORT_DIR, passed=True)
    process, outputs, _ = _run_action(tmp_path, PLUGIN=plugin_command(), ARGS="--scenario no-such-scenario")
    assert process.returncode == 2, process.stderr
    assert outputs["verdict"] == "none" and outputs["exit-code"] == "2"


def test_a_run_over_an_earlier_results_json_reports_its_own_verdict(tmp_path: Path) -> None:
    """The control: this run's results.json replaces the earlier one, and its verdict is the one reported."""
    _stale_results(tmp_path / ci_action.DEFAULT_REPORT_DIR, passed=False)
    process, outputs, _ = _run_action(tmp_path, PLUGIN=plugin_command(), ARGS="--scenario delete-unknown")
    assert process.returncode == 0, process.stderr
    assert outputs["verdict"] == "pass" and outputs["exit-code"] == "0"


def test_a_bad_args_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    process, outputs, _ = _run_action(tmp_path, PLUGIN=plugin_command(), ARGS='--scenario "exec-env')
    assert process.returncode == 2
    assert process.stderr.strip().splitlines() == [
        "sandbox-conformance action: args: No closing quotation in the extra arguments"]
    assert outputs["verdict"] == "none" and outputs["exit-code"] == "2"


def test_the_config_and_provider_inputs_pick_a_provider_and_a_failing_one_fails_the_step(tmp_path: Path) -> None:
    config = tmp_path / "ci.toml"
    config.write_text(f'[providers.reference]\nplugin = {json.dumps(plugin_command())}\n'
                      f'[providers.broken]\nplugin = {json.dumps(mutant_command("delete-unknown-errors"))}\n')
    runs = {}
    for provider in ("reference", "broken"):
        (tmp_path / provider).mkdir()
        runs[provider] = _run_action(tmp_path / provider, CONFIG=str(config), PROVIDER=provider,
                                     ARGS="--scenario delete-unknown")
    assert {name: (process.returncode, outputs["verdict"]) for name, (process, outputs, _) in runs.items()} == {
        "reference": (0, "pass"), "broken": (1, "fail")}, runs["broken"][0].stderr
    _, outputs, summary = runs["broken"]
    assert outputs["exit-code"] == "1" and "delete-unknown" in summary
    assert (tmp_path / "broken" / ci_action.DEFAULT_REPORT_DIR / "results.json").is_file()
