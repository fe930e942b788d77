"""A plugin executable on stdio: argv spawn, scrubbed environment, NDJSON frames, stderr ring buffer."""

from __future__ import annotations

import os
import select
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from conformance.errors import ProviderStartError
from conformance.transports.base import EXIT_GRACE_S, FrameWriter, StderrTail, pump_lines

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


# Once the plugin and its process group are gone its pipes end at once, unless a process that left the
# group (its own session) still holds them: this long, then the suite stops waiting for them.
PIPE_RELEASE_S = 0.5


def _not_found(program: str, env: Mapping[str, str] | None, cwd: str | None) -> str:
    """Why exec found nothing to run: the program itself is missing, or it is a script whose ``#!``
    interpreter is (exec reports both as ENOENT)."""
    import shutil

    if "/" in program:
        path: str | None = os.path.join(cwd, program) if cwd else program
    else:
        path = shutil.which(program, path=(env or os.environ).get("PATH"))
    try:
        with open(path or program, "rb") as handle:
            first = handle.readline(4096)
    except OSError:
        return f"plugin executable not found: {program}"
    line = first[2:].rstrip(b"\n") if first.startswith(b"#!") else b""
    if line.endswith(b"\r"):
        return f"plugin {program} has Windows line endings: its #! line ends in a carriage return"
    if line.split():
        interpreter = line.split()[0].decode("utf-8", "backslashreplace")
        return f"plugin {program} names the interpreter {interpreter} in its #! line, which does not exist"
    return f"plugin executable not found: {program}"


@dataclass
class CloseOutcome:
    """How closing a plugin went: whether it exited on its own once its input closed, what it took to
    end it otherwise, and which processes outside its group were left holding its output."""

    exited_on_eof: bool
    grace_s: float
    forced: str | None = None  # the signal that ended it when it did not exit on its own
    returncode: int | None = None
    leftovers: list[str] = field(default_factory=list)  # "pid N: cmdline" of each process holding our pipes


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
        self._writer: FrameWriter | None = None
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()
        self.max_line_bytes: int | None = None  # the connection sets it (the run's or the dialect's limit)
        self._ended = threading.Event()  # set once on_close ran (the output ended, or close() gave up on it)
        self._on_close: Callable[[], None] = lambda: None
        self.close_outcome: CloseOutcome | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, on_line: Callable[[bytes], None], on_close: Callable[[], None],
              on_overflow: Callable[[int], None] | None = None) -> None:
        # on_close runs once: when stdout ends, or from close() when a leftover process holds stdout open
        on_close = self._on_close = self._once(on_close)
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
            raise ProviderStartError(_not_found(self.argv[0], self.env, self.cwd)) from None
        except PermissionError:
            raise ProviderStartError(f"plugin executable is not executable: {self.argv[0]}") from None
        except OSError as exc:
            raise ProviderStartError(f"cannot start plugin {self.argv[0]}: {exc.strerror or exc}") from None

        proc = self._proc
        assert proc.stdin is not None
        self._writer = FrameWriter(proc.stdin.fileno())  # frames go to the descriptor, never through its buffer

        def pump_stdout() -> None:
            assert proc.stdout is not None
            try:
                crossed = pump_lines(proc.stdout.read1, on_line, lambda: self.max_line_bytes)
                if crossed is not None and on_overflow is not None:
                    on_overflow(crossed)
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
    def peer_pid(self) -> int | None:
        """The process that may open data channels back to us: the plugin we spawned."""
        return self.pid

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

    def send(self, frame: bytes, timeout_s: float | None = None) -> None:
        if self._writer is None:
            raise BrokenPipeError("plugin not started")
        self._writer.write(frame, timeout_s)

    @property
    def input_broken(self) -> str | None:
        """Why no frame can be sent any more (part of one went out and the rest could not), or None."""
        return self._writer.broken if self._writer is not None else None

    def close_input(self) -> None:
        proc, writer = self._proc, self._writer
        if proc is not None and proc.stdin is not None and writer is not None:
            writer.close(self._close_stdin)

    def _close_stdin(self) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.close()  # nothing is buffered there: every frame went to the descriptor
        except OSError:
            pass

    def wait_exit(self, timeout_s: float) -> int | None:
        """Wait for the process to exit on its own; None when it is still running at the deadline.

        Blocks on a pidfd (the kernel wakes us as it exits) rather than Popen.wait's sleep-poll, so an
        honest plugin is reaped the moment it exits."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is not None:
            return proc.returncode
        try:
            pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # no pidfd here, or the process is already reaped
            try:
                return proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return None
        try:
            if proc.poll() is not None:  # reaped between the poll and the open: the pidfd may name another
                return proc.returncode
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            if not poller.poll(max(0.0, timeout_s) * 1000):
                return None
        finally:
            os.close(pidfd)
        return proc.wait()

    def close(self, grace_s: float = EXIT_GRACE_S) -> None:
        """Close stdin, give the plugin ``grace_s`` to exit, then end its whole process group; never wait
        longer than PIPE_RELEASE_S for output a process outside the group still holds open, and name
        that process in ``close_outcome`` instead."""
        if self._closed.is_set():
            return
        self._closed.set()
        proc = self._proc
        if proc is None:
            return
        self.close_input()
        outcome = CloseOutcome(exited_on_eof=True, grace_s=grace_s)
        if self.wait_exit(grace_s) is None:
            outcome.exited_on_eof = False
            outcome.forced = "SIGTERM"
            self._signal_group(signal.SIGTERM)
            if self.wait_exit(1.0) is None:
                outcome.forced = "SIGKILL"
                self._signal_group(signal.SIGKILL)
                self.wait_exit(5.0)
        outcome.returncode = proc.returncode
        # Anything the plugin left behind in its own group goes too.
        self._signal_group(signal.SIGKILL)
        deadline = time.monotonic() + PIPE_RELEASE_S
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        held = [thread for thread in self._threads if thread.is_alive()]
        if held:
            # A process outside the group (its own session) holds our output open. Its reader thread
            # stays blocked in read() until that process ends: closing the buffered stream under it would
            # block here on the stream's lock, so the streams are left to that thread.
            outcome.leftovers = holders_of(self._pipe_inodes(proc), exclude=(os.getpid(),))
            self._on_close()
        else:
            for stream in (proc.stdout, proc.stderr):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
        self.close_outcome = outcome

    def _pipe_inodes(self, proc: subprocess.Popen[bytes]) -> set[int]:
        inodes = set()
        for stream in (proc.stdout, proc.stderr):
            try:
                if stream is not None:
                    inodes.add(os.fstat(stream.fileno()).st_ino)
            except (OSError, ValueError):
                pass
        return inodes

    def _once(self, callback: Callable[[], None]) -> Callable[[], None]:
        lock = threading.Lock()

        def once() -> None:
            with lock:
                if self._ended.is_set():
                    return
                self._ended.set()
            callback()

        return once

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


def holders_of(pipe_inodes: set[int], exclude: Sequence[int] = ()) -> list[str]:
    """Every process with one of ``pipe_inodes`` open, as "pid N: its command line" (found by reading
    /proc/*/fd: a pipe's two ends share one inode). Processes we may not inspect are passed over."""
    if not pipe_inodes:
        return []
    wanted = {f"pipe:[{inode}]" for inode in pipe_inodes}
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in exclude:
            continue
        if _open_files(int(entry.name)) & wanted:
            found.append(f"pid {entry.name}: {_command_line(int(entry.name))}")
    return found


def _open_files(pid: int) -> set[str]:
    """What each open descriptor of ``pid`` points at (descriptors closed meanwhile are passed over)."""
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return set()
    targets = set()
    for fd in descriptors:
        try:
            targets.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return targets


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return "(gone)"
    return shlex.join(part.decode(errors="replace") for part in raw.rstrip(b"\0").split(b"\0")) or "(no command line)"
