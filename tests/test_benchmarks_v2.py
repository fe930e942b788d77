"""benchmarks/v2_channel_throughput.py refuses a bad size up front. (Its run at a small size, past the
16 MiB a stream's outcome retains, is in tests/test_benchmarks_smoke.py with every benchmark's.)"""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import REPO

BENCHMARK = REPO / "benchmarks" / "v2_channel_throughput.py"


def test_a_bad_size_is_refused_before_anything_starts(tmp_path) -> None:
    completed = subprocess.run([sys.executable, str(BENCHMARK), "--bytes", "lots", "--output",
                                str(tmp_path / "unused.json")], check=False, capture_output=True, text=True,
                               timeout=30)
    assert completed.returncode == 2 and "not a positive byte count" in completed.stderr
    assert not (tmp_path / "unused.json").exists()
