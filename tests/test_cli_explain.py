"""``explain``, ``list``'s filters, unknown selection ids and piped output: the CLI's read-only side.

In-process (``cli.main`` with captured output) except where a real pipe is the point. Expected values
come from the registries, the feature files and the mutant catalogue, never written out here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conformance import cli, explain
from conformance import requirements as registry
from conformance.reporting.catalogue import all_scenarios

ONE_LINE = "sandbox-conformance: error: "
FEATURES = Path(__file__).resolve().parent.parent / "features"
CATALOGUE = Path(__file__).resolve().parent / "mutants" / "catalogue"


def mutant_catalogue() -> list[dict]:
    """The catalogue's entries, read here on their own (importing tests.mutants would load every mutant)."""
    return [entry for path in sorted(CATALOGUE.glob("*.yaml"))
            for entry in yaml.load(path.read_text(), Loader=registry.SAFE_LOADER)["mutants"]]


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line_error(err: str, *fragments: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(ONE_LINE), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# -- explain -------------------------------------------------------------------------------------


def test_explaining_a_requirement_shows_its_text_scenarios_steps_and_mutants(capsys) -> None:
    rid = "SDP1-059"
    requirement = registry.load()[rid]
    covering = registry.coverage(registry.load(), all_scenarios())[rid]
    code, out, _ = _main(capsys, "explain", rid, "--mutants")
    assert code == 0
    flat = " ".join(out.split())  # the text is wrapped to the terminal
    assert " ".join(requirement.text.split()) in flat
    assert f"{requirement.level}" in out and requirement.section in out and requirement.testability in out
    assert f"conformance/requirements/{requirement.registry}.yaml" in out
    carrier = next(r.id for r in registry.load().values() if rid in r.carries)
    assert f"restated for protocol v2 by: {carrier}" in out
    for sid in covering:
        assert f"{sid}:" in out
    # the steps come from the feature file as written
    first = next(e for e in all_scenarios() if e.id == covering[0])
    below_title = (FEATURES / first.feature).read_text().splitlines()[first.line:]
    first_step = next(line.strip() for line in below_title if line.split()[:1] in (["Given"], ["When"]))
    assert first_step in out
    # each mutant the catalogue says fails a covering scenario is named
    failing = {m["name"] for m in mutant_catalogue() if set(m.get("fails", [])) & set(covering)}
    assert failing and all(f"{name} (" in out for name in failing)


def test_explaining_an_outline_row_fills_in_its_values_and_names_its_outline(capsys) -> None:
    row = next(e for e in all_scenarios() if e.base_id == "exec-exit-code" and e.id != e.base_id)
    value = row.id.split("[", 1)[1].rstrip("]")
    code, out, _ = _main(capsys, "explain", row.id)
    assert code == 0
    assert out.startswith(f"{row.id}: {row.name}")
    assert f"one row of the outline {row.base_id}" in out
    assert f"exit {value}" in out and "<code>" not in out
    for rid in row.tags.requirements:  # each requirement with its text
        text = registry.load()[rid].text
        assert " ".join(text.split())[:40] in " ".join(out.split())


def test_explaining_an_outline_lists_its_rows_and_the_mutants_of_each(capsys) -> None:
    code, out, _ = _main(capsys, "explain", "exec-exit-code", "--json", "--mutants")
    assert code == 0
    explained = json.loads(out)
    rows = [e.id for e in all_scenarios() if e.base_id == "exec-exit-code"]
    assert explained["kind"] == "scenario" and explained["rows"] == rows and explained["outline"] is None
    assert any("<code>" in step for step in explained["steps"])
    expected = {m["name"]: sorted(set(m["fails"]) & set(rows)) for m in mutant_catalogue()
                if set(m.get("fails", [])) & set(rows)}
    assert {m["name"]: sorted(m["fails"]) for m in explained["mutants"]} == expected
    cited = next(e for e in all_scenarios() if e.id == rows[0]).tags.requirements
    assert [r["id"] for r in explained["requirements"]] == list(cited)


def test_a_requirement_can_be_asked_for_in_lower_case_and_as_json(capsys) -> None:
    code, out, _ = _main(capsys, "explain", "sdp2-059", "--json")
    assert code == 0
    explained = json.loads(out)
    assert explained["id"] == "SDP2-059" and explained["carries"] == list(registry.load()["SDP2-059"].carries)
    covering = registry.coverage(registry.load(), all_scenarios())["SDP2-059"]
    assert {sid for s in explained["scenarios"] for sid in (s["rows"] or [s["id"]])} == set(covering)


def test_explain_names_no_mutant_unless_asked(capsys) -> None:
    """Mutant names mean nothing to a provider author: a plain `explain` shows none, text or JSON."""
    named = {m["name"] for m in mutant_catalogue() if "delete-unknown" in m.get("fails", [])}
    assert named, "the control: the catalogue names mutants failing delete-unknown"
    for extra in ((), ("--json",)):
        code, out, _ = _main(capsys, "explain", "delete-unknown", *extra)
        assert code == 0 and "mutant" not in out.lower() and not any(name in out for name in named), out
    code, out, _ = _main(capsys, "explain", "SDP1-059")
    assert code == 0 and "mutant" not in out.lower()
    code, out, _ = _main(capsys, "explain", "delete-unknown", "--mutants")
    assert code == 0 and all(f"{name} (" in out for name in named)


def test_without_the_mutant_catalogue_explain_never_mentions_it_unless_asked(capsys, monkeypatch, tmp_path) -> None:
    # an installed wheel carries no tests/ folder, so no catalogue
    monkeypatch.setattr(explain, "mutant_catalogue_dir", lambda: tmp_path / "absent")
    explain.mutant_catalogue.cache_clear()
    try:
        code, out, _ = _main(capsys, "explain", "delete-unknown")
        assert code == 0 and "mutant" not in out.lower() and "not installed" not in out
        code, _, err = _main(capsys, "explain", "delete-unknown", "--mutants")
    finally:
        explain.mutant_catalogue.cache_clear()
    assert code == 2
    _one_line_error(err, "--mutants needs the suite's source checkout")


def test_an_unknown_id_is_exit_2_with_the_closest_ids(capsys) -> None:
    code, _, err = _main(capsys, "explain", "delete-unknwn")
    assert code == 2
    _one_line_error(err, "'delete-unknwn' is neither a requirement nor a scenario id", "closest: delete-unknown")
    code, _, err = _main(capsys, "explain", "SDP1-59")
    assert code == 2
    _one_line_error(err, "SDP1-059")


# -- run: unknown selection ids ------------------------------------------------------------------


@pytest.mark.parametrize(("option", "typo", "closest"), [
    ("--scenario", "exec-envv", "exec-env"),
    ("--scenario", "exec-exit-code[99]", "exec-exit-code["),
    ("--feature", "v2/exec.featur", "v2/exec.feature"),
])
def test_an_unknown_scenario_or_feature_stops_run_before_any_provider_starts(capsys, tmp_path, option, typo,
                                                                               closest) -> None:
    # `false` would fail the handshake: the one-line error naming the typo shows nothing was started
    code, _, err = _main(capsys, "run", "--plugin", "false", option, typo, "--report-dir", str(tmp_path))
    assert code == 2
    line = _one_line_error(err, f"{option} {typo!r} is not a", "closest: ")
    assert closest in line.split("closest: ", 1)[1] and "handshake" not in line


def test_known_ids_pass_the_check_as_the_selection_matches_them(tmp_path) -> None:
    from conformance.config import Selection

    row = next(e for e in all_scenarios() if e.id != e.base_id)
    # a bare outline id, a row id, a feature by name (every file of that name) and by path all count
    Selection(scenarios=(row.base_id, row.id), features=("exec.feature", "features/v2/exec.feature")).check_known(
        all_scenarios())


# -- list ----------------------------------------------------------------------------------------


def _listed(capsys, *filters: str) -> list[dict]:
    code, out, err = _main(capsys, "list", "--json", *filters)
    assert code == 0, err
    return json.loads(out)


def test_list_filters_by_level_feature_tags_and_requirement(capsys) -> None:
    entries = all_scenarios()
    assert {e["id"] for e in _listed(capsys, "--level", "should")} == {e.id for e in entries if e.tags.level == "should"}
    assert {e["feature"] for e in _listed(capsys, "--feature", "exec.feature")} == {"exec.feature", "v2/exec.feature"}
    tagged = _listed(capsys, "--tags", "must and cap:exec.stdin")
    assert tagged and all(e["level"] == "must" and "exec.stdin" in e["capabilities"] for e in tagged)
    # a v2 rule lists the scenarios citing the v1 rule it carries, as `list --requirements` counts them
    covering = registry.coverage(registry.load(), entries)["SDP2-059"]
    assert [e["id"] for e in _listed(capsys, "--requirement", "SDP2-059")] == covering
    both = _listed(capsys, "--requirement", "SDP1-059", "--level", "should")
    assert all(e["level"] == "should" and "SDP1-059" in e["requirements"] for e in both)


def test_list_into_a_pipe_is_one_whole_line_per_scenario(capsys, monkeypatch) -> None:
    for forcing in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(forcing, raising=False)
    code, out, _ = _main(capsys, "list")  # capsys's stdout is no terminal, as a pipe or a file
    assert code == 0
    entries = all_scenarios()
    assert out.splitlines() == ["\t".join((e.id, e.tags.level or "", " ".join(e.tags.requirements), e.name))
                                for e in entries]  # no box, no title wrapped, nothing but the rows
    assert not any(mark in out for mark in "│┃━")


def test_list_on_a_terminal_is_a_table_with_titles_beside_ids(capsys, monkeypatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich then takes stdout for a terminal
    monkeypatch.setenv("COLUMNS", "250")
    code, out, _ = _main(capsys, "list", "--feature", "delete.feature")
    assert code == 0 and "│" in out
    for entry in (e for e in all_scenarios() if e.feature == "delete.feature"):
        row = next(line for line in out.splitlines() if f" {entry.id} " in line)
        assert entry.name.split()[0] in row


def test_list_by_dialect_shows_the_scenarios_a_provider_of_it_runs(capsys) -> None:
    listed = {dialect: {e["id"] for e in _listed(capsys, "--dialect", dialect)}
              for dialect in ("sandbox-driver-v1", "sandbox-driver-v2", "fabro-sketch", "rest")}
    everything = {e.id for e in all_scenarios()}
    for dialect, ids in listed.items():
        assert ids and ids < everything, dialect
        # a scenario written for other dialects only is never listed for this one
        assert not any(set(e.tags.dialects) - {dialect} == set(e.tags.dialects) != set()
                       for e in all_scenarios() if e.id in ids), dialect
    assert "exec-env" in listed["sandbox-driver-v1"] and "sketch-foreign-id" not in listed["sandbox-driver-v1"]
    assert "sketch-foreign-id" in listed["fabro-sketch"] and "exec-env" in listed["rest"]  # it cites REST-002
    assert any(i.startswith("invalid-params[") for i in listed["sandbox-driver-v1"])
    assert not any(i.startswith("invalid-params[") for i in listed["rest"] | listed["fabro-sketch"])  # v1 only
    # a row cites its own block's rules: the v1 lifecycle row has a v1 rule, so it is listed for v1
    assert "optional-operation[archive]" in listed["sandbox-driver-v1"]
    both = {e["id"] for e in _listed(capsys, "--dialect", "sandbox-driver-v1", "--dialect", "rest")}
    assert both == listed["sandbox-driver-v1"] | listed["rest"]


@pytest.mark.parametrize(("filters", "fragments"), [
    (("--requirement", "SDP1-59"), ("--requirement 'SDP1-59' is not a requirement id", "SDP1-059")),
    (("--feature", "deelte.feature"), ("--feature 'deelte.feature' is not a feature file", "delete.feature")),
    (("--tags", "must and ("), ("--tags",)),
    (("--requirements", "--level", "must"), ("list --requirements takes no scenario filter (--level)",)),
    (("--dialect", "v1"), ("--dialect", "invalid choice", "sandbox-driver-v1")),
])
def test_bad_list_filters_are_exit_2_in_one_line(capsys, filters, fragments) -> None:
    code, _, err = _main(capsys, "list", *filters)
    assert code == 2
    _one_line_error(err, *fragments)


def test_list_piped_into_head_exits_0_quietly() -> None:
    # a real pipe closed after one line: the listing is far longer than a pipe's buffer, so writing fails
    piped = subprocess.run(["bash", "-c", f"set -o pipefail; {sys.executable} -m conformance.cli list | head -1"], check=False,
                           capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == "" and len(piped.stdout.splitlines()) == 1


@pytest.mark.parametrize("command", [("list", "--requirements"), ("list", "--json"), ("explain", "SDP1-059")])
def test_every_reader_writing_into_a_closed_pipe_exits_0_quietly(command, monkeypatch, capsys) -> None:
    # in this process: stdout is a pipe whose reading end is already closed, so the first write fails
    reading, writing = os.pipe()
    os.close(reading)
    closed = os.fdopen(writing, "w")
    monkeypatch.setattr(sys, "stdout", closed)
    try:
        code = cli.main(list(command))
    finally:
        monkeypatch.undo()
        closed.close()  # what the handler left buffered now goes to /dev/null, the pipe's fd being replaced
    assert code == 0
    assert capsys.readouterr().err == ""
