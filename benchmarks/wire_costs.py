"""Benchmark: what the suite's wire reader costs over the wire itself (issue 13, rows 1 and 4).

1. ``provider/health`` round trip through the adapter ÷ a raw NDJSON ping-pong on the same reference
   plugin process (p50 of single round trips, the two interleaved one by one). The raw side writes the
   request bytes on the same transport and takes the answer line from the same reader thread, then
   json-decodes it: what is left in the ratio is everything above the bytes (ids, futures, schema checks,
   the transcript), which is the suite's own cost. The adapter side records into a transcript, as it
   does during every scenario.
2. Peak RSS of a 64 MiB buffered ``exec/run`` (v1): the suite (adapter, transcript, schema checks,
   ExecOutcome) ÷ a minimal raw reader (read the line, json-decode, base64-decode), each in a fresh
   child process so each peak is its own; interleaved repetitions.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/wire_costs.py [--round-trips N] [--rss-repeat N] [--exec-mib N]
        [--output PATH]

Figures go to reports/benchmarks/wire_costs.json.
"""

from __future__ import annotations

import argparse
import base64
import json
import queue
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._measure import (
    REPO,
    Figure,
    interleaved,
    peak_rss_mb,
    ratio,
    write_figures,
)

EXEC_MIB = 64


def exec_command(mib: int) -> str:
    return f"head -c {mib * 1024 * 1024} /dev/zero"


# -- 1. health round trip ------------------------------------------------------------------------


class _Tap:
    """A transport wrapper whose lines go either to the connection (adapter mode) or to a queue (raw
    mode), so both sides share one plugin process, one pipe and one reader thread."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self.raw_mode = False
        self.raw_lines: queue.Queue[bytes] = queue.Queue()

    def start(self, on_line: Callable[[bytes], None], on_close: Callable[[], None], *rest: Any, **named: Any) -> None:
        def route(line: bytes) -> None:
            if self.raw_mode:
                self.raw_lines.put(line)
            else:
                on_line(line)

        self._transport.start(route, on_close, *rest, **named)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") or name in ("raw_mode", "raw_lines"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._transport, name, value)


def health_round_trips(count: int) -> dict[str, Any]:
    from conformance.dialects.jsonrpc import JsonRpcConnection
    from conformance.dialects.sandbox_driver_v1 import SandboxDriverV1Adapter, V1Rules
    from conformance.providers import reference_plugin_argv
    from conformance.transcript import Transcript
    from conformance.transports.process import ProcessTransport, scrubbed_environment

    tap = _Tap(ProcessTransport(reference_plugin_argv(), scrubbed_environment()))
    connection = JsonRpcConnection(tap, V1Rules())
    connection.start()
    adapter = SandboxDriverV1Adapter(connection, command="reference", base_spec=None, run_labels={},
                                     call_timeout_s=10.0)
    adapter.handshake(timeout_s=10.0)
    raw_ids = iter(range(10**9, 10**10))  # far from the connection's own ids

    def raw_once() -> float:
        frame = b'{"jsonrpc":"2.0","id":%d,"method":"provider/health","params":null}\n' % next(raw_ids)
        tap.raw_mode = True
        started = time.perf_counter()
        tap.send(frame)
        answer = json.loads(tap.raw_lines.get(timeout=10.0))
        elapsed = time.perf_counter() - started
        tap.raw_mode = False
        assert answer["result"]["health"], answer
        return elapsed

    def adapter_once() -> float:
        started = time.perf_counter()
        adapter.health()
        return time.perf_counter() - started

    try:
        with adapter.recording(Transcript()):
            interleaved({"raw": raw_once, "adapter": adapter_once}, repeat=min(200, count))  # warm-up
            figures = interleaved({"raw": raw_once, "adapter": adapter_once}, repeat=count)
    finally:
        adapter.close()
    raw, ours = figures["raw"], figures["adapter"]
    return {"round_trips": count, "raw": raw, "adapter": ours, "p90_us": {name: _percentile(f, 0.9) * 1e6
                                                                             for name, f in figures.items()},
            "ratio_p50": ratio(ours, raw)["median"]}


def _percentile(figure: Figure, fraction: float) -> float:
    ordered = sorted(figure.samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# -- 2. peak RSS of a 64 MiB buffered exec/run ---------------------------------------------------


def _child_raw(mib: int) -> dict[str, float]:
    """A minimal reader: the plugin on pipes, each answer a line, json-decoded, the output base64-decoded."""
    from conformance.providers import reference_plugin_argv
    from conformance.transports.process import scrubbed_environment

    plugin = subprocess.Popen(reference_plugin_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env=scrubbed_environment(), start_new_session=True)
    assert plugin.stdin is not None and plugin.stdout is not None
    ids = iter(range(1, 100))

    def call(method: str, params: Any) -> Any:
        request = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
        plugin.stdin.write(json.dumps(request).encode() + b"\n")
        plugin.stdin.flush()
        return json.loads(plugin.stdout.readline())["result"]

    call("initialize", {"protocol_version": 1})
    sandbox = call("sandbox/create", {"spec": {"source": "host_directory"}})["status"]["id"]
    before = peak_rss_mb()
    result = call("exec/run", {"sandbox_id": sandbox, "spec": {"command": exec_command(mib), "env": {}}})
    stdout = base64.b64decode(result["stdout_b64"])
    assert len(stdout) == mib * 1024 * 1024
    del result, stdout
    peak = peak_rss_mb()
    call("sandbox/delete", {"sandbox_id": sandbox})
    plugin.stdin.close()
    plugin.wait(10)
    return {"peak_mb": peak, "before_mb": before}


def _child_suite(mib: int) -> dict[str, float]:
    """The suite's path: the adapter with a transcript recording, as inside a scenario."""
    from conformance.adapter import ExecRequest, SandboxRequest
    from conformance.providers import ProviderConfig, open_provider
    from conformance.transcript import Transcript

    adapter = open_provider(ProviderConfig(dialect="sandbox-driver-v1"))
    try:
        with adapter.recording(Transcript()):
            handle = adapter.create(SandboxRequest())
            before = peak_rss_mb()
            outcome = adapter.exec(handle.id, ExecRequest(exec_command(mib), timeout_s=120.0))
            assert len(outcome.stdout) == mib * 1024 * 1024, (outcome.kind, len(outcome.stdout))
            del outcome
            peak = peak_rss_mb()
            adapter.delete(handle.id)
    finally:
        adapter.close()
    return {"peak_mb": peak, "before_mb": before}


def _in_child(kind: str, mib: int) -> Callable[[], float]:
    def measure() -> float:
        completed = subprocess.run([sys.executable, __file__, "--child", kind, "--exec-mib", str(mib)],
                                   capture_output=True, text=True,
                                   cwd=REPO, check=False, timeout=600)
        if completed.returncode != 0:
            sys.exit(f"the {kind} child failed:\n{completed.stdout[-2000:]}{completed.stderr[-3000:]}")
        figures = json.loads(completed.stdout.strip().splitlines()[-1])
        _child_figures.setdefault(kind, []).append(figures)
        return figures["peak_mb"]

    return measure


_child_figures: dict[str, list[dict[str, float]]] = {}


def exec_run_peak_rss(repeat: int, mib: int) -> dict[str, Any]:
    figures = interleaved({"raw": _in_child("raw", mib), "suite": _in_child("suite", mib)}, repeat=repeat, unit="MB")
    return {"output_mib": mib, "raw": figures["raw"], "suite": figures["suite"],
            "children": _child_figures, "ratio_peak": ratio(figures["suite"], figures["raw"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-trips", type=int, default=2000, help="interleaved health round trips (default 2000)")
    parser.add_argument("--rss-repeat", type=int, default=3, help="interleaved exec/run children of each (default 3)")
    parser.add_argument("--only", choices=("health", "rss"), help="run one of the two measurements")
    parser.add_argument("--exec-mib", type=int, default=EXEC_MIB,
                        help=f"MiB of the buffered exec/run's output (default {EXEC_MIB})")
    parser.add_argument("--output", type=Path, help="where the JSON figures go (default reports/benchmarks/)")
    parser.add_argument("--child", choices=("raw", "suite"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.exec_mib < 1 or args.round_trips < 1 or args.rss_repeat < 1:
        parser.error("--exec-mib, --round-trips and --rss-repeat must be at least 1")
    if args.child:
        print(json.dumps(_child_raw(args.exec_mib) if args.child == "raw" else _child_suite(args.exec_mib)))
        return 0
    payload: dict[str, Any] = {}
    if args.only in (None, "health"):
        health = health_round_trips(args.round_trips)
        payload["health_round_trip"] = health
        raw, ours = health["raw"], health["adapter"]
        print(f"provider/health round trip, {args.round_trips} interleaved pairs on one plugin process:")
        print(f"  raw NDJSON ping-pong: p50 {raw.median * 1e6:.0f} µs (p90 {health['p90_us']['raw']:.0f})")
        print(f"  through the adapter:  p50 {ours.median * 1e6:.0f} µs (p90 {health['p90_us']['adapter']:.0f})")
        print(f"  ratio adapter / raw (p50): {health['ratio_p50']:.2f}  (goal <= 1.5)")
    if args.only in (None, "rss"):
        rss = exec_run_peak_rss(args.rss_repeat, args.exec_mib)
        payload["exec_run_64mib_peak_rss"] = rss
        print(f"peak RSS of a {args.exec_mib} MiB buffered exec/run, {args.rss_repeat} interleaved children of each:")
        for name in ("raw", "suite"):
            low, high = rss[name].spread
            print(f"  {name:5}: median {rss[name].median:.0f} MB (min {low:.0f}, max {high:.0f})")
        print(f"  ratio suite / raw (peak): {rss['ratio_peak']['median']:.2f}  (goal < 2)")
    path = write_figures("wire_costs", payload, args.output)
    print(f"figures: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
