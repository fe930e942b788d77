"""What every benchmark here shares: interleaved repetitions, median and spread, a ratio to a raw
baseline measured in the same run, peak RSS, and the JSON figures file.

Interleaving (baseline, subject, baseline, subject, ...) rather than all of one then all of the other
spreads the machine's noise over both sides of a ratio: this machine is shared, and a burst of other
work would otherwise land on one configuration only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
REPORTS = REPO / "reports" / "benchmarks"
MIB = 1 << 20
# PYTHONPATH is forwarded so a plugin imports the same checkout as the suite, as a run does.
PASS_ENV = ("PYTHONPATH",)
# A bare K, M or G counts in powers of two, as ``head -c`` reads them; KB, MB, GB in powers of ten.
_UNITS = {"": 1, "k": 1 << 10, "kib": 1 << 10, "kb": 1000, "m": MIB, "mib": MIB, "mb": 1000**2,
          "g": 1 << 30, "gib": 1 << 30, "gb": 1000**3}


def byte_count(text: str) -> int:
    """``4194304``, ``4MiB``, ``256M``, ``1GiB``... (an argparse type)."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if match is None or match.group(2).lower() not in _UNITS or int(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"not a positive byte count: {text!r} (e.g. 4194304, 4MiB, 1GiB)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def send_request(process: subprocess.Popen[bytes], request_id: int, method: str, params: dict[str, Any]) -> None:
    """One JSON-RPC request on a raw host's pipe, as a host writes it: a line, flushed."""
    assert process.stdin is not None
    process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                    "params": params}).encode() + b"\n")
    process.stdin.flush()


def end_plugin(process: subprocess.Popen[bytes]) -> None:
    """End a plugin a raw baseline started: close its input, give it 10 s, then kill it."""
    assert process.stdin is not None
    process.stdin.close()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass
class Figure:
    """Several measurements of one configuration (seconds, bytes, ... whatever ``unit`` says)."""

    name: str
    unit: str
    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> tuple[float, float]:
        return min(self.samples), max(self.samples)

    def as_dict(self) -> dict[str, Any]:
        low, high = self.spread
        return {**asdict(self), "median": self.median, "min": low, "max": high}


def interleaved(configurations: Mapping[str, Callable[[], float]], repeat: int, unit: str = "s") -> dict[str, Figure]:
    """Run each configuration ``repeat`` times, in turn (a, b, a, b, ...); each call returns its measure."""
    figures = {name: Figure(name, unit) for name in configurations}
    for _ in range(repeat):
        for name, measure in configurations.items():
            figures[name].samples.append(measure())
    return figures


def timed(action: Callable[[], object]) -> float:
    """Seconds ``action`` took (monotonic clock)."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def ratio(subject: Figure, baseline: Figure) -> dict[str, float]:
    """subject ÷ baseline: of the medians, and the range over paired samples (same repetition)."""
    paired = [s / b for s, b in zip(subject.samples, baseline.samples) if b]
    return {"median": subject.median / baseline.median if baseline.median else float("inf"),
            "min": min(paired) if paired else float("nan"), "max": max(paired) if paired else float("nan")}


def rss_mb() -> float:
    """This process's resident set now (MB)."""
    return _status_kb("VmRSS") / 1024


def peak_rss_mb() -> float:
    """This process's peak resident set since start or the last ``reset_peak_rss`` (MB)."""
    return _status_kb("VmHWM") / 1024


def reset_peak_rss() -> None:
    """Start the peak-RSS watermark afresh (Linux: writing 5 to clear_refs resets VmHWM)."""
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def _status_kb(key: str) -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return float(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


def write_figures(name: str, payload: Mapping[str, Any], path: Path | None = None) -> Path:
    """Write ``payload`` with the machine's description to reports/benchmarks/<name>.json."""
    target = path or REPORTS / f"{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    machine = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}
    target.write_text(json.dumps({"benchmark": name, "machine": machine, **payload}, indent=2, default=_plain) + "\n")
    return target


def _plain(value: Any) -> Any:
    if isinstance(value, Figure):
        return value.as_dict()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
