"""The suite run inside this process: the runner's ``run(config)`` against a plugin served on a thread
(``conformance/transports/memory.py``) or a REST server on a thread, the document returned in memory.

Where starting a process is not the point, our tests use this instead of the CLI: no interpreter start,
no plugin process, no results.json to read back.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import pickle
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from conformance import cli, runner
from conformance.config import RunConfig, Selection
from conformance.engine import Document
from conformance.providers import ProviderConfig

HOST_PLUGIN = "conformance.reference.host_plugin:serve"
HOST_MUTANT = "tests.mutants.launch:serve_host_mutant"


def plugin(*argv: str, mutant: str | None = None, **fields) -> ProviderConfig:
    """A host plugin (the reference, or the host mutant ``mutant``) served in this process."""
    target = (HOST_MUTANT, mutant, *argv) if mutant is not None else (HOST_PLUGIN, *argv)
    return ProviderConfig(in_process=target, **fields)


@dataclass
class InProcessRun:
    exit_code: int
    document: Document
    output: str  # what the run printed (the terminal summary)
    stderr: str  # what it wrote on stderr, with the CLI's ``FAIL: reason`` lines (``cli.report``)
    report_dir: Path  # where results.json and junit.xml were written

    @property
    def stdout(self) -> str:
        return self.output

    @property
    def results(self) -> dict:
        return self.document.data

    def outcomes(self) -> dict[str, str]:
        return self.document.outcomes()

    def with_outcome(self, *outcomes: str) -> set[str]:
        return self.document.with_outcome(*outcomes)


def run_suite(provider: ProviderConfig, report_dir: Path, *, scenarios: tuple[str, ...] = (),
              features: tuple[str, ...] = (), tags: str | None = None, keyword: str | None = None,
              strict: bool = False, seed: int | None = 42, expected_failures: str | None = None,
              update_baseline: str | None = None, repeat: int = 1, maxfail: int = 0,
              shard: tuple[int, int] | None = None) -> InProcessRun:
    """Run the selection against ``provider`` and return what the CLI would have written and printed.

    ``seed=None`` draws a seed as the CLI does without ``--seed``, and a provider without a run id gets a
    fresh one, as the CLI gives it without ``--run-id``. The exit code is the CLI's (0 or 1);
    a usage problem raises ``UsageError`` where the CLI would exit 2."""
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "big")
    if provider.run_id == ProviderConfig.run_id:  # no run id given: a fresh one, as the CLI draws
        provider = replace(provider, run_id=f"run-{uuid.uuid4().hex[:12]}")
    selection = Selection(scenarios=scenarios, features=features, tags=tags, keyword=keyword, shard=shard)
    config = RunConfig(provider=provider, selection=selection, report_dir=str(report_dir), seed=seed, strict=strict,
                       expected_failures=expected_failures, update_baseline=update_baseline, repeat=repeat, maxfail=maxfail)
    printed, written = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(written):
        outcome = runner.run(config)
        exit_code = cli.report(outcome)
    assert outcome.document is not None, f"the run wrote no document (exit {outcome.exit_code}): {outcome.note}"
    return InProcessRun(exit_code, outcome.document, printed.getvalue(), written.getvalue(), Path(report_dir))


def run_once(tmp_path_factory: Any, name: str, run: Callable[[Path], InProcessRun]) -> InProcessRun:
    """``run(report_dir)`` once for every xdist worker of this session: a module fixture is set up again on each
    worker that takes one of its tests (worksteal spreads a module's tests), and a whole-suite run is what costs.
    The first worker to take the lock runs it and saves it; the others read it. Under xdist the base temp's
    parent is this session's and shared by its workers; without xdist it is shared by sessions, so not used."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = shared / "run.pickle"
        if not saved.exists():
            saved.write_bytes(pickle.dumps(run(shared / "reports")))
        return pickle.loads(saved.read_bytes())


@contextlib.contextmanager
def rest_server(token: str, app_class=None, log: list[str] | None = None) -> Iterator[str]:
    """The reference REST server (or a mutant ``app_class``) on a thread on a free loopback port; its URL.

    With ``log``, the server's log lines (what a server process prints on stderr) are appended to it
    instead; without, they go to this process's stderr as they would."""
    from conformance.reference import rest_server as server_module

    cls = app_class or server_module.ForkdApp
    app = cls(token)
    if log is not None:
        app.log = log.append
    server = server_module.build_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        app.close()
        thread.join(timeout=5)
