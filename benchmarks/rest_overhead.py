"""Benchmark: what the REST adapter costs over plain HTTP, against the bundled forkd-compatible server.

Performance is measured here, never asserted in a test. The raw baseline is the same create → exec →
delete cycle sent with a bare httpx client (no profile, no transcript, no redaction) to the same server in
the same run; the adapter's figure is reported as a ratio to it.

    .venv/bin/python benchmarks/rest_overhead.py [--cycles N]
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
TOKEN_ENV = "FORKD_TOKEN"


def start_server(token: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, "-m", "conformance.reference.rest_server", "--host", "127.0.0.1",
                                "--port", "0", "--token-env", TOKEN_ENV], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, cwd=REPO, env={**os.environ, TOKEN_ENV: token})
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("listening on "):
        process.kill()
        sys.exit(f"the reference REST server did not start: {line!r}")
    return process, line.removeprefix("listening on ").strip()


def raw_cycle(client: httpx.Client) -> None:
    created = client.post("/v1/sandboxes", json={"snapshot_tag": "default"})
    created.raise_for_status()
    body = created.json()
    sandbox_id = (body[0] if isinstance(body, list) else body)["id"]
    ran = client.post(f"/v1/sandboxes/{sandbox_id}/exec", json={"args": ["bash", "-c", "echo hi"], "timeout_secs": 30})
    ran.raise_for_status()
    assert ran.json()["stdout"] == "hi\n"
    client.delete(f"/v1/sandboxes/{sandbox_id}").raise_for_status()


def adapter_cycle_factory(url: str) -> tuple[Callable[[], None], Callable[[], None]]:
    from conformance.adapter import ExecRequest, SandboxRequest
    from conformance.providers import ProviderConfig, open_provider

    adapter = open_provider(ProviderConfig(rest_url=url, profile="forkd", run_id="bench"))

    def cycle() -> None:
        handle = adapter.create(SandboxRequest())
        outcome = adapter.exec(handle.id, ExecRequest(command="echo hi"))
        assert outcome.stdout == b"hi\n", outcome
        adapter.delete(handle.id)

    return cycle, adapter.close


def per_cycle_ms(cycle: Callable[[], None], cycles: int) -> float:
    cycle()  # warm-up: connection, imports, first sandbox directory
    samples = []
    for _ in range(cycles):
        started = time.perf_counter()
        cycle()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=30, help="create → exec → delete cycles per configuration")
    args = parser.parse_args()
    token = secrets.token_urlsafe(16)
    os.environ[TOKEN_ENV] = token
    process, url = start_server(token)
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            raw = per_cycle_ms(lambda: raw_cycle(client), args.cycles)
        cycle, close = adapter_cycle_factory(url)
        try:
            adapted = per_cycle_ms(cycle, args.cycles)
        finally:
            close()
    finally:
        process.terminate()
        process.wait(timeout=10)
    print(f"{'configuration':<34}{'median per cycle':>18}{'× raw':>8}")
    print(f"{'raw httpx (baseline)':<34}{raw:>15.2f} ms{1.0:>8.2f}")
    print(f"{'REST adapter (forkd profile)':<34}{adapted:>15.2f} ms{adapted / raw:>8.2f}")
    print(f"adapter overhead: {adapted - raw:.2f} ms per create → exec → delete ({args.cycles} cycles each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
