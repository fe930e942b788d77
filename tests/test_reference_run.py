"""The bundled reference plugin passes everything it declares, and the reports say so."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from conformance import schemas
from conformance.reporting.catalogue import all_scenarios
from conformance.reporting.writer import RESULTS_SCHEMA


def test_the_reference_plugin_passes_the_whole_suite(suite) -> None:
    run = suite()
    assert run.exit_code == 0, run.stdout[-3000:] + run.stderr[-2000:]
    results = run.results
    assert schemas.problems(RESULTS_SCHEMA, results) == []
    outcomes = run.outcomes()
    assert set(outcomes) == {entry.id for entry in all_scenarios()}
    not_passed = {sid: o for sid, o in outcomes.items() if o != "passed"}
    for sid, outcome in not_passed.items():
        scenario = next(s for s in results["scenarios"] if s["id"] == sid)
        assert outcome == "skipped", f"{sid} ended {outcome}: {scenario['message']}"
        assert scenario["message"].startswith(("capability ", "applies to dialect",
                                               "the sandbox-driver-v1 dialect cannot express",
                                               "on the sandbox-driver-v1 dialect, ",
                                               # the reference's registry lives as long as its process, as
                                               # upstream's host default does: truthful, and said so
                                               "the provider keeps no sandbox across plugin processes")), \
            scenario["message"]
    assert results["summary"]["failed"] == results["summary"]["errors"] == 0
    assert results["summary"]["passed"] >= len(outcomes) - len(not_passed)
    assert results["sandboxes"]["leaked"] == []
    assert results["sandboxes"]["created"] == results["sandboxes"]["deleted"] > 0
    provider = results["provider"]
    assert (provider["kind"], provider["dialect"], provider["transport"]) == ("host", "sandbox-driver-v1", "stdio")
    assert provider["capabilities"]["isolation"] == "none"

    junit = ET.parse(run.report_dir / "junit.xml").getroot()
    assert int(junit.get("tests")) == results["summary"]["total"]
    assert int(junit.get("failures")) == 0 and int(junit.get("errors")) == 0


def test_parallel_workers_give_the_same_outcomes(suite) -> None:
    run = suite("-n", "2")
    assert run.exit_code == 0, run.stdout[-3000:]
    assert set(run.outcomes().values()) <= {"passed", "skipped"}
    assert run.results["sandboxes"]["created"] == run.results["sandboxes"]["deleted"] > 0
