"""Broken variants of the v1 host plugin that put the suite's cleanup to the test: a call that never
gets an answer, a plugin that stops reading its input, a plugin that dies mid-run (with a sandbox
the suite knows about, or with one whose create it never heard answered).

Each breaks one scenario in a way a real provider can; ``tests/test_cleanup.py`` runs them with a
persistent registry and proves that every sandbox they were asked for is deleted all the same.
"""

from __future__ import annotations

import threading
from typing import Any

from conformance.reference.host_plugin import HostPlugin
from conformance.reference.stdio_server import NoAnswer
from tests.mutants import mutant

CRASH_EXIT_CODE = 70


class _Dies(HostPlugin):
    """Can end its own process abruptly: no answer, no shutdown. The sandboxes' processes end with it;
    their records stay where a persistent registry keeps them, as a real provider's sandboxes outlive
    the plugin that manages them."""

    def die(self, why: str) -> None:
        self.log(f"crashing on purpose: {why}")
        self.backend.close()
        self.exit_now(CRASH_EXIT_CODE)


class _Hangs(HostPlugin):
    """Can leave a request unanswered for good (until the plugin stops, so it exits promptly)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._stopping = threading.Event()

    def hang(self, why: str) -> None:
        self.log(f"never answering: {why}")
        self._stopping.wait()
        raise NoAnswer  # ends the handler's thread without an answer

    def on_stop(self) -> None:
        self._stopping.set()
        super().on_stop()


@mutant("timed-out-exec-never-answered")
class TimedOutExecNeverAnswered(_Hangs):
    """Stops a command that outlives its timeout, then never answers its exec/run (other requests are
    still answered)."""

    def m_exec_run(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_run(params)
        if result["termination"] == "timed_out":
            self.hang(f"exec/run of {params['spec']['command']!r} timed out")
        return result


@mutant("timed-out-exec-freezes-plugin")
class TimedOutExecFreezesPlugin(_Hangs):
    """Runs exec/run on the thread that reads its input, and never returns from a command that outlives
    its timeout: from then on the plugin reads nothing and answers nothing, a delete included."""

    inline_methods = frozenset({*HostPlugin.inline_methods, "exec/run"})

    def m_exec_run(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_run(params)
        if result["termination"] == "timed_out":
            self.hang(f"exec/run of {params['spec']['command']!r} timed out; reading nothing more")
        return result


@mutant("signalled-exec-crashes-plugin")
class SignalledExecCrashesPlugin(_Dies):
    """Exits abruptly, without answering, when a command is ended by a signal it did not send itself."""

    def m_exec_run(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_run(params)
        if result["signal"] is not None and result["termination"] == "exited":
            self.die(f"the command was ended by signal {result['signal']}")
        return result


@mutant("named-create-crashes-unanswered")
class NamedCreateCrashesUnanswered(_Dies):
    """Creates a sandbox that asks for a name, then exits abruptly before answering: the host never
    learns the new sandbox's id, and only the run label finds it again."""

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_create(params)
        if params["spec"].get("name"):
            self.die(f"created {info['status']['id']} and will not say so")
        return info
