"""Seventh blind set, network half (``bn1_*``): single-fault network-policy mutants of the v1 host plugin.

Written from the protocol digest (section 5.1 capabilities ``network.*`` and ``lifecycle.update_network``,
section 5.4 ``spec.network`` / NetworkPolicy, section 5.3 ``SandboxStatus.network``, section 7 SDP1-021..024,
SDP1-051, SDP1-060) and the reference provider's sources only. The honest host plugin declares no network
policy and refuses every non-default one with ``invalid_spec`` field ``network``; each mutant is a fault a
provider author could make while adding or validating network support. Each class overrides the smallest
piece of ``HostPlugin`` it can; ``tests.redteam.selfcheck_7`` shows each fault over the real stdio.
"""

from __future__ import annotations

import copy
from typing import Any

from conformance.reference.host_backend import HostSandbox, invalid_spec
from conformance.reference.host_plugin import HostPlugin, application_error
from conformance.reference.stdio_server import METHOD_NOT_FOUND, RpcFailure
from tests.redteam import redteam

NETWORK_FLAGS = ("allow_all", "block_all", "cidr_allow_list", "domain_allow_list", "outbound_proxy")


def _without_network(spec: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in spec.items() if key != "network"}


@redteam("bn1_block_silently_accepted", "SDP1-051 (5.4: must not silently ignore a requested setting)",
         "a create asking for network 'block' succeeds although the host provider cannot block anything and "
         "declares no network.block_all")
class BlockSilentlyAccepted(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        if spec.get("network") == "block":
            spec = _without_network(spec)
        super().validate_spec(spec)


@redteam("bn1_block_declared_refused", "SDP1-023 (a declared capability must work)",
         "initialize declares network.block_all but a create with network 'block' is still refused invalid_spec")
class BlockDeclaredRefused(HostPlugin):
    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["network"]["block_all"] = True
        return capabilities


@redteam("bn1_empty_domain_list_default", "5.4: empty allow-lists are rejected (invalid_spec field network)",
         "an empty domain_allow_list is read as 'no restriction' and the sandbox is created with the provider "
         "default network instead of being refused")
class EmptyDomainListDefault(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        network = spec.get("network")
        if isinstance(network, dict) and network.get("domain_allow_list", {}).get("domains") == []:
            spec = _without_network(spec)
        super().validate_spec(spec)


@redteam("bn1_field_spec_prefixed", "SDP1-051 / 5.4 (invalid_spec names the field: 'network')",
         "a refused network policy names the field by its JSON path 'spec.network' instead of 'network'")
class FieldSpecPrefixed(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        if spec.get("network", "provider_default") != "provider_default":
            raise invalid_spec("spec.network", "the host provider cannot change the network policy")
        super().validate_spec(spec)


@redteam("bn1_unsupported_kind", "SDP1-051 (a spec the plugin cannot honour is invalid_spec naming the field)",
         "a non-default network policy in a create spec is refused as 'unsupported' naming network.block_all etc. "
         "instead of invalid_spec field network")
class UnsupportedKind(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        network = spec.get("network", "provider_default")
        if network != "provider_default":
            flag = {"allow_all": "allow_all", "block": "block_all"}.get(network) if isinstance(network, str) else (
                next(iter(network), "unknown") if isinstance(network, dict) and network else "unknown")
            raise application_error("unsupported", f"capability network.{flag} is not supported by this provider",
                                    {"capability": f"network.{flag}"})
        super().validate_spec(spec)


@redteam("bn1_explicit_default_refused", "5.4 (network defaults to provider_default; asking for it is always fine)",
         "any 'network' key in the spec is refused invalid_spec, even the explicit default 'provider_default'")
class ExplicitDefaultRefused(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        if "network" in spec:
            raise invalid_spec("network", "the host provider cannot change the network policy")
        super().validate_spec(spec)


@redteam("bn1_block_all_alias_default", "SDP1-051 (an unknown NetworkPolicy is never read as the default)",
         "an unknown network policy string (e.g. 'block_all', the capability's name, not the policy 'block') "
         "falls back to provider_default and the create succeeds with an open network")
class UnknownPolicyDefault(HostPlugin):
    KNOWN = ("provider_default", "allow_all", "block")

    def validate_spec(self, spec: dict[str, Any]) -> None:
        if isinstance(spec.get("network"), str) and spec["network"] not in self.KNOWN:
            spec = _without_network(spec)
        super().validate_spec(spec)


@redteam("bn1_status_network_tagged", "5.3 (SandboxStatus.network is NetworkPolicy|null, externally tagged)",
         "SandboxStatus.network reports the policy internally tagged, {'type': 'provider_default'}, which is no "
         "NetworkPolicy value")
class StatusNetworkTagged(HostPlugin):
    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        status = super().status(sandbox)
        status["network"] = {"type": "provider_default"}
        return status


@redteam("bn1_update_network_noop", "SDP1-023 / 5.4 (lifecycle.update_network declared must work; a policy the "
         "provider cannot honour is refused)",
         "lifecycle.update_network is declared and sandbox/update_network answers {} for any policy, but nothing "
         "changes: 'block' is accepted while network.block_all stays false and the status still says null")
class UpdateNetworkNoop(HostPlugin):
    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["lifecycle"]["update_network"] = True
        return capabilities

    def m_sandbox_update_network(self, params: dict[str, Any]) -> Any:
        self.backend.get(params["sandbox_id"])
        params["network"]  # a required key: missing -> invalid params
        return None


@redteam("bn1_update_network_unknown_method", "SDP1-024 / SDP1-060 (an undeclared lifecycle verb fails "
         "unsupported naming lifecycle.update_network)",
         "sandbox/update_network is answered -32601 'unknown method' instead of -32000 unsupported "
         "lifecycle.update_network")
class UpdateNetworkUnknownMethod(HostPlugin):
    def unsupported(self, method: str, capability: str) -> RpcFailure:
        if method == "sandbox/update_network":
            return RpcFailure(METHOD_NOT_FOUND, f"unknown method {method}")
        return super().unsupported(method, capability)


@redteam("bn1_handle_caps_network_wider", "SDP1-021 / 5.1 (per-sandbox capabilities may be narrower than "
         "initialize's, never wider; they never claim what the provider cannot do)",
         "the HandleInfo capability set of a created sandbox claims every network.* policy although initialize "
         "declared none and create refuses them")
class HandleCapsNetworkWider(HostPlugin):
    def handle_info(self, sandbox: HostSandbox) -> dict[str, Any]:
        info = super().handle_info(sandbox)
        capabilities = copy.deepcopy(info["capabilities"])
        capabilities["network"] = {flag: True for flag in NETWORK_FLAGS}
        info["capabilities"] = capabilities
        return info


@redteam("bn1_network_checked_after_create", "SDP1-051 (validation comes first: a refused spec creates nothing)",
         "the network policy is checked only after the sandbox was made: the create answers invalid_spec "
         "network but leaves a running sandbox behind in sandbox/list")
class NetworkCheckedAfterCreate(HostPlugin):
    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        network = spec.get("network", "provider_default")
        info = super().m_sandbox_create({**params, "spec": _without_network(spec)})
        if network != "provider_default":
            raise invalid_spec("network", "the host provider cannot change the network policy")
        return info
