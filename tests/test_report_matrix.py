"""``report merge`` of several providers' runs: a providers × scenarios matrix (matrix.json against its
schema, matrix.md, matrix.html), each provider's shards merged into its whole run first.

The runs are the suite's own, in this process: the reference plugin (v1), a mutant of it that fails
``delete-twice`` and the reference in the fabro sketch dialect, over four scenarios chosen for their
cells: one the mutant fails, one all pass, one only v1 has (``@dialect:sandbox-driver-v1``), one citing
no rule of the sketch. The expected cells are computed here from each run's own document, with symbols
written out here, so a renderer that draws a wrong cell is caught (``test_a_renderer_mutant_is_caught``).
"""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conformance import cli, schemas
from conformance.errors import UsageError
from conformance.providers import ProviderConfig
from conformance.reporting import matrix, shards
from tests import inprocess

SELECTION = ("delete-unknown", "delete-twice", "error-retryable-by-kind", "application-error-report")
# What a cell must show, written out independently of the renderer's own table.
EXPECTED_SYMBOL = {"passed": "✅", "failed": "❌", "error": "💥", "skipped": "⏭️", "xfail": "🟡", "xpass": "❗"}
DASH = "—"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("matrix")
    reference, mutant = inprocess.plugin(), inprocess.plugin(mutant="delete-twice-errors")
    sketch = inprocess.plugin("--dialect", "fabro-sketch")
    made = {}
    for name, provider in (("reference", reference), ("mutant", mutant)):
        made[name] = inprocess.run_suite(provider, base / name, scenarios=SELECTION)
        for index in (1, 2):
            made[f"{name}-{index}"] = inprocess.run_suite(provider, base / f"{name}-{index}", scenarios=SELECTION,
                                                          shard=(index, 2))
    made["sketch"] = inprocess.run_suite(sketch, base / "sketch", scenarios=SELECTION)
    for index in (1, 2):  # shards of a run with another dialect's scenarios in it
        made[f"sketch-{index}"] = inprocess.run_suite(sketch, base / f"sketch-{index}", scenarios=SELECTION,
                                                      shard=(index, 2))
    return base, made


def results(run) -> str:
    return str(run.report_dir / "results.json")


def expected_symbol(scenario: dict) -> str:
    message = scenario.get("message") or ""
    if scenario["outcome"] == "disabled" or message.startswith("applies to dialect ") or "states no rule" in message:
        return DASH
    return EXPECTED_SYMBOL[scenario["outcome"]]


def expected_cells(run) -> dict[str, str]:
    return {scenario["id"]: expected_symbol(scenario) for scenario in run.results["scenarios"]}


def markdown_cells(text: str, labels: list[str]) -> dict[str, dict[str, str]]:
    """scenario id → column title → symbol, read back from matrix.md's scenario table."""
    lines = text.splitlines()
    header_at = next(i for i, line in enumerate(lines) if line.startswith("| scenario |"))
    header = [cell.strip().replace("\\#", "#") for cell in lines[header_at].strip("|").split("|")]
    assert header[3:] == labels
    cells = {}
    for line in lines[header_at + 2:]:
        if not line.startswith("|"):
            break
        row = [cell.strip() for cell in line.strip("|").split("|")]
        scenario_id = row[0].removeprefix("⚠️ ").strip("`")
        cells[scenario_id] = dict(zip(header[3:], row[3:], strict=True))
    return cells


class _MatrixTable(HTMLParser):
    """The matrix table of matrix.html: each row's scenario id, classes and cell classes."""

    def __init__(self):
        super().__init__()
        self.rows: list[dict] = []
        self._in_matrix = self._in_code = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "table":
            self._in_matrix = attributes.get("class") == "matrix"
        elif self._in_matrix and tag == "tr":
            self.rows.append({"class": attributes.get("class"), "id": "", "cells": []})
        elif self._in_matrix and tag == "code" and self.rows:
            self._in_code = True
        elif self._in_matrix and tag == "td" and "cell" in (attributes.get("class") or "").split():
            self.rows[-1]["cells"].append(attributes["class"].split()[1])

    def handle_endtag(self, tag):
        self._in_code = self._in_code and tag != "code"

    def handle_data(self, data):
        if self._in_code and not self.rows[-1]["id"]:
            self.rows[-1]["id"] = data


def html_rows(text: str) -> list[dict]:
    parser = _MatrixTable()
    parser.feed(text)
    return [row for row in parser.rows if row["id"]]


def check_matrix(out: Path, columns: list) -> dict:
    """What a correct matrix of ``columns`` (the unsharded runs, in column order) must satisfy; returns it."""
    document = json.loads((out / "matrix.json").read_text())
    assert schemas.problems(matrix.MATRIX_SCHEMA, document) == []
    labels = [provider["label"] for provider in document["providers"]]
    expected = [expected_cells(run) for run in columns]
    shown = markdown_cells((out / "matrix.md").read_text(), labels)
    ran_somewhere = {scenario_id for cells in expected for scenario_id, symbol in cells.items() if symbol != DASH}
    assert set(shown) == ran_somewhere
    for scenario_id, by_label in shown.items():
        assert [by_label[label] for label in labels] == [cells[scenario_id] for cells in expected], scenario_id
    statuses = {row["id"]: [row["cells"][p["slug"]]["status"] for p in document["providers"]]
                for row in document["scenarios"]}
    for row in html_rows((out / "matrix.html").read_text()):
        assert row["cells"] == [status.replace(" ", "-") for status in statuses[row["id"]]], row["id"]
    return document


def test_two_providers_merge_into_a_matrix_with_the_disagreement_first(runs, capsys):
    base, made = runs
    out = base / "two"
    code = cli.main(["report", "merge", results(made["reference"]), results(made["mutant"]), "--out", str(out)])
    assert code == 1  # the mutant's verdict fails
    document = check_matrix(out, [made["reference"], made["mutant"]])
    assert [row["id"] for row in document["scenarios"] if row["disagree"]] == ["delete-twice"]
    assert document["scenarios"][0]["id"] == "delete-twice" and document["disagreements"] == 1
    assert [p["verdict"]["passed"] for p in document["providers"]] == [True, False]
    assert document["providers"][1]["must"]["failed"] == 1
    html = (out / "matrix.html").read_text()
    assert html_rows(html)[0] == {"class": "disagree", "id": "delete-twice",
                                  "cells": ["passed", "failed"]}
    assert "⚠️ `delete-twice`" in (out / "matrix.md").read_text()
    for provider in document["providers"]:  # each provider's whole run, nothing lost
        kept = json.loads((out / provider["results"]).read_text())
        assert kept["provider"]["command"] == provider["command"]
    printed = capsys.readouterr().out
    assert "FAIL host 0.1.0 (sandbox-driver-v1) #2: MUST 2 passed, 1 failed" in printed and "matrix.html" in printed


def test_another_dialects_scenarios_show_as_a_dash_not_a_skip(runs):
    base, made = runs
    out = base / "dialects"
    code = cli.main(["report", "merge", results(made["reference"]), results(made["sketch"]),
                     "--label", "reference v1", "--label", "sketch", "--out", str(out)])
    assert code == 0
    document = check_matrix(out, [made["reference"], made["sketch"]])
    cells = {row["id"]: row["cells"]["sketch"] for row in document["scenarios"]}
    assert cells["error-retryable-by-kind"]["status"] == "not applicable"  # @dialect:sandbox-driver-v1
    assert cells["application-error-report"]["status"] == "not applicable"  # cites no sketch rule
    assert [p["slug"] for p in document["providers"]] == ["reference-v1", "sketch"]
    assert document["disagreements"] == 0
    assert (out / "sketch" / "results.json").exists()


def test_shards_of_two_providers_merge_into_the_matrix_of_the_unsharded_runs(runs):
    base, made = runs
    out = base / "sharded"
    shards = [results(made[name]) for name in ("mutant-2", "reference-1", "mutant-1", "reference-2")]
    assert cli.main(["report", "merge", *shards, "--out", str(out)]) == 1
    document = check_matrix(out, [made["mutant"], made["reference"]])  # columns in order of first appearance
    assert [p["shards"] for p in document["providers"]] == [2, 2]
    for provider, whole in zip(document["providers"], (made["mutant"], made["reference"]), strict=True):
        merged = json.loads((out / provider["results"]).read_text())
        assert {s["id"]: s["outcome"] for s in merged["scenarios"]} == whole.outcomes()


@pytest.mark.parametrize("mutant", ["wrong symbol", "skip instead of dash", "columns swapped"])
def test_a_renderer_mutant_is_caught(runs, monkeypatch, mutant):
    """The checks above read the rendered matrix back: a renderer that draws a wrong cell fails them."""
    base, made = runs
    if mutant == "wrong symbol":
        monkeypatch.setitem(matrix.SYMBOLS, "failed", "✅")
    elif mutant == "skip instead of dash":
        monkeypatch.setattr(matrix, "cell_status", lambda scenario: scenario["outcome"].replace("disabled", "not run"))
    else:
        real_build = matrix.build
        monkeypatch.setattr(matrix, "build", lambda runs, labels=None: _swap_cells(real_build(runs, labels)))
    out = base / f"mutant-{mutant.replace(' ', '-')}"
    cli.main(["report", "merge", results(made["reference"]), results(made["mutant"]), results(made["sketch"]),
              "--out", str(out)])
    with pytest.raises(AssertionError) as caught:
        check_matrix(out, [made["reference"], made["mutant"], made["sketch"]])
    assert any(scenario_id in str(caught.value).splitlines()[0] for scenario_id in SELECTION)  # a cell, named


def _swap_cells(document: dict) -> dict:
    first, second = (p["slug"] for p in document["providers"][:2])
    for row in document["scenarios"]:
        row["cells"][first], row["cells"][second] = row["cells"][second], row["cells"][first]
    return document


def test_the_matrix_schema_refuses_a_broken_matrix(runs):
    base, made = runs
    out = base / "schema"
    cli.main(["report", "merge", results(made["reference"]), results(made["sketch"]), "--out", str(out)])
    document = json.loads((out / "matrix.json").read_text())
    assert schemas.problems(matrix.MATRIX_SCHEMA, document) == []  # the control
    document["scenarios"][0]["cells"]["host-0-1-0-fabro-sketch"]["status"] = "skip"
    assert schemas.problems(matrix.MATRIX_SCHEMA, document)


def test_the_html_is_self_contained_and_escapes_what_the_documents_say(runs, tmp_path):
    _, made = runs
    hostile = json.loads(Path(results(made["mutant"])).read_text())
    failed = next(s for s in hostile["scenarios"] if s["outcome"] == "failed")
    failed["message"] = '<img src=x onerror="alert(1)"> & "quoted"'
    hostile["provider"]["command"] = "</code><script>alert(2)</script>"
    (tmp_path / "hostile.json").write_text(json.dumps(hostile))
    out = tmp_path / "out"
    cli.main(["report", "merge", results(made["reference"]), str(tmp_path / "hostile.json"), "--out", str(out)])
    page = (out / "matrix.html").read_text()
    assert "<img" not in page and "<script" not in page and "&lt;img src=x" in page
    for external in ("http://", "https://", "<link", "src=", "url("):
        assert external not in page.replace("&lt;img src=x", ""), external
    assert "position: sticky" in page


@pytest.mark.parametrize("case, arguments, says", [
    ("not a results.json", lambda made, tmp: [_write(tmp / "other.json", {"schema_version": 1})], "other.json is not a results.json"),
    ("a shard twice", lambda made, tmp: [results(made[n]) for n in ("reference-1", "reference-1", "reference-2",
                                                                     "mutant-1", "mutant-2")], "given twice"),
    ("a shard missing", lambda made, tmp: [results(made[n]) for n in ("reference-1", "mutant-1", "mutant-2")],
     r"host 0\.1\.0 \(sandbox-driver-v1\) \(.*reference-1/results\.json \.\.\.\): shard\(s\) 2/2 missing"),
    ("one provider's run twice", lambda made, tmp: [results(made[n]) for n in ("reference", "sketch", "reference")],
     "ran in both"),
    ("too few labels", lambda made, tmp: [results(made["reference"]), results(made["sketch"]), "--label", "only"],
     r"--label given 1 time\(s\) for 2 providers"),
    ("a label for one provider", lambda made, tmp: [results(made["reference-1"]), results(made["reference-2"]),
                                                    "--label", "x"], "--label names matrix columns"),
])
def test_bad_merges_exit_2_in_one_line(runs, tmp_path, capsys, case, arguments, says):
    _, made = runs
    out = tmp_path / "out"
    assert cli.main(["report", "merge", *arguments(made, tmp_path), "--out", str(out)]) == 2, case
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert re.search(says, err), err
    assert not (out / "matrix.json").exists()


def _write(path: Path, document: dict) -> str:
    path.write_text(json.dumps(document))
    return str(path)


def test_the_merged_folder_moves_as_a_whole(runs, tmp_path):
    """matrix.json points at each provider's merged run relative to itself: the folder moves as a whole."""
    _, made = runs
    out = tmp_path / "out"
    cli.main(["report", "merge", results(made["reference"]), results(made["sketch"]), "--out", str(out)])
    moved = shutil.move(str(out), str(tmp_path / "moved"))
    document = json.loads((Path(moved) / "matrix.json").read_text())
    assert all((Path(moved) / provider["results"]).is_file() for provider in document["providers"])


def test_the_must_skipped_count_leaves_out_the_cells_shown_as_a_dash(runs):
    """The sketch's skip of a v1-only MUST scenario is "—" in its column, so its MUST skipped count (matrix.json,
    matrix.md, matrix.html) is this provider's own skips only; the reference, with none, keeps 0."""
    base, made = runs
    out = base / "must-skipped"
    cli.main(["report", "merge", results(made["reference"]), results(made["sketch"]),
              "--label", "reference", "--label", "sketch", "--out", str(out)])
    document = json.loads((out / "matrix.json").read_text())
    sketch_scenarios = made["sketch"].results["scenarios"]
    dashes = [s["id"] for s in sketch_scenarios if (s["level"] or "must") == "must" and s["outcome"] == "skipped"
              and expected_symbol(s) == DASH]
    assert dashes, "the selection must hold a MUST scenario the sketch skips as another dialect's"
    own_skips = sum(1 for s in sketch_scenarios
                    if (s["level"] or "must") == "must" and expected_symbol(s) == EXPECTED_SYMBOL["skipped"])
    assert [p["must"]["skipped"] for p in document["providers"]] == [0, own_skips]
    row = next(line for line in (out / "matrix.md").read_text().splitlines() if line.startswith("| sketch |"))
    assert row.split(" | ")[5] == str(own_skips)


def test_a_providers_own_must_skip_is_still_counted(runs, tmp_path):
    """The control: a MUST scenario skipped for a capability the provider does not declare shows "⏭️" and counts."""
    _, made = runs
    skipping = json.loads(Path(results(made["reference"])).read_text())
    scenario = next(s for s in skipping["scenarios"] if s["outcome"] == "passed" and (s["level"] or "must") == "must")
    scenario.update(outcome="skipped", message="capability not declared: sandbox.delete")
    skipping["summary"]["levels"]["must"] = {"passed": 2, "skipped": 1}
    out = tmp_path / "out"
    cli.main(["report", "merge", _write(tmp_path / "skipping.json", skipping), results(made["sketch"]),
              "--label", "skipping", "--label", "sketch", "--out", str(out)])
    document = json.loads((out / "matrix.json").read_text())
    assert document["providers"][0]["must"]["skipped"] == 1


def test_merged_shards_count_another_dialects_scenarios_apart_as_the_whole_run_does(runs, tmp_path):
    _, made = runs
    assert made["sketch"].results["summary"]["other_dialect"] >= 1
    out = tmp_path / "sketch"
    cli.main(["report", "merge", results(made["sketch-1"]), results(made["sketch-2"]), "--out", str(out)])
    merged = json.loads((out / "results.json").read_text())
    assert merged["summary"] == made["sketch"].results["summary"]
    lines = (out / "summary.md").read_text().splitlines()
    header, all_row = (next(line for line in lines if line.startswith(start)) for start in ("| level |", "| **all** |"))
    counted = dict(zip(_table_cells(header), _table_cells(all_row), strict=True))
    assert counted["not for this dialect"] == str(merged["summary"]["other_dialect"])


def _table_cells(line: str) -> list[str]:
    """A Markdown table row's cells as GitHub splits them: at every "|" not escaped as "\\|"."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


@pytest.mark.parametrize("command", ["plain-plugin --flag", "sh -c 'a | b' || true"], ids=["control", "pipes"])
def test_a_pipe_in_the_provider_command_stays_inside_its_table_cell(runs, tmp_path, command):
    _, made = runs
    piped = json.loads(Path(results(made["mutant"])).read_text())
    piped["provider"]["command"] = command
    out = tmp_path / "out"
    cli.main(["report", "merge", results(made["reference"]), _write(tmp_path / "piped.json", piped),
              "--label", "reference", "--label", "piped", "--out", str(out)])
    lines = (out / "matrix.md").read_text().splitlines()
    header = _table_cells(lines[2])
    row = _table_cells(next(line for line in lines if line.startswith("| piped |")))
    assert len(row) == len(header) == 7
    assert row[6].replace("\\|", "|") == f"`{command}`"


def _image_shard(document: dict, image: str, port: int) -> dict:
    changed = json.loads(json.dumps(document))
    changed["provider"] |= {"image": image, "command": f"http://172.17.0.1:{port}"}
    return changed


def test_shards_of_an_image_run_merge_although_each_container_had_its_own_port(runs, tmp_path, monkeypatch):
    """A REST provider run from --image in two shard jobs: each job's container answered on another port, so
    the recorded commands differ; the image is the same, and so is the provider. The documents are real runs
    over the REST server with an image recorded (a Docker-free stand-in for ``--image``)."""
    token = "image-shard-token-3141"
    monkeypatch.setenv("FORKD_TOKEN", token)
    paths = []
    for index in (1, 2):
        with inprocess.rest_server(token, log=[]) as url:
            provider = ProviderConfig(rest_url=url, profile="forkd", image="registry.example/forkd:1")
            run = inprocess.run_suite(provider, tmp_path / f"shard-{index}", scenarios=SELECTION[:2], shard=(index, 2))
        assert run.results["provider"]["image"] == "registry.example/forkd:1"
        paths.append(results(run))
    commands = {json.loads(Path(path).read_text())["provider"]["command"] for path in paths}
    assert len(commands) == 2  # two ports
    assert cli.main(["report", "merge", *paths, "--out", str(tmp_path / "merged")]) == 0
    merged = json.loads((tmp_path / "merged" / "results.json").read_text())
    assert merged["run"]["shards"] == 2 and not (tmp_path / "merged" / "matrix.json").exists()
    assert {s["id"]: s["outcome"] for s in merged["scenarios"] if s["outcome"] != "disabled"} == {
        "delete-unknown": "passed", "delete-twice": "passed"}
    # Beside another provider, the image run's column names its image, not one shard's container URL.
    _, made = runs
    assert cli.main(["report", "merge", *paths, results(made["reference"]), "--out", str(tmp_path / "matrix")]) == 0
    table = json.loads((tmp_path / "matrix" / "matrix.json").read_text())
    described = sorted(provider["command"] for provider in table["providers"])
    assert described == sorted(["image registry.example/forkd:1",
                                made["reference"].results["provider"]["command"]]), described  # a command stays


def test_two_images_or_two_commands_are_still_two_providers(runs):
    """The controls: the image replaces the command in the identity only; another image is another provider,
    and so is another command where no image was recorded."""
    _, made = runs
    one, two = (made[f"reference-{index}"].results for index in (1, 2))
    same = [("1", _image_shard(one, "registry.example/forkd:1", 1)), ("2", _image_shard(two, "registry.example/forkd:1", 2))]
    assert len(shards.by_provider(same)) == 1
    images = [("1", _image_shard(one, "registry.example/forkd:1", 1)), ("2", _image_shard(two, "registry.example/forkd:2", 1))]
    assert len(shards.by_provider(images)) == 2
    with pytest.raises(UsageError, match="provider image: 'registry.example/forkd:2' vs 'registry.example/forkd:1'"):
        shards.merge(images)
    commands = [("1", one), ("2", {**two, "provider": {**two["provider"], "command": "other-plugin"}})]
    assert len(shards.by_provider(commands)) == 2
