"""Two providers that must never be passed by a scenario about what they do not do (tests/test_no_pass_without_check.py).

- ``RefusingPlugin``: the reference v1 plugin that answers only the methods a session cannot do without
  (``CORE_METHODS``) and refuses every other one — ``-32601`` (``--refuse unknown``) or ``unsupported``
  (``--refuse unsupported``) —, recording each refusal under the scenario that was running (``RECORDER``). ``--declare everything`` claims every capability (so no ``@cap:`` gate
  skips anything and every refusal meets a scenario that expects the operation to work);
  ``--declare nothing`` claims none (so a refusal of what is not declared must skip, never pass).
- ``SerialPlugin``: the reference v1 plugin reading and answering one request at a time: a long command
  blocks every answer behind it, ``shutdown`` included.

Both are served in the test process (``serve_refusing``, ``serve_serial``: ``ProviderConfig(in_process=...)``).
"""

from __future__ import annotations

import argparse
import copy
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TextIO

from conformance.reference import host_plugin
from conformance.reference.host_plugin import BASE_CAPABILITIES, GATED_METHODS, HostPlugin, unsupported
from conformance.reference.stdio_server import METHOD_NOT_FOUND, RpcFailure

# What a v1 session cannot do without: the handshake, the end of the session, the handle calls and
# exec/run (no scenario could start a sandbox or run a command otherwise). Every other method of the
# protocol is refused as if the plugin had never heard of it.
CORE_METHODS = frozenset({
    "initialize", "shutdown", "provider/health", "sandbox/create", "sandbox/attach", "sandbox/describe",
    "sandbox/list", "sandbox/delete", "sandbox/platform_info", "sandbox/start", "sandbox/stop", "exec/run",
})


@dataclass
class Recorder:
    """The refusals of every ``RefusingPlugin`` in this process, by the scenario that was running."""

    scenario: str | None = None
    refused: dict[str, list[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, method: str) -> None:
        with self.lock:
            self.refused.setdefault(self.scenario or "(between scenarios)", []).append(method)

    def reset(self) -> None:
        with self.lock:
            self.scenario = None
            self.refused.clear()


RECORDER = Recorder()


def _everything(value: Any) -> Any:
    """``value`` with every flag set: booleans true, absent groups present."""
    if isinstance(value, bool):
        return True
    if isinstance(value, dict):
        return {key: _everything(item) for key, item in value.items()}
    return value


def flags_cleared(value: Any) -> Any:
    """``value`` with every flag cleared: booleans false, optional groups null."""
    if isinstance(value, bool):
        return False
    if isinstance(value, dict):
        return {key: flags_cleared(item) for key, item in value.items()}
    return value


def every_capability() -> dict[str, Any]:
    declared = _everything(copy.deepcopy(BASE_CAPABILITIES))
    declared.update(pty={"resize": True}, logs={"provision": True, "entrypoint": True},
                    volumes={"create_time_attach": True})
    return declared


def no_capability() -> dict[str, Any]:
    declared = flags_cleared(copy.deepcopy(BASE_CAPABILITIES))
    declared.update(pty=None, logs=None, volumes=None)
    return declared


class RefusingPlugin(HostPlugin):
    """Answers ``CORE_METHODS`` as the reference does and refuses every other method, noting it: as unknown
    (``-32601``), or as ``unsupported`` naming the capability that gates it (the dotted method name where none
    does)."""

    declare = "everything"
    refuse = "unknown"

    def declared_capabilities(self) -> dict[str, Any]:
        return every_capability() if self.declare == "everything" else no_capability()

    def dispatch(self, method: str, params: Any) -> Any:
        if method not in CORE_METHODS:
            RECORDER.note(method)
            if self.refuse == "unsupported":
                raise unsupported(GATED_METHODS.get(method, method.replace("/", ".")))
            raise RpcFailure(METHOD_NOT_FOUND, f"unknown method {method}")
        return super().dispatch(method, params)


class _Everything(frozenset):
    """Every method name: each request is run on the reading thread, so the next line waits for it."""

    def __contains__(self, item: object) -> bool:
        return True


class SerialPlugin(HostPlugin):
    """The reference plugin serving one request at a time: a 30 s command holds back every later answer."""

    inline_methods = _Everything()


def serve_refusing(argv: list[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO,
                   environ: Mapping[str, str], exit_now: Any = None) -> int:
    """``RefusingPlugin`` on the given streams; ``argv``: ``--declare everything|nothing``,
    ``--refuse unknown|unsupported``."""
    parser = argparse.ArgumentParser(prog="refusing-plugin")
    parser.add_argument("--declare", choices=("everything", "nothing"), default="everything")
    parser.add_argument("--refuse", choices=("unknown", "unsupported"), default="unknown")
    args = parser.parse_args(argv)
    plugin_class = type(f"RefusingPlugin_{args.declare}_{args.refuse}", (RefusingPlugin,),
                        {"declare": args.declare, "refuse": args.refuse})
    return host_plugin.serve([], stdin, stdout, stderr, environ, plugin_class=plugin_class, exit_now=exit_now)


def serve_serial(argv: list[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO,
                 environ: Mapping[str, str], exit_now: Any = None) -> int:
    """``SerialPlugin`` on the given streams."""
    return host_plugin.serve(argv, stdin, stdout, stderr, environ, plugin_class=SerialPlugin, exit_now=exit_now)
