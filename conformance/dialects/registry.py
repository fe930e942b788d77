"""The dialect registry: every JSON-RPC plugin dialect by name, how to recognise it from an
``initialize`` answer, the rules of its messages, and how to wrap a connection in its adapter.

``conformance/providers.py`` asks the registry instead of testing adapter classes; a new dialect (the
protocol v2 one) is one more entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conformance.adapter import ProviderAdapter
from conformance.dialects import fabro_sketch, sandbox_driver_v1
from conformance.dialects.jsonrpc import JsonRpcConnection, MessageRules

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


@dataclass(frozen=True)
class Dialect:
    name: str
    looks_like: Callable[[Any], bool]  # does this initialize answer come from a plugin of this dialect?
    rules: Callable[[], MessageRules]
    build: Callable[[JsonRpcConnection, Connect, AdapterSettings], ProviderAdapter]
    # The initialize request that works for auto-detection (a v1 initialize: the sketch ignores params).
    probe_params: Callable[[], dict[str, Any]] = lambda: {"protocol_version": sandbox_driver_v1.PROTOCOL_VERSION}


def _build_v1(connection: JsonRpcConnection, connect: Connect, settings: AdapterSettings) -> ProviderAdapter:
    return sandbox_driver_v1.SandboxDriverV1Adapter(
        connection, command=settings.command, base_spec=settings.base_spec, run_labels=settings.run_labels,
        call_timeout_s=settings.call_timeout_s)


def _build_sketch(connection: JsonRpcConnection, connect: Connect, settings: AdapterSettings) -> ProviderAdapter:
    return fabro_sketch.FabroSketchAdapter(
        connection, lambda label: connect(label, fabro_sketch.SketchRules()), command=settings.command,
        base_spec=settings.base_spec, call_timeout_s=settings.call_timeout_s,
        sandboxes_per_process=settings.sandboxes_per_process)


# In detection order: the first entry whose looks_like accepts the answer wins.
PLUGIN_DIALECTS: dict[str, Dialect] = {
    sandbox_driver_v1.NAME: Dialect(sandbox_driver_v1.NAME, sandbox_driver_v1.looks_like,
                                    sandbox_driver_v1.V1Rules, _build_v1),
    fabro_sketch.NAME: Dialect(fabro_sketch.NAME, fabro_sketch.looks_like, fabro_sketch.SketchRules, _build_sketch),
}


def plugin_dialect(name: str) -> Dialect:
    return PLUGIN_DIALECTS[name]


def detect(initialize_result: Any) -> Dialect | None:
    """The dialect whose plugins answer ``initialize`` like this, or ``None``."""
    for dialect in PLUGIN_DIALECTS.values():
        if dialect.looks_like(initialize_result):
            return dialect
    return None
