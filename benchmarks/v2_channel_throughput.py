"""Benchmark: bytes through one protocol-v2 data channel, the suite's host side against a raw host.

Performance is measured here, never asserted in a test. Both configurations drive the bundled v2
reference plugin as a real process and time one ``exec/stream`` of ``head -c N /dev/zero``, from the
request to the answer with the channel read to its eof:

- raw baseline: a minimal host written below — its own Unix socket listener, the ``initialize``, one
  ``exec/stream`` request, frames read with ``recv_into`` into one preallocated buffer and discarded;
- adapter: the suite's real path, ``open_provider`` with the ``sandbox-driver-v2`` dialect, then
  ``streams.start_exec`` / ``wait`` (every frame checked, recorded and handed over as an output chunk;
  the outcome holds the retained copy of the output as one ``bytes``, as every scenario gets it: all of
  it up to 16 MiB, a head and a tail of a larger one, as upstream's host retains). The bytes that
  crossed are counted by the stream's record (``totals``), which sees every chunk.

The best of K repetitions of each is reported, with the ratio adapter / raw (target: at least 0.8).
A second adapter figure stops the clock at the plugin's answer (which comes after its eof, so the
bytes have crossed the channel by then): the channel path alone, without the assembly of the outcome
that follows (chunks, one join of N bytes) and that the raw host, which keeps nothing, never pays.

The memory part streams a larger output (default 1 GiB) through one channel with a consumer that keeps
nothing: a stdio process (``processes.open`` / ``read`` — the adapter's only call that hands frames
over one by one; ``streams`` keeps a bounded record, measured in benchmarks/stream_costs.py) whose output
is read and dropped. It reports how far the suite process's peak RSS (VmHWM, reset through /proc/self/clear_refs)
rose above its RSS before (target: under 50 MB). It runs first, before the throughput part has grown
the heap.

    .venv/bin/python benchmarks/v2_channel_throughput.py [--bytes 256MiB] [--memory-bytes 1GiB] [--repeat 3]

The table is printed and the figures written as JSON (default reports/benchmarks/v2_channel_throughput.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import secrets
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _measure, when run as a script

from _measure import MIB, PASS_ENV, byte_count, end_plugin, send_request

from conformance.adapter import ExecRequest, SandboxRequest
from conformance.dialects.sandbox_driver_v2.facets import UNLIMITED_RETAINED_BYTES
from conformance.providers import ProviderConfig, open_provider, reference_plugin_argv
from conformance.transports.process import scrubbed_environment

REPO = Path(__file__).resolve().parent.parent

DIALECT = "sandbox-driver-v2"
OPEN, STDOUT, STDERR, EOF = 0, 1, 2, 4
HEADER = struct.Struct(">BI")
MAX_FRAME_BYTES = 65536
RAW_RECV_BUFFER_BYTES = 1 << 20
TARGET_RATIO = 0.8
TARGET_GROWTH_MB = 50.0
DEFAULT_REPORT = REPO / "reports" / "benchmarks" / "v2_channel_throughput.json"


def plugin_argv() -> list[str]:
    return reference_plugin_argv("--dialect", DIALECT)


def command_for(size: int) -> str:
    return f"head -c {size} /dev/zero"


# -- the raw baseline: a minimal v2 host --------------------------------------------------------------


class RawHost:
    """The reference plugin as a process, spoken to with nothing but what one streamed exec needs."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="v2-bench-raw-")  # mode 0700
        self.socket_path = os.path.join(self.directory, "data.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.socket_path)
        self.listener.listen(4)
        self.listener.settimeout(30.0)  # for the plugin's connection; the connection itself blocks
        self.process = subprocess.Popen(plugin_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=scrubbed_environment((), PASS_ENV))
        self.buffer = bytearray(RAW_RECV_BUFFER_BYTES)
        self._answers: dict[int, dict[str, Any]] = {}
        self._arrived = threading.Condition()
        self._ids = 0
        self._channel_ids = 0
        threading.Thread(target=self._read_control, daemon=True).start()
        transport = {"socket_path": self.socket_path, "max_frame_bytes": MAX_FRAME_BYTES, "open_ack": True}
        self.result(self.send("initialize", {"protocol_version": 2, "data_transport": transport}))
        created = self.result(self.send("sandbox/create", {"spec": {"source": "host_directory"}}))
        self.sandbox_id = created["status"]["id"]

    def _read_control(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            message = json.loads(line)
            if "id" in message:  # notifications (events) are not this host's business
                with self._arrived:
                    self._answers[message["id"]] = message
                    self._arrived.notify_all()

    def send(self, method: str, params: dict[str, Any]) -> int:
        self._ids += 1
        send_request(self.process, self._ids, method, params)
        return self._ids

    def result(self, request_id: int, timeout_s: float = 600.0) -> Any:
        with self._arrived:
            if not self._arrived.wait_for(lambda: request_id in self._answers, timeout_s):
                sys.exit(f"the raw host got no answer to request {request_id}")
            answer = self._answers.pop(request_id)
        if "result" not in answer:
            sys.exit(f"the raw host's request {request_id} failed: {answer.get('error')}")
        return answer["result"]

    def stream(self, size: int) -> tuple[int, None]:
        """One ``exec/stream`` of ``size`` bytes; the stdout bytes that crossed its channel."""
        self._channel_ids += 1
        token = secrets.token_hex(32)
        spec = {"program": "bash", "args": ["-c", command_for(size)], "env": {"BASH_ENV": ""}, "timeout_ms": 600_000}
        request_id = self.send("exec/stream", {"sandbox_id": self.sandbox_id, "exec_id": f"raw-{self._channel_ids}",
                                               "spec": spec, "stdin": False,
                                               "channel": {"channel_id": self._channel_ids, "token": token}})
        try:
            connection, _ = self.listener.accept()
        except TimeoutError:
            sys.exit("the plugin never connected to the raw host's socket")
        with connection:
            connection.settimeout(None)
            kind, length = HEADER.unpack(connection.recv(HEADER.size, socket.MSG_WAITALL))
            opened = json.loads(connection.recv(length, socket.MSG_WAITALL))
            if kind != OPEN or opened.get("token") != token:
                sys.exit("the raw host's channel was not opened as asked")
            if opened.get("acknowledge"):
                connection.sendall(HEADER.pack(OPEN, 0))
            received = self._drain(connection)
        self.result(request_id)
        return received, None

    def _drain(self, connection: socket.socket) -> int:
        """Read frames to the plugin's eof, discarding payloads; the stdout/stderr bytes seen."""
        view = memoryview(self.buffer)
        header = bytearray(HEADER.size)
        have_header = 0  # bytes of the current header read so far (a header may straddle two reads)
        payload_left = 0
        data = 0
        while True:
            count = connection.recv_into(view)
            if count == 0:
                sys.exit("the plugin closed the raw host's channel before its eof")
            at = 0
            while at < count:
                if payload_left:
                    take = min(payload_left, count - at)
                    payload_left -= take
                    data += take
                    at += take
                    continue
                take = min(HEADER.size - have_header, count - at)
                header[have_header:have_header + take] = view[at:at + take]
                have_header += take
                at += take
                if have_header == HEADER.size:
                    have_header = 0
                    kind, payload_left = HEADER.unpack(header)
                    if kind == EOF:
                        return data
                    if kind not in (STDOUT, STDERR):
                        sys.exit(f"the raw host got a frame of kind {kind}")

    def close(self) -> None:
        end_plugin(self.process)
        self.listener.close()
        shutil.rmtree(self.directory, ignore_errors=True)


# -- the suite's path ---------------------------------------------------------------------------------


class AdapterHost:
    """The same plugin behind ``open_provider``, as a run of the suite reaches it."""

    def __init__(self) -> None:
        config = ProviderConfig(plugin=shlex.join(plugin_argv()), dialect=DIALECT, pass_env=PASS_ENV, run_id="bench")
        self.adapter = open_provider(config)
        self.sandbox_id = self.adapter.create(SandboxRequest()).id

    def stream(self, size: int) -> tuple[int, float]:
        """One ``exec/stream`` of ``size`` bytes: the stdout bytes that crossed its channel (the record's
        count: the outcome retains at most 16 MiB of them), and the seconds from the start to the
        plugin's answer."""
        running = self.adapter.streams.start_exec(self.sandbox_id, ExecRequest(command_for(size), timeout_s=600))
        outcome = running.wait()
        if outcome.result.outcome != "ran" or outcome.result.exit_code != 0 or outcome.answered_at is None:
            sys.exit(f"the adapter's exec/stream failed: {outcome.result}")
        retained = len(outcome.result.stdout)
        if retained != min(size, UNLIMITED_RETAINED_BYTES):
            sys.exit(f"the adapter's outcome retained {retained} bytes of {size} (expected "
                     f"{min(size, UNLIMITED_RETAINED_BYTES)})")
        totals = outcome.record.totals.get("stdout")
        return (totals.length if totals is not None else 0), outcome.answered_at - outcome.started_at

    def stream_discarding(self, size: int) -> int:
        """``size`` bytes through a stdio process's channel, each frame dropped once read."""
        processes = self.adapter.processes
        process_id = processes.open(self.sandbox_id, command_for(size))
        received = 0
        while (chunk := processes.read(process_id, timeout_s=60)) is not None:
            received += len(chunk)
        processes.wait(process_id, timeout_s=60)
        return received

    def close(self) -> None:
        violations = self.adapter.take_violations()
        self.adapter.close()
        if violations:
            sys.exit(f"the adapter reported wire violations: {violations[:3]}")


# -- measuring ----------------------------------------------------------------------------------------


def timed_stream(stream: Any, size: int) -> tuple[float, Any]:
    """One stream of ``size`` bytes: its seconds, and what it said of its answer."""
    started = time.perf_counter()
    received, answered_after = stream(size)
    elapsed = time.perf_counter() - started
    if received != size:
        sys.exit(f"{received} bytes arrived of {size}")
    return elapsed, answered_after


def rate(size: int, seconds: list[float]) -> float:
    """The best MB/s (10^6 bytes per second) of those runs."""
    return size / min(seconds) / 1e6


def memory_status() -> dict[str, int]:
    """VmRSS and VmHWM of this process, in KiB."""
    text = Path("/proc/self/status").read_text()
    return {key: int(re.search(rf"^{key}:\s+(\d+)", text, re.MULTILINE).group(1)) for key in ("VmRSS", "VmHWM")}


def peak_growth_mb(run: Any) -> tuple[float, float]:
    """Run ``run()``; how far this process's peak RSS rose above its RSS before (MB), and the seconds."""
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    before = memory_status()["VmRSS"]
    started = time.perf_counter()
    run()
    elapsed = time.perf_counter() - started
    return (memory_status()["VmHWM"] - before) * 1024 / 1e6, elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=byte_count, default=256 * MIB, dest="size",
                        help="bytes of each timed exec/stream (default 256MiB)")
    parser.add_argument("--memory-bytes", type=byte_count, default=1 << 30,
                        help="bytes streamed through one channel for the memory figure (default 1GiB)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each configuration (the best counts)")
    parser.add_argument("--output", type=Path, default=DEFAULT_REPORT, help="where the JSON figures go")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    adapter_host = AdapterHost()
    raw_host: RawHost | None = None
    try:
        adapter_host.stream(MIB)  # warm-up: first channel, imports on both sides
        growth_mb, memory_s = peak_growth_mb(lambda: adapter_host.stream_discarding(args.memory_bytes))
        raw_host = RawHost()
        raw_host.stream(MIB)
        raw_times, adapter_times, to_answer = [], [], []
        for _ in range(args.repeat):  # interleaved, so a busy moment of the (shared) machine hits both alike
            raw_times.append(timed_stream(raw_host.stream, args.size)[0])
            elapsed, answered_after = timed_stream(adapter_host.stream, args.size)
            adapter_times.append(elapsed)
            to_answer.append(answered_after)
    finally:
        adapter_host.close()
        if raw_host is not None:
            raw_host.close()

    raw_rate, adapter_rate, answer_rate = rate(args.size, raw_times), rate(args.size, adapter_times), \
        rate(args.size, to_answer)
    ratio, answer_ratio = adapter_rate / raw_rate, answer_rate / raw_rate
    memory_rate = args.memory_bytes / memory_s / 1e6
    print(f"one exec/stream of {args.size} bytes, best of {args.repeat}; v2 reference plugin as a process")
    print(f"{'configuration':<48}{'MB/s':>10}{'× raw':>8}")
    print(f"{'raw host, recv_into and discard (baseline)':<48}{raw_rate:>10.1f}{1.0:>8.2f}")
    print(f"{'adapter: streams.start_exec / wait':<48}{adapter_rate:>10.1f}{ratio:>8.2f}")
    print(f"{'adapter, clock stopped at the answer':<48}{answer_rate:>10.1f}{answer_ratio:>8.2f}")
    print(f"ratio {ratio:.2f} (target ≥ {TARGET_RATIO}); the channel path alone {answer_ratio:.2f}")
    print(f"memory: {args.memory_bytes} bytes through one stdio-process channel, read and dropped: peak RSS "
          f"+{growth_mb:.1f} MB (target < {TARGET_GROWTH_MB:g} MB), {memory_rate:.1f} MB/s")
    document = {
        "benchmark": "v2_channel_throughput",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_average": os.getloadavg()},
        "throughput": {
            "bytes": args.size, "repeat": args.repeat,
            "raw": {"best_mb_per_s": raw_rate, "seconds": raw_times},
            "adapter": {"best_mb_per_s": adapter_rate, "seconds": adapter_times,
                        "to_answer_best_mb_per_s": answer_rate, "to_answer_seconds": to_answer},
            "ratio": ratio, "to_answer_ratio": answer_ratio, "target_ratio": TARGET_RATIO,
            "meets_target": ratio >= TARGET_RATIO,
        },
        "memory": {
            "bytes": args.memory_bytes, "consumer": "processes.read, each frame dropped",
            "peak_rss_growth_mb": growth_mb, "mb_per_s": memory_rate, "seconds": memory_s,
            "target_growth_mb": TARGET_GROWTH_MB, "meets_target": growth_mb < TARGET_GROWTH_MB,
        },
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=2) + "\n")
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
