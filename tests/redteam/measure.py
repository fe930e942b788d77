"""Measure the suite against a blind red team's mutants: which does it catch, which survive.

    .venv/bin/python -m tests.redteam.measure [--set blind_1] [--workers 4] [--only NAME ...] [--out FILE]

Each mutant of the set is served in-process (a plugin, or a REST server run over the built-in forkd
profile) and the WHOLE suite runs against it (--strict, so a broken
SHOULD counts). A mutant is *killed* when at least one scenario fails; *errored* when the suite could not
run against it at all (its handshake broke) or blamed itself; *survived* otherwise. A mutant that survives
in-process runs again as a real plugin process through the CLI, since some faults (a thread that keeps
the process alive after EOF) only show there. The numbers go to
stdout and, as JSON, to --out (default reports/redteam-<set>.json).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import importlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _measure(set_name: str, name: str, call_timeout_s: float) -> dict:
    import os
    import uuid

    from conformance.providers import ProviderConfig
    from tests import inprocess, redteam

    importlib.import_module(f"tests.redteam.{set_name}")
    started = time.monotonic()
    if _is_rest_server(name):
        token = f"redteam-{uuid.uuid4().hex}"
        os.environ["FORKD_TOKEN"] = token  # this worker's own environment: the forkd profile reads the token there
        with inprocess.rest_server(token, redteam.REGISTRY[name].cls, log=[]) as url:
            provider = ProviderConfig(rest_url=url, profile="forkd", call_timeout_s=call_timeout_s,
                                      run_id=f"redteam-{name}")
            return _judged(name, provider, started, "rest in-process")
    provider = ProviderConfig(in_process=("tests.redteam.serve:serve", name), call_timeout_s=call_timeout_s,
                              run_id=f"redteam-{name}")
    result = _judged(name, provider, started, "in-process")
    if result["status"] == "survived":  # some faults show only in a real process (a thread that keeps it alive)
        failed, errors = _as_a_process(name, call_timeout_s)
        result.update(status="killed" if failed else ("errored" if errors else "survived"), failed=failed,
                      errors=errors, how="as a process", seconds=round(time.monotonic() - started, 1))
    return result


def _judged(name: str, provider, started: float, how: str) -> dict:
    """The whole suite (--strict, seed 42) against ``provider``: killed (a scenario failed), errored (the run
    could not start, or only errors), or survived."""
    from conformance import runner
    from conformance.config import RunConfig
    from conformance.errors import ConformanceError

    with tempfile.TemporaryDirectory() as reports:
        config = RunConfig(provider=provider, report_dir=reports, seed=42, strict=True)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                outcome = runner.run(config)
        except ConformanceError as exc:
            return {"name": name, "status": "errored", "why": str(exc), "seconds": round(time.monotonic() - started, 1)}
    document = outcome.document
    if document is None:
        return {"name": name, "status": "errored", "why": outcome.note or "no document",
                "seconds": round(time.monotonic() - started, 1)}
    failed = sorted(document.with_outcome("failed"))
    errors = sorted(document.with_outcome("error"))
    status = "killed" if failed else ("errored" if errors else "survived")
    return {"name": name, "status": status, "failed": failed, "errors": errors, "how": how,
            "seconds": round(time.monotonic() - started, 1)}


def _is_rest_server(name: str) -> bool:
    """Whether the mutant ``name`` is a REST server (a subclass of the bundled forkd-compatible app), not a plugin."""
    from conformance.reference.rest_server import ForkdApp
    from tests import redteam

    return issubclass(redteam.REGISTRY[name].cls, ForkdApp)


def _as_a_process(name: str, call_timeout_s: float) -> tuple[list[str], list[str]]:
    """The whole suite through the CLI against the mutant as a real plugin process."""
    import subprocess

    plugin = f"{sys.executable} -m tests.redteam.serve {name}"
    with tempfile.TemporaryDirectory() as reports:
        subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--plugin", plugin, "--strict", "--seed", "42",
                        "--call-timeout", str(call_timeout_s), "--report-dir", reports], check=False, cwd=REPO,
                       capture_output=True, text=True, timeout=900)
        path = Path(reports) / "results.json"
        if not path.exists():
            return [], ["(no results: the run did not start)"]
        scenarios = json.loads(path.read_text())["scenarios"]
    return (sorted(s["id"] for s in scenarios if s["outcome"] == "failed"),
            sorted(s["id"] for s in scenarios if s["outcome"] == "error"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="blind_1", help="the module of tests/redteam holding the mutants")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--call-timeout", type=float, default=10.0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from tests import redteam

    importlib.import_module(f"tests.redteam.{args.set}")
    module = f"tests.redteam.{args.set}"
    names = [n for n, entry in redteam.REGISTRY.items()
             if entry.cls.__module__ == module and (args.only is None or n in args.only)]
    results = []
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = {pool.submit(_measure, args.set, name, args.call_timeout): name for name in names}
        for future in concurrent.futures.as_completed(futures):
            result = future.result()
            entry = redteam.REGISTRY[result["name"]]
            result["requirement"] = getattr(entry, "requirement", None)
            result["bug"] = getattr(entry, "bug", None)
            results.append(result)
            print(f"{result['status']:>8}  {result['name']}  ({result['seconds']} s) "
                  f"{' '.join(result.get('failed', [])[:4])}", flush=True)
    results.sort(key=lambda r: r["name"])
    killed = sum(r["status"] == "killed" for r in results)
    print(f"{args.set}: {killed} of {len(results)} killed "
          f"({100 * killed / max(1, len(results)):.0f}%); "
          f"survived: {', '.join(r['name'] for r in results if r['status'] == 'survived') or 'none'}; "
          f"errored: {', '.join(r['name'] for r in results if r['status'] == 'errored') or 'none'}")
    out = Path(args.out or REPO / "reports" / f"redteam-{args.set}.json")
    out.write_text(json.dumps({"set": args.set, "killed": killed, "total": len(results), "results": results},
                              indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
