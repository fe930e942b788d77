"""The Docker-backed reference plugin: the whole suite passes against containers, GAP 2 is observably
supported, health answers when the engine does not, and no container outlives a run or a crash.

Needs a Docker engine (the ``docker_engine`` fixture skips visibly without one, or fails under
SANDBOX_CONFORMANCE_REQUIRE_DOCKER=1); the images are built locally by conformance.reference.images.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from conformance.reference.docker_backend import MANAGED_LABEL, RUN_LABEL, default_state_root
from conformance.reference.docker_plugin import suite_arguments
from tests.helpers import SuiteRun, docker_mutant_arguments, run_cli

pytestmark = pytest.mark.docker

SKIP_REASONS = ("capability ", "applies to dialect", "the sandbox-driver-v1 dialect cannot express",
                "on the sandbox-driver-v1 dialect, ",
                # the Docker reference names no runtime directory (the host backend's is outside the container)
                "no runtime directory: ")


def _containers(*filters: str) -> list[str]:
    arguments = [part for label in filters for part in ("--filter", f"label={label}")]
    completed = subprocess.run(["docker", "ps", "--all", "--quiet", *arguments], capture_output=True, text=True,
                               check=True, timeout=60)
    return completed.stdout.split()


def _orphaned_records(run_id: str) -> list[str]:
    """Record directories of this run's sandboxes whose container is gone: what a leaking delete leaves."""
    root = default_state_root()
    live = set(subprocess.run(["docker", "ps", "--all", "--filter", f"label={MANAGED_LABEL}=1", "--format",
                               "{{.Names}}"], capture_output=True, text=True, check=True).stdout.split())
    orphans = []
    for record in root.glob("docker-*/record.json") if root.is_dir() else ():
        try:
            labels = json.loads(record.read_text()).get("labels", {})
        except (OSError, json.JSONDecodeError):
            continue
        if labels.get(RUN_LABEL) == run_id and record.parent.name not in live:
            orphans.append(record.parent.name)
    return orphans


class Plugin:
    """The Docker plugin spoken to directly over stdio, for what the suite's reports do not show."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "conformance.reference.docker_plugin"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, **(env or {})})
        self.next_id = 0
        assert self.call("initialize", {"protocol_version": 1})["protocol_version"] == 1

    def call(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            answer = json.loads(self.proc.stdout.readline())
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise AssertionError(f"{method} failed: {answer['error']}")
                return answer["result"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)


# The Docker plugin is the host plugin's JSON-RPC server over another backend: the features about the
# protocol itself (wire, handshake, errors, events, capabilities) exercise no line of the Docker backend
# and run against the host plugin's processes elsewhere. What a container changes is every sandbox and
# command feature, the session's shutdowns with containers running, and the three gaps.
CONTAINER_FEATURES = ("exec.feature", "streaming.feature", "streaming-volume.feature", "fs.feature",
                      "lifecycle.feature", "interactive.feature", "delete.feature", "session.feature",
                      "gaps/snapshots.feature", "gaps/resources.feature", "gaps/outcomes.feature",
                      "gaps/network.feature")


def _whole_run(image: str, report_dir: Path) -> SuiteRun:
    run_id = f"docker-{uuid.uuid4().hex[:12]}"
    features = [arg for name in CONTAINER_FEATURES for arg in ("--feature", name)]
    return run_cli("run", *suite_arguments(image=image), "--run-id", run_id, *features, report_dir=report_dir,
                   timeout=1200)


@pytest.mark.slow
def test_the_docker_plugin_passes_the_whole_suite_sized_and_leaving_no_container(
        docker_sandbox_image: str, tmp_path: Path) -> None:
    """One run of every feature a container changes, three verdicts on it. (One test, not three sharing a
    module fixture: under xdist each worker that got one of them would run the Docker suite again.)"""
    run = _whole_run(docker_sandbox_image, tmp_path / "reports")
    # the whole suite passes, every skip says why
    assert run.exit_code == 0, run.stdout[-3000:] + run.stderr[-2000:]
    results = run.results
    assert results["summary"]["failed"] == results["summary"]["errors"] == 0
    ran = [scenario for scenario in results["scenarios"] if scenario["outcome"] != "disabled"]
    # a --feature name also selects the same file name under v2/, whose scenarios skip on this v1 plugin
    assert set(CONTAINER_FEATURES) <= {scenario["feature"] for scenario in ran}
    for scenario in ran:
        assert scenario["outcome"] in ("passed", "skipped"), f"{scenario['id']}: {scenario['message']}"
        if scenario["outcome"] == "skipped":
            assert scenario["message"].startswith(SKIP_REASONS), f"{scenario['id']}: {scenario['message']}"
    provider = results["provider"]
    identity = (provider["kind"], provider["dialect"], provider["transport"])
    assert identity == ("docker", "sandbox-driver-v1", "stdio")
    assert provider["capabilities"]["isolation"] == "container"
    # resource sizes are enforced inside the container (GAP-2 supported)
    gap = results["gaps"]["GAP-2"]
    assert gap["status"] == "supported", gap
    outcomes = run.outcomes()
    assert outcomes["resources-memory"] == outcomes["resources-cpu"] == "passed"
    # a blocked network has loopback alone, an allow-all one the bridge, at create and later (GAP-4 supported)
    assert results["gaps"]["GAP-4"]["status"] == "supported", results["gaps"]["GAP-4"]
    network = ("network-block-not-host", "network-block", "network-allow-all", "network-update-block-not-host",
               "network-update-block")
    assert {outcomes[sid] for sid in network} == {"passed"}, {sid: outcomes[sid] for sid in network}
    # no container outlives the run
    sandboxes = results["sandboxes"]
    assert sandboxes["leaked"] == []
    assert sandboxes["created"] == sandboxes["deleted"] > 0
    run_id = results["run"]["id"]
    assert _containers(f"{MANAGED_LABEL}=1", f"{RUN_LABEL}={run_id}") == []
    assert _orphaned_records(run_id) == []


def test_health_is_a_successful_unreachable_answer_without_an_engine(docker_engine: str, suite,
                                                                      tmp_path: Path) -> None:
    nowhere = f"unix://{tmp_path}/nobody-listens.sock"
    plugin = Plugin(env={"DOCKER_HOST": nowhere})
    try:
        health = plugin.call("provider/health", {})["health"]
    finally:
        plugin.close()
    assert health["status"] == "unreachable", health
    assert "cannot be reached" in health["message"]
    run = suite(*suite_arguments(), "--env", f"DOCKER_HOST={nowhere}",
                "--scenario", "health-status", "--scenario", "health-answered-even-when-unhealthy")
    assert run.exit_code == 0, run.stdout[-3000:]
    assert run.with_outcome("passed") == {"health-status", "health-answered-even-when-unhealthy"}


def test_ignoring_resources_is_reported_as_a_gap_2_violation(docker_sandbox_image: str, suite) -> None:
    run = suite(*docker_mutant_arguments("docker-resources-accepted-and-ignored", image=docker_sandbox_image),
                "--feature", "resources.feature")
    assert run.exit_code == 1, run.stdout[-3000:]
    assert run.with_outcome("failed") == {"resources-memory", "resources-cpu"}
    assert run.results["gaps"]["GAP-2"]["status"] == "violated"


def test_a_block_of_a_sandbox_that_had_no_network_is_no_evidence_of_a_change(docker_sandbox_image: str,
                                                                               suite) -> None:
    """A provider whose allow-all sandbox has no network at all: blocking it later changes nothing that could
    be seen, so the gap scenario skips, saying so, rather than pass a change it never saw; the MUST one (not
    on the suite's network) holds and passes."""
    run = suite(*docker_mutant_arguments("docker-network-allow-all-unusable", image=docker_sandbox_image),
                "--scenario", "network-update-block", "--scenario", "network-update-block-not-host")
    assert run.exit_code == 0, run.stdout[-3000:]
    by_id = {s["id"]: s for s in run.results["scenarios"] if s["outcome"] != "disabled"}
    assert by_id["network-update-block-not-host"]["outcome"] == "passed"
    skipped = by_id["network-update-block"]
    assert skipped["outcome"] == "skipped", skipped
    assert skipped["message"].startswith("the sandbox had no network before the change"), skipped["message"]


def test_a_killed_plugin_leaves_its_container_to_the_next_one_and_to_the_sweep(docker_sandbox_image: str) -> None:
    run_label = f"crash-{uuid.uuid4().hex[:12]}"
    spec = {"source": {"image": {"reference": docker_sandbox_image}}, "labels": {RUN_LABEL: run_label}}
    first = Plugin()
    doomed = first.call("sandbox/create", {"spec": spec})["status"]["id"]
    swept = first.call("sandbox/create", {"spec": spec})["status"]["id"]
    first.proc.kill()
    first.proc.wait(timeout=10)
    assert len(_containers(f"{RUN_LABEL}={run_label}")) == 2  # containers outlive the plugin process

    second = Plugin()
    try:
        listing = second.call("sandbox/list", {"filter": {"labels": {RUN_LABEL: run_label}}})
        listed = {status["id"] for status in listing["sandboxes"]}
        assert listed == {doomed, swept}
        second.call("sandbox/delete", {"sandbox_id": doomed})
    finally:
        second.close()
    assert len(_containers(f"{RUN_LABEL}={run_label}")) == 1

    completed = subprocess.run([sys.executable, "-m", "conformance.reference.docker_plugin", "--sweep",
                                "--run-label", run_label], check=False, capture_output=True, text=True,
                               timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == [swept]
    assert _containers(f"{RUN_LABEL}={run_label}") == []
    assert not (default_state_root() / doomed).exists() and not (default_state_root() / swept).exists()
