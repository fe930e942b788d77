"""The pytest plugin behind ``sandbox-conformance run``.

Inert unless ``--conformance`` is given. When active it loads the step definitions, turns scenario
tags into markers, selects and gates scenarios, records a transcript per scenario, cleans up every
sandbox a scenario created, and writes the reports when the run ends (on the xdist controller when
running in parallel, so workers never aggregate).
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import sys
import time
import types
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from faker import Faker

from conformance import bundle, interrupts, requirements
from conformance.adapter import ProviderAdapter
from conformance.dialects.jsonrpc import raise_wire_violations
from conformance.errors import ConformanceError, NotExpressible, UsageError, is_provider_fault
from conformance.providers import ProviderConfig, parse_env_pairs
from conformance.reporting import catalogue as scenario_catalogue
from conformance.reporting import writer
from conformance.reporting.baseline import Baseline, write_baseline
from conformance.reporting.model import ScenarioResult
from conformance.scenario_tags import ScenarioTags, TagExpression, example_key
from conformance.session import CleanupReport, ProviderSession, scenario_owner
from conformance.transcript import REDACTOR, Transcript

STEPS_PACKAGE = "conformance_steps"
PAYLOAD_KEY = "sandbox-conformance"


@dataclass
class ScenarioInfo:
    """What the suite knows about a collected scenario before it runs."""

    scenario_id: str
    name: str
    feature: str
    tags: ScenarioTags

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.scenario_id, "name": self.name, "feature": self.feature,
                "level": self.tags.level, "requirements": list(self.tags.requirements),
                "capabilities": list(self.tags.capabilities), "dialects": list(self.tags.dialects)}


def requirement_texts(ids: list[str]) -> dict[str, str]:
    """What each requirement says, for the people reading a failure."""
    registry = requirements.load()
    return {rid: registry[rid].text for rid in ids if rid in registry}


@dataclass
class ScenarioRecord:
    """What happens while a scenario runs: its transcript, the step that broke, its fresh providers."""

    adapter: ProviderAdapter
    stderr_start: int = 0
    transcript: Transcript = field(default_factory=Transcript)
    failed_step: str | None = None
    fresh: list[ProviderAdapter] = field(default_factory=list)
    cleanup: CleanupReport = field(default_factory=CleanupReport)
    findings: dict[str, dict[str, str]] = field(default_factory=dict)  # requirement id → what was found

    def stderr(self) -> str:
        """What the providers of this scenario wrote to stderr while it ran."""
        parts = [self.adapter.stderr_tail(since=self.stderr_start)]
        parts += [f"--- freshly started provider #{number} ---\n{fresh.stderr_tail()}"
                  for number, fresh in enumerate(self.fresh, start=1)]
        return "\n".join(part for part in parts if part.strip())

    def violations(self) -> list[Any]:
        found = list(self.adapter.take_violations())
        for adapter in self.fresh:
            found.extend(adapter.take_violations())
        return found


INFO = pytest.StashKey[ScenarioInfo]()
RECORD = pytest.StashKey[ScenarioRecord]()
STATE = pytest.StashKey["RunState"]()


class RunState:
    """Per-process state of a conformance run."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        option = config.option
        worker_input = getattr(config, "workerinput", None)
        self.is_worker = worker_input is not None
        self.run_id = (worker_input or {}).get("sc_run_id") or option.sc_run_id or f"run-{uuid.uuid4().hex[:12]}"
        try:
            create_spec = json.loads(option.sc_create_spec) if option.sc_create_spec else None
        except json.JSONDecodeError as exc:
            raise UsageError(f"--create-spec is not valid JSON: {exc}") from None
        self.provider_config = ProviderConfig(
            plugin=option.sc_plugin, dialect=option.sc_dialect,
            env=parse_env_pairs(option.sc_env or []), pass_env=list(option.sc_pass_env or []),
            create_spec=create_spec, run_id=self.run_id, call_timeout_s=option.sc_call_timeout,
            sandboxes_per_process=option.sc_sandboxes_per_process,
            rest_url=option.sc_rest, profile=option.sc_profile, image=option.sc_image,
        )
        self.provider_config.validate()
        self.report_dir = Path(option.sc_report_dir)
        self.session: ProviderSession | None = None
        self.provider_info: dict[str, Any] = {}
        self.results: dict[str, ScenarioResult] = {}
        self.unattributed_violations: list[str] = []
        self.created: list[str] = []  # every sandbox a scenario created, from the reports
        self.leaked: set[str] = set()
        self.started_at = time.time()
        self.tag_expression = TagExpression(option.sc_tags) if option.sc_tags else None
        self.selected_ids = set(option.sc_scenario or [])
        self.selected_features = [f.removeprefix("features/") for f in option.sc_feature or []]
        self.seed = (worker_input or {}).get("sc_seed") or option.sc_seed or int.from_bytes(os.urandom(4), "big")
        self.selected_scenarios: set[str] = set()  # ids the selection kept (the controller's view)
        self.strict = bool(option.sc_strict)
        self.baseline = Baseline.load(option.sc_expected_failures) if option.sc_expected_failures else None
        self.update_baseline = option.sc_update_baseline

    def provider_session(self) -> ProviderSession:
        if self.session is None:
            self.session = ProviderSession(self.provider_config)
        return self.session

    def reproduce(self, scenario_id: str) -> str:
        parts = ["sandbox-conformance", "run"]
        config = self.provider_config
        if config.image is not None:  # the container's URL is gone once the run ends; the image is not
            parts += ["--image", config.image]
        elif config.rest_url is not None:
            parts += ["--rest", config.rest_url]
        if config.is_rest and config.profile is not None:
            parts += ["--profile", config.profile]
        if config.plugin is not None:
            parts += ["--plugin", config.plugin]
        if config.dialect != "auto":
            parts += ["--dialect", config.dialect]
        if config.sandboxes_per_process != "auto":
            parts += ["--sandboxes-per-process", config.sandboxes_per_process]
        if config.create_spec is not None:
            parts += ["--create-spec", json.dumps(config.create_spec, separators=(",", ":"))]
        for name in config.env:
            parts += ["--env", f"{name}=${name}"]
        for name in config.pass_env:
            parts += ["--pass-env", name]
        parts += ["--scenario", scenario_id]
        return REDACTOR.text(shlex.join(parts))


_CONFIG: pytest.Config | None = None  # hooks such as pytest_runtest_logreport receive no config


def _enabled(config: pytest.Config | None) -> bool:
    return config is not None and bool(getattr(config.option, "conformance", False))


def _state(config: pytest.Config) -> RunState:
    return config.stash[STATE]


# -- options and configuration -------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sandbox-conformance", "sandbox provider conformance")
    group.addoption("--conformance", action="store_true", default=False, help="run the conformance scenarios")
    group.addoption("--sc-plugin", default=None, help="plugin command line (default: the reference plugin)")
    group.addoption("--sc-dialect", default="auto", help="dialect of the plugin")
    group.addoption("--sc-env", action="append", default=[], metavar="NAME=VALUE", help="plugin environment")
    group.addoption("--sc-pass-env", action="append", default=[], metavar="NAME", help="forward a variable")
    group.addoption("--sc-create-spec", default=None, help="creation spec for fixture sandboxes (JSON)")
    group.addoption("--sc-report-dir", default="reports", help="where results.json and junit.xml go")
    group.addoption("--sc-tags", default=None, help="tag expression selecting scenarios")
    group.addoption("--sc-scenario", action="append", default=[], help="run only this scenario id")
    group.addoption("--sc-feature", action="append", default=[], help="run only this feature file's scenarios")
    group.addoption("--sc-run-id", default=None, help="label value that marks this run's sandboxes")
    group.addoption("--sc-call-timeout", type=float, default=30.0, help="deadline of one provider call (s)")
    group.addoption("--sc-seed", type=int, default=None, help="seed of generated data (replays a run)")
    group.addoption("--sc-sandboxes-per-process", default="auto", help="fabro-sketch: one, many or auto")
    group.addoption("--sc-rest", default=None, metavar="URL", help="base URL of a REST provider")
    group.addoption("--sc-profile", default=None, metavar="NAME|PATH", help="REST profile (default: forkd)")
    group.addoption("--sc-image", default=None, metavar="IMAGE", help="the image the REST provider runs from")
    group.addoption("--sc-strict", action="store_true", default=False, help="SHOULD failures fail the run")
    group.addoption("--sc-expected-failures", default=None, metavar="FILE", help="baseline of known failures")
    group.addoption("--sc-update-baseline", default=None, metavar="FILE", help="write this run's failures there")


def pytest_configure(config: pytest.Config) -> None:
    global _CONFIG
    if not _enabled(config):
        return
    _CONFIG = config
    for name, doc in (("scenario_id(id)", "stable scenario id"), ("requirement(id)", "requirement"),
                      ("level(name)", "must/should/may"), ("capability(name)", "capability gate"),
                      ("dialect(name)", "dialect gate")):
        config.addinivalue_line("markers", f"{name}: {doc}")
    try:
        config.stash[STATE] = RunState(config)
    except (UsageError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None
    _load_steps(config)


def _load_steps(config: pytest.Config) -> None:
    """Import ``steps/`` as the package ``conformance_steps`` and register each module as a plugin."""
    steps_dir = bundle.steps_dir()
    pytest.register_assert_rewrite(STEPS_PACKAGE)
    package = sys.modules.get(STEPS_PACKAGE)
    if package is None:
        package = types.ModuleType(STEPS_PACKAGE)
        package.__path__ = [str(steps_dir)]
        package.__file__ = str(steps_dir / "__init__.py")
        sys.modules[STEPS_PACKAGE] = package
    for path in sorted(steps_dir.glob("*.py")):
        if path.name.startswith("_"):
            continue
        name = f"{STEPS_PACKAGE}.{path.stem}"
        module = importlib.import_module(name)
        if not config.pluginmanager.is_registered(module):
            config.pluginmanager.register(module, name)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: every worker labels its sandboxes with the controller's run id."""
    if _enabled(node.config):
        node.workerinput["sc_run_id"] = _state(node.config).run_id
        node.workerinput["sc_seed"] = _state(node.config).seed


@pytest.hookimpl(tryfirst=True)
def pytest_bdd_apply_tag(tag: str, function: Any) -> Any:
    if not _enabled(_CONFIG):
        return None
    prefix, sep, value = tag.partition(":")
    marks = {"id": pytest.mark.scenario_id, "req": pytest.mark.requirement,
             "cap": pytest.mark.capability, "dialect": pytest.mark.dialect}
    if sep and prefix in marks:
        marks[prefix](value)(function)
        return True
    if tag in ("must", "should", "may"):
        pytest.mark.level(tag)(function)
        return True
    return None


# -- session start: preflight handshake ----------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if not _enabled(config):
        return
    state = _state(config)
    if state.is_worker:
        return
    provider_session = state.provider_session()
    try:
        adapter = provider_session.shared()
    except ConformanceError as exc:
        raise pytest.UsageError(str(exc)) from None
    state.provider_info = _provider_info(adapter, state)


def _provider_info(adapter: ProviderAdapter, state: RunState) -> dict[str, Any]:
    identity = adapter.identity
    return {
        "kind": identity.kind,
        "version": identity.version,
        "protocol_version": identity.protocol_version,
        "dialect": identity.dialect,
        "transport": identity.transport,
        "command": REDACTOR.text(identity.command),
        "capabilities": adapter.capabilities.raw,
        "declared": adapter.capabilities.declared(),
        "handshake_problems": [str(p) for p in (adapter.wire.handshake_problems if adapter.wire else [])],
        "run_id": state.run_id,
        "seed": state.seed,
    }


# -- collection: scenario info, selection --------------------------------------------------------


def _scenario_info(item: pytest.Item) -> ScenarioInfo | None:
    from pytest_bdd.scenario import scenario_wrapper_template_registry

    function = getattr(item, "function", None)
    template = scenario_wrapper_template_registry.get(function) if function is not None else None
    if template is None:
        return None
    tags = ScenarioTags.parse(template.tags | template.feature.tags)
    scenario_id = tags.scenario_id or item.name
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "_pytest_bdd_example" in callspec.params:
        scenario_id = f"{scenario_id}[{example_key(callspec.params['_pytest_bdd_example'])}]"
    feature = os.path.relpath(template.feature.filename, bundle.features_dir())
    return ScenarioInfo(scenario_id, template.name, feature, tags)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _enabled(config):
        return
    state = _state(config)
    selected, deselected = [], []
    for item in items:
        info = _scenario_info(item)
        if info is None:
            selected.append(item)
            continue
        item.stash[INFO] = info
        wanted = True
        if state.selected_ids:
            base = info.scenario_id.split("[", 1)[0]
            wanted = info.scenario_id in state.selected_ids or base in state.selected_ids
        if wanted and state.selected_features:
            wanted = any(info.feature == f or info.feature.endswith("/" + f) for f in state.selected_features)
        if wanted and state.tag_expression is not None:
            wanted = state.tag_expression.matches(info.tags.tag_set())
        (selected if wanted else deselected).append(item)
        if wanted:
            state.selected_scenarios.add(info.scenario_id)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def conformance_session(request: pytest.FixtureRequest) -> Iterator[ProviderSession]:
    state = _state(request.config)
    provider_session = state.provider_session()
    yield provider_session
    if state.is_worker:
        provider_session.close()


@pytest.fixture(autouse=True)
def _conformance_scenario(request: pytest.FixtureRequest) -> Iterator[None]:
    item = request.node
    if not _enabled(request.config) or INFO not in item.stash:
        yield
        return
    info = item.stash[INFO]
    provider_session: ProviderSession = request.getfixturevalue("conformance_session")
    adapter = provider_session.shared()
    if info.tags.dialects and adapter.dialect not in info.tags.dialects:
        pytest.skip(f"applies to dialect {', '.join(info.tags.dialects)} only; the provider speaks {adapter.dialect}")
    for capability in info.tags.capabilities:
        if not adapter.capabilities.declares(capability):
            pytest.skip(f"capability {capability} not declared")
    state = _state(request.config)
    state.unattributed_violations.extend(str(v) for v in adapter.take_violations())
    record = ScenarioRecord(adapter, stderr_start=adapter.stderr_position())
    item.stash[RECORD] = record
    with adapter.recording(record.transcript), scenario_owner(adapter, info.scenario_id):
        yield
        for fresh in record.fresh:
            record.cleanup.merge(provider_session.cleanup(fresh, info.scenario_id))
            fresh.close()
        record.cleanup.merge(provider_session.cleanup(adapter, info.scenario_id))
    if record.cleanup.leaked:
        detail = "; ".join(f"{sid}: {why}" for sid, why in record.cleanup.leaked.items())
        raise AssertionError(f"could not delete the scenario's sandboxes: {detail}")


@pytest.fixture
def conformance_provider(request: pytest.FixtureRequest) -> ProviderAdapter:
    """The shared adapter, recording into this scenario's transcript."""
    return request.node.stash[RECORD].adapter


@pytest.fixture
def conformance_fresh_provider(request: pytest.FixtureRequest):
    """A factory for newly started providers that record into this scenario's transcript."""
    record: ScenarioRecord = request.node.stash[RECORD]
    provider_session: ProviderSession = request.getfixturevalue("conformance_session")
    owner = request.node.stash[INFO].scenario_id

    def start(handshake: bool = True) -> ProviderAdapter:
        adapter = provider_session.fresh(handshake=False)
        adapter.owner = owner
        adapter.add_transcript(record.transcript)
        record.fresh.append(adapter)
        if handshake:
            adapter.handshake(strict=False)
        return adapter

    return start


@pytest.fixture
def conformance_finding(request: pytest.FixtureRequest):
    """Records what a scenario found out about a requirement with several honest outcomes (a gap:
    ``supported`` or ``refused``), for the gap section of the report."""
    record: ScenarioRecord = request.node.stash[RECORD]

    def note(requirement: str, status: str, detail: str) -> None:
        record.findings[requirement] = {"status": status, "detail": detail}

    return note


@pytest.fixture
def conformance_faker(request: pytest.FixtureRequest) -> Faker:
    """Generated data for this scenario: the same run seed and scenario id give the same values."""
    state = _state(request.config)
    scenario_id = request.node.stash[INFO].scenario_id
    faker = Faker()
    faker.seed_instance(f"{state.seed}:{scenario_id}")
    return faker


# -- running and reporting -----------------------------------------------------------------------


def pytest_bdd_step_error(request: pytest.FixtureRequest, step: Any, exception: Exception, **_: Any) -> None:
    record = request.node.stash.get(RECORD, None)
    if record is not None and record.failed_step is None:
        record.failed_step = f"{step.keyword} {step.name} (line {step.line_number})"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    record = item.stash.get(RECORD, None)
    try:
        result = yield
    except NotExpressible as gap:
        pytest.skip(str(gap))
    except BaseException:
        if record is not None:
            for violation in record.violations():
                record.transcript.record("suite", "note", f"also: {violation}")
        raise
    if record is not None:
        raise_wire_violations(record.violations())
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if _enabled(item.config) and INFO in item.stash:
        report.user_properties.append((PAYLOAD_KEY, _payload(item, call, report)))
    return report


def _payload(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> dict[str, Any]:
    info = item.stash[INFO]
    payload: dict[str, Any] = {"info": info.as_dict(), "phase": report.when, "duration_s": report.duration}
    record = item.stash.get(RECORD, None)
    if report.when == "teardown" and record is not None:
        payload["sandboxes"] = {"created": record.cleanup.created, "leaked": sorted(record.cleanup.leaked)}
    if report.when == "call" and record is not None and record.findings:
        payload["findings"] = record.findings
    if report.passed:
        payload["outcome"] = "passed"
        return payload
    if report.skipped:
        payload["outcome"] = "skipped"
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        payload["message"] = reason.removeprefix("Skipped: ")
        return payload
    exception = call.excinfo.value if call.excinfo is not None else None
    payload["outcome"] = "failed" if exception is not None and is_provider_fault(exception) else "error"
    payload["message"] = REDACTOR.text(_describe(exception))
    state = _state(item.config)
    payload["reproduce"] = state.reproduce(info.scenario_id)
    payload["requirement_texts"] = requirement_texts(list(info.tags.requirements))
    if record is not None:
        payload["step"] = record.failed_step
        payload["transcript"] = record.transcript.render()
        payload["transcript_omitted"] = record.transcript.omitted
        payload["stderr"] = REDACTOR.text(record.stderr())
    return payload


def _describe(exception: BaseException | None) -> str:
    if exception is None:
        return "unknown failure"
    text = str(exception).strip()
    kind = type(exception).__name__
    if not text:
        return kind
    return text if isinstance(exception, AssertionError | ConformanceError) else f"{kind}: {text}"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    payload = dict(report.user_properties).get(PAYLOAD_KEY)
    if payload is None:
        return
    config = _CONFIG
    if not _enabled(config) or STATE not in config.stash:
        return
    state = _state(config)
    if state.is_worker:
        return
    info = payload["info"]
    result = state.results.get(report.nodeid)
    if result is None:
        result = ScenarioResult(
            id=info["id"], name=info["name"], feature=info["feature"], nodeid=report.nodeid,
            level=info["level"], requirements=info["requirements"], capabilities=info["capabilities"],
            dialects=info["dialects"],
        )
        state.results[report.nodeid] = result
    result.absorb(payload["phase"], payload)
    sandboxes = payload.get("sandboxes")
    if sandboxes:
        state.created.extend(sandboxes["created"])
        state.leaked.update(sandboxes["leaked"])


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if not _enabled(config) or STATE not in config.stash:
        return
    state = _state(config)
    if state.is_worker:
        return
    with interrupts.shielded():
        _finish_run(session, config, state, exitstatus)


def _finish_run(session: pytest.Session, config: pytest.Config, state: RunState, exitstatus: int) -> None:
    """Sweep, fold every scenario's result, apply the baseline, decide the verdict, write the reports."""
    sweep = state.session.sweep() if state.session is not None else CleanupReport()
    shared = state.session.current() if state.session is not None else None
    if state.session is not None:
        state.session.close()
    leaked = (state.leaked - set(sweep.deleted)) | set(sweep.leaked)
    results = list(state.results.values())
    seen = {r.id for r in results}
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or interrupts.INTERRUPTED.is_set()
    catalogue = scenario_catalogue.all_scenarios()
    for entry in catalogue:
        if entry.id not in seen:
            result = entry.disabled_result()
            if interrupted and entry.id in state.selected_scenarios:
                result.message = "not reached: the run was interrupted"
            results.append(result)
    baseline_report = None
    if state.baseline is not None:
        known = {entry.id for entry in catalogue} | {entry.id.split("[", 1)[0] for entry in catalogue}
        known |= set(requirements.load())
        baseline_report = {"source": state.baseline.source, "entries": state.baseline.apply(results, known)}
    if interrupted:
        for result in results:
            if result.outcome != "disabled" and "teardown" not in result.phases:
                result.outcome = "error"
                result.message = "the run was interrupted before this scenario finished"
                # Its teardown deleted its sandboxes but never reported: count them from the ledger.
                owned = shared.ledger.owned(result.id) if shared is not None else []
                state.created.extend(sid for sid in owned if sid not in state.created)
    document = writer.write_reports(
        state.report_dir, results, provider=state.provider_info, run_id=state.run_id,
        started_at=state.started_at, unattributed=state.unattributed_violations,
        sandboxes={"created": len(state.created), "deleted": len(state.created) - len(state.leaked & set(state.created)),
                   "leaked": sorted(leaked), "swept": sorted(sweep.deleted)},
        seed=state.seed, interrupted=interrupted, strict=state.strict, baseline=baseline_report,
    )
    if state.update_baseline:
        write_baseline(state.update_baseline, results, previous=state.baseline)
    config.stash[writer.DOCUMENT] = document
    # The verdict, not pytest's tally, decides: SHOULD failures only warn without --strict, and a run
    # that verified nothing fails. Interruptions and usage errors keep pytest's own codes.
    if interrupted:
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    elif exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        session.exitstatus = pytest.ExitCode.OK if document["verdict"]["passed"] else pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    global _CONFIG
    if config is _CONFIG:
        _CONFIG = None


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not _enabled(config) or writer.DOCUMENT not in config.stash:
        return
    from conformance.reporting import terminal

    terminal.print_summary(config.stash[writer.DOCUMENT], terminalreporter)
