"""Broken variants of the v2 reference plugin's commands: argument vectors, the environment, stops, timeouts
and stop graces, input, exec ids and retained output."""

from __future__ import annotations

import shlex
import shutil
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from conformance.reference.data_channel import PluginChannel
from conformance.reference.host_backend import HostBackend, HostSandbox, invalid_spec
from conformance.reference.host_plugin_v2 import (
    ExecSpecV2,
    ExecStops,
    HostBackendV2,
    HostPluginV2,
    StreamedStdin,
)
from tests.mutants import mutant

# -- argument vectors --------------------------------------------------------------------------------------


class _RewritesArgv(HostPluginV2):
    """Runs every argument vector but Bash's own through ``rewrite``: how a plugin that still thinks in
    shell commands behaves."""

    def rewrite(self, argv: list[str]) -> list[str]:
        raise NotImplementedError

    def exec_spec(self, method: str, spec: Any) -> ExecSpecV2:
        parsed = super().exec_spec(method, spec)
        if parsed.argv[0] == "bash":
            return parsed
        return replace(parsed, argv=self.rewrite(parsed.argv))


@mutant("argv-joined-into-shell-source")
class ArgvJoinedIntoShellSource(_RewritesArgv):
    """Joins the arguments with spaces and hands them to `bash -c`, so the shell expands and splits them."""

    def rewrite(self, argv: list[str]) -> list[str]:
        return ["bash", "-c", " ".join(argv)]


@mutant("argv-quoted-into-bash")
class ArgvQuotedIntoBash(_RewritesArgv):
    """Quotes the arguments faithfully, but still runs them through `bash -c`, which reads BASH_ENV."""

    def rewrite(self, argv: list[str]) -> list[str]:
        return ["bash", "-c", "exec " + shlex.join(argv)]


class _ResolvesProgram(HostPluginV2):
    """Resolves the program itself, through ``resolve(program, directory)``, before running it."""

    def resolve(self, program: str, directory: Path) -> str:
        raise NotImplementedError

    def stream_exec(self, sandbox: HostSandbox, spec: ExecSpecV2, channel: PluginChannel, stops: ExecStops,
                    wants_stdin: bool) -> Any:
        directory = self.backend.resolve(sandbox, spec.working_dir)
        argv = [self.resolve(spec.argv[0], directory), *spec.argv[1:]]
        return super().stream_exec(sandbox, replace(spec, argv=argv), channel, stops, wants_stdin)


@mutant("working-dir-programs-first")
class WorkingDirProgramsFirst(_ResolvesProgram):
    """Prefers an executable of that name in the working directory to the one PATH finds."""

    def resolve(self, program: str, directory: Path) -> str:
        local = directory / program
        return str(local) if "/" not in program and local.is_file() else program


@mutant("programs-resolved-from-plugin-cwd")
class ProgramsResolvedFromPluginCwd(_ResolvesProgram):
    """Resolves a relative program path against the plugin's own directory, not the command's."""

    def resolve(self, program: str, directory: Path) -> str:
        return str(Path(program).absolute()) if "/" in program and not program.startswith("/") else program


@mutant("missing-program-exits-127")
class MissingProgramExits127(_ResolvesProgram):
    """Reports a program it cannot find as a command that exited 127, the way a shell does."""

    def resolve(self, program: str, directory: Path) -> str:
        return program

    def stream_exec(self, sandbox: HostSandbox, spec: ExecSpecV2, channel: PluginChannel, stops: ExecStops,
                    wants_stdin: bool) -> Any:
        program = spec.argv[0]
        if "/" not in program and shutil.which(program) is None:
            argv = ["bash", "-c", 'printf "%s: command not found\\n" "$0" >&2; exit 127', program]
            spec = replace(spec, argv=argv)
        return super().stream_exec(sandbox, spec, channel, stops, wants_stdin)


# -- the environment ------------------------------------------------------------------------------------


@mutant("bash-env-stripped")
class BashEnvStripped(HostPluginV2):
    """Drops BASH_ENV from every command's environment, as version 1 asked."""

    def exec_spec(self, method: str, spec: Any) -> ExecSpecV2:
        parsed = super().exec_spec(method, spec)
        return replace(parsed, env={k: v for k, v in parsed.env.items() if k != "BASH_ENV"})


@mutant("empty-env-values-dropped")
class EmptyEnvValuesDropped(HostPluginV2):
    """Leaves out the variables whose value is empty."""

    def exec_spec(self, method: str, spec: Any) -> ExecSpecV2:
        parsed = super().exec_spec(method, spec)
        return replace(parsed, env={k: v for k, v in parsed.env.items() if v})


# -- stops ------------------------------------------------------------------------------------------------


def _stops_of(plugin: HostPluginV2, exec_id: str) -> ExecStops | None:
    with plugin._execs_lock:
        return plugin._execs.get(exec_id)


@mutant("gentle-stop-kills")
class GentleStopKills(HostPluginV2):
    """Ends a command at once on a gentle stop, as if it had been a hard one."""

    def m_exec_stop(self, params: dict[str, Any]) -> Any:
        return super().m_exec_stop({**params, "level": "kill"})


@mutant("gentle-stop-escalates")
class GentleStopEscalates(HostPluginV2):
    """Follows a gentle stop with a hard one half a second later, whether or not the command heeded it."""

    def m_exec_stop(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stop(params)
        stops = _stops_of(self, params["exec_id"])
        if stops is not None and params["level"] == "term":
            threading.Timer(0.5, stops.request, args=("kill",)).start()
        return answer


@mutant("stop-of-unknown-exec-refused")
class StopOfUnknownExecRefused(HostPluginV2):
    """Refuses to stop a command it is not running."""

    def m_exec_stop(self, params: dict[str, Any]) -> Any:
        if _stops_of(self, params.get("exec_id")) is None:
            raise invalid_spec("exec_id", "unknown execution id")
        return super().m_exec_stop(params)


@mutant("timeout-asks-first")
class TimeoutAsksFirst(HostPluginV2):
    """At a timeout sends SIGTERM and waits a second before the kill, even without a stop grace."""

    def exec_spec(self, method: str, spec: Any) -> ExecSpecV2:
        parsed = super().exec_spec(method, spec)
        return parsed if parsed.grace_s is not None else replace(parsed, grace_s=1.0)


@mutant("stop-grace-ignored")
class StopGraceIgnored(HostPluginV2):
    """Kills a command outright at its timeout, whatever stop grace the host gave."""

    def exec_spec(self, method: str, spec: Any) -> ExecSpecV2:
        return replace(super().exec_spec(method, spec), grace_s=None)


# -- input --------------------------------------------------------------------------------------------------


class _FirstWriteOnly:
    """A command's stdin that takes one write and is then closed: whatever follows is dropped."""

    def __init__(self, pipe: Any) -> None:
        self.pipe = pipe
        self.written = False

    def write(self, data: bytes) -> None:
        if not self.written:
            self.written = True
            self.pipe.write(data)
            self.pipe.close()

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if not self.written:
            self.pipe.close()


class _FirstFrameBackend(HostBackendV2):
    def feed_stdin(self, proc: Any, data: Any) -> None:
        if isinstance(data, StreamedStdin):
            data.feed(_FirstWriteOnly(proc.stdin))
        else:
            super().feed_stdin(proc, data)


@mutant("streamed-stdin-cut-after-first-frame")
class StreamedStdinCutAfterFirstFrame(HostPluginV2):
    """Closes a command's streamed stdin after the host's first stdin frame."""

    def make_backend(self) -> HostBackend:
        return _FirstFrameBackend(environ=self.environ)


class _FixedStdin(HostPluginV2):
    """Takes a command's input whole (``exec.stdin``) instead of streaming it (``exec.stdin_stream``)."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["exec"]["stdin_stream"] = False
        return capabilities


@mutant("control-fixed-stdin")
class ControlFixedStdin(_FixedStdin):
    """Honest (control): collects a command's input to the host's eof, up to 16 MiB, before it runs."""


@mutant("fixed-stdin-loses-last-byte")
class FixedStdinLosesLastByte(_FixedStdin):
    """Collects a command's input to the host's eof but hands the command all of it but the last byte."""

    def collect_input(self, channel: PluginChannel, max_bytes: int) -> bytes:
        return super().collect_input(channel, max_bytes)[:-1]


@mutant("fixed-stdin-unbounded")
class FixedStdinUnbounded(_FixedStdin):
    """Collects however much input the host sends."""

    def collect_input(self, channel: PluginChannel, max_bytes: int) -> bytes:
        return super().collect_input(channel, 1 << 40)


@mutant("fixed-stdin-limit-off-by-one")
class FixedStdinLimitOffByOne(_FixedStdin):
    """Refuses an input of exactly the limit, which is still within it."""

    def collect_input(self, channel: PluginChannel, max_bytes: int) -> bytes:
        return super().collect_input(channel, max_bytes - 1)


# -- exec ids and retention -----------------------------------------------------------------------------------


@mutant("duplicate-exec-id-accepted")
class DuplicateExecIdAccepted(HostPluginV2):
    """Lets a new command take over the exec id of one still running."""

    def register_exec(self, exec_id: str, grace_s: float | None) -> ExecStops:
        with self._execs_lock:
            self._execs.pop(exec_id, None)
        return super().register_exec(exec_id, grace_s)


def _retained(capture: dict[str, Any], limit: int | None) -> dict[str, Any]:
    """A capture that kept ``limit`` bytes (all of them for None) of what it observed."""
    observed = capture.get("observed_bytes", 0)
    kept = observed if limit is None else min(observed, limit)
    return {**capture, "retained_bytes": kept, "omitted_bytes": observed - kept}


@mutant("retains-everything-by-default")
class RetainsEverythingByDefault(HostPluginV2):
    """Keeps (and counts as kept) all of a command's output when no retained output limit is asked, as v1 did."""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stream(params)
        if params.get("retained_output_limit") is None:
            for stream in ("stdout_capture", "stderr_capture"):
                answer[stream] = _retained(answer[stream], None)
        return answer


@mutant("retention-beyond-limit-kept")
class RetentionBeyondLimitKept(HostPluginV2):
    """Retains as much output as the host asks for, past retained_output_bytes."""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        limit = params.get("retained_output_limit")
        answer = super().m_exec_stream({**params, "retained_output_limit": None})
        if limit is not None:
            for stream in ("stdout_capture", "stderr_capture"):
                answer[stream] = _retained(answer[stream], limit)
        return answer


@mutant("control-retention-limit-ignored")
class ControlRetentionLimitIgnored(HostPluginV2):
    """Honest (control): keeps no copy of the output whatever limit is asked, leaving retention to the host
    (as upstream's plugin does), instead of refusing a limit past retained_output_bytes."""

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        return super().m_exec_stream({**params, "retained_output_limit": None})


# -- the end of a session --------------------------------------------------------------------------------------

SHUTDOWN_PATIENCE_S = 12.0


@mutant("shutdown-waits-for-commands")
class ShutdownWaitsForCommands(HostPluginV2):
    """Gives running commands 12 seconds to finish on their own before a shutdown stops them."""

    def on_stop(self) -> None:
        deadline = time.monotonic() + SHUTDOWN_PATIENCE_S
        while time.monotonic() < deadline:
            with self._execs_lock:
                if not self._execs:
                    break
            time.sleep(0.05)
        super().on_stop()
