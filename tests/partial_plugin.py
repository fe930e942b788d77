"""A provider author's first plugin: sandbox-driver v1 answering only ``initialize``, ``sandbox/create``,
``exec/run`` and ``sandbox/delete`` (the reference's own answers), and ``-32601`` for every other method, while
declaring the reference's capabilities. Against it nearly every scenario fails, for a handful of reasons:
the run's ``causes`` must say so in about ten lines (``tests/test_causes.py``).

Served in the test process: ``ProviderConfig(in_process="tests.partial_plugin:serve")``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, BinaryIO, TextIO

from conformance.reference import host_plugin
from conformance.reference.host_plugin import HostPlugin
from conformance.reference.stdio_server import METHOD_NOT_FOUND, RpcFailure
from tests.no_pass_plugins import no_capability

IMPLEMENTED = frozenset({"initialize", "sandbox/create", "exec/run", "sandbox/delete"})


class PartialPlugin(HostPlugin):
    """The reference plugin with every method but ``IMPLEMENTED`` unknown, declaring no optional capability
    (``--declare reference``: the reference's, as an author who copied them would)."""

    declare = "nothing"

    def declared_capabilities(self) -> dict[str, Any]:
        return no_capability() if self.declare == "nothing" else super().declared_capabilities()

    def dispatch(self, method: str, params: Any) -> Any:
        if method not in IMPLEMENTED:
            raise RpcFailure(METHOD_NOT_FOUND, f"method not found: {method}")
        return super().dispatch(method, params)


def serve(argv: list[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO, environ: Mapping[str, str],
          exit_now: Any = None) -> int:
    """``PartialPlugin`` on the given streams; ``argv``: ``[--declare nothing|reference]``."""
    declare = argv[argv.index("--declare") + 1] if "--declare" in argv else "nothing"
    plugin_class = type(f"PartialPlugin_{declare}", (PartialPlugin,), {"declare": declare})
    return host_plugin.serve([], stdin, stdout, stderr, environ, plugin_class=plugin_class, exit_now=exit_now)
