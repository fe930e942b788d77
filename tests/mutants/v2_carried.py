"""Broken variants of the v2 reference plugin for the v1 rules protocol v2 carries unchanged.

A v2 rule that ``carries`` a v1 one (conformance/requirements/sandbox-driver-v2.yaml) is judged, on a v2
provider, by the shared scenarios that cite the v1 id. Proving those scenarios can fail on v2 needs a v2
provider that breaks the rule. Most such rules live in code ``HostPluginV2`` inherits from the v1
reference (handles, lifecycle, metadata filesystem calls, events, the JSON-RPC server), so the v1 mutant
that breaks them breaks v2 too once it sits in front of the v2 reference: ``on_v2(name)`` registers
``<name>-on-v2``, the v1 mutant's overrides first, then ``HostPluginV2`` and the v1 reference below it.

Only mutants whose fault is in shared code are composed. Where the v1 mutant overrides a method v2 does
not call (exec/run, the base64 output fields, the stdio/pty output polls), or a method v2 replaced
(exec/stream, fs/read, fs/write over data channels), the rule is broken here by a small mutant of the v2
reference's own seams instead (below the compositions).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import threading
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

from conformance.reference.data_channel import STDOUT
from conformance.reference.host_backend import BackendError, HostBackend
from conformance.reference.host_interactive import STDIO_CHUNK
from conformance.reference.host_interactive_v2 import ChannelStdioProcess
from conformance.reference.host_plugin_v2 import ExecSpecV2, HostBackendV2, HostPluginV2
from conformance.reference.sanitize import Sanitizer
from conformance.reference.stdio_server import NoAnswer, RpcFailure
from tests.mutants import (
    REGISTRY,
    mutant,
    redteam,
    v1_core,
    v1_events,
    v1_fs,
    v1_interactive,
    v1_lifecycle,
    v1_streaming,
    v1_wire,
)

V2_SUFFIX = "-on-v2"
# Imported for their registrations: each v1 mutant is looked up by name before it is composed.
COMPOSED_FROM = (redteam, v1_core, v1_events, v1_fs, v1_interactive, v1_lifecycle, v1_streaming, v1_wire)

# HostBackendV2 adds v2's exec contract as methods only; a v1 mutant's backend gains it by class (below).
assert "__init__" not in vars(HostBackendV2), "HostBackendV2 now has state: compose v1 backends by construction"


@cache
def _backend_on_v2(backend_class: type[HostBackend]) -> type[HostBackend]:
    if issubclass(backend_class, HostBackendV2):
        return backend_class
    return type(f"{backend_class.__name__}OnV2", (backend_class, HostBackendV2), {"__module__": __name__})


class _OnV2:
    """What every composed mutant needs beside the two classes: a v1 mutant that builds its own backend
    (a subclass of the v1 ``HostBackend``) gets that backend with v2's exec contract, so only the
    mutant's fault differs from the v2 reference.

    A v1 mutant's own event source stays as the mutant wired it (events written through ``notify`` as
    they happen): v2 allows events before the answer, and a mutant that rewrites events in ``notify``
    keeps seeing them."""

    def make_backend(self) -> HostBackend:
        backend = super().make_backend()  # type: ignore[misc]
        backend.__class__ = _backend_on_v2(type(backend))  # keeps whatever the mutant built it with
        return backend


def on_v2(name: str) -> type:
    """Register the v1 mutant ``name`` composed onto the v2 reference as ``<name>-on-v2``."""
    v1_mutant = REGISTRY[name]
    namespace: dict[str, Any] = {"__module__": __name__,
                                 "__doc__": f"{(v1_mutant.__doc__ or name).strip()} (on the v2 reference)"}
    composed = type(f"{v1_mutant.__name__}OnV2", (_OnV2, v1_mutant, HostPluginV2), namespace)
    return mutant(f"{name}{V2_SUFFIX}")(composed)


# Each fault lies in code the v2 reference inherits; the catalogue (catalogue/v2-carried.yaml) names the
# v2 rules each breaks and the shared scenarios that fail.
CARRIED_V1_MUTANTS = (
    # the JSON-RPC server and the handshake
    "stream-blocks-server", "unknown-method-invalid-request", "malformed-line-exits", "hs_missing_provider_version",
    "provider-kind-uppercase", "health-status-healthy", "health-error-when-unhealthy", "shutdown-exits-without-answer",
    # capabilities: what is declared works, what is not is refused as unsupported
    "set-labels-merges", "undeclared-answers-provider-error", "b5_activate_names_snapshots",
    "live-streaming-claimed-undeclared",
    # handles and lifecycle
    "sandbox-id-with-whitespace", "attach-reports-registry-directory", "describe-reports-other-id",
    "stopped-state-exited", "spec-extras-ignored", "timers-null-refused", "delete-unknown-errors",
    "describe-deleted-as-running", "undelete-empty-workspace", "fork-accepts-without-memory",
    "fork-shares-workspace", "start-stop-unknown-ok", "start-leaves-stopped-sandbox", "lc_list_label_key_only",
    "platform-os-capitalized", "b4_platform_arch_goarch",
    # snapshots and access
    "snapshot-source-ignored", "snapshot-memory-silently-filesystem", "b3_volume_list_ungated",
    "snapshot-delete-twice-not-found", "b4_snapshot_not_found_resource_sandbox", "ssh-ttl-ignored",
    "ssh-token-missing",
    # events
    "events-correlation-trimmed", "events-sequence-gaps", "events-failure-reported-completed",
    "events-create-subject-without-id", "events-started-after-terminal", "b2_event_route_id_lowercased",
    "b3_attach_no_events", "b6_event_time_monotonic",
    # the metadata filesystem calls and path resolution
    "fs-absolute-paths-joined-to-workspace", "fs-metadata-mode-octal-digits", "fs-exists-always-true",
    "fs-list-dir-unbounded", "fs-rename-copies", "fs-delete-ignores-recursive-false", "fs-create-dir-ignored",
    "fs-set-permissions-ignored", "fs-metadata-follows-symlinks",
    # what a command's run shares with v1: the backend's sanitizer, exit status and termination
    "b4_sanitizer_per_chunk", "b4_strip_ansi_drops_controls", "b3_signal_negative", "b5_timeout_reports_killed",
    # long-lived streams: what v2 keeps of v1 (ids, stdio_wait's answer)
    "b4_stdio_wait_exit_code_after_signal", "b2_stdio_wait_terminated_enum", "b3_pty_duplicate_replaces",
)

for _name in CARRIED_V1_MUTANTS:
    on_v2(_name)


# -- faults at the v2 reference's own seams -----------------------------------------------------------
# The v1 mutant of each of these rules overrides code v2 does not run (exec/run and its base64 result,
# the output polls) or replaced (exec/stream, fs/write over data channels); the same fault is put here
# where v2 has it.

# The control connection


class _MethodOfThisThread(threading.local):
    name: str | None = None


@mutant("read-answers-pretty-printed-on-v2")
class ReadAnswersPrettyPrintedOnV2(HostPluginV2):
    """Writes each fs/read answer as indented JSON: one message spread over several lines, with literal
    newlines between its members."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._method = _MethodOfThisThread()  # a request is dispatched and answered on one thread

    def dispatch(self, method: str, params: Any) -> Any:
        self._method.name = method
        return super().dispatch(method, params)

    def respond(self, request_id: Any, result: Any) -> None:
        if self._method.name != "fs/read":
            return super().respond(request_id, result)
        text = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}, indent=1)
        with self._write_lock:
            try:
                self.stdout.write(text.encode("utf-8") + b"\n")
                self.stdout.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass  # the host is gone


@mutant("requests-beyond-four-dropped-on-v2")
class RequestsBeyondFourDroppedOnV2(HostPluginV2):
    """Takes at most four requests at a time and silently drops any that arrive while four are in flight
    (neither served nor refused as overloaded)."""

    in_flight_cap = 4

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._taken = 0
        self._taken_lock = threading.Lock()

    def admit(self, method: str) -> Callable[[], None] | None:
        with self._taken_lock:
            if self._taken >= self.in_flight_cap:
                raise NoAnswer
            self._taken += 1
        try:
            release = super().admit(method)
        except BaseException:
            self._let_go(None)
            raise
        return lambda: self._let_go(release)

    def _let_go(self, release: Callable[[], None] | None) -> None:
        if release is not None:
            release()
        with self._taken_lock:
            self._taken -= 1


@mutant("answers-in-request-order-on-v2")
class AnswersInRequestOrderOnV2(HostPluginV2):
    """Labels each answer with the id of the oldest request still unanswered, as if answers always went out
    in the order the requests came in: a quick answer overtaking a slow one carries the slow one's id."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._unanswered: collections.deque[Any] = collections.deque()
        self._unanswered_lock = threading.Lock()

    def handle_line(self, raw: bytes) -> bool:
        try:
            message = json.loads(raw)
        except ValueError:
            message = None
        if isinstance(message, dict) and "method" in message and "id" in message:
            with self._unanswered_lock:
                self._unanswered.append(message["id"])
        return super().handle_line(raw)

    def _oldest_instead_of(self, request_id: Any) -> Any:
        with self._unanswered_lock:
            if request_id not in self._unanswered:
                return request_id  # not a request of ours (a malformed line's answer)
            return self._unanswered.popleft()

    def respond(self, request_id: Any, result: Any) -> None:
        super().respond(self._oldest_instead_of(request_id), result)

    def respond_error(self, request_id: Any, failure: RpcFailure) -> None:
        super().respond_error(self._oldest_instead_of(request_id), failure)


# Commands: the exec/stream answer


class _RewritesExecAnswer(HostPluginV2):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        return self.rewrite(super().m_exec_stream(params))

    def rewrite(self, answer: dict[str, Any]) -> dict[str, Any]:
        return answer


@mutant("exit-code-always-zero-on-v2")
class ExitCodeAlwaysZeroOnV2(_RewritesExecAnswer):
    """Reports every command that exited as exiting with code 0."""

    def rewrite(self, answer: dict[str, Any]) -> dict[str, Any]:
        if answer["result"]["exit_code"] is not None:
            answer["result"]["exit_code"] = 0
        return answer


@mutant("nonzero-exit-as-error-on-v2")
class NonzeroExitAsErrorOnV2(_RewritesExecAnswer):
    """Turns a command's non-zero exit into an exec error instead of a result."""

    def rewrite(self, answer: dict[str, Any]) -> dict[str, Any]:
        result = answer["result"]
        if result["exit_code"] not in (0, None):
            raise BackendError("exec", f"command failed with exit code {result['exit_code']}", exec={
                "label": "command", "termination": result["termination"], "exit_code": result["exit_code"],
                "stdout_b64": "", "stderr_b64": ""})
        return answer


# Commands: the spec


class _RewritesExecSpec(HostPluginV2):
    def exec_spec(self, method: str, spec: Any) -> ExecSpecV2:
        return self.rewrite(super().exec_spec(method, spec))

    def rewrite(self, spec: ExecSpecV2) -> ExecSpecV2:
        return spec


@mutant("exec-env-ignored-on-v2")
class ExecEnvIgnoredOnV2(_RewritesExecSpec):
    """Runs commands without the variables their spec's env gives."""

    def rewrite(self, spec: ExecSpecV2) -> ExecSpecV2:
        return dataclasses.replace(spec, env={})


@mutant("exec-working-dir-ignored-on-v2")
class ExecWorkingDirIgnoredOnV2(_RewritesExecSpec):
    """Runs every command in the sandbox's root, whatever working_dir its spec gives."""

    def rewrite(self, spec: ExecSpecV2) -> ExecSpecV2:
        return dataclasses.replace(spec, working_dir=None)


# Commands: the output frames (the backend hands each chunk to the plugin as ``on_output(stream, chunk)``)

OnOutput = Callable[[str, bytes], None]


class _OutputRewritingBackend(HostBackendV2):
    def run(self, *args: Any, on_output: OnOutput | None = None, **kwargs: Any) -> Any:
        if on_output is None:
            return super().run(*args, **kwargs)
        deliver, at_exit = self.rewrite(on_output)
        run = super().run(*args, on_output=deliver, **kwargs)
        at_exit()
        return run

    def rewrite(self, on_output: OnOutput) -> tuple[OnOutput, Callable[[], None]]:
        """What the command's chunks go to instead, and what is sent once the command ended."""
        return on_output, lambda: None


class _OutputRewritingPlugin(HostPluginV2):
    backend_class: type[_OutputRewritingBackend] = _OutputRewritingBackend

    def make_backend(self) -> HostBackend:
        return self.backend_class(environ=self.environ)


class _StderrAsStdoutBackend(_OutputRewritingBackend):
    def rewrite(self, on_output: OnOutput) -> tuple[OnOutput, Callable[[], None]]:
        return (lambda stream, chunk: on_output("stdout", chunk)), lambda: None


@mutant("stderr-streamed-as-stdout-on-v2")
class StderrStreamedAsStdoutOnV2(_OutputRewritingPlugin):
    """Sends a command's stderr as stdout frames, while its answer still says the streams are separated."""

    backend_class = _StderrAsStdoutBackend


class _HeldBack:
    """Chunks kept until the command ends, then sent in the order they came."""

    def __init__(self, on_output: OnOutput) -> None:
        self.on_output = on_output
        self.chunks: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()

    def keep(self, stream: str, chunk: bytes) -> None:
        with self.lock:
            self.chunks.append((stream, chunk))

    def release(self) -> None:
        for stream, chunk in self.chunks:
            self.on_output(stream, chunk)


class _StderrHeldBackBackend(_OutputRewritingBackend):
    def rewrite(self, on_output: OnOutput) -> tuple[OnOutput, Callable[[], None]]:
        held = _HeldBack(on_output)
        return (lambda stream, chunk: (held.keep if stream == "stderr" else on_output)(stream, chunk)), held.release


@mutant("stderr-held-back-on-v2")
class StderrHeldBackOnV2(_OutputRewritingPlugin):
    """Sends a command's stdout as it comes but its stderr only once the command ended (still before the
    eof): stderr frames arrive after stdout written later."""

    backend_class = _StderrHeldBackBackend


class _ReplayingBackend(_OutputRewritingBackend):
    def rewrite(self, on_output: OnOutput) -> tuple[OnOutput, Callable[[], None]]:
        held = _HeldBack(on_output)
        return held.keep, held.release


@mutant("replayed-output-claims-live-on-v2")
class ReplayedOutputClaimsLiveOnV2(_OutputRewritingPlugin):
    """Buffers a command's output and sends it all once the command ended, still claiming live streaming."""

    backend_class = _ReplayingBackend


class _DropsAfterLimitBackend(_OutputRewritingBackend):
    limit = 1024 * 1024

    def rewrite(self, on_output: OnOutput) -> tuple[OnOutput, Callable[[], None]]:
        sent = collections.Counter[str]()

        def deliver(stream: str, chunk: bytes) -> None:
            room = max(0, self.limit - sent[stream])
            sent[stream] += len(chunk)
            if room:
                on_output(stream, chunk[:room])

        return deliver, lambda: None


@mutant("output-dropped-after-limit-on-v2")
class OutputDroppedAfterLimitOnV2(_OutputRewritingPlugin):
    """Sends at most 1 MiB of each of a command's outputs and drops the rest (still counted as observed)."""

    backend_class = _DropsAfterLimitBackend


# Files: fs/write


@mutant("fs-append-truncates-on-v2")
class FsAppendTruncatesOnV2(HostPluginV2):
    """Opens the file for writing from its start even when the write asks to append."""

    def destination(self, path: Path, mode: str) -> Any:
        return super().destination(path, "wb")


class _InPlace:
    """A file written over from its start, its old bytes past the new end kept."""

    def __init__(self, path: Path) -> None:
        self.handle: BinaryIO = path.open("r+b")

    def __enter__(self) -> BinaryIO:
        return self.handle

    def __exit__(self, *exc: object) -> None:
        self.handle.close()


@mutant("fs-write-keeps-old-tail-on-v2")
class FsWriteKeepsOldTailOnV2(HostPluginV2):
    """Writes over an existing file in place without truncating it, so a shorter write keeps the old tail."""

    def destination(self, path: Path, mode: str) -> Any:
        if mode == "wb" and path.is_file():
            return _InPlace(path)
        return super().destination(path, mode)


# Long-lived streams


class _SanitizedStdioProcess(ChannelStdioProcess):
    def _pump_stdout(self) -> None:
        sanitizer = Sanitizer("strip_ansi")
        assert self.proc.stdout is not None
        try:
            for chunk in iter(lambda: self.proc.stdout.read1(STDIO_CHUNK), b""):
                self.channel.send(STDOUT, sanitizer.feed(chunk))
            self.channel.send(STDOUT, sanitizer.finish())
            self.channel.finish()
        except (BackendError, OSError, ValueError):
            pass
        finally:
            self._output_ended.set()


@mutant("stdio-output-sanitized-on-v2")
class StdioOutputSanitizedOnV2(HostPluginV2):
    """Strips ANSI escape sequences out of a stdio process's output."""

    stdio_process_class = _SanitizedStdioProcess


class _OutputUnderInputLock(ChannelStdioProcess):
    def _pump_stdout(self) -> None:
        with self.stdin_lock:  # one lock for the process's pipes, held while waiting for its output
            super()._pump_stdout()


@mutant("stdio-input-waits-for-output-on-v2")
class StdioInputWaitsForOutputOnV2(HostPluginV2):
    """Waits for a stdio process's output under the lock its input is written under: while the process has
    nothing to say, input to it waits."""

    stdio_process_class = _OutputUnderInputLock


@mutant("logs-output-after-answer-on-v2")
class LogsOutputAfterAnswerOnV2(HostPluginV2):
    """Answers a log follow at once and sends the log's frames and eof afterwards."""

    def m_logs_follow(self, params: dict[str, Any]) -> Any:
        follow = super().m_logs_follow

        def follow_after_the_answer() -> None:
            try:
                follow(params)
            except BackendError as error:  # the answer went out already: nobody to tell
                self.log(f"log follow after its answer failed: {error}")

        threading.Thread(target=follow_after_the_answer, daemon=True).start()
        return None
