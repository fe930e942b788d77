"""Benchmark: what closing a plugin process costs through ``ProcessTransport.close`` as a ratio to the
raw minimum (close its stdin, block in ``waitpid`` until it exits), both on the same tiny plugin that
exits on EOF, measured interleaved in the same run; and the same close of the bundled reference plugin.

A run closes a plugin ~47 times (fresh providers, restarts, the end): every millisecond of polling
here is paid that often.

    .venv/bin/python benchmarks/plugin_close.py [--repeat N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._measure import interleaved, ratio, write_figures
from conformance.providers import reference_plugin_argv
from conformance.transports.process import ProcessTransport, scrubbed_environment

# Reads its input to the end, then exits: an honest plugin as far as closing goes.
EOF_PLUGIN = [sys.executable, "-S", "-c", "import sys\nwhile sys.stdin.buffer.read(65536): pass"]


# Time for the interpreter to reach its read loop, so the close measures only the close.
SETTLE_S = 0.15


def raw_close() -> float:
    proc = subprocess.Popen(EOF_PLUGIN, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    time.sleep(SETTLE_S)
    started = time.perf_counter()
    proc.stdin.close()
    proc.wait()  # a blocking waitpid: the kernel wakes us when it exits
    elapsed = time.perf_counter() - started
    proc.stdout.close()
    proc.stderr.close()
    return elapsed


def transport_close(argv: list[str], settle_s: float = SETTLE_S) -> float:
    transport = ProcessTransport(argv, scrubbed_environment())
    transport.start(lambda line: None, lambda: None)
    time.sleep(settle_s)
    started = time.perf_counter()
    transport.close()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--output", type=Path, help="where the JSON figures go (default reports/benchmarks/)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    figures = interleaved({
        "raw": raw_close,
        "transport": lambda: transport_close(EOF_PLUGIN),
        "reference": lambda: transport_close(reference_plugin_argv(), settle_s=0.6),
    }, repeat=args.repeat)
    close_ratio = ratio(figures["transport"], figures["raw"])
    path = write_figures("plugin_close", {"figures": figures, "transport_over_raw": close_ratio}, args.output)
    for figure in figures.values():
        low, high = figure.spread
        print(f"{figure.name:10s} median {figure.median * 1000:7.1f} ms  (min {low * 1000:.1f}, max {high * 1000:.1f})")
    print(f"transport ÷ raw: median {close_ratio['median']:.2f} (paired {close_ratio['min']:.2f}–{close_ratio['max']:.2f})")
    print(f"figures: {path}")


if __name__ == "__main__":
    main()
