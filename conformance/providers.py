"""Turning a provider configuration into a connected adapter: spawn, detect the dialect, handshake."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from conformance.adapter import ProviderAdapter
from conformance.dialects import fabro_sketch, jsonrpc, rest, sandbox_driver_v1
from conformance.dialects.common import SchemaRules
from conformance.errors import (
    CallTimeout,
    ProviderCallError,
    ProviderCrashed,
    ProviderStartError,
    UsageError,
)
from conformance.schemas import SchemaProblem
from conformance.transcript import REDACTOR
from conformance.transports.http import valid_base_url
from conformance.transports.process import ProcessTransport, scrubbed_environment

DIALECTS = ("auto", sandbox_driver_v1.NAME, fabro_sketch.NAME)  # of plugins; a REST provider's is "rest"
SANDBOXES_PER_PROCESS = ("auto", "one", "many")
REFERENCE_PLUGIN_DISPLAY = "sandbox-conformance-host-plugin"


def reference_plugin_argv(*extra: str) -> list[str]:
    """The bundled reference plugin, started with this interpreter so no PATH lookup is needed."""
    return [sys.executable, "-m", "conformance.reference.host_plugin", *extra]


@dataclass
class ProviderConfig:
    """Everything needed to reach one provider. Built by the CLI or from pytest options."""

    plugin: str | None = None  # a command line; None means the bundled reference plugin
    dialect: str = "auto"
    env: dict[str, str] = field(default_factory=dict)
    pass_env: list[str] = field(default_factory=list)
    create_spec: dict[str, Any] | None = None
    run_id: str = "local"
    call_timeout_s: float = 30.0
    sandboxes_per_process: str = "auto"
    rest_url: str | None = None  # a REST provider's base URL; the plugin fields are unused then
    profile: str | None = None  # a built-in REST profile name or a profile file (default: forkd)
    image: str | None = None  # the image the REST provider was started from (--image), for reports

    @property
    def is_rest(self) -> bool:
        return self.rest_url is not None

    def rest_profile(self) -> rest.Profile:
        """The REST profile; ``UsageError`` (one line, naming the field) when it is unknown or invalid."""
        return rest.load_profile(self.profile)

    @property
    def argv(self) -> list[str]:
        if self.plugin is None:
            return reference_plugin_argv()
        try:
            argv = shlex.split(self.plugin)
        except ValueError as exc:
            raise UsageError(f"--plugin is not a valid command line: {exc}") from None
        if not argv:
            raise UsageError("--plugin is empty")
        return argv

    @property
    def display(self) -> str:
        if self.rest_url is not None:
            return self.rest_url
        return REFERENCE_PLUGIN_DISPLAY if self.plugin is None else self.plugin

    @property
    def run_labels(self) -> dict[str, str]:
        return {"sandbox-conformance.run": self.run_id}

    def validate(self) -> None:
        if self.rest_url is not None:
            if self.plugin is not None:
                raise UsageError("--rest and --plugin are mutually exclusive")
            if self.dialect not in ("auto", rest.NAME):
                raise UsageError(f"a REST provider speaks the {rest.NAME} dialect, not {self.dialect}")
            problem = valid_base_url(self.rest_url)
            if problem is not None:
                raise UsageError(f"--rest {self.rest_url!r} is not a usable URL: {problem}")
            self.rest_profile()
            return
        if self.profile is not None:
            raise UsageError("--profile applies to REST providers only (give --rest or --image)")
        if self.dialect not in DIALECTS:
            raise UsageError(f"unknown dialect {self.dialect!r} (choose from {', '.join(DIALECTS)})")
        if self.sandboxes_per_process not in SANDBOXES_PER_PROCESS:
            raise UsageError(f"--sandboxes-per-process must be one of {', '.join(SANDBOXES_PER_PROCESS)}")
        self.argv  # noqa: B018 - parses the command line

    def to_json(self) -> str:
        return json.dumps({
            "plugin": self.plugin, "dialect": self.dialect, "env": self.env, "pass_env": self.pass_env,
            "create_spec": self.create_spec, "run_id": self.run_id, "call_timeout_s": self.call_timeout_s,
            "sandboxes_per_process": self.sandboxes_per_process, "rest_url": self.rest_url,
            "profile": self.profile, "image": self.image,
        })

    @classmethod
    def from_json(cls, text: str) -> ProviderConfig:
        return cls(**json.loads(text))


def parse_env_pairs(pairs: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--env expects NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


class _UndecidedRules(SchemaRules):
    """Rules while the dialect is not known yet: frames are still checked, shapes are not."""

    def envelope_problems(self, message: Any) -> list[SchemaProblem]:
        return []

    def params_problems(self, method: str, params: Any) -> list[SchemaProblem]:
        return []

    def result_problems(self, method: str, result: Any) -> list[SchemaProblem]:
        return []


def _rules(dialect: str) -> Any:
    return fabro_sketch.SketchRules() if dialect == fabro_sketch.NAME else sandbox_driver_v1.V1Rules()


def detect_dialect(initialize_result: Any) -> str | None:
    if sandbox_driver_v1.looks_like(initialize_result):
        return sandbox_driver_v1.NAME
    if fabro_sketch.looks_like(initialize_result):
        return fabro_sketch.NAME
    return None


def open_provider(config: ProviderConfig, channel: str = "provider", strict_handshake: bool = False,
                  handshake: bool = True) -> ProviderAdapter:
    """Start the provider, detect its dialect and complete the handshake.

    Raises ``ProviderStartError`` when it cannot be started or does not complete the handshake. With
    ``strict_handshake`` a schema violation in the ``initialize`` answer is raised as well; otherwise it
    is left for the handshake scenarios to report. Without ``handshake`` the provider is only started
    (its dialect must then be known: configured, or detected earlier by the session).

    A REST provider has no process: its adapter is built from the profile, and its health check and a
    credentials probe stand in for the handshake.
    """
    if config.rest_url is not None:
        return _open_rest(config, channel, handshake)
    REDACTOR.add_environment(config.env)
    env = scrubbed_environment(config.env, config.pass_env)

    def connect(label: str, rules: Any) -> jsonrpc.JsonRpcConnection:
        transport = ProcessTransport(config.argv, env, display=config.display)
        connection = jsonrpc.JsonRpcConnection(transport, rules, channel=label)
        connection.start()
        return connection

    dialect = config.dialect
    if dialect == "auto" and not handshake:
        dialect = sandbox_driver_v1.NAME
    connection = connect(channel, _UndecidedRules() if dialect == "auto" else _rules(dialect))
    try:
        if dialect == "auto":
            # Both dialects answer an initialize that carries the v1 version: the sketch ignores params.
            result = connection.request("initialize", {"protocol_version": sandbox_driver_v1.PROTOCOL_VERSION},
                                        config.call_timeout_s, check_result=False).result()
            dialect = detect_dialect(result) or _undetectable(result)
            connection.rules = _rules(dialect)
            adapter = _adapter(dialect, connection, config, connect)
            adapter.adopt_initialize(result)
            if strict_handshake and adapter.handshake_problems:
                problem = adapter.handshake_problems[0]
                raise ProviderStartError(f"the initialize answer violates the {dialect} schema {problem}")
        else:
            adapter = _adapter(dialect, connection, config, connect)
            if handshake:
                adapter.handshake(timeout_s=config.call_timeout_s, strict=strict_handshake)
        if handshake and isinstance(adapter, fabro_sketch.FabroSketchAdapter):
            adapter.detect_sandboxes_per_process()
    except (CallTimeout, ProviderCrashed, ProviderCallError) as exc:
        tail = connection.transport.stderr_tail().strip().splitlines()[-1:]
        connection.close(grace_s=0.5)
        hint = f" (stderr: {tail[0]})" if tail else ""
        raise ProviderStartError(f"provider {config.display!r} did not complete the handshake: {exc}{hint}") from None
    except BaseException:
        connection.close(grace_s=0.5)
        raise
    return adapter


def _open_rest(config: ProviderConfig, channel: str, handshake: bool) -> ProviderAdapter:
    assert config.rest_url is not None
    adapter = rest.open_rest_adapter(config.rest_profile(), config.rest_url, run_labels=config.run_labels,
                                     base_spec=config.create_spec, call_timeout_s=config.call_timeout_s,
                                     channel="http" if channel == "provider" else channel)
    if handshake:
        try:
            adapter.connect()
        except BaseException:
            adapter.close()
            raise
    return adapter


def _undetectable(result: Any) -> str:
    shown = json.dumps(result)[:200]
    raise ProviderStartError(f"cannot tell the dialect from the initialize answer {shown}; pass --dialect")


def _adapter(dialect: str, connection: jsonrpc.JsonRpcConnection, config: ProviderConfig,
             connect: Callable[[str, Any], jsonrpc.JsonRpcConnection]) -> ProviderAdapter:
    if dialect == fabro_sketch.NAME:
        return fabro_sketch.FabroSketchAdapter(
            connection, lambda label: connect(label, fabro_sketch.SketchRules()), command=config.display,
            base_spec=config.create_spec, call_timeout_s=config.call_timeout_s,
            sandboxes_per_process=config.sandboxes_per_process)
    return sandbox_driver_v1.SandboxDriverV1Adapter(
        connection, command=config.display, base_spec=config.create_spec,
        run_labels=config.run_labels, call_timeout_s=config.call_timeout_s)


def with_dialect(config: ProviderConfig, adapter: ProviderAdapter) -> ProviderConfig:
    """The configuration with the dialect (and sketch process mode) the first connection settled on."""
    if config.rest_url is not None:
        return config
    per_process = getattr(adapter, "sandboxes_per_process", config.sandboxes_per_process)
    return replace(config, dialect=adapter.dialect, sandboxes_per_process=per_process)
