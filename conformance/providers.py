"""Turning a provider configuration into a connected adapter: spawn, detect the dialect, handshake."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance.adapter import ProviderAdapter
from conformance.dialects import jsonrpc, sandbox_driver_v1
from conformance.errors import (
    CallTimeout,
    ProviderCallError,
    ProviderCrashed,
    ProviderStartError,
    UsageError,
)
from conformance.transcript import REDACTOR
from conformance.transports.process import ProcessTransport, scrubbed_environment

DIALECTS = ("auto", sandbox_driver_v1.NAME)
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
        return REFERENCE_PLUGIN_DISPLAY if self.plugin is None else self.plugin

    @property
    def run_labels(self) -> dict[str, str]:
        return {"sandbox-conformance.run": self.run_id}

    def validate(self) -> None:
        if self.dialect not in DIALECTS:
            raise UsageError(f"unknown dialect {self.dialect!r} (choose from {', '.join(DIALECTS)})")
        self.argv  # noqa: B018 - parses the command line

    def to_json(self) -> str:
        return json.dumps({
            "plugin": self.plugin, "dialect": self.dialect, "env": self.env, "pass_env": self.pass_env,
            "create_spec": self.create_spec, "run_id": self.run_id, "call_timeout_s": self.call_timeout_s,
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


def open_provider(config: ProviderConfig, channel: str = "provider", strict_handshake: bool = False,
                  handshake: bool = True) -> ProviderAdapter:
    """Start the provider, detect its dialect and complete the handshake.

    Raises ``ProviderStartError`` when it cannot be started or does not complete the handshake. With
    ``strict_handshake`` a schema violation in the ``initialize`` answer is raised as well; otherwise it
    is left for the handshake scenarios to report. Without ``handshake`` the provider is only started.
    """
    REDACTOR.add_environment(config.env)
    env = scrubbed_environment(config.env, config.pass_env)
    transport = ProcessTransport(config.argv, env, display=config.display)
    rules = sandbox_driver_v1.V1Rules()
    connection = jsonrpc.JsonRpcConnection(transport, rules, channel=channel)
    connection.start()
    adapter = sandbox_driver_v1.SandboxDriverV1Adapter(
        connection, command=config.display, base_spec=config.create_spec,
        run_labels=config.run_labels, call_timeout_s=config.call_timeout_s,
    )
    if not handshake:
        return adapter
    try:
        adapter.handshake(timeout_s=config.call_timeout_s, strict=strict_handshake)
    except (CallTimeout, ProviderCrashed, ProviderCallError) as exc:
        tail = transport.stderr_tail().strip().splitlines()[-1:] or []
        connection.close(grace_s=0.5)
        hint = f" (stderr: {tail[0]})" if tail else ""
        raise ProviderStartError(f"provider {config.display!r} did not complete the handshake: {exc}{hint}") from None
    except Exception:
        connection.close(grace_s=0.5)
        raise
    return adapter


def describe_environment(env: Mapping[str, str]) -> dict[str, str]:
    return {name: REDACTOR.text(value) for name, value in env.items()}
