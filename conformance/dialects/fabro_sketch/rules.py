"""What the fabro-sketch dialect knows about its messages: schemas, errors, capability names."""

from __future__ import annotations

from typing import Any

from conformance.adapter import NETWORK_POLICY_FLAGS, WireVocabulary
from conformance.dialects.jsonrpc_adapter import SchemaRules, boolean_leaves, protocol_error
from conformance.errors import ApplicationErrorAnswer, ProviderCallError

NAME = "fabro-sketch"
FOLDER = "fabro-sketch"
PROTOCOL_VERSION = 1
UNSUPPORTED_CODE = -32001
UNSUPPORTED_MESSAGE = "this sandbox provider does not support it"

VOCABULARY = WireVocabulary(
    jsonrpc="2.0",
    version_field="protocolVersion",
    protocol_version=PROTOCOL_VERSION,
    application_error_code=None,  # the sketch has one code per kind (below), no single application code
    sandbox_field="id",
    methods={"initialize": "initialize", "shutdown": "shutdown", "describe": "sandbox/describe", "exec": "exec"},
    notifications=(),  # the sketch sends no notifications
)

# Sketch error codes → the protocol-neutral kinds the steps judge.
KINDS_BY_CODE = {UNSUPPORTED_CODE: "unsupported", -32602: "invalid_state", -32603: "provider"}
# Sketch capability flags that mean the same as a canonical sandbox-driver name.
CAPABILITY_ALIASES = {"access.preview_urls": "previewUrls"}


# The sketch's network modes (``network.modes``, a list) that name a sandbox-driver network policy, by the
# canonical flag that offers it: a mode the plugin lists is that flag declared.
# (the policy names, and "block_all", the flag's own name, which a sketch plugin may list too)
_NETWORK_MODES = {**{policy: flag for policy, flag in NETWORK_POLICY_FLAGS.items() if flag},
                  "block_all": "network.block_all"}


def network_modes(raw: Any) -> list[str]:
    """The network modes a sketch declaration lists (``{"network": {"modes": [...]}}``), as it spells them."""
    network = raw.get("network") if isinstance(raw, dict) else None
    modes = network.get("modes") if isinstance(network, dict) else None
    return [mode for mode in modes if isinstance(mode, str)] if isinstance(modes, list) else []


def capability_flags(raw: Any) -> dict[str, bool]:
    """Every boolean leaf of the sketch's declaration by its dotted path, plus canonical aliases and the
    network policies its network modes name."""
    flags = boolean_leaves(raw)
    for name, wire in CAPABILITY_ALIASES.items():
        flags[name] = flags.get(wire, False)
    for mode in network_modes(raw):
        if mode in _NETWORK_MODES:
            flags[_NETWORK_MODES[mode]] = True
    return flags


class SketchRules(SchemaRules):
    """Schema checks and error normalization for sketch messages (the sketch sends no notifications)."""

    folder = FOLDER

    def error_answer(self, method: str, error: dict[str, Any]) -> ProviderCallError:
        code = error.get("code")
        kind = KINDS_BY_CODE.get(code) if isinstance(code, int) else None
        if kind is None:
            return protocol_error(method, error)
        return ApplicationErrorAnswer(method=method, code=code, message=str(error.get("message", "")),
                                      data=error.get("data"), kind=kind)


def looks_like(initialize_result: Any) -> bool:
    """Does an ``initialize`` answer come from a sketch plugin?"""
    return isinstance(initialize_result, dict) and "protocolVersion" in initialize_result
