"""The bundled reference plugin passes everything it declares, and the reports say so."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

import pytest

from conformance import schemas
from conformance.reporting.catalogue import all_scenarios
from conformance.reporting.writer import RESULTS_SCHEMA


@pytest.mark.slow
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
    assert results["sandboxes"]["leaked"] == [] and results["sandboxes"]["died_holding"] == []
    assert results["sandboxes"]["created"] == results["sandboxes"]["deleted"] > 0
    # every close of the reference ended it cleanly: it answered shutdown and exited, leaving nothing behind
    assert results["wire_violations_outside_scenarios"] == []
    provider = results["provider"]
    assert (provider["kind"], provider["dialect"], provider["transport"]) == ("host", "sandbox-driver-v1", "stdio")
    # auto-detection asked in v2 first; the v1 reference refused it, naming both versions
    assert provider["negotiation"] == "v1 (negotiated: the plugin offers v1, not v2)", provider["negotiation"]
    assert provider["negotiation_detail"].startswith("its answer to the v2 initialize: "), provider
    assert provider["capabilities"]["isolation"] == "none"

    junit = ET.parse(run.report_dir / "junit.xml").getroot()
    assert int(junit.get("tests")) == results["summary"]["selected"]  # scenarios left out are no test cases
    assert int(junit.get("failures")) == 0 and int(junit.get("errors")) == 0


# What a v2 run may skip, and why (each says so truthfully): another dialect's scenarios, a rule v2 does
# not state, a v1 request v2 has no form of, the sketch's operation names, an undeclared capability, the
# fixed-stdin scenarios of a provider that streams stdin, and what needs a registry kept across processes.
V2_TRUTHFUL_SKIPS = ("capability ", "applies to dialect", "the sandbox-driver-v2 dialect states no rule",
                     "the sandbox-driver-v2 dialect cannot express", "on the sandbox-driver-v2 dialect, ",
                     "the provider streams a command's input",
                     "the provider declares exec.stdin and exec.stdin_stream",
                     # the reference's registry lives as long as its process, as upstream's host default does
                     "the provider keeps no sandbox across plugin processes")


@pytest.mark.slow
def test_the_v2_reference_passes_the_whole_suite_with_two_workers(suite) -> None:
    """The protocol-v2 reference, told apart by auto-detection (v2 is asked first), green on every scenario
    it is held to, through two xdist workers (the v1 reference runs with two in tests/test_wheel.py)."""
    run = suite("--plugin", f"{sys.executable} -m conformance.reference.host_plugin --dialect sandbox-driver-v2",
                "-n", "2")
    assert run.exit_code == 0, run.stdout[-3000:] + run.stderr[-2000:]
    results = run.results
    assert schemas.problems(RESULTS_SCHEMA, results) == []
    provider = results["provider"]
    assert (provider["dialect"], provider["protocol_version"], provider["negotiation"]) == \
        ("sandbox-driver-v2", 2, "v2 (asked v2)")
    for scenario in results["scenarios"]:
        if scenario["outcome"] == "skipped":
            assert scenario["message"].startswith(V2_TRUTHFUL_SKIPS), (scenario["id"], scenario["message"])
        else:
            assert scenario["outcome"] in ("passed", "disabled"), (scenario["id"], scenario["message"])
    v2_only = [s for s in results["scenarios"] if s["feature"].startswith("v2/")]
    assert v2_only and all(s["outcome"] in ("passed", "skipped") for s in v2_only)
    assert sum(s["outcome"] == "passed" for s in v2_only) > len(v2_only) // 2
    assert results["sandboxes"]["leaked"] == []
    assert results["sandboxes"]["created"] == results["sandboxes"]["deleted"] > 0