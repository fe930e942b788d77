"""Broken variants of the v1 host plugin's buffered exec: the Bash contract, BASH_ENV, literal command
text, binary stderr, output sanitization, stdin, signals, timeouts and relative working directories."""

from __future__ import annotations

import queue
import shlex
import subprocess
from pathlib import Path
from typing import Any

from conformance.reference import host_backend
from conformance.reference.host_backend import BackendError, HostBackend, HostSandbox
from conformance.reference.host_plugin import HostPlugin, application_error, b64
from conformance.reference.sanitize import BEL, Sanitizer
from tests.mutants import mutant
from tests.redteam.seams import BackendPlugin, sanitizing_backend

# -- the Bash contract ---------------------------------------------------------------------------


class _RewritesCommand(HostPlugin):
    """Runs every command through ``rewrite``: how a provider that wraps commands in its own shell
    invocation behaves."""

    def rewrite(self, command: str) -> str:
        raise NotImplementedError

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        return super().run_spec(sandbox_id, {**spec, "command": self.rewrite(spec["command"])}, **kwargs)


def _through(*argv: str):
    """A rewrite that hands the command, properly quoted, to another shell invocation."""

    def rewrite(self: HostPlugin, command: str) -> str:
        shell = [self.backend.bash if word == "bash" else word for word in argv]
        return "exec " + shlex.join([*shell, "-c", command])

    return rewrite


@mutant("exec-login-shell")
class ExecLoginShell(_RewritesCommand):
    """Runs commands with `bash -lc`, as a login shell."""

    rewrite = _through("bash", "-l")


@mutant("exec-through-sh")
class ExecThroughSh(_RewritesCommand):
    """Runs commands with `sh -c` instead of Bash."""

    rewrite = _through("sh")


@mutant("exec-errexit")
class ExecErrexit(_RewritesCommand):
    """Runs commands with `bash -ec`: the first failing command ends the script."""

    rewrite = _through("bash", "-e")


@mutant("exec-pipefail")
class ExecPipefail(_RewritesCommand):
    """Runs commands with `bash -o pipefail -c`."""

    rewrite = _through("bash", "-o", "pipefail")


@mutant("exec-posix-mode")
class ExecPosixMode(_RewritesCommand):
    """Runs commands with `bash --posix -c`."""

    rewrite = _through("bash", "--posix")


@mutant("command-requoted-through-shell")
class CommandRequotedThroughShell(_RewritesCommand):
    """Wraps the command in double quotes for a second shell, escaping only the double quotes: the
    outer shell expands `$...` and `$(...)` that the command had single-quoted."""

    def rewrite(self, command: str) -> str:
        return f'exec {self.backend.bash} -c "' + command.replace('"', '\\"') + '"'


class _BashEnvKeepingBackend(HostBackend):
    def environment(self, sandbox: HostSandbox, spec_env: Any) -> dict[str, str]:
        env = super().environment(sandbox, spec_env)
        if "BASH_ENV" in spec_env:
            env["BASH_ENV"] = spec_env["BASH_ENV"]
        return env


@mutant("bash-env-honoured")
class BashEnvHonoured(HostPlugin):
    """Passes BASH_ENV from the command's env through to Bash, which then sources that file."""

    def make_backend(self) -> HostBackend:
        return _BashEnvKeepingBackend(environ=self.environ)


class _EnvInSourceBackend(HostBackend):
    def start_process(self, sandbox: HostSandbox, command: str, env: Any, working_dir: str | None,
                      stdin_piped: bool, argv: list[str] | None) -> subprocess.Popen[bytes]:
        exports = "".join(f"{name}='{value}'; export {name}; " for name, value in env.items())
        return super().start_process(sandbox, exports + command, {}, working_dir, stdin_piped, argv)


@mutant("env-spliced-into-source")
class EnvSplicedIntoSource(HostPlugin):
    """Sets the command's variables by prefixing NAME='value'; export NAME; to its source, quoting each
    value in single quotes without escaping them: a value holding a single quote arrives altered."""

    def make_backend(self) -> HostBackend:
        return _EnvInSourceBackend(environ=self.environ)


# -- output ----------------------------------------------------------------------------------------


@mutant("stderr-decoded-as-text")
class StderrDecodedAsText(HostPlugin):
    """Round-trips stderr through lossy UTF-8 text (stdout stays binary-safe)."""

    def exec_result(self, run: Any) -> dict[str, Any]:
        result = super().exec_result(run)
        result["stderr_b64"] = b64(run.stderr.decode("utf-8", errors="replace").encode("utf-8"))
        return result


class _OverridesSanitization(HostPlugin):
    def sanitization(self, asked: str | None) -> str | None:
        raise NotImplementedError

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        return super().run_spec(sandbox_id, {**spec, "output_sanitization": self.sanitization(
            spec.get("output_sanitization"))}, **kwargs)


@mutant("sanitization-ignored")
class SanitizationIgnored(_OverridesSanitization):
    """Accepts output_sanitization and always returns raw output."""

    def sanitization(self, asked: str | None) -> str | None:
        return "raw"


@mutant("strip-all-keeps-controls")
class StripAllKeepsControls(_OverridesSanitization):
    """Treats strip_all like strip_ansi: escape sequences go, standalone control characters stay."""

    def sanitization(self, asked: str | None) -> str | None:
        return "strip_ansi" if asked == "strip_all" else asked


@mutant("sanitization-always-strip-ansi")
class SanitizationAlwaysStripAnsi(_OverridesSanitization):
    """Strips ANSI escape sequences from every command's output, whatever was asked."""

    def sanitization(self, asked: str | None) -> str | None:
        return "strip_ansi"


# -- stdin ---------------------------------------------------------------------------------------


@mutant("stdin-dropped")
class StdinDropped(HostPlugin):
    """Declares exec.stdin and accepts stdin_b64, but the command's stdin is empty."""

    def decode_stdin(self, spec: dict[str, Any]) -> bytes | None:
        super().decode_stdin(spec)
        return None


class _StrictStdinBackend(HostBackend):
    """Fails the exec when the command closed its stdin before all of it was written."""

    FEED_REPORT_WAIT_S = 5.0

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._feeds: dict[str, queue.Queue[bool]] = {}

    def feed_stdin(self, proc: subprocess.Popen[bytes], data: bytes) -> None:
        try:
            assert proc.stdin is not None
            proc.stdin.write(data)
            proc.stdin.close()
            complete = True
        except (BrokenPipeError, OSError, ValueError):
            complete = False
        self._feeds.setdefault(proc.args[-1], queue.Queue()).put(complete)

    def run(self, sandbox: HostSandbox, command: str, env: Any, working_dir: str | None = None,
            stdin: bytes | None = None, **kwargs: Any) -> host_backend.ExecRun:
        run = super().run(sandbox, command, env, working_dir=working_dir, stdin=stdin, **kwargs)
        if stdin is not None:
            try:
                complete = self._feeds.setdefault(command, queue.Queue()).get(timeout=self.FEED_REPORT_WAIT_S)
            except queue.Empty:
                complete = True
            if not complete:
                raise BackendError("io", "could not write the command's stdin: broken pipe", io_context="stdin")
        return run


class _EmptyStdinLeftOpenBackend(HostBackend):
    def feed_stdin(self, proc: subprocess.Popen[bytes], data: bytes) -> None:
        if data:
            super().feed_stdin(proc, data)
        # zero bytes: nothing is written, and the pipe is left open


@mutant("stdin-empty-left-open")
class StdinEmptyLeftOpen(HostPlugin):
    """Given an empty stdin_b64, pipes the command's stdin but never closes it: no end of file."""

    def make_backend(self) -> HostBackend:
        return _EmptyStdinLeftOpenBackend(environ=self.environ)


@mutant("stdin-broken-pipe-error")
class StdinBrokenPipeError(HostPlugin):
    """Fails the exec with an io error when the command stops reading its stdin early."""

    def make_backend(self) -> HostBackend:
        return _StrictStdinBackend(environ=self.environ)


# -- signals, timeouts, durations ----------------------------------------------------------------


@mutant("signal-not-reported")
class SignalNotReported(HostPlugin):
    """Reports a command killed by a signal with the shell's exit code 128+N and no signal."""

    def exec_result(self, run: Any) -> dict[str, Any]:
        result = super().exec_result(run)
        if run.signal is not None:
            result["exit_code"], result["signal"] = 128 + run.signal, None
        return result


@mutant("timeout-ignored")
class TimeoutIgnored(HostPlugin):
    """Never applies timeout_ms: a command runs until it ends by itself."""

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        return super().run_spec(sandbox_id, {**spec, "timeout_ms": None}, **kwargs)


@mutant("timeout-as-error")
class TimeoutAsError(HostPlugin):
    """Answers a timed-out command with a `timeout` error instead of a result."""

    def m_exec_run(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_run(params)
        if result["termination"] == "timed_out":
            elapsed = result["duration_ms"]
            raise application_error("timeout", f"exec timed out after {elapsed} ms",
                                    {"operation": "exec", "elapsed": {"secs": elapsed // 1000,
                                                                      "nanos": elapsed % 1000 * 1_000_000}},
                                    retryable=True)
        return result


@mutant("duration-in-seconds")
class DurationInSeconds(HostPlugin):
    """Reports duration_ms in whole seconds."""

    def exec_result(self, run: Any) -> dict[str, Any]:
        return {**super().exec_result(run), "duration_ms": run.duration_ms // 1000}


# -- working directory ---------------------------------------------------------------------------


class _PluginCwdBackend(HostBackend):
    def resolve(self, sandbox: HostSandbox, path: str | None) -> Path:
        if path and not Path(path).is_absolute():
            return Path(path).absolute()
        return super().resolve(sandbox, path)


@mutant("relative-working-dir-from-plugin-cwd")
class RelativeWorkingDirFromPluginCwd(HostPlugin):
    """Resolves a relative working_dir against the plugin's own current directory."""

    def make_backend(self) -> HostBackend:
        return _PluginCwdBackend(environ=self.environ)


# -- sanitization families (features/exec.feature: sanitization-families) ------------------------------


def _with_sanitizer(sanitizer: type[Sanitizer]) -> type[HostPlugin]:
    return type(f"_Plugin_{sanitizer.__name__}", (BackendPlugin,), {"backend_class": sanitizing_backend(sanitizer)})


class _DcsAsTwoByteEscape(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "esc" and byte in (ord("P"), ord("X"), ord("^"), ord("_")):
            self._state = "text"  # read as a two-byte escape: the string's body leaks
            return
        super()._step(byte, out)


class _OscEndsOnlyAtSt(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "osc" and byte == BEL:
            return  # BEL is taken for part of the OSC, which then swallows what follows
        super()._step(byte, out)


class _StripAllKeepsVtFf(Sanitizer):
    def _text_byte(self, byte: int, out: bytearray) -> None:
        if self.mode == "strip_all" and byte in (0x0B, 0x0C):
            out.append(byte)
            return
        super()._text_byte(byte, out)


class _AnsiDropsControls(Sanitizer):
    def _text_byte(self, byte: int, out: bytearray) -> None:
        if self.mode == "strip_ansi" and byte < 0x20 and byte not in (0x09, 0x0A, 0x0D):
            return
        super()._text_byte(byte, out)


class _AnsiDropsC1Controls(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "c2" and self.mode == "strip_ansi" and 0x80 <= byte <= 0x9F \
                and byte not in (0x9B, 0x9D, 0x90, 0x98, 0x9E, 0x9F):
            self._state = "text"  # a standalone C1 control (NEL, ...) removed, which only strip_all removes
            return
        super()._step(byte, out)


class _NfEscapeKept(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "esc" and 0x20 <= byte <= 0x2F:
            self._state = "text"  # ESC and an intermediate are kept as text, and the final byte with them
            out.extend((0x1B, byte))
            return
        super()._step(byte, out)


class _CsiEndsAtIntermediate(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "csi" and 0x20 <= byte <= 0x2F:
            self._state = "text"  # only parameter bytes are taken for part of a CSI
            self._text_byte(byte, out)
            return
        super()._step(byte, out)


class _FpEscapesKept(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "esc" and 0x30 <= byte <= 0x3F:
            self._state = "text"  # ESC 7, ESC 8, ESC =, ESC > ... are not recognised
            out.extend((0x1B, byte))
            return
        super()._step(byte, out)


class _C2AlwaysC1(Sanitizer):
    def _step(self, byte: int, out: bytearray) -> None:
        if self._state == "c2" and not 0x80 <= byte <= 0x9F:
            self._state = "text"  # the lead byte 0xC2 is dropped as if a C1 control had followed
            self._step(byte, out)
            return
        super()._step(byte, out)


mutant("sanitize-dcs-body-kept")(type("SanitizeDcsBodyKept", (_with_sanitizer(_DcsAsTwoByteEscape),), {
    "__doc__": "Reads ESC P (and SOS, PM, APC) as a two-byte escape: the string's body is kept."}))
mutant("sanitize-osc-bel-ignored")(type("SanitizeOscBelIgnored", (_with_sanitizer(_OscEndsOnlyAtSt),), {
    "__doc__": "Ends an OSC only at the string terminator: one ended by BEL swallows what follows."}))
mutant("sanitize-strip-all-keeps-vt-ff")(type("SanitizeStripAllKeepsVtFf", (_with_sanitizer(_StripAllKeepsVtFf),), {
    "__doc__": "strip_all keeps VT and FF, which are neither TAB, LF nor CR."}))
mutant("sanitize-ansi-drops-controls")(type("SanitizeAnsiDropsControls", (_with_sanitizer(_AnsiDropsControls),), {
    "__doc__": "strip_ansi removes standalone control characters, which only strip_all removes."}))
mutant("sanitize-ansi-drops-c1-controls")(type("SanitizeAnsiDropsC1Controls",
                                               (_with_sanitizer(_AnsiDropsC1Controls),), {
    "__doc__": "strip_ansi removes standalone UTF-8-encoded C1 controls (NEL ...), which only strip_all removes."}))
mutant("sanitize-nf-escape-kept")(type("SanitizeNfEscapeKept", (_with_sanitizer(_NfEscapeKept),), {
    "__doc__": "Does not recognise ESC followed by intermediates (a character set designation such as ESC ( B)."}))
mutant("sanitize-csi-ends-at-intermediate")(type("SanitizeCsiEndsAtIntermediate",
                                                 (_with_sanitizer(_CsiEndsAtIntermediate),), {
    "__doc__": "Ends a CSI at an intermediate byte (ESC [2 SP q): the intermediate and final byte leak."}))
mutant("sanitize-fp-escapes-kept")(type("SanitizeFpEscapesKept", (_with_sanitizer(_FpEscapesKept),), {
    "__doc__": "Keeps the two-byte private escapes ESC 0 .. ESC ? (keypad modes ESC = and ESC >)."}))
mutant("sanitize-c2-lead-dropped")(type("SanitizeC2LeadDropped", (_with_sanitizer(_C2AlwaysC1),), {
    "__doc__": "Drops the UTF-8 lead byte 0xC2 of ordinary text (degree sign, plus-minus ...)."}))
