"""Broken variants (and controls) of the v1 host plugin for GAP 4, network policies.

The host plugin's sandboxes run on the network of the machine that runs it, so none of these can honour
a blocked network: the variants that accept one ignore it, which is the point. The allow-list doubles
accept allow-lists no host directory can enforce; nothing can see that without sending traffic, so they
stand for a provider that does (the status is all the suite can compare).
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from conformance.reference.host_backend import HostSandbox, invalid_spec
from conformance.reference.host_plugin import BASE_CAPABILITIES, HostPlugin
from conformance.reference.stdio_server import RpcFailure
from tests.mutants import mutant

ALLOW_LIST_KEYS = {"cidr_allow_list": "cidrs", "domain_allow_list": "domains"}


class _Declaring(HostPlugin):
    """Declares the network flags and lifecycle operations named in ``network`` and ``lifecycle``."""

    network: ClassVar[dict[str, bool]] = {}
    lifecycle: ClassVar[dict[str, bool]] = {}

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = copy.deepcopy(BASE_CAPABILITIES)
        capabilities["network"].update(self.network)
        capabilities["lifecycle"].update(self.lifecycle)
        return capabilities


@mutant("network-block-accepted-and-ignored")
class NetworkBlockAcceptedAndIgnored(_Declaring):
    """Declares network.block_all and accepts a blocked network, then runs the sandbox on the host's network:
    the own-IP session's tasks that silently fell back to the host's network."""

    network: ClassVar[dict[str, bool]] = {"block_all": True}

    def validate_spec(self, spec: dict[str, Any]) -> None:
        super().validate_spec({key: value for key, value in spec.items() if not (key == "network" and value == "block")})


@mutant("network-undeclared-block-accepted")
class NetworkUndeclaredBlockAccepted(HostPlugin):
    """Declares every network flag false, yet accepts a blocked network (and ignores it)."""

    def validate_spec(self, spec: dict[str, Any]) -> None:
        super().validate_spec({key: value for key, value in spec.items() if not (key == "network" and value == "block")})


@mutant("network-undeclared-allow-all-accepted")
class NetworkUndeclaredAllowAllAccepted(HostPlugin):
    """Declares network.allow_all false, yet accepts an allow-all network (the host's, which it has anyway)."""

    def validate_spec(self, spec: dict[str, Any]) -> None:
        super().validate_spec({key: value for key, value in spec.items()
                               if not (key == "network" and value == "allow_all")})


@mutant("network-update-ignored")
class NetworkUpdateIgnored(_Declaring):
    """Declares lifecycle.update_network and answers every change with {}, changing nothing."""

    lifecycle: ClassVar[dict[str, bool]] = {"update_network": True}

    def m_sandbox_update_network(self, params: dict[str, Any]) -> Any:
        self.backend.get(params["sandbox_id"])
        return None


@mutant("network-declared-policy-refused")
class NetworkDeclaredPolicyRefused(_Declaring):
    """Declares the CIDR and domain allow-lists, then refuses them as invalid_spec naming network."""

    network: ClassVar[dict[str, bool]] = {"cidr_allow_list": True, "domain_allow_list": True}


class _AllowLists(_Declaring):
    """Declares both allow-lists and accepts a non-empty one; ``reports`` is what the status then says."""

    network: ClassVar[dict[str, bool]] = {"cidr_allow_list": True, "domain_allow_list": True}
    refuses_empty = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.policies: dict[str, Any] = {}

    def validate_spec(self, spec: dict[str, Any]) -> None:
        network = spec.get("network")
        if isinstance(network, dict) and len(network) == 1 and next(iter(network)) in ALLOW_LIST_KEYS:
            (kind, body), = network.items()
            if self.refuses_empty and not (isinstance(body, dict) and body.get(ALLOW_LIST_KEYS[kind])):
                raise invalid_spec("network", f"{kind} must name at least one entry")
            spec = {key: value for key, value in spec.items() if key != "network"}
        super().validate_spec(spec)

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        answer = super().m_sandbox_create(params)
        self.policies[answer["status"]["id"]] = params["spec"].get("network")
        answer["status"] = {**answer["status"], "network": self.reports(self.policies[answer["status"]["id"]])}
        return answer

    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        status = super().status(sandbox)
        if sandbox.id in getattr(self, "policies", {}):
            status["network"] = self.reports(self.policies[sandbox.id])
        return status

    def reports(self, policy: Any) -> Any:
        return None


@mutant("network-allow-lists-unreported")
class NetworkAllowListsUnreported(_AllowLists):
    """Control: accepts the allow-lists it declares; its status reports no network (an optional member)."""


@mutant("network-allow-lists-reported")
class NetworkAllowListsReported(_AllowLists):
    """Control: accepts the allow-lists it declares, and its status reports the policy as asked."""

    def reports(self, policy: Any) -> Any:
        return policy


@mutant("network-allow-list-misreported")
class NetworkAllowListMisreported(_AllowLists):
    """Accepts an allow-list, and its status reports an allow-all network: the list went nowhere."""

    def reports(self, policy: Any) -> Any:
        return "allow_all" if policy is not None else None


@mutant("network-allow-list-reported-as-default")
class NetworkAllowListReportedAsDefault(_AllowLists):
    """Accepts an allow-list, and its status reports provider_default: the list is not what the sandbox has."""

    def reports(self, policy: Any) -> Any:
        return "provider_default" if policy is not None else None


@mutant("network-empty-allow-list-accepted")
class NetworkEmptyAllowListAccepted(_AllowLists):
    """Accepts an allow-list with nothing in it, which allows nothing it could name."""

    refuses_empty = False


# The names a NetworkPolicy may have (section 5.4); a plugin built on upstream's types cannot decode any other.
DEFINED_POLICIES = ("provider_default", "allow_all", "block", "cidr_allow_list", "domain_allow_list")


class _UndecodablePolicy(HostPlugin):
    """Refuses a network policy the protocol does not define as params that cannot be decoded (JSON-RPC
    ``code``), as a plugin decoding the spec with upstream's types does; otherwise the honest plugin."""

    code: ClassVar[int] = -32600

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        network = (params.get("spec") or {}).get("network", "provider_default")
        name = network if isinstance(network, str) else next(iter(network), None) if isinstance(network, dict) else None
        if name not in DEFINED_POLICIES:
            raise RpcFailure(self.code, f"invalid params: spec.network: unknown variant `{name}`")
        return super().m_sandbox_create(params)


@mutant("network-undefined-policy-invalid-request")
class NetworkUndefinedPolicyInvalidRequest(_UndecodablePolicy):
    """-32600, as v1 and v2 name an undecodable request (the reference plugins' own answer)."""


@mutant("network-undefined-policy-invalid-params")
class NetworkUndefinedPolicyInvalidParams(_UndecodablePolicy):
    """-32602, as a JSON-RPC library answers params its types cannot take."""

    code = -32602
