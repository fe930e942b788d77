"""Streams consumed as they arrive (issue 13): a stream's record stays bounded whatever the volume, a
scenario judging volume compares as chunks come, and output sent after the answer is caught by waiting
on arrivals, not on a fixed grace — a plugin that sends it a whole second late is still reported."""

from __future__ import annotations

import shlex
import subprocess
import sys
import threading
import time

import pytest

from conformance.adapter import (
    STREAM_BYTES_KEPT,
    CaptureStats,
    ExecOutcome,
    ExecRequest,
    OutputChunk,
    SandboxRequest,
    StreamOutcome,
    StreamRecord,
)
from conformance.dialects.sandbox_driver_v2.facets import RetainedCopy, retained_copy
from conformance.errors import HarnessError
from conformance.providers import ProviderConfig, open_provider, reference_plugin_argv
from steps._shared import BlockComparison
from tests.helpers import REPO

LATE_PLUGIN = REPO / "tests" / "hostile" / "late_output.py"


def _outcome(record: StreamRecord, observed: int) -> StreamOutcome:
    return StreamOutcome(ExecOutcome("ran", "exited", 0, None, b"", b"", None), record, 0.0, 1.0, 10,
                         stdout_capture=CaptureStats(observed, 0, observed, False))


# -- the record -------------------------------------------------------------------------------------


def test_a_record_keeps_the_first_chunks_and_counts_the_rest() -> None:
    record = StreamRecord(chunks_kept=4, bytes_kept=100, edge_bytes=8)
    for index in range(10):
        record.add(float(index), index + 1, "stdout", bytes([65 + index]) * 30)
    record.add(11.0, 12, "stderr", b"late", late=True)
    kept = record.chunks()
    assert [c.sequence for c in kept] == [1, 2, 3, 12]  # 3 × 30 bytes fit in 100, then the late one
    assert record.count == 11 and record.dropped == 7 and record.late_count == 1
    assert record.tags == {"stdout", "stderr"} and record.late_lengths == {"stderr": 4}
    totals = record.totals["stdout"]
    assert (totals.chunks, totals.length) == (10, 300)
    assert bytes(totals.head) == b"A" * 8 and totals.last(8) == b"J" * 8
    with pytest.raises(HarnessError, match="more than a record keeps whole"):
        record.streamed("stdout")


def test_a_small_stream_is_kept_whole_and_late_bytes_never_count() -> None:
    record = StreamRecord()
    record.add(0.0, 1, "stdout", b"one ")
    record.add(0.1, 2, "stderr", b"err")
    record.add(0.2, 3, "stdout", b"two")
    record.add(0.4, 5, "stdout", b" late", late=True)
    assert record.streamed("stdout") == b"one two" and record.streamed() == b"one errtwo"
    assert record.streamed("stderr") == b"err"


def test_a_record_of_a_large_volume_stays_within_its_bounds() -> None:
    record = StreamRecord()
    block = bytes(64 << 10)
    for index in range(4096):  # 256 MiB through it; the same block object each time
        record.add(float(index), index + 1, "stdout", block)
    kept = record.chunks()
    assert sum(len(c.data) for c in kept) <= STREAM_BYTES_KEPT
    assert record.totals["stdout"].length == 256 << 20 and len(record.totals["stdout"].tail) <= 2 * 4096


def test_observers_see_every_chunk_before_the_response_and_none_after() -> None:
    seen: list[OutputChunk] = []
    record = StreamRecord((seen.append,), chunks_kept=1)
    record.add(0.0, 1, "stdout", b"a")
    record.add(0.0, 2, "stdout", b"b")
    record.add(0.0, 4, "stdout", b"c", late=True)
    assert [c.data for c in seen] == [b"a", b"b"]


def test_a_failing_observer_is_the_suite_s_error_raised_where_the_stream_is_read() -> None:
    def broken(_chunk: OutputChunk) -> None:
        raise ValueError("observer bug")

    record = StreamRecord((broken,))
    record.add(0.0, 1, "stdout", b"a")  # on the reader thread: never raised there
    with pytest.raises(HarnessError, match="observer bug"):
        record.check_observers()


# -- late output: waited for on arrivals ------------------------------------------------------------


def test_awaiting_late_output_returns_at_once_when_nothing_is_missing() -> None:
    record = StreamRecord()
    record.add(0.0, 1, "stdout", b"12345")
    started = time.monotonic()
    assert _outcome(record, 5).await_late(30.0)
    assert time.monotonic() - started < 1.0


def test_awaiting_late_output_ends_when_the_missing_bytes_arrive() -> None:
    record = StreamRecord()
    record.add(0.0, 1, "stdout", b"12")
    outcome = _outcome(record, 5)
    threading.Timer(0.2, lambda: record.add(0.3, 12, "stdout", b"345", late=True)).start()
    started = time.monotonic()
    assert outcome.await_late(30.0)
    assert time.monotonic() - started < 10.0 and outcome.late_chunks == 1


def test_awaiting_late_output_gives_up_at_its_deadline() -> None:
    record = StreamRecord()
    assert not _outcome(record, 5).await_late(0.05)


def test_output_sent_a_second_after_the_answer_is_reported_as_late(tmp_path) -> None:
    """A real plugin process: the old fixed 0.3 s grace would have missed all of it."""
    plugin = shlex.join([sys.executable, str(LATE_PLUGIN), "--late-after", "1.0"])
    completed = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--plugin", plugin,
                                "--scenario", "stream-output-before-response", "--report-dir", str(tmp_path)],
                               check=False, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert completed.returncode == 1, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert "output chunks arrived after the exec/stream response" in completed.stdout


# -- comparison as chunks arrive, and v2's retained copy kept the same way --------------------------------


@pytest.mark.parametrize("received, expected, difference", [
    ([b"abc", b"def"], [b"ab", b"cdef"], None),
    ([b"abX", b"def"], [b"abcdef"], (2, b"X", b"cdef")),  # what came: the rest of that chunk
    ([b"abc"], [b"abcdef"], (3, b"(end of output)", b"def")),
    ([b"abcdefgh"], [b"abc", b"def"], (6, b"gh", b"(end of output)")),
])
def test_a_block_comparison_finds_the_first_difference(received, expected, difference) -> None:
    comparison = BlockComparison("stdout", expected)
    for data in received:
        comparison(OutputChunk(0.0, 1, "stdout", data))
        comparison(OutputChunk(0.0, 1, "stderr", b"ignored: another tag"))
    assert comparison.finished() == difference


@pytest.mark.parametrize("chunk", [97, 1500])
@pytest.mark.parametrize("limit", [None, 0, 1, 7, 999, 1000, 5000])
def test_the_retained_copy_kept_as_chunks_arrive_is_the_retained_copy(limit, chunk) -> None:
    data = bytes(range(256)) * 13
    copy = RetainedCopy("stdout", limit)
    for start in range(0, len(data), chunk):
        copy(OutputChunk(0.0, 1, "stdout", data[start:start + chunk]))
        copy(OutputChunk(0.0, 1, "stderr", b"other stream"))
        # At every point, not only at the end: the ring's wrap is where a copy goes wrong.
        assert copy.value() == retained_copy(data[:start + chunk], limit)


def test_an_unlimited_retention_keeps_no_more_than_the_hosts_cap() -> None:
    from conformance.dialects.sandbox_driver_v2.facets import UNLIMITED_RETAINED_BYTES

    copy = RetainedCopy("stdout", None)
    block = bytes(range(256)) * 256  # 64 KiB
    blocks = UNLIMITED_RETAINED_BYTES // len(block) + 16
    for index in range(blocks):
        copy(OutputChunk(0.0, index, "stdout", block))
    kept = copy.value()
    assert len(kept) == UNLIMITED_RETAINED_BYTES
    assert len(copy.head) + len(copy.tail) <= UNLIMITED_RETAINED_BYTES  # the tail's ring never outgrows its share


def test_a_record_wakes_whoever_waits_on_it_at_each_chunk() -> None:
    record = StreamRecord()
    woke = threading.Event()

    def wait() -> None:
        if record.wait_until(lambda r: r.count == 2, 10.0):
            woke.set()

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    record.add(0.0, 1, "stdout", b"one")
    assert not woke.wait(0.2)
    record.add(0.0, 2, "stdout", b"two")
    assert woke.wait(5.0)
    waiter.join(5.0)
    assert record.totals["stdout"].length == 6 and record.totals["stdout"].last() == b"onetwo"
    big = bytes(range(256)) * 40  # one chunk longer than the edge: it alone is the tail
    record.add(0.0, 3, "stdout", big)
    assert record.totals["stdout"].last() == big[-4096:] and record.totals["stdout"].length == 6 + len(big)


# -- a large stream through the adapter, in bounded memory ------------------------------------------------


@pytest.mark.parametrize("dialect", ["sandbox-driver-v1", "sandbox-driver-v2"])
def test_a_large_stream_through_the_adapter_keeps_a_bounded_record(dialect) -> None:
    size = 48 << 20
    extra = ("--dialect", "sandbox-driver-v2") if dialect.endswith("v2") else ()
    adapter = open_provider(ProviderConfig(plugin=shlex.join(reference_plugin_argv(*extra)), dialect=dialect,
                                           pass_env=("PYTHONPATH",), run_id="hostile-streams"))
    try:
        sandbox = adapter.create(SandboxRequest())
        assert adapter.streams is not None
        compared = BlockComparison("stdout", (bytes(1 << 20) for _ in range(size >> 20)))
        outcome = adapter.streams.start_exec(sandbox.id, ExecRequest(f"head -c {size} /dev/zero", timeout_s=120),
                                             retained_limit=0, observers=(compared,)).wait()
        adapter.delete(sandbox.id)
    finally:
        adapter.close()
    assert outcome.result.exit_code == 0 and outcome.result.stdout == b""
    assert compared.finished() is None and outcome.record.totals["stdout"].length == size
    assert sum(len(c.data) for c in outcome.chunks) <= STREAM_BYTES_KEPT and outcome.record.dropped > 0
