"""A plugin executable on stdio: argv spawn, scrubbed environment, NDJSON frames, stderr ring buffer."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from conformance.errors import ProviderStartError
from conformance.transports.base import StderrTail

# Variables a plugin needs to run at all; everything else must be declared by the user.
BASELINE_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME", "TZ")


def scrubbed_environment(
    declared: Mapping[str, str] | None = None,
    passed_through: Sequence[str] = (),
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment a plugin starts with: a small baseline, forwarded names, declared pairs."""
    source = os.environ if source is None else source
    env = {name: source[name] for name in BASELINE_ENVIRONMENT if name in source}
    env.update({name: source[name] for name in passed_through if name in source})
    env.update(declared or {})
    return env


class ProcessTransport:
    """Runs one plugin process and exchanges newline-delimited frames with it."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: str | None = None,
        stderr_limit_bytes: int = 64 * 1024,
        display: str | None = None,
    ) -> None:
        if not argv:
            raise ProviderStartError("the plugin command is empty")
        self.argv = list(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.display = display or shlex.join(self.argv)
        self.stderr = StderrTail(stderr_limit_bytes)
        self._proc: subprocess.Popen[bytes] | None = None
        self._write_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, on_line: Callable[[bytes], None], on_close: Callable[[], None]) -> None:
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,  # its own process group, so teardown can kill everything it spawned
            )
        except FileNotFoundError:
            raise ProviderStartError(f"plugin executable not found: {self.argv[0]}") from None
        except PermissionError:
            raise ProviderStartError(f"plugin executable is not executable: {self.argv[0]}") from None
        except OSError as exc:
            raise ProviderStartError(f"cannot start plugin {self.argv[0]}: {exc.strerror or exc}") from None

        proc = self._proc

        def pump_stdout() -> None:
            assert proc.stdout is not None
            try:
                for raw in iter(proc.stdout.readline, b""):
                    line = raw[:-1] if raw.endswith(b"\n") else raw
                    on_line(line)
            except (OSError, ValueError):
                pass
            finally:
                on_close()

        def pump_stderr() -> None:
            assert proc.stderr is not None
            try:
                for chunk in iter(lambda: proc.stderr.read1(65536), b""):
                    self.stderr.append(chunk)
            except (OSError, ValueError):
                pass

        for target, name in ((pump_stdout, "stdout"), (pump_stderr, "stderr")):
            thread = threading.Thread(target=target, name=f"plugin-{name}-{proc.pid}", daemon=True)
            thread.start()
            self._threads.append(thread)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def describe(self) -> str:
        return self.display

    def stderr_tail(self, since: int | None = None) -> str:
        self.stderr.settle()
        if since is None:
            return self.stderr.text(max_bytes=8 * 1024)
        return self.stderr.since(since, max_bytes=8 * 1024)

    def stderr_position(self) -> int:
        return self.stderr.mark()

    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc else None

    # -- frames ----------------------------------------------------------------------------------

    def send(self, frame: bytes) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise BrokenPipeError("plugin not started")
        with self._write_lock:
            if proc.stdin.closed:  # the suite closed it (EOF scenarios): nothing more can be sent
                raise BrokenPipeError("the plugin's input is closed")
            proc.stdin.write(frame)
            proc.stdin.flush()

    def close_input(self) -> None:
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            with self._write_lock:
                try:
                    proc.stdin.close()
                except OSError:
                    pass

    def wait_exit(self, timeout_s: float) -> int | None:
        """Wait for the process to exit on its own; None when it is still running at the deadline."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def close(self, grace_s: float = 2.0) -> None:
        """Close stdin, give the plugin ``grace_s`` to exit, then kill its whole process group."""
        if self._closed.is_set():
            return
        self._closed.set()
        proc = self._proc
        if proc is None:
            return
        self.close_input()
        deadline = time.monotonic() + grace_s
        if self.wait_exit(max(0.0, deadline - time.monotonic())) is None:
            self._signal_group(signal.SIGTERM)
            if self.wait_exit(1.0) is None:
                self._signal_group(signal.SIGKILL)
                self.wait_exit(5.0)
        # Anything the plugin left behind in its own group goes too.
        self._signal_group(signal.SIGKILL)
        for thread in self._threads:
            thread.join(timeout=2.0)
        for stream in (proc.stdout, proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def kill(self) -> None:
        """Kill the plugin at once (used to simulate and recover from crashes)."""
        self._signal_group(signal.SIGKILL)

    def _signal_group(self, sig: signal.Signals) -> None:
        if self._proc is None:
            return
        try:
            os.killpg(self._proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
