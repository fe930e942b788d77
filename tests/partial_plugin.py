"""A provider author's first plugin: answering only ``initialize``, ``sandbox/create``, ``exec/run`` and
``sandbox/delete`` (the reference's own answers, sandbox-driver v1 or v2) and ``-32601`` for every other method,
while declaring no optional capability (``--declare reference``: the reference's, as an author who copied them
would). Against it most scenarios fail, for a handful of reasons: the run's ``causes`` must say so in about ten
lines (``tests/test_causes.py``).

Served in the test process: ``ProviderConfig(in_process=("tests.partial_plugin:serve", "--dialect", ...))``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, BinaryIO, TextIO

from conformance.reference import host_plugin
from conformance.reference.host_plugin import HostPlugin
from conformance.reference.host_plugin_v2 import HostPluginV2
from conformance.reference.stdio_server import METHOD_NOT_FOUND, RpcFailure
from tests.no_pass_plugins import flags_cleared

IMPLEMENTED = frozenset({"initialize", "sandbox/create", "exec/run", "sandbox/delete"})
# Capability groups a provider without them declares as null rather than as a map of false flags.
NULL_GROUPS = ("pty", "logs", "volumes", "one_shot")


class _Partial:
    """Every method but ``IMPLEMENTED`` unknown; with ``declare == "nothing"``, no capability declared."""

    declare = "nothing"

    def declared_capabilities(self) -> dict[str, Any]:
        declared = super().declared_capabilities()
        if self.declare == "reference":
            return declared
        return {key: None if key in NULL_GROUPS else flags_cleared(value) for key, value in declared.items()}

    def dispatch(self, method: str, params: Any) -> Any:
        if method not in IMPLEMENTED:
            raise RpcFailure(METHOD_NOT_FOUND, f"method not found: {method}")
        return super().dispatch(method, params)


class PartialPlugin(_Partial, HostPlugin):
    """sandbox-driver v1."""


class PartialPluginV2(_Partial, HostPluginV2):
    """sandbox-driver v2."""


def serve(argv: list[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO, environ: Mapping[str, str],
          exit_now: Any = None) -> int:
    """``argv``: ``[--dialect sandbox-driver-v1|sandbox-driver-v2] [--declare nothing|reference]``."""
    options = dict(zip(argv[::2], argv[1::2], strict=False))
    base = PartialPluginV2 if options.get("--dialect") == "sandbox-driver-v2" else PartialPlugin
    declare = options.get("--declare", "nothing")
    plugin_class = type(f"{base.__name__}_{declare}", (base,), {"declare": declare})
    return host_plugin.serve([], stdin, stdout, stderr, environ, plugin_class=plugin_class, exit_now=exit_now)
