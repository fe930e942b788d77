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


@pytest.mark.parametrize(("provider", "dialect", "negotiation"), [
    (inprocess.plugin(), "sandbox-driver-v1", "v1 (negotiated: the plugin offers v1, not v2)"),
    (inprocess.plugin("--dialect", "sandbox-driver-v2"), "sandbox-driver-v2", "v2 (asked v2)"),
    (_sketch(), "fabro-sketch", "fabro-sketch (detected from its answer to v2's initialize)"),
], ids=["sandbox-driver-v1", "sandbox-driver-v2", "fabro-sketch"])
def test_auto_detection_tells_the_dialects_apart(provider, dialect, negotiation) -> None:
    """The v2 initialize goes first: the v1 reference refuses it naming version 1 and is asked again, in
    v1, in a fresh process; the sketch ignores its params."""
    adapter = open_provider(provider)
    try:
        assert adapter.dialect == dialect
        assert adapter.identity.dialect == dialect
        assert adapter.identity.kind == "host"
        assert adapter.identity.negotiation.startswith(negotiation), adapter.identity.negotiation
    finally:
        adapter.close()


@pytest.mark.parametrize(("asked", "plugin_argv", "spoken"), [
    ("sandbox-driver-v1", ("--dialect", "sandbox-driver-v2"), "sandbox-driver-v2"),
    ("sandbox-driver-v2", (), "sandbox-driver-v1"),
], ids=["asked-v1-of-the-v2-reference", "asked-v2-of-the-v1-reference"])
def test_a_configured_version_the_plugin_refuses_naming_the_other_is_spoken_in_that(asked, plugin_argv, spoken) -> None:
    adapter = open_provider(inprocess.plugin(*plugin_argv, dialect=asked))
    try:
        assert adapter.dialect == spoken
        assert "negotiated: the plugin offers" in adapter.identity.negotiation
        assert adapter.identity.negotiation_detail.startswith("its answer to the ")
        sandbox = adapter.create(SandboxRequest())
        assert adapter.exec(sandbox.id, ExecRequest("printf ok")).stdout == b"ok"
        adapter.delete(sandbox.id)
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
    # it declares the network mode allow_all, and the sketch's create carries no network policy
    assert gaps["GAP-4"]["status"] == "declared but not expressible", gaps["GAP-4"]
    declared = [s for s in gaps["GAP-4"]["scenarios"] if s["status"] == "declared but not expressible"]
    assert declared and all("network modes allow_all" in s["detail"] for s in declared)
    skipped = [s for s in results["scenarios"] if s["outcome"] == "skipped"]
    assert all(s["message"].startswith(("capability ", "applies to dialect", "the fabro-sketch dialect cannot express",
                                        "the fabro-sketch dialect states no rule"))
               for s in skipped), {s["id"]: s["message"] for s in skipped}
    # Judged by the sketch's own rules: no sandbox-driver rule is cited, and a scenario backed by a v1 rule
    # and a gap proposal is, on the sketch, a gap scenario.
    ran = [s for s in results["scenarios"] if s["outcome"] in ("passed", "failed")]
    assert ran and all(r.startswith(("SKETCH-", "GAP-")) for s in ran for r in s["requirements"]), \
        {s["id"]: s["requirements"] for s in ran}
    by_id = {s["id"]: s for s in results["scenarios"]}
    assert by_id["timeout-is-not-an-exit-code"]["requirements"] == ["GAP-3"]
    assert by_id["timeout-is-not-an-exit-code"]["level"] == "gap"
    assert by_id["exec-env"]["requirements"] == ["SKETCH-005"] and by_id["exec-env"]["level"] == "must"
    assert by_id["sandbox-id-rules"]["message"].startswith("the fabro-sketch dialect states no rule")


def test_the_v1_reference_reports_its_gaps(tmp_path) -> None:
    run = inprocess.run_suite(inprocess.plugin(), tmp_path / "reports",
                              features=("gaps/snapshots.feature", "gaps/resources.feature", "gaps/outcomes.feature",
                                        "gaps/network.feature"))
    assert run.exit_code == 0, run.stdout[-3000:]
    gaps = run.results["gaps"]
    assert gaps["GAP-1"]["status"] == "supported"
    assert gaps["GAP-2"]["status"] == "refused"
    assert gaps["GAP-3"]["status"] == "supported"
    # the host provider offers no network policy: each is refused, and the policies' own scenarios are not declared
    assert gaps["GAP-4"]["status"] == "refused"
    assert {s["status"] for s in gaps["GAP-4"]["scenarios"]} == {"refused", "not declared"}


def test_a_silently_ignored_network_policy_is_reported_as_a_violation(tmp_path) -> None:
    """A blocked sandbox on the suite's own network is certain: a MUST failure (the run fails). What it sees
    of interfaces and routes is a gap finding of its own scenario, whose level is gap."""
    run = inprocess.run_suite(inprocess.plugin(mutant="network-block-accepted-and-ignored"), tmp_path / "reports",
                              scenarios=("network-block-not-host", "network-block"))
    assert run.exit_code == 1
    assert run.results["verdict"]["passed"] is False
    levels = {s["id"]: s["level"] for s in run.results["scenarios"] if s["outcome"] != "disabled"}
    assert levels == {"network-block-not-host": "must", "network-block": "gap"}
    gap = run.results["gaps"]["GAP-4"]
    assert gap["status"] == "violated"
    details = {entry["id"]: entry["detail"] for entry in gap["scenarios"]}
    assert all("silently ignored" in detail for detail in details.values()), details
    assert "a socket the suite listens on at 127.0.0.1 is among its sockets" in details["network-block-not-host"]


def test_a_silently_ignored_size_is_reported_as_a_violation(tmp_path) -> None:
    run = inprocess.run_suite(inprocess.plugin(mutant="resources-accepted-and-ignored"), tmp_path / "reports",
                              features=("gaps/resources.feature",))
    assert run.exit_code == 1
    gap = run.results["gaps"]["GAP-2"]
    assert gap["status"] == "violated"
    assert "silently ignored" in gap["scenarios"][0]["detail"]


def test_a_failed_gap_scenario_is_a_gap_finding_never_a_verdict_reason(tmp_path) -> None:
    """exec-deleted-sandbox-is-an-error is backed only by GAP-3 (a proposal, not a v1 rule): the
    mutant that runs commands in deleted sandboxes is reported in the gap section and as a warning,
    counted under `gap`, and the run still passes, even with --strict."""
    run = inprocess.run_suite(inprocess.plugin(mutant="deleted-sandbox-exit-127"), tmp_path,
                              scenarios=("exec-deleted-sandbox-is-an-error", "exec-nonzero-is-a-result"), strict=True)
    results = run.results
    assert run.with_outcome("failed") == {"exec-deleted-sandbox-is-an-error"}
    assert run.with_outcome("passed") == {"exec-nonzero-is-a-result"}
    assert run.exit_code == 0 and results["verdict"]["passed"], results["verdict"]
    assert any("GAP finding" in w and "exec-deleted-sandbox-is-an-error" in w for w in results["verdict"]["warnings"])
    # the other gap-only scenarios (GAP 4's network-block and network-update-block) were not selected
    assert {k: v for k, v in results["summary"]["levels"]["gap"].items() if k != "disabled"} == {"failed": 1}
    entry = next(s for s in results["gaps"]["GAP-3"]["scenarios"] if s["id"] == "exec-deleted-sandbox-is-an-error")
    assert entry["status"] == "violated" and entry["detail"].startswith("a deleted sandbox ran a command"), entry
    assert results["gaps"]["GAP-3"]["status"] == "violated"
    assert "GAP FINDING exec-deleted-sandbox-is-an-error" in run.output
    assert "GAP" in run.output.rsplit("GAP FINDING", 1)[1]  # the level row of the summary table (the last
    # GAP FINDING is the summary's; the first was printed as the scenario failed)


def test_skip_reasons_tell_the_truth(tmp_path) -> None:
    """"cannot express" only where the dialect has no such message; a method the dialect has but the
    provider declares false is "capability X not declared" (so is the sketch's exec.cancel flag, declared
    false, although the sketch has no exec/cancel); v1's exec/cancel runs against the v1 reference, which
    declares it; and an operation the sketch gates but v1 has as a core method says where v1 has it."""
    sketch = inprocess.run_suite(inprocess.plugin("--dialect", "fabro-sketch"), tmp_path / "sketch", scenarios=(
        "stream-output-before-response", "fs-write-replaces", "fs-create-dir", "stream-cancel",
        "optional-operation[cancel-a-command]", "optional-operation[stream-a-command-s-output]"))
    messages = {s["id"]: s["message"] for s in sketch.results["scenarios"] if s["outcome"] == "skipped"}
    assert messages == {
        "stream-output-before-response": "capability exec.streaming not declared",  # the sketch has exec/stream
        "fs-write-replaces": "capability fs.native not declared",  # ... and fs/writeFile
        "fs-create-dir": "the fabro-sketch dialect cannot express: create a directory",  # ... but no mkdir
        # no exec/cancel either, but the flag exists and is false: that is what the provider said
        "stream-cancel": "capability exec.cancel not declared",
        "optional-operation[cancel-a-command]": "capability exec.cancel not declared",
    }, messages
    assert sketch.with_outcome("passed") == {"optional-operation[stream-a-command-s-output]"}
    v1 = inprocess.run_suite(inprocess.plugin(), tmp_path / "v1", scenarios=(
        "optional-operation[cancel-a-command]", "optional-operation[read-a-file-natively]",
        "optional-operation[stream-a-command-s-output]", "optional-operation[grep-files]"))
    assert v1.with_outcome("passed") == {"optional-operation[cancel-a-command]"}, v1.outcomes()
    messages = {s["id"]: s["message"] for s in v1.results["scenarios"] if s["outcome"] == "skipped"}
    assert messages == {
        "optional-operation[read-a-file-natively]":
            "on the sandbox-driver-v1 dialect, read a file natively is no optional operation: fs/read is a core "
            "method, checked by the file scenarios",
        "optional-operation[stream-a-command-s-output]":
            "on the sandbox-driver-v1 dialect, stream a command's output is no optional operation: exec/stream "
            "is a core method, checked by the streaming scenarios",
        "optional-operation[grep-files]": "the sandbox-driver-v1 dialect cannot express: grep files",  # no search
    }, messages


def test_a_sketch_plugin_without_stop_passes_the_stop_row_and_skips_the_stop_cycle(tmp_path) -> None:
    """lifecycle.stop false (the forkd plugin's declaration) and sandbox/stop refused: the optional-operation
    row passes, and the stop cycles are gated off, not failed. v1 has stop as a core method: they run."""
    scenarios = ("optional-operation[stop-the-sandbox]", "stop-start-cycle", "stop-describes-stopped")
    run = inprocess.run_suite(inprocess.plugin(mutant="sketch-stop-not-offered"), tmp_path / "sketch",
                              scenarios=scenarios, strict=True)
    assert run.exit_code == 0, run.output[-3000:]
    assert run.with_outcome("passed") == {"optional-operation[stop-the-sandbox]"}
    skipped = {s["id"]: s["message"] for s in run.results["scenarios"] if s["outcome"] == "skipped"}
    assert skipped == {"stop-start-cycle": "capability lifecycle.stop not declared",
                       "stop-describes-stopped": "capability lifecycle.stop not declared"}
    v1 = inprocess.run_suite(inprocess.plugin(), tmp_path / "v1", scenarios=scenarios[1:], strict=True)
    assert v1.with_outcome("passed") == set(scenarios[1:]), v1.outcomes()


def test_a_plugin_that_silently_overwrites_its_sandbox_is_detected_as_one_per_process(tmp_path) -> None:
    """The forkd plugin accepts a second create by replacing its one sandbox (and describes statically):
    the probe sees the first sandbox's marker file gone and picks "one", so every sandbox gets its own
    process and the run stays correct."""
    adapter = open_provider(inprocess.plugin(mutant="sketch-create-overwrites"))
    try:
        assert adapter.sandboxes_per_process == "one"
    finally:
        adapter.close()
    run = inprocess.run_suite(inprocess.plugin(mutant="sketch-create-overwrites"), tmp_path, scenarios=(
        "create-describe-delete", "delete-twice", "exec-exit-code[42]", "exec-env", "exec-nonzero-is-a-result"))
    assert run.exit_code == 0, run.output[-3000:]
    assert run.results["provider"]["sandboxes_per_process"] == "one"
    assert run.with_outcome("passed") == {"create-describe-delete", "delete-twice", "exec-exit-code[42]", "exec-env",
                                          "exec-nonzero-is-a-result"}
