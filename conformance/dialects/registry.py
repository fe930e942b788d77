"""The dialect registry: every JSON-RPC plugin dialect by name, how to recognise it from an
``initialize`` answer, the rules of its messages, and how to wrap a connection in its adapter.

``conformance/providers.py`` asks the registry instead of testing adapter classes; a new dialect is one
more entry. A dialect that moves bytes over data channels (v2) is built with the connection's
``ChannelServer``, which its initialize announces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conformance.adapter import ProviderAdapter
from conformance.dialects import fabro_sketch, sandbox_driver_v1, sandbox_driver_v2
from conformance.dialects.jsonrpc import JsonRpcConnection, MessageRules
from conformance.dialects.sandbox_driver_v2.rules import initialize_params as v2_initialize_params
from conformance.errors import ApplicationErrorAnswer
from conformance.transports.channels import ChannelServer

# Starts another plugin process and returns its started connection, labelled for transcripts.
Connect = Callable[[str, MessageRules], JsonRpcConnection]


@dataclass(frozen=True)
class AdapterSettings:
    """What an adapter is built with, whatever its dialect."""

    command: str
    base_spec: dict[str, Any] | None
    run_labels: dict[str, str]
    call_timeout_s: float
    sandboxes_per_process: str
    open_ack: bool = True  # v2: announce open_ack (channels wait for the host's acknowledgment)


Build = Callable[[JsonRpcConnection, Connect, AdapterSettings, "ChannelServer | None"], ProviderAdapter]


def _v1_initialize(server: ChannelServer | None, settings: AdapterSettings) -> dict[str, Any]:
    return {"protocol_version": sandbox_driver_v1.PROTOCOL_VERSION}


def _v2_initialize(server: ChannelServer | None, settings: AdapterSettings) -> dict[str, Any]:
    assert server is not None and server.socket_path is not None
    return v2_initialize_params(server.socket_path, settings.open_ack)


@dataclass(frozen=True)
class Dialect:
    name: str
    label: str  # how a negotiation report names it ("v2")
    looks_like: Callable[[Any], bool]  # does this initialize answer come from a plugin of this dialect?
    rules: Callable[[], MessageRules]
    build: Build
    # The initialize request of this dialect (the sketch ignores params, so any works for it).
    initialize_params: Callable[[ChannelServer | None, AdapterSettings], dict[str, Any]] = _v1_initialize
    protocol_version: int | None = None  # the sandbox-driver version it speaks; None: not a version of it
    data_channels: bool = False  # built with a ChannelServer, which its initialize announces


def _build_v1(connection: JsonRpcConnection, connect: Connect, settings: AdapterSettings,
              server: ChannelServer | None) -> ProviderAdapter:
    return sandbox_driver_v1.SandboxDriverV1Adapter(
        connection, command=settings.command, base_spec=settings.base_spec, run_labels=settings.run_labels,
        call_timeout_s=settings.call_timeout_s)


def _build_v2(connection: JsonRpcConnection, connect: Connect, settings: AdapterSettings,
              server: ChannelServer | None) -> ProviderAdapter:
    assert server is not None, "a v2 adapter is built with its connection's channel server"
    return sandbox_driver_v2.SandboxDriverV2Adapter(
        connection, command=settings.command, channel_server=server, base_spec=settings.base_spec,
        run_labels=settings.run_labels, call_timeout_s=settings.call_timeout_s, open_ack=settings.open_ack)


def _build_sketch(connection: JsonRpcConnection, connect: Connect, settings: AdapterSettings,
                  server: ChannelServer | None) -> ProviderAdapter:
    return fabro_sketch.FabroSketchAdapter(
        connection, lambda label: connect(label, fabro_sketch.SketchRules()), command=settings.command,
        base_spec=settings.base_spec, call_timeout_s=settings.call_timeout_s,
        sandboxes_per_process=settings.sandboxes_per_process)


# In detection order: the first entry whose looks_like accepts the answer wins. The first is also the
# probe: auto-detection sends its initialize (v2 first; a v1 plugin refuses it naming version 1, the sketch
# ignores its params).
PLUGIN_DIALECTS: dict[str, Dialect] = {
    sandbox_driver_v2.NAME: Dialect(sandbox_driver_v2.NAME, "v2", sandbox_driver_v2.looks_like,
                                    sandbox_driver_v2.V2Rules, _build_v2, _v2_initialize,
                                    protocol_version=sandbox_driver_v2.PROTOCOL_VERSION, data_channels=True),
    sandbox_driver_v1.NAME: Dialect(sandbox_driver_v1.NAME, "v1", sandbox_driver_v1.looks_like,
                                    sandbox_driver_v1.V1Rules, _build_v1,
                                    protocol_version=sandbox_driver_v1.PROTOCOL_VERSION),
    fabro_sketch.NAME: Dialect(fabro_sketch.NAME, fabro_sketch.NAME, fabro_sketch.looks_like,
                               fabro_sketch.SketchRules, _build_sketch),
}


def plugin_dialect(name: str) -> Dialect:
    return PLUGIN_DIALECTS[name]


def probe() -> Dialect:
    """The dialect whose initialize auto-detection sends first."""
    return next(iter(PLUGIN_DIALECTS.values()))


def detect(initialize_result: Any) -> Dialect | None:
    """The dialect whose plugins answer ``initialize`` like this, or ``None``."""
    for dialect in PLUGIN_DIALECTS.values():
        if dialect.looks_like(initialize_result):
            return dialect
    return None


def refused_for(refusal: ApplicationErrorAnswer, asked: Dialect) -> Dialect | None:
    """The other protocol version's dialect when ``refusal`` (of ``asked``'s initialize) is a version
    mismatch naming that version as the plugin's own."""
    for dialect in PLUGIN_DIALECTS.values():
        if (dialect is not asked and dialect.protocol_version is not None
                and sandbox_driver_v2.refusal_names_version(refusal, dialect.protocol_version)):
            return dialect
    return None


def other_version(asked: Dialect) -> Dialect:
    """The one other protocol version the suite speaks (v1 for v2)."""
    (other,) = (d for d in PLUGIN_DIALECTS.values() if d is not asked and d.protocol_version is not None)
    return other
