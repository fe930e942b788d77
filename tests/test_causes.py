"""Failures grouped by cause (``conformance/reporting/causes.py``): the facts a failure records, the grouping key,
the basics-first order, the merges that recompute them, and one run against a plugin that answers only
``initialize``, ``sandbox/create``, ``exec/run`` and ``sandbox/delete`` (``tests/partial_plugin.py``, v1 and v2):
at most twelve causes cover every failure, and the terminal, summary.md, results.json and report.html (in Chromium)
show the same grouping, in the same order.
"""

from __future__ import annotations

import json
import re

import pytest

from conformance import schemas
from conformance.engine import redact_document
from conformance.errors import ApplicationErrorAnswer, CallTimeout, ProtocolErrorAnswer, WrongAnswer
from conformance.providers import ProviderConfig
from conformance.reporting import repeat, shards, writer
from conformance.reporting.causes import cause_key, group_causes, observed_cause, setup_message
from conformance.reporting.model import ScenarioResult
from conformance.transcript import REDACTOR
from tests import inprocess
from tests.test_report_html import browser, open_report  # noqa: F401 - the module's Chromium fixtures

PARTIAL = "tests.partial_plugin:serve"
MOST_CAUSES = 12


def _unknown(method: str) -> ProtocolErrorAnswer:
    return ProtocolErrorAnswer(method=method, code=-32601, message=f"method not found: {method}")


# -- the facts a failure records --------------------------------------------------------------------


def test_an_error_answer_escaping_a_given_step_is_a_setup_cause() -> None:
    cause = observed_cause(_unknown("fs/write"), "given", "Given a file 'a.txt' holding \"x\" (line 12)")
    assert cause == {"method": "fs/write", "answer": "-32601 method not found", "expected": None, "setup": True,
                     "step": "Given a file 'a.txt' holding \"x\""}
    assert setup_message(cause, "fs/write answered an error") == "needs fs/write, which failed: fs/write answered an error"
    assert setup_message({**cause, "setup": False}, "m") == "m", "only a Given step is the scenario's setup"
    assert setup_message({**cause, "method": None}, "m") == "m", "a Given behind no call names no call"


def test_a_checked_answer_keeps_its_call_and_what_the_rule_expected() -> None:
    refused = ApplicationErrorAnswer(method="sandbox/fork", code=-32000, message="no", kind="not_found")
    cause = observed_cause(WrongAnswer("must be unsupported", refused, "unsupported"), "then", "Then x (line 3)")
    assert (cause["method"], cause["answer"], cause["expected"], cause["setup"]) == \
        ("sandbox/fork", "kind not_found", "unsupported", False)


def test_the_call_behind_an_assertion_is_found_through_its_chain() -> None:
    try:
        try:
            raise _unknown("sandbox/list")
        except ProtocolErrorAnswer as error:
            raise AssertionError("the listing should succeed") from error
    except AssertionError as failure:
        cause = observed_cause(failure, "when", None)
    assert (cause["method"], cause["answer"]) == ("sandbox/list", "-32601 method not found")


def test_a_timeout_names_its_method_and_a_plain_assertion_names_none() -> None:
    timed_out = observed_cause(CallTimeout("exec/run got no answer", method="exec/run"), "when", None)
    assert (timed_out["method"], timed_out["answer"]) == ("exec/run", "no answer within the deadline")
    plain = observed_cause(AssertionError("exit code 1, expected 0"), "then", "Then the exit code is 0 (line 9)")
    assert (plain["method"], plain["answer"], plain["step"]) == (None, None, "Then the exit code is 0")


# -- the grouping key and the order ------------------------------------------------------------------


def _failed(sid: str, method: str | None, answer: str | None = "-32601 method not found", expected: str | None = None,
            setup: bool = False, feature: str = "fs.feature", requirements: tuple[str, ...] = ("SDP1-100",),
            step: str | None = "Then it holds") -> dict:
    return {"id": sid, "outcome": "failed", "feature": feature, "requirements": list(requirements), "step": step,
            "cause": {"method": method, "answer": answer if method else None, "expected": expected, "setup": setup,
                      "step": step}}


def test_the_key_of_each_kind_of_cause() -> None:
    assert cause_key(_failed("a", "fs/write"))[0] == cause_key(_failed("b", "fs/read"))[0], \
        "methods of one group the provider does not know are one missing part of the protocol"
    assert cause_key(_failed("a", "fs/write"))[0] != cause_key(_failed("b", "exec/stream"))[0]
    assert cause_key(_failed("a", "fs/write", "kind not_found"))[0] != cause_key(_failed("b", "fs/read", "kind not_found"))[0], \
        "another answer is a cause per method"
    undeclared = {cause_key(_failed(sid, method, expected="unsupported"))[0]
                  for sid, method in (("a", "sandbox/fork"), ("b", "volume/create"))}
    assert len(undeclared) == 1, "every undeclared operation refused otherwise than unsupported: one cause"
    assert cause_key(_failed("a", None, requirements=("SDP1-001",)))[0] != \
        cause_key(_failed("b", None, requirements=("SDP1-002",)))[0], "behind no call: by requirement and step"


def test_every_failure_is_under_one_cause_and_the_basics_come_first() -> None:
    scenarios = [*(_failed(f"fs-{n}", "fs/write", setup=n < 3) for n in range(6)),
                 _failed("create-it", "sandbox/create", "kind invalid_spec", feature="lifecycle.feature"),
                 _failed("handshake-it", None, feature="handshake.feature", requirements=("SDP1-001",)),
                 {"id": "ok", "outcome": "passed", "feature": "fs.feature", "requirements": []}]
    causes = group_causes(scenarios)
    assert [c["scenarios"] for c in causes] == [["handshake-it"], ["create-it"], [f"fs-{n}" for n in range(6)]]
    assert [c["rank"] for c in causes] == [1, 2, 3]
    fs = causes[2]
    assert (fs["count"], fs["setup"], fs["method"], fs["title"]) == (6, 3, "fs/write", "fs/write → -32601 method not found")
    assert writer.failures_in_order(scenarios, causes)[:2] == ["handshake-it", "create-it"]


def _document(results: list[ScenarioResult], shard: tuple[int, int] | None = None) -> dict:
    return writer.build_document(results, provider={"kind": "k", "version": "1", "dialect": "sandbox-driver-v1",
                                                    "transport": "stdio", "command": "c"},
                                 run_id="run-1", started_at=0.0, unattributed=[],
                                 sandboxes={"created": 0, "deleted": 0, "leaked": [], "swept": []}, seed=1, shard=shard)


def _result(sid: str, outcome: str, method: str | None = None, answer: str = "-32601 method not found") -> ScenarioResult:
    result = ScenarioResult(id=sid, name=sid, feature="fs.feature", nodeid=sid, level="must",
                            requirements=["SDP1-100"], capabilities=[], dialects=[], outcome=outcome)
    if outcome == "failed":
        result.message = "failed"
        result.cause = {"method": method, "answer": answer, "expected": None, "setup": False,
                        "step": "Then it holds"}
    return result


def test_merged_documents_recompute_their_causes() -> None:
    first = _document([_result("a", "failed", "fs/write"), _result("b", "passed")])
    second = _document([_result("a", "passed"), _result("b", "failed", "exec/stream")])
    merged = repeat.merge([first, second])
    assert sorted(c["title"] for c in merged["causes"]) == ["exec/stream → -32601 method not found",
                                                            "fs/write → -32601 method not found"]
    left = _document([_result("a", "failed", "fs/write")], shard=(1, 2))
    right = _document([_result("b", "failed", "fs/read")], shard=(2, 2))
    union = shards.merge([("left", left), ("right", right)])
    assert [(c["count"], sorted(c["methods"])) for c in union["causes"]] == [(2, ["fs/read", "fs/write"])]
    assert not schemas.problems(writer.RESULTS_SCHEMA + "#/properties/causes", union["causes"])


def test_a_secret_in_a_cause_is_redacted_in_the_causes_too() -> None:
    secret = "cause-secret-4711"
    known = REDACTOR.known()
    REDACTOR.add(secret)
    try:
        document = redact_document(_document([_result("a", "failed", "fs/write", f"kind {secret}")]))
    finally:
        REDACTOR.keep_only(known)
    assert document["causes"] and secret not in json.dumps(document)


# -- a first plugin, every report ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def partial_run(tmp_path_factory) -> inprocess.InProcessRun:
    return inprocess.run_once(tmp_path_factory, "causes-partial-run",
                              lambda reports: inprocess.run_suite(ProviderConfig(in_process=(PARTIAL,)), reports))


def test_a_dozen_causes_cover_every_failure_of_a_four_method_plugin(partial_run) -> None:
    document = partial_run.results
    failing = partial_run.with_outcome("failed", "error")
    causes = document["causes"]
    assert partial_run.exit_code == 1 and len(failing) > 200
    assert len(causes) <= MOST_CAUSES, [c["title"] for c in causes]
    listed = [sid for cause in causes for sid in cause["scenarios"]]
    assert sorted(listed) == sorted(failing), "every failure under exactly one cause"
    assert [c["count"] for c in causes] == [len(c["scenarios"]) for c in causes]
    written = json.loads((partial_run.report_dir / "results.json").read_text())
    assert written["causes"] == causes and not schemas.problems(writer.RESULTS_SCHEMA, written)
    assert written["failures"] == [sid for c in causes for sid in c["scenarios"]], "failures in their causes' order"
    fs = next(c for c in causes if "fs/write" in c["methods"])
    setup = [s for s in document["scenarios"] if (s.get("cause") or {}).get("setup")]
    assert setup and fs["setup"] == sum(1 for s in setup if s["id"] in fs["scenarios"]) > 0
    needing = next(s for s in setup if s["id"] in fs["scenarios"] and s["cause"]["method"] == "fs/write")
    assert needing["message"].startswith("needs fs/write, which failed: "), needing["message"]


def test_a_dozen_causes_cover_every_failure_of_a_four_method_v2_plugin(tmp_path) -> None:
    run = inprocess.run_suite(ProviderConfig(in_process=(PARTIAL, "--dialect", "sandbox-driver-v2")), tmp_path)
    causes = run.results["causes"]
    assert run.results["provider"]["dialect"] == "sandbox-driver-v2" and run.exit_code == 1
    assert len(causes) <= MOST_CAUSES, [c["title"] for c in causes]
    assert sorted(sid for c in causes for sid in c["scenarios"]) == sorted(run.with_outcome("failed", "error"))
    assert any(c["setup"] for c in causes if "fs/write" in c["methods"])


def test_the_terminal_shows_the_causes_first_and_one_line_per_failure(partial_run) -> None:
    summary = partial_run.output[partial_run.output.index("failures by cause"):]
    causes = partial_run.results["causes"]
    head, _, detail = summary.partition("\n\n")
    lines = head.splitlines()[1:]
    assert len(lines) <= MOST_CAUSES + 1
    assert [line.split("  ", 2)[-1].split(" · ")[0] for line in lines[:len(causes)]] == \
        [c["title"] for c in causes[:MOST_CAUSES]], "the causes, in the document's order"
    failing = len(partial_run.with_outcome("failed", "error"))
    one_liners = [line for line in detail.splitlines() if re.match(r"(FAILED|ERROR|GAP FINDING) \S+ \[", line)]
    assert len(one_liners) == failing, "one line per failing scenario, the detail left to the reports"
    assert "\n  messages (" not in detail and "\n  reproduce: " not in detail


def test_summary_md_opens_with_the_causes(partial_run) -> None:
    text = (partial_run.report_dir / "summary.md").read_text()
    sections = re.findall(r"^### (.+)$", text, flags=re.MULTILINE)
    assert sections[0].startswith("Failures by cause"), sections
    table = text[text.index("### Failures by cause"):text.index("### Counts per level")]
    counts = [int(row.split("|")[2]) for row in table.splitlines() if re.match(r"\| \d+ \|", row)]
    assert counts == [c["count"] for c in partial_run.results["causes"]]


def test_report_html_groups_the_failures_under_their_causes(partial_run, open_report) -> None:  # noqa: F811
    causes = partial_run.results["causes"]
    report = open_report(partial_run.report_dir / "report.html")
    headings = report.page.eval_on_selector_all("#failures .cause h3", "els => els.map(e => e.innerText)")
    assert [h.split(" · ", 1)[1].split(" (")[0] for h in headings] == [c["title"].split(" (")[0] for c in causes]
    listed = report.page.eval_on_selector_all(
        "#failures .cause", "els => els.map(e => e.querySelectorAll('li').length)")
    assert listed == [c["count"] for c in causes]
    dangling = report.page.eval_on_selector_all(
        "#failures .cause li a", "els => els.filter(a => !document.getElementById(a.hash.slice(1))).length")
    assert dangling == 0, "every failure links to its card"
    assert not report.problems
