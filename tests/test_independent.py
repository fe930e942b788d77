"""A provider this project did not write: the whole suite against an independent v1 plugin, as a real
process through the CLI, gives no false failure and tells the truth about every skip."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import untruthful_skips

REPO = Path(__file__).resolve().parents[1]
PLUGIN = REPO / "tests" / "independent" / "indie_v1_plugin.py"
V1_LIMITS = ("the sandbox-driver-v1 dialect cannot express: glob", "the sandbox-driver-v1 dialect cannot express: grep",
             "on the sandbox-driver-v1 dialect, ")


@pytest.mark.slow
def test_the_independent_v1_plugin_passes_with_truthful_skips(tmp_path) -> None:
    reports = tmp_path / "reports"
    run = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--plugin", f"{sys.executable} {PLUGIN}", "--strict",
         "--env", f"INDIE_SANDBOX_ROOT={tmp_path / 'sandboxes'}", "--report-dir", str(reports), "-n", "2"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    results = json.loads((reports / "results.json").read_text())
    failures = {s["id"]: s["message"] for s in results["scenarios"] if s["outcome"] in ("failed", "error")}
    assert run.returncode == 0 and not failures, (failures, run.stdout[-3000:])
    assert results["provider"]["kind"] == "indie"
    assert results["summary"]["passed"] >= 200
    untruthful = untruthful_skips(results, *V1_LIMITS)
    assert not untruthful, untruthful
    # a v1 provider is cited v1 rules (and gap proposals) only
    assert all(r.startswith(("SDP1-", "GAP-")) for s in results["scenarios"] for r in s["requirements"]
               if s["outcome"] in ("passed", "failed"))
    assert results["sandboxes"]["leaked"] == [] and results["sandboxes"]["created"] == results["sandboxes"]["deleted"] > 0
