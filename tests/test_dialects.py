"""One adapter, several dialects: detection, the sketch's one-sandbox-per-process mode, and the gap
section each dialect earns. Every provider here is served in this process (``tests/inprocess.py``): no
test in this file is about a real process."""

from __future__ import annotations

import pytest

from conformance.adapter import ExecRequest, SandboxRequest
from conformance.errors import ApplicationErrorAnswer
from conformance.providers import open_provider
from tests import inprocess


def _sketch(**fields):
    """The sketch reference plugin, served in this process."""
    return inprocess.plugin("--dialect", "fabro-sketch", **fields)


@pytest.mark.parametrize(("provider", "dialect"), [
    (inprocess.plugin(), "sandbox-driver-v1"),
    (_sketch(), "fabro-sketch"),
], ids=["sandbox-driver-v1", "fabro-sketch"])
def test_auto_detection_tells_the_dialects_apart(provider, dialect) -> None:
    adapter = open_provider(provider)
    try:
        assert adapter.dialect == dialect
        assert adapter.identity.dialect == dialect
        assert adapter.identity.kind == "host"
    finally:
        adapter.close()


@pytest.mark.parametrize(("provider", "expected"), [(_sketch(), "one"),
                                                   (inprocess.plugin(mutant="sketch-many-sandboxes"), "many")],
                         ids=["one", "many"])
def test_the_sketch_adapter_detects_how_many_sandboxes_a_process_owns(provider, expected) -> None:
    adapter = open_provider(provider)
    try:
        assert adapter.sandboxes_per_process == expected
        first, second = adapter.create(SandboxRequest()), adapter.create(SandboxRequest())
        assert first.id != second.id
        for sandbox in (first, second):
            outcome = adapter.exec(sandbox.id, ExecRequest(f"printf {sandbox.id}"))
            assert outcome.stdout == sandbox.id.encode(), outcome.describe()
            adapter.delete(sandbox.id)
    finally:
        adapter.close()


def test_a_configured_process_mode_is_used_as_given() -> None:
    """Told (wrongly) that the one-sandbox reference holds many, the adapter keeps one process, and the
    plugin refuses the second create: the configuration wins over detection."""
    adapter = open_provider(_sketch(sandboxes_per_process="many"))
    try:
        assert adapter.sandboxes_per_process == "many"
        first = adapter.create(SandboxRequest())
        with pytest.raises(ApplicationErrorAnswer, match="already owns a sandbox"):
            adapter.create(SandboxRequest())
        adapter.delete(first.id)
    finally:
        adapter.close()


def test_the_sketch_reference_passes_and_reports_its_gaps(tmp_path) -> None:
    run = inprocess.run_suite(_sketch(), tmp_path / "reports")
    assert run.exit_code == 0, run.stdout[-3000:]
    results = run.results
    assert results["provider"]["dialect"] == "fabro-sketch"
    assert results["summary"]["failed"] == results["summary"]["errors"] == 0
    assert results["summary"]["passed"] >= 40
    gaps = results["gaps"]
    assert gaps["GAP-2"]["status"] == "not expressible"
    statuses = {entry["id"]: entry["status"] for entry in gaps["GAP-1"]["scenarios"]}
    assert statuses["snapshot-filesystem"] == "not expressible"
    assert statuses["snapshot-missing-refused"] == "refused"
    assert gaps["GAP-3"]["status"] == "supported"
    skipped = [s for s in results["scenarios"] if s["outcome"] == "skipped"]
    assert all(s["message"].startswith(("capability ", "applies to dialect", "the fabro-sketch dialect cannot express"))
               for s in skipped), {s["id"]: s["message"] for s in skipped}


def test_the_v1_reference_reports_its_gaps(tmp_path) -> None:
    run = inprocess.run_suite(inprocess.plugin(), tmp_path / "reports",
                              features=("gaps/snapshots.feature", "gaps/resources.feature", "gaps/outcomes.feature"))
    assert run.exit_code == 0, run.stdout[-3000:]
    gaps = run.results["gaps"]
    assert gaps["GAP-1"]["status"] == "supported"
    assert gaps["GAP-2"]["status"] == "refused"
    assert gaps["GAP-3"]["status"] == "supported"


def test_a_silently_ignored_size_is_reported_as_a_violation(tmp_path) -> None:
    run = inprocess.run_suite(inprocess.plugin(mutant="resources-accepted-and-ignored"), tmp_path / "reports",
                              features=("gaps/resources.feature",))
    assert run.exit_code == 1
    gap = run.results["gaps"]["GAP-2"]
    assert gap["status"] == "violated"
    assert "silently ignored" in gap["scenarios"][0]["detail"]
