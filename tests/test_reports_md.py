"""The reports people read: ``summary.md`` (and its append to ``$GITHUB_STEP_SUMMARY``), the badges and
the JUnit file, all built from the results document of one small in-process run against a mutant that
fails one MUST scenario (``delete-unknown``), beside passes, a skip, dialect skips and a gap finding.
"""

from __future__ import annotations

import copy
import fcntl
import json
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import jsonschema
import pytest

from conformance import cli
from conformance.engine import Document
from conformance.reporting import badge, counts, html, markdown, terminal
from conformance.runner import RunOutcome
from tests import inprocess

FAILING = "delete-unknown"  # the mutant's one failure, a MUST
SKETCH_ONLY = ("sketch-exec-timeout", "sketch-foreign-id", "sketch-unsupported-sentence")  # skipped on v1
OWN_SKIP = "volume-lifecycle"  # the reference declares no volumes
SCENARIOS = (FAILING, "delete-twice", "snapshot-missing-refused", OWN_SKIP, *SKETCH_ONLY)

# shields.io's endpoint format (https://shields.io/badges/endpoint-badge): what badge.json must satisfy.
SHIELDS_ENDPOINT = {
    "type": "object",
    "required": ["schemaVersion", "label", "message", "color"],
    "properties": {"schemaVersion": {"const": 1}, "label": {"type": "string"},
                   "message": {"type": "string", "minLength": 1}, "color": {"type": "string", "minLength": 1}},
    "additionalProperties": False,
}
SVG = "{http://www.w3.org/2000/svg}"


@dataclass
class SavedRun:
    """The run as its reports show it: what it wrote, and the document read back from its results.json."""

    exit_code: int
    report_dir: Path

    @cached_property
    def results(self) -> dict:
        return json.loads((self.report_dir / "results.json").read_text(encoding="utf-8"))

    def outcomes(self) -> dict[str, str]:
        return {s["id"]: s["outcome"] for s in self.results["scenarios"]}

    @property
    def output(self) -> str:
        """What the run printed: the terminal summary and pytest's closing line."""
        return (self.report_dir.parent / "output").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> SavedRun:
    """One run for every xdist worker: the first to take the lock runs the suite, the others read its
    reports (the run is what costs; the tests only read). Under xdist the base temp's parent is this
    session's and shared by its workers; without xdist it is shared by sessions, so not used."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "reports-md-run"
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        exit_file = shared / "exit-code"
        if not exit_file.exists():
            done = inprocess.run_suite(inprocess.plugin(mutant="delete-unknown-errors"), shared / "reports",
                                       scenarios=SCENARIOS)
            (shared / "output").write_text(done.output, encoding="utf-8")
            exit_file.write_text(str(done.exit_code))
        return SavedRun(int(exit_file.read_text()), shared / "reports")


def _scenario(run: SavedRun, scenario_id: str) -> dict:
    return next(s for s in run.results["scenarios"] if s["id"] == scenario_id)


def test_the_run_has_what_the_reports_must_show(run) -> None:
    outcomes = run.outcomes()
    assert run.exit_code == 1 and outcomes[FAILING] == "failed"
    assert outcomes["delete-twice"] == "passed"
    assert any(o == "skipped" for i, o in outcomes.items() if i.startswith("sketch-"))
    assert run.results["summary"]["disabled"] > 100  # most of the suite was left out


def test_summary_md_shows_verdict_counts_failure_gaps_and_grouped_skips(run) -> None:
    summary = (run.report_dir / "summary.md").read_text(encoding="utf-8")
    document = run.results
    assert "FAIL" in summary.splitlines()[0]
    for reason in document["verdict"]["reasons"]:
        assert markdown.text(reason) in summary

    must = document["summary"]["levels"]["must"]
    row = next(line for line in summary.splitlines() if line.startswith("| MUST |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells == ["MUST", *(str(must.get(key, 0)) for key in ("passed", "failed", "error", "xfail", "xpass",
                                                                  "skipped", "other_dialect", "disabled")),
                     str(sum(must.values()))]

    failure = _scenario(run, FAILING)
    failures = summary.split("### Failures (1)")[1].split("###")[0]
    assert f"**FAILED** `{FAILING}` (MUST)" in failures
    for requirement, text in failure["requirement_texts"].items():
        assert f"requirement `{requirement}`: {markdown.text(text)}" in failures
    assert f"cause: {markdown.text(failure['message'].splitlines()[0])}" in failures
    assert len(failures.strip().splitlines()) == 2 + len(failure["requirements"])  # one line of cause, no more

    gaps = summary.split("### Gaps")[1].split("###")[0]
    for gap_id, gap in document["gaps"].items():
        assert f"| `{gap_id}` | {markdown.text(gap['title'])} | {markdown.text(gap['status'])} |" in gaps

    skipped = [s for s in document["scenarios"] if counts.category(s) == "skipped"]
    skips = summary.split(f"### Skipped ({len(skipped)}), by reason")[1]
    reasons = {s["message"] for s in skipped}
    reason_lines = [line for line in skips.splitlines() if line.startswith("- ")]
    assert len(reason_lines) == len(reasons)  # one line per reason, not per scenario
    assert not any(f"`{s['id']}`" in skips for s in document["scenarios"] if counts.category(s) == "other_dialect")
    for reason in reasons:
        ids = [s["id"] for s in skipped if s["message"] == reason]
        line = next(line for line in skips.splitlines() if line.startswith(f"- {markdown.text(reason)} ({len(ids)}):"))
        assert all(f"`{i}`" in line for i in ids[:markdown.MAX_SKIPPED_IDS_SHOWN])


def test_every_sink_counts_the_run_alike_in_the_same_words(run) -> None:
    """results.json, the terminal (table and plain lines), summary.md, report.html and the closing line that
    replaces pytest's: one count per category, named by its one word, adding up to the total."""
    summary = run.results["summary"]
    expected = {c.word: summary[c.summary_key] for c in counts.CATEGORIES}
    assert sum(expected.values()) == summary["total"] == len(run.results["scenarios"])
    assert expected["skipped"] and expected["not for this dialect"] and expected["not selected"], expected
    assert expected["not for this dialect"] == sum(1 for s in run.results["scenarios"]
                                                   if s["id"].split("[")[0] in SKETCH_ONLY)

    def table(lines: list[str], header_start: str, row_start: str, split) -> dict[str, int]:
        header = split(next(line for line in lines if line.startswith(header_start)))
        row = split(next(line for line in lines if line.startswith(row_start)))
        return {word: int(count) for word, count in zip(header, row, strict=True) if word in expected}

    def cells(line: str) -> list[str]:  # a Markdown row or one of rich's (header "┃", body "│")
        return [cell.strip() for cell in re.split(r"[│┃|]", line.strip())[1:-1]]

    md = (run.report_dir / "summary.md").read_text(encoding="utf-8").splitlines()
    assert table(md, "| level |", "| **all** |", cells) == expected
    rich = terminal.render_summary(run.results, width=250).splitlines()
    assert table(rich, "┃ level", "│ all", cells) == expected
    plain = next(line for line in run.output.splitlines() if line.startswith("all: "))
    assert plain == "all: " + ", ".join(f"{word} {n}" for word, n in expected.items()) + f", total {summary['total']}"
    page = (run.report_dir / html.REPORT_NAME).read_text(encoding="utf-8")
    counts_section = page.split('<section id="counts">')[1].split("</section>")[0]
    head, *rows = counts_section.split("<tr>")[1:]
    words = [cell.split(">", 1)[1] for cell in head.split("</th>")[1:-2]]
    numbers = [cell.rsplit(">", 1)[1] for cell in rows[-1].split("</td>")[:-2]]
    assert rows[-1].startswith("<th>all</th>") and dict(zip(words, map(int, numbers), strict=True)) == expected
    closing = run.output.rstrip().splitlines()[-1]
    assert ", ".join(f"{n} {word}" for word, n in expected.items() if n) + " in " in closing, closing
    assert "deselected" not in run.output and "disabled" not in run.output


def test_the_job_summary_is_appended_to_never_overwritten(run, tmp_path: Path, monkeypatch) -> None:
    """What the CLI does at the end of a run (``cli.report``), with ``$GITHUB_STEP_SUMMARY`` set."""
    job_summary = tmp_path / "step-summary.md"
    job_summary.write_text("## an earlier step's summary\n", encoding="utf-8")
    monkeypatch.setenv(markdown.STEP_SUMMARY_ENV, str(job_summary))
    outcome = RunOutcome(run.exit_code, Document(run.results))
    assert cli.report(outcome) == run.exit_code
    assert cli.report(outcome) == run.exit_code  # a second step (another provider) in the same job
    written = job_summary.read_text(encoding="utf-8")
    own = (run.report_dir / "summary.md").read_text(encoding="utf-8")
    assert written.startswith("## an earlier step's summary\n")
    assert written.count(own) == 2


def test_an_unwritable_job_summary_costs_one_line_not_the_run(run, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv(markdown.STEP_SUMMARY_ENV, str(tmp_path / "no-such-dir" / "summary.md"))
    assert cli.report(RunOutcome(run.exit_code, Document(run.results))) == run.exit_code
    problems = [line for line in capsys.readouterr().err.splitlines() if markdown.STEP_SUMMARY_ENV in line]
    assert len(problems) == 1 and "no-such-dir" in problems[0]


def test_markdown_and_html_in_a_message_stay_inert(run) -> None:
    document = copy.deepcopy(run.results)
    failure = next(s for s in document["scenarios"] if s["id"] == FAILING)
    failure["message"] = "got <script>alert(1)</script> | **bold** [link](http://x) `tick`\nsecond line"
    rendered = markdown.render_markdown(document)
    cause = next(line for line in rendered.splitlines() if line.startswith("  - cause:"))
    assert "<script>" not in cause and "**bold**" not in cause and "[link]" not in cause
    assert "second line" not in rendered  # a one-line cause
    assert cause.count("|") == cause.count("\\|")  # every bar escaped: no table cell can open


def test_badge_json_is_a_shields_endpoint_with_the_must_ratio(run) -> None:
    data = json.loads((run.report_dir / "badge.json").read_text(encoding="utf-8"))
    jsonschema.validate(data, SHIELDS_ENDPOINT)
    must = run.results["summary"]["levels"]["must"]
    checked = sum(n for category, n in must.items() if category not in ("disabled", "skipped", "other_dialect"))
    assert (data["label"], data["message"], data["color"]) == ("conformance", f"{must['passed']}/{checked} MUST", "red")
    assert must["passed"] < checked  # the failure counts against the ratio


def test_badge_svg_is_red_for_a_failing_verdict_and_green_for_a_passing_one(run) -> None:
    svg = ET.parse(run.report_dir / "badge.svg").getroot()
    assert svg.tag == f"{SVG}svg"
    message = json.loads((run.report_dir / "badge.json").read_text(encoding="utf-8"))["message"]
    assert svg.findtext(f"{SVG}title") == f"conformance: {message}"
    fills = {rect.get("fill") for rect in svg.iter(f"{SVG}rect")}
    assert badge.RED in fills and badge.GREEN not in fills

    passing = copy.deepcopy(run.results)
    passing["verdict"] = {"passed": True, "reasons": [], "warnings": []}
    assert badge.endpoint_json(passing)["color"] == "brightgreen"
    green = ET.fromstring(badge.render_svg(passing))
    assert badge.GREEN in {rect.get("fill") for rect in green.iter(f"{SVG}rect")}


def test_junit_names_the_requirement_and_leaves_out_unselected_scenarios(run) -> None:
    suite = ET.parse(run.report_dir / "junit.xml").getroot()
    summary = run.results["summary"]
    cases = suite.findall("testcase")
    selected = [s["id"] for s in run.results["scenarios"] if s["outcome"] != "disabled"]
    assert sorted(case.get("name") for case in cases) == sorted(selected)
    assert int(suite.get("tests")) == summary["selected"] == len(cases)
    assert int(suite.get("skipped")) == summary["skipped"] + summary["other_dialect"] == \
        len(suite.findall("testcase/skipped"))
    not_selected = next(p for p in suite.iter("property") if p.get("name") == "scenarios.not_selected")
    assert int(not_selected.get("value")) == summary["disabled"]

    failure_case = next(case for case in cases if case.get("name") == FAILING)
    failure = failure_case.find("failure")
    assert failure.get("type") == "failed MUST"
    texts = _scenario(run, FAILING)["requirement_texts"]
    assert texts and all(f"requirement {rid}: {text}" in failure.text for rid, text in texts.items())
