"""Benchmark: what a streamed exec costs the suite, in time and in memory (issue 13, rows 2 and 3).

Performance is measured here, never asserted in a test. Both parts drive the bundled reference plugin
as a real process, streaming ``head -c N /dev/zero`` through one ``exec/stream`` with a retained output
limit of 0 (so the answer carries no copy of it: what is measured is the stream).

- throughput (v1): the adapter's path (``open_provider``, ``streams.start_exec`` / ``wait``: every
  notification checked, routed, decoded and recorded) against a raw reader on its own plugin process,
  written below, that reads the plugin's stdout lines, json-decodes them, base64-decodes each
  ``exec/output`` payload and discards it. Interleaved repetitions; the figure is raw seconds ÷ adapter
  seconds (1.0: the adapter costs nothing over decoding the wire; target ≥ 0.7), median and spread.
- memory (v1 and v2): how far this process's peak RSS rises above its RSS before, while
  ``--memory-bytes`` (default 1 GiB) stream through one ``exec/stream`` of the adapter (target < 50 MB).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/stream_costs.py [--bytes 256MiB] [--memory-bytes 1GiB] [--repeat 3]

The figures go to reports/benchmarks/stream_costs.json (``--output`` elsewhere).
"""

from __future__ import annotations

import argparse
import base64
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _measure, when run as a script

from _measure import (
    MIB,
    PASS_ENV,
    REPORTS,
    byte_count,
    end_plugin,
    interleaved,
    peak_rss_mb,
    ratio,
    reset_peak_rss,
    rss_mb,
    send_request,
    timed,
    write_figures,
)

from conformance.adapter import ExecRequest, SandboxRequest
from conformance.providers import ProviderConfig, open_provider, reference_plugin_argv
from conformance.transports.process import scrubbed_environment

TARGET_RATIO = 0.7
TARGET_GROWTH_MB = 50.0
DIALECT_ARGS = {"sandbox-driver-v1": (), "sandbox-driver-v2": ("--dialect", "sandbox-driver-v2")}


def command_for(size: int) -> str:
    return f"head -c {size} /dev/zero"


class RawReader:
    """The v1 reference plugin as a process, read with nothing but what one streamed exec needs: lines,
    JSON, base64, discarded."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(reference_plugin_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=scrubbed_environment((), PASS_ENV))
        self._ids = 0
        self.call("initialize", {"protocol_version": 1})
        self.sandbox_id = self.call("sandbox/create", {"spec": {"source": "host_directory"}})["status"]["id"]

    def send(self, method: str, params: dict[str, Any]) -> int:
        self._ids += 1
        send_request(self.process, self._ids, method, params)
        return self._ids

    def answer(self, request_id: int) -> tuple[Any, int]:
        """Read to the answer of ``request_id``; its result and the output bytes decoded on the way."""
        assert self.process.stdout is not None
        decoded = 0
        for line in self.process.stdout:
            message = json.loads(line)
            if message.get("method") == "exec/output":
                decoded += len(base64.b64decode(message["params"]["data_b64"]))
            elif message.get("id") == request_id:
                if "result" not in message:
                    sys.exit(f"the raw reader's request {request_id} failed: {message.get('error')}")
                return message["result"], decoded
        sys.exit("the plugin's stdout closed before its answer")

    def call(self, method: str, params: dict[str, Any]) -> Any:
        return self.answer(self.send(method, params))[0]

    def stream(self, size: int) -> int:
        request_id = self.send("exec/stream", {
            "sandbox_id": self.sandbox_id, "exec_id": f"raw-{self._ids}", "retained_output_limit": 0,
            "spec": {"command": command_for(size), "timeout_ms": 600_000, "env": {}}})
        return self.answer(request_id)[1]

    def close(self) -> None:
        end_plugin(self.process)


class AdapterStreamer:
    """The same plugin behind ``open_provider``, as a run of the suite reaches it."""

    def __init__(self, dialect: str) -> None:
        plugin = shlex.join(reference_plugin_argv(*DIALECT_ARGS[dialect]))
        self.adapter = open_provider(ProviderConfig(plugin=plugin, dialect=dialect, pass_env=PASS_ENV,
                                                    run_id="bench"))
        self.sandbox_id = self.adapter.create(SandboxRequest()).id

    def stream(self, size: int) -> int:
        """One ``exec/stream`` of ``size`` bytes, retaining none; the bytes the provider says it streamed."""
        streams = self.adapter.streams
        assert streams is not None
        outcome = streams.start_exec(self.sandbox_id, ExecRequest(command_for(size), timeout_s=600),
                                     retained_limit=0).wait()
        capture = outcome.stdout_capture
        if outcome.result.outcome != "ran" or outcome.result.exit_code != 0 or capture is None:
            sys.exit(f"the adapter's exec/stream failed: {outcome.result.describe()}")
        return capture.observed_bytes

    def close(self) -> None:
        violations = self.adapter.take_violations()
        self.adapter.close()
        if violations:
            sys.exit(f"the adapter reported wire violations: {violations[:3]}")


def checked(stream: Any, size: int) -> Any:
    def run() -> None:
        received = stream(size)
        if received != size:
            sys.exit(f"{received} bytes arrived of {size}")
    return run


def memory_growth(dialect: str, size: int) -> dict[str, float]:
    """Peak RSS growth (MB) of this process while ``size`` bytes stream through one adapter exec."""
    streamer = AdapterStreamer(dialect)
    try:
        streamer.stream(MIB)  # warm-up: imports, first notifications
        reset_peak_rss()
        before = rss_mb()
        seconds = timed(checked(streamer.stream, size))
        return {"peak_rss_growth_mb": peak_rss_mb() - before, "seconds": seconds, "mb_per_s": size / seconds / 1e6}
    finally:
        streamer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=byte_count, default=256 * MIB, dest="size",
                        help="bytes of each timed exec/stream (default 256MiB)")
    parser.add_argument("--memory-bytes", type=byte_count, default=1 << 30,
                        help="bytes streamed through one exec for the memory figure (default 1GiB)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved repetitions of each (default 3)")
    parser.add_argument("--output", type=Path, default=REPORTS / "stream_costs.json", help="the JSON figures")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    # Memory first, before the throughput part has grown the heap.
    memory = {dialect: memory_growth(dialect, args.memory_bytes) for dialect in DIALECT_ARGS}

    raw, adapter = RawReader(), AdapterStreamer("sandbox-driver-v1")
    try:
        raw.stream(MIB)
        adapter.stream(MIB)
        figures = interleaved({"raw": lambda: timed(checked(raw.stream, args.size)),
                               "adapter": lambda: timed(checked(adapter.stream, args.size))}, args.repeat)
    finally:
        raw.close()
        adapter.close()
    # Throughput ratio = adapter rate ÷ raw rate = raw seconds ÷ adapter seconds.
    slowdown = ratio(figures["adapter"], figures["raw"])
    throughput = {"median": 1 / slowdown["median"], "min": 1 / slowdown["max"], "max": 1 / slowdown["min"]}

    print(f"one v1 exec/stream of {args.size} bytes, {args.repeat} interleaved repetitions, reference plugin")
    for name, figure in figures.items():
        low, high = figure.spread
        print(f"  {name:<8} median {figure.median:.2f} s (min {low:.2f}, max {high:.2f}), "
              f"{args.size / figure.median / 1e6:.1f} MB/s")
    print(f"  throughput ratio adapter ÷ raw: {throughput['median']:.2f} (min {throughput['min']:.2f}, max "
          f"{throughput['max']:.2f}; target ≥ {TARGET_RATIO})")
    for dialect, figure in memory.items():
        print(f"memory, {dialect}: {args.memory_bytes} bytes through one exec/stream: peak RSS "
              f"+{figure['peak_rss_growth_mb']:.1f} MB (target < {TARGET_GROWTH_MB:g} MB), "
              f"{figure['mb_per_s']:.1f} MB/s")
    path = write_figures("stream_costs", {
        "throughput": {"bytes": args.size, "repeat": args.repeat, "raw": figures["raw"], "adapter": figures["adapter"],
                       "ratio": throughput, "target_ratio": TARGET_RATIO,
                       "meets_target": throughput["median"] >= TARGET_RATIO},
        "memory": {"bytes": args.memory_bytes, **memory, "target_growth_mb": TARGET_GROWTH_MB,
                   "meets_target": all(f["peak_rss_growth_mb"] < TARGET_GROWTH_MB for f in memory.values())},
    }, args.output)
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
