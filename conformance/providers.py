"""Turning a provider configuration into a connected adapter: spawn, detect the dialect, handshake."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from conformance.adapter import ProviderAdapter
from conformance.dialects import jsonrpc, registry, rest, sandbox_driver_v1
from conformance.dialects.jsonrpc_adapter import SchemaRules
from conformance.dialects.registry import AdapterSettings
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
from conformance.transports.memory import InProcessTransport
from conformance.transports.process import ProcessTransport, scrubbed_environment

DIALECTS = ("auto", *registry.PLUGIN_DIALECTS)  # of plugins; a REST provider's is "rest"
SANDBOXES_PER_PROCESS = ("auto", "one", "many")
REFERENCE_PLUGIN_DISPLAY = "sandbox-conformance-host-plugin"


def reference_plugin_argv(*extra: str) -> list[str]:
    """The bundled reference plugin, started with this interpreter so no PATH lookup is needed."""
    return [sys.executable, "-m", "conformance.reference.host_plugin", *extra]


@dataclass(frozen=True)
class ProviderConfig:
    """Everything needed to reach one provider (part of the run's ``RunConfig``)."""

    plugin: str | None = None  # a command line; None (and no in_process) means the bundled reference plugin
    dialect: str = "auto"
    env: dict[str, str] = field(default_factory=dict)
    pass_env: tuple[str, ...] = ()
    create_spec: dict[str, Any] | None = None
    run_id: str = "local"
    call_timeout_s: float = 30.0
    sandboxes_per_process: str = "auto"
    rest_url: str | None = None  # a REST provider's base URL; the plugin fields are unused then
    profile: str | None = None  # a built-in REST profile name or a profile file (default: forkd)
    image: str | None = None  # the image the REST provider was started from (--image), for reports
    # A stdio plugin served on a thread of this process: ("package.module:function", *argv). The suite's
    # own tests use it; see conformance/transports/memory.py.
    in_process: tuple[str, ...] | None = None

    @property
    def is_rest(self) -> bool:
        return self.rest_url is not None

    def rest_profile(self) -> rest.Profile:
        """The REST profile; ``UsageError`` (one line, naming the field) when it is unknown or invalid."""
        return rest.load_profile(self.profile)

    def token_env(self) -> str | None:
        """The variable a REST provider's token is read from."""
        return self.rest_profile().token_env if self.is_rest else None

    @property
    def argv(self) -> list[str]:
        if self.in_process is not None:
            module = self.in_process[0].partition(":")[0]
            return [sys.executable, "-m", module, *self.in_process[1:]]
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
        if self.in_process is not None:
            return shlex.join(self.argv)
        return REFERENCE_PLUGIN_DISPLAY if self.plugin is None else self.plugin

    @property
    def run_labels(self) -> dict[str, str]:
        return {"sandbox-conformance.run": self.run_id}

    def handed_values(self, source: Mapping[str, str] | None = None) -> list[str]:
        """Every value this run hands the provider: ``--env`` values, forwarded variables, the REST
        token. Each is a secret to the reports, whatever its name."""
        source = os.environ if source is None else source
        values = list(self.env.values())
        values += [source[name] for name in self.pass_env if name in source]
        if self.is_rest:
            token_env = self.token_env()
            if token_env and source.get(token_env):
                values.append(source[token_env])
        return values

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


def profile_reference(value: str | None, rest_target: bool) -> str | None:
    """The profile as every process will find it: a built-in name as given, a file by absolute path."""
    if value is None:
        return "forkd" if rest_target else None
    if not rest_target:
        raise UsageError("--profile applies to REST providers only (give --rest or --image)")
    path = rest.profile_path(value)
    return str(path.resolve()) if path is not None else value


def register_secrets(config: ProviderConfig) -> None:
    """Every value handed to the provider is redacted from everything the suite writes."""
    for value in config.handed_values():
        REDACTOR.add(value)


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


def _transport(config: ProviderConfig, env: dict[str, str]) -> Any:
    if config.in_process is not None:
        return InProcessTransport(config.in_process[0], config.in_process[1:], env, display=config.display)
    return ProcessTransport(config.argv, env, display=config.display)


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
    register_secrets(config)
    env = scrubbed_environment(config.env, config.pass_env)

    def connect(label: str, rules: Any) -> jsonrpc.JsonRpcConnection:
        connection = jsonrpc.JsonRpcConnection(_transport(config, env), rules, channel=label)
        connection.start()
        return connection

    settings = AdapterSettings(command=config.display, base_spec=config.create_spec, run_labels=config.run_labels,
                               call_timeout_s=config.call_timeout_s,
                               sandboxes_per_process=config.sandboxes_per_process)
    name = config.dialect
    if name == "auto" and not handshake:
        name = sandbox_driver_v1.NAME
    known = None if name == "auto" else registry.plugin_dialect(name)
    connection = connect(channel, known.rules() if known is not None else _UndecidedRules())
    try:
        if known is None:
            probe = next(iter(registry.PLUGIN_DIALECTS.values())).probe_params()
            result = connection.request("initialize", probe, config.call_timeout_s, check_result=False).result()
            detected = registry.detect(result) or _undetectable(result)
            connection.rules = detected.rules()
            adapter = detected.build(connection, connect, settings)
            adapter.adopt_initialize(result)
            if strict_handshake and adapter.handshake_problems:
                problem = adapter.handshake_problems[0]
                raise ProviderStartError(f"the initialize answer violates the {detected.name} schema {problem}")
        else:
            adapter = known.build(connection, connect, settings)
            if handshake:
                adapter.handshake(timeout_s=config.call_timeout_s, strict=strict_handshake)
        if handshake:
            adapter.settle()
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


def with_dialect(config: ProviderConfig, adapter: ProviderAdapter) -> ProviderConfig:
    """The configuration with the dialect (and sketch process mode) the first connection settled on."""
    if config.rest_url is not None:
        return config
    return replace(config, dialect=adapter.dialect, **adapter.settled())
