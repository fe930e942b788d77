"""Every benchmark in benchmarks/ still runs end to end, at a tiny size, and its figures still parse.

A benchmark is never run by CI otherwise, so one could break unnoticed (issue 24: the v2 channel
benchmark failed above 16 MiB for weeks). Each runs as the script a developer runs, in a subprocess,
with the smallest sizes it takes; what is checked is that it completes and that its figures (the JSON
file, or the printed lines of those that only print) are there and are numbers — never a timing or a
ratio: the machine running CI is shared and loaded.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import REPO

BENCHMARKS = REPO / "benchmarks"
NUMBER = r"(-?\d+(?:\.\d+)?)"


@dataclass(frozen=True)
class Smoke:
    """How to run one benchmark small: its arguments (``{output}`` becomes a JSON path in a temporary
    directory) and a check of what it printed and wrote."""

    arguments: tuple[str, ...]
    check: Callable[[str, Path], None]


def _printed(stdout: str, pattern: str) -> float:
    match = re.search(pattern, stdout)
    assert match is not None, f"no line matching {pattern!r} in:\n{stdout[-2000:]}"
    return float(match.group(1))


def _figures(output: Path) -> dict:
    assert output.exists(), f"no figures written to {output}"
    return json.loads(output.read_text())


def _samples(figure: dict, count: int) -> None:
    assert len(figure["samples"]) == count and all(isinstance(value, float) for value in figure["samples"])


def _inprocess_overhead(stdout: str, output: Path) -> None:
    assert "1 scenarios, 1 interleaved repetitions" in stdout
    _printed(stdout, rf"subprocess CLI \+ plugin process \(baseline\): median {NUMBER} s")
    assert _printed(stdout, rf"ratio in-process / subprocess: {NUMBER}") > 0


def _plugin_close(stdout: str, output: Path) -> None:
    figures = _figures(output)
    assert figures["benchmark"] == "plugin_close"
    for name in ("raw", "transport", "reference"):
        _samples(figures["figures"][name], 1)
    assert figures["transport_over_raw"]["median"] > 0
    assert "transport ÷ raw: median" in stdout


def _rest_overhead(stdout: str, output: Path) -> None:
    assert _printed(stdout, rf"raw httpx \(baseline\)\s+{NUMBER} ms") > 0
    assert _printed(stdout, rf"REST adapter \(forkd profile\)\s+{NUMBER} ms") > 0
    _printed(stdout, rf"adapter overhead: {NUMBER} ms per create → exec → delete \(1 cycles each\)")


def _startup(stdout: str, output: Path) -> None:
    figures = _figures(output)
    for name in ("pytest --version", "sandbox-conformance --version", "sandbox-conformance run --help"):
        _samples(figures["figures"][name], 1)
    assert figures["ratio_to_pytest"]["sandbox-conformance --version"]["median"] > 0
    _printed(stdout, rf"pytest --version \(baseline\)\s+median {NUMBER} s")
    assert _printed(stdout, rf"ratio sandbox-conformance --version / pytest --version: median {NUMBER}") > 0


def _stream_costs(stdout: str, output: Path) -> None:
    figures = _figures(output)
    throughput, memory = figures["throughput"], figures["memory"]
    assert throughput["bytes"] == 1 << 20 and throughput["repeat"] == 1
    _samples(throughput["raw"], 1)
    _samples(throughput["adapter"], 1)
    assert throughput["ratio"]["median"] > 0 and {"target_ratio", "meets_target"} <= throughput.keys()
    assert memory["bytes"] == 1 << 20
    for dialect in ("sandbox-driver-v1", "sandbox-driver-v2"):
        assert isinstance(memory[dialect]["peak_rss_growth_mb"], float)


def _suite_wall_time(stdout: str, output: Path) -> None:
    assert _printed(stdout, rf"battery: {NUMBER} scenarios \(") == 1
    for configuration in (r"baseline \(one scenario\)", "battery, 1 process"):
        assert _printed(stdout, rf"{configuration}\s+{NUMBER}s") > 0
    _printed(stdout, rf"scenario cost above the baseline: {NUMBER} ms per scenario")
    assert "battery, -n" not in stdout  # --workers 0: no parallel run (three whole CLI runs are too long here)


# Above the 16 MiB the host retains of a stream: the size at which issue 24's benchmark failed.
V2_BYTES = 17 << 20


def _v2_channel_throughput(stdout: str, output: Path) -> None:
    assert "ratio" in stdout and "peak RSS" in stdout
    figures = _figures(output)
    throughput, memory = figures["throughput"], figures["memory"]
    assert throughput["bytes"] == V2_BYTES and throughput["repeat"] == 1
    for side in ("raw", "adapter"):
        assert throughput[side]["best_mb_per_s"] > 0 and len(throughput[side]["seconds"]) == 1
    assert len(throughput["adapter"]["to_answer_seconds"]) == 1
    assert {"ratio", "to_answer_ratio", "target_ratio", "meets_target"} <= throughput.keys()
    assert memory["bytes"] == 1 << 20
    assert {"peak_rss_growth_mb", "mb_per_s", "target_growth_mb", "meets_target"} <= memory.keys()


def _wire_costs(stdout: str, output: Path) -> None:
    figures = _figures(output)
    health, rss = figures["health_round_trip"], figures["exec_run_64mib_peak_rss"]
    _samples(health["raw"], 20)
    _samples(health["adapter"], 20)
    assert health["ratio_p50"] > 0
    assert rss["output_mib"] == 1
    _samples(rss["raw"], 1)
    _samples(rss["suite"], 1)
    assert "peak RSS of a 1 MiB buffered exec/run" in stdout


SMOKES = {
    "inprocess_overhead": Smoke(("--repeat", "1", "--scenario", "delete-unknown"), _inprocess_overhead),
    "plugin_close": Smoke(("--repeat", "1", "--output", "{output}"), _plugin_close),
    "rest_overhead": Smoke(("--cycles", "1"), _rest_overhead),
    "startup": Smoke(("--repeat", "1", "--output", "{output}"), _startup),
    "stream_costs": Smoke(("--bytes", "1MiB", "--memory-bytes", "1MiB", "--repeat", "1", "--output", "{output}"),
                          _stream_costs),
    "suite_wall_time": Smoke(("--battery-scenario", "delete-unknown", "--workers", "0"), _suite_wall_time),
    "v2_channel_throughput": Smoke(("--bytes", str(V2_BYTES), "--memory-bytes", "1MiB", "--repeat", "1",
                                    "--output", "{output}"), _v2_channel_throughput),
    "wire_costs": Smoke(("--round-trips", "20", "--rss-repeat", "1", "--exec-mib", "1", "--output", "{output}"),
                        _wire_costs),
}


def test_every_benchmark_has_a_smoke_run() -> None:
    scripts = {path.stem for path in BENCHMARKS.glob("*.py") if not path.name.startswith("_")}
    assert scripts == set(SMOKES), "a benchmark without a smoke run here, or a smoke run of a removed one"


@pytest.mark.parametrize("name", sorted(SMOKES))
def test_the_benchmark_runs_small_and_its_figures_parse(name: str, tmp_path: Path) -> None:
    smoke = SMOKES[name]
    output = tmp_path / f"{name}.json"
    arguments = [argument.replace("{output}", str(output)) for argument in smoke.arguments]
    # From a scratch directory: whatever a benchmark writes relative to where it runs lands there.
    completed = subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), *arguments], cwd=tmp_path,
                               capture_output=True, text=True, timeout=240, check=False)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]
    smoke.check(completed.stdout, output)
