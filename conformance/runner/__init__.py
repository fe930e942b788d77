"""How pytest is driven: ``run(config)`` starts the provider once (the preflight handshake), hands that
connection and the frozen ``RunConfig`` to pytest as a plugin object, and returns the results document
in memory — for the CLI and, in-process, for the suite's own tests.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

from conformance.adapter import ProviderAdapter
from conformance.config import RunConfig
from conformance.engine import Document, merge_repetitions
from conformance.errors import UsageError

SCENARIOS_MODULE = Path(__file__).with_name("scenarios.py")
INI_FILE = Path(__file__).with_name("pytest.ini")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass
class RunOutcome:
    exit_code: int  # 0 the verdict passed, 1 it did not (or the run was interrupted), 2 a usage problem
    document: Document | None  # None when the run ended before writing one
    note: str | None = None  # why there is no verdict (interrupted, internal error), for the terminal


def pytest_arguments(config: RunConfig) -> list[str]:
    argv = [
        str(SCENARIOS_MODULE),
        "-c", str(INI_FILE),
        "--rootdir", str(SCENARIOS_MODULE.parent),
        "-p", "conformance.pytest_plugin",
        "-p", "no:cacheprovider",
        # pytest's unraisable-exception report forces a full garbage collection as each run ends (80 ms in a
        # large process, twice); a provider author never sees those warnings from the suite's own objects
        "-p", "no:unraisableexception",
        "--tb=no", "-rN", "--no-header",
        "-v" if config.verbose else "-q",
    ]
    if config.selection.keyword:
        argv += ["-k", config.selection.keyword]
    if config.workers:
        argv += ["-n", str(config.workers)]
    if config.maxfail:
        argv += [f"--maxfail={config.maxfail}"]
    return [*argv, *config.pytest_args]  # last: what the user passed after `--` has the final word


def preflight(config: RunConfig) -> ProviderAdapter:
    """Start the provider and complete the handshake, so a broken setup fails fast and clearly (exit 2);
    the connection then serves the run."""
    from conformance.providers import open_provider, register_secrets, verify_pin

    register_secrets(config.provider)
    verify_pin(config.provider)
    adapter = open_provider(config.provider, channel="provider")
    try:
        if config.provider.create_spec is not None:
            problems = adapter.creation_spec_problems(config.provider.create_spec)
            if problems:
                raise UsageError(f"--create-spec is not a valid {adapter.dialect} creation spec {problems[0]}")
    except BaseException:
        adapter.close()
        raise
    return adapter


def run_once(config: RunConfig, connected: ProviderAdapter | None = None) -> RunOutcome:
    import pytest

    from conformance import interrupts
    from conformance.plugin import ConformancePlugin

    plugin = ConformancePlugin(config, connected=connected if connected is not None else preflight(config))
    code = pytest.main(pytest_arguments(config), plugins=[plugin])
    document = plugin.state.document if plugin.state is not None else None
    if interrupts.INTERRUPTED.is_set():  # whatever pytest made of it: an interrupted run never passes
        code = pytest.ExitCode.INTERRUPTED
    if code == pytest.ExitCode.OK:
        return RunOutcome(EXIT_OK, document)
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        raise UsageError("no scenario matched the selection (--scenario, --feature, --tags, -k)")
    if code == pytest.ExitCode.USAGE_ERROR:
        return RunOutcome(EXIT_USAGE, document)
    if code == pytest.ExitCode.INTERRUPTED:
        return RunOutcome(EXIT_FAILED, document, "the run was interrupted; results are incomplete")
    if code == pytest.ExitCode.INTERNAL_ERROR:
        return RunOutcome(EXIT_FAILED, document, "the suite itself failed (internal error); see the output above")
    return RunOutcome(EXIT_FAILED, document, _stopped_early(config, document))


def _stopped_early(config: RunConfig, document: Document | None) -> str | None:
    """Why a run stopped by --maxfail/-x covers fewer scenarios than selected: those it never reached
    are reported as not selected (disabled), which a reader must not take for the whole selection."""
    if not config.maxfail or document is None:
        return None
    summary = document.data["summary"]
    if summary["failed"] + summary["errors"] < config.maxfail:
        return None
    return (f"stopped after {config.maxfail} failed scenario(s) (--maxfail/-x): scenarios not reached are "
            "reported as not selected")


def run(config: RunConfig, connected: ProviderAdapter | None = None) -> RunOutcome:
    """The selection once, or ``config.repeat`` times (each repetition a complete run, its reports in
    ``repeat-K/``; the merged report, with flaky scenarios, at the top of the report directory)."""
    if config.repeat == 1:
        return run_once(config, connected)
    from conformance import interrupts

    if connected is not None:  # each repetition is a run of its own, labelled with its own run id
        connected.close()
    documents: list[Document] = []
    outcome = RunOutcome(EXIT_OK, None)
    for number in range(1, config.repeat + 1):
        attempt = replace(config, report_dir=str(Path(config.report_dir) / f"repeat-{number}"), repeat=1)
        attempt = attempt.with_provider(run_id=f"{config.run_id}-r{number}")
        print(f"sandbox-conformance: repetition {number} of {config.repeat}", file=sys.stderr)
        outcome = run_once(attempt)
        if outcome.document is not None:
            documents.append(outcome.document)
        if outcome.exit_code not in (EXIT_OK, EXIT_FAILED) or interrupts.INTERRUPTED.is_set():
            break
    if not documents:
        return outcome
    merged = merge_repetitions(config, documents)
    from conformance.reporting import terminal

    print(terminal.render_summary(merged.data, plain=not terminal.is_terminal()), end="")
    return RunOutcome(EXIT_OK if merged.passed else EXIT_FAILED, merged, outcome.note)
