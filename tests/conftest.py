"""Fixtures for the suite's own tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import SuiteRun, run_cli


@pytest.fixture
def suite(tmp_path: Path):
    """Run ``sandbox-conformance run`` with the given arguments, reports in a private directory."""

    def run(*args: str, timeout: float = 300) -> SuiteRun:
        return run_cli("run", *args, report_dir=tmp_path / "reports", timeout=timeout)

    return run
