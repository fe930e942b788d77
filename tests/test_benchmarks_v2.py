"""benchmarks/v2_channel_throughput.py still runs end to end and writes its figures. Tiny sizes, one
repetition: what is checked is the shape of the report, never a timing (performance lives in the
benchmark itself)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import REPO

BENCHMARK = REPO / "benchmarks" / "v2_channel_throughput.py"


def test_the_channel_benchmark_runs_and_writes_its_figures(tmp_path) -> None:
    report = tmp_path / "v2_channel_throughput.json"
    completed = subprocess.run([sys.executable, str(BENCHMARK), "--bytes", "4MiB", "--memory-bytes", "4MiB",
                                "--repeat", "1", "--output", str(report)],
                               check=False, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert "ratio" in completed.stdout and "peak RSS" in completed.stdout
    figures = json.loads(report.read_text())
    throughput, memory = figures["throughput"], figures["memory"]
    assert throughput["bytes"] == 4 << 20 and throughput["repeat"] == 1
    for side in ("raw", "adapter"):
        assert throughput[side]["best_mb_per_s"] > 0 and len(throughput[side]["seconds"]) == 1
    assert len(throughput["adapter"]["to_answer_seconds"]) == 1
    assert {"ratio", "to_answer_ratio", "target_ratio", "meets_target"} <= throughput.keys()
    assert memory["bytes"] == 4 << 20
    assert {"peak_rss_growth_mb", "mb_per_s", "target_growth_mb", "meets_target"} <= memory.keys()


def test_a_bad_size_is_refused_before_anything_starts(tmp_path) -> None:
    completed = subprocess.run([sys.executable, str(BENCHMARK), "--bytes", "lots", "--output",
                                str(tmp_path / "unused.json")], check=False, capture_output=True, text=True,
                               timeout=30)
    assert completed.returncode == 2 and "not a positive byte count" in completed.stderr
    assert not (tmp_path / "unused.json").exists()
