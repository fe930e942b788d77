"""A stdio plugin served on a thread of this process, over ``os.pipe`` pairs.

The same bytes as a real plugin process, without a process: the suite's own tests run the reference
plugins (and their deliberately broken variants) this way, where starting an interpreter per provider
is what would cost the time. What only a real process shows — process groups, signals, a crash that
kills the interpreter — stays with ``ProcessTransport``.

The served function is named ``"package.module:function"`` and called as
``function(argv, stdin=..., stdout=..., stderr=..., environ=..., exit_now=...)``: binary ``stdin`` and
``stdout`` pipe ends, a text ``stderr``, the plugin's environment, and ``exit_now(code)``, which ends
the "process" at once with that exit code (what ``os._exit`` is to a real one). It returns the exit code.
"""

from __future__ import annotations

import importlib
import io
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from conformance.errors import ProviderStartError
from conformance.transports.base import FrameWriter, StderrTail, pump_lines


class _StderrWriter(io.TextIOBase):
    """A text stream whose writes land in the transport's stderr ring, as a real plugin's stderr would."""

    def __init__(self, tail: StderrTail) -> None:
        self._tail = tail

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._tail.append(text.encode("utf-8", errors="replace"))
        return len(text)


class ServedExit(BaseException):
    """Raised by ``exit_now`` to end the serving thread (BaseException: handlers catching Exception
    must not swallow it, as nothing swallows ``os._exit``)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def resolve(target: str) -> Callable[..., int]:
    module_name, _, function_name = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise ProviderStartError(f"cannot serve {target!r} in process: {exc}") from None


class InProcessTransport:
    """A ``LineTransport`` whose peer is a function serving a plugin on pipes, on its own thread."""

    def __init__(self, target: str, argv: Sequence[str], env: Mapping[str, str], display: str | None = None,
                 stderr_limit_bytes: int = 64 * 1024) -> None:
        self.serve = resolve(target)
        self.target = target
        self.argv = list(argv)
        self.env = dict(env)
        self.display = display or f"{target} {' '.join(self.argv)}".strip()
        self.stderr = StderrTail(stderr_limit_bytes)
        self._to_plugin: Any = None  # our end of the plugin's stdin
        self._writer: FrameWriter | None = None
        self._plugin_stdout_writer: Any = None
        self._server: threading.Thread | None = None
        self._reader: threading.Thread | None = None
        self._exit_code: int | None = None
        self._ended = threading.Event()
        self._closed = threading.Event()
        self._crashed = False
        self.max_line_bytes: int | None = None  # the connection sets it (the run's or the dialect's limit)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, on_line: Callable[[bytes], None], on_close: Callable[[], None],
              on_overflow: Callable[[int], None] | None = None) -> None:
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        plugin_stdin = os.fdopen(stdin_read, "rb")
        plugin_stdout = os.fdopen(stdout_write, "wb")
        self._to_plugin = os.fdopen(stdin_write, "wb", buffering=0)
        self._writer = FrameWriter(stdin_write)
        self._plugin_stdout_writer = plugin_stdout
        from_plugin = os.fdopen(stdout_read, "rb")
        stderr = _StderrWriter(self.stderr)

        def exit_now(code: int) -> None:
            self._crashed = True
            self._finish(code)
            raise ServedExit(code)

        def run() -> None:
            code = 1
            try:
                code = int(self.serve(self.argv, stdin=plugin_stdin, stdout=plugin_stdout,
                                      stderr=stderr, environ=dict(self.env), exit_now=exit_now) or 0)
            except ServedExit as served:
                code = served.code
            except SystemExit as exiting:
                code = exiting.code if isinstance(exiting.code, int) else 1
            except BaseException as exc:  # noqa: BLE001 - an uncaught exception ends a real process too
                stderr.write(f"Traceback (in-process plugin): {exc!r}\n")
                code = 1
            finally:
                self._finish(code)
                try:
                    plugin_stdin.close()
                except OSError:
                    pass

        def pump() -> None:
            try:
                crossed = pump_lines(from_plugin.read1, on_line, lambda: self.max_line_bytes)
                if crossed is not None and on_overflow is not None:
                    on_overflow(crossed)
            except (OSError, ValueError):
                pass
            finally:
                try:
                    from_plugin.close()
                except OSError:
                    pass
                on_close()

        self._server = threading.Thread(target=run, name=f"in-process-{self.target}", daemon=True)
        self._reader = threading.Thread(target=pump, name=f"in-process-reader-{self.target}", daemon=True)
        self._reader.start()
        self._server.start()

    def _finish(self, code: int) -> None:
        """The "process" ended: its exit code is known and its stdout closes (the reader sees EOF)."""
        if self._ended.is_set():
            return
        self._exit_code = code
        self._ended.set()
        try:
            self._plugin_stdout_writer.close()
        except (OSError, ValueError):
            pass

    @property
    def alive(self) -> bool:
        return self._server is not None and not self._ended.is_set()

    @property
    def peer_pid(self) -> int:
        """The served plugin is a thread of this process, so its data channels come from our own pid."""
        return os.getpid()

    def describe(self) -> str:
        return self.display

    def stderr_tail(self, since: int | None = None) -> str:
        if since is None:
            return self.stderr.text(max_bytes=8 * 1024)
        return self.stderr.since(since, max_bytes=8 * 1024)

    def stderr_position(self) -> int:
        return self.stderr.mark()

    def returncode(self) -> int | None:
        return self._exit_code

    # -- frames ----------------------------------------------------------------------------------

    def send(self, frame: bytes, timeout_s: float | None = None) -> None:
        if self._writer is None or self._ended.is_set():
            raise BrokenPipeError("the in-process plugin has ended")
        self._writer.write(frame, timeout_s)

    @property
    def input_broken(self) -> str | None:
        """Why no frame can be sent any more (part of one went out and the rest could not), or None."""
        return self._writer.broken if self._writer is not None else None

    def close_input(self) -> None:
        if self._writer is not None:
            self._writer.close(self._close_to_plugin)

    def _close_to_plugin(self) -> None:
        try:
            self._to_plugin.close()
        except OSError:
            pass

    def wait_exit(self, timeout_s: float) -> int | None:
        if self._server is None:
            return None
        self._ended.wait(timeout_s)
        return self._exit_code if self._ended.is_set() else None

    def close(self, grace_s: float = 2.0) -> None:
        """Close the plugin's input and give it ``grace_s`` to end; a thread cannot be killed, so one
        that does not end is abandoned (it is a daemon) with its output closed."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._server is None:
            return
        self.close_input()
        if self.wait_exit(grace_s) is None:
            self._finish(-9)
        if self._reader is not None:
            self._reader.join(timeout=2.0)

    def kill(self) -> None:
        """End the plugin at once, as SIGKILL would: its output closes, its input is cut."""
        self._crashed = True
        self._finish(-9)
        self.close_input()

