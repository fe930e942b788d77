"""The v2 long-lived streams: stdio processes, PTYs and log follows, each on one data channel (v2 §8.4).

A stdio process or a PTY keeps its channel for its whole life: the host's ``stdin`` frames are its
input (the host's eof closes a process's stdin), its output goes out as ``stdout`` frames and the
plugin's eof when the output ends; ``exec/stdio_wait`` and ``pty/close`` end the channel. A stdio
process's stderr stays with the plugin, as the tail ``exec/stdio_wait`` answers. A log follow writes
``stdout`` frames, then its eof, then answers.
"""

from __future__ import annotations

import os
import subprocess
import threading
from dataclasses import dataclass
from typing import Any

from conformance.reference.data_channel import STDOUT, PluginChannel
from conformance.reference.host_backend import BackendError, invalid_spec
from conformance.reference.host_interactive import STDIO_CHUNK, InteractiveMethods, PtySession, StdioProcess
from conformance.reference.v2_limits import invalid_params

# How long ending a session waits for its output pump to send the last bytes and the eof.
OUTPUT_END_WAIT_S = 2.0


class ChannelStdioProcess(StdioProcess):
    """A stdio process whose stdin and stdout ride a channel (its stderr tail is v1's)."""

    def __init__(self, proc: subprocess.Popen[bytes], channel: PluginChannel) -> None:
        self.channel = channel
        self._output_ended = threading.Event()
        super().__init__(proc)
        channel.pump_input(self._write_stdin, on_eof=self._close_stdin)

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        try:
            for chunk in iter(lambda: self.proc.stdout.read1(STDIO_CHUNK), b""):
                self.channel.send(STDOUT, chunk)
            self.channel.finish()
        except (BackendError, OSError, ValueError):
            pass  # the host went away, or the session was torn down: nobody is left to read
        finally:
            self._output_ended.set()

    def _write_stdin(self, data: bytes) -> None:
        with self.stdin_lock:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass  # the process stopped reading: not an error of the host

    def _close_stdin(self) -> None:
        with self.stdin_lock:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except (BrokenPipeError, OSError, ValueError):
                pass

    def end_output(self) -> None:
        """Let the output pump send what is left and the eof (bounded), then send the eof if it could not."""
        self._output_ended.wait(timeout=OUTPUT_END_WAIT_S)
        try:
            self.channel.finish()
        except BackendError:
            pass


@dataclass
class ChannelPty:
    """A PTY session's channel and the thread that pumps its output into it."""

    channel: PluginChannel
    output: threading.Thread


class ChannelInteractiveMethods(InteractiveMethods):
    """Mixin for the v2 plugin (which supplies ``channel_request``, ``open_channel``, ``serving``,
    ``release_channel`` and ``exec_spec``).

    Seams: ``stdio_process_class`` (a ``ChannelStdioProcess``: ``_pump_stdout``, ``_write_stdin``,
    ``_close_stdin``, ``end_output``), ``_pump_pty_output(session, channel)``, ``_pty_ended(pty_id,
    session)`` and ``abandon_channel(channel)``; the v1 mixin's ``_spawn``, ``_open_pty`` and
    ``_follow_logs`` run the work.
    """

    stdio_process_class = ChannelStdioProcess

    def init_interactive(self) -> None:
        super().init_interactive()
        self._pty_channels: dict[str, ChannelPty] = {}

    def held_sessions(self) -> int:
        """Channels held by live stdio processes and PTYs: each keeps its ``active_io`` slot."""
        with self._interactive_lock:
            return (sum(1 for p in self._processes.values() if isinstance(p, ChannelStdioProcess))
                    + len(self._pty_channels))

    def session_pumps(self) -> int:
        """Background threads the live sessions own."""
        return 2 * self.held_sessions()

    # -- stdio processes -------------------------------------------------------------------------

    def m_exec_stdio_open(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        process_id = params["process_id"]
        request = self.channel_request("exec/stdio_open", params)
        spec = self.exec_spec("exec/stdio_open", params["spec"])
        channel = self.open_channel(request, accepts_input=True)
        try:
            with self._interactive_lock:
                if process_id in self._processes:
                    raise invalid_spec("process_id", "duplicate stdio process id")
                self._processes[process_id] = None  # type: ignore[assignment]  # reserve the id
            try:
                proc = self._spawn(sandbox, "", spec.env, spec.working_dir, argv=spec.argv,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            except BaseException as exc:
                with self._interactive_lock:
                    self._processes.pop(process_id, None)
                if isinstance(exc, OSError):  # e.g. no such program: execvp semantics, no shell to fall back to
                    raise BackendError("io", f"could not start the command: {exc}", io_context="spawn") from None
                raise
        except BaseException:
            self.abandon_channel(channel)
            raise
        with self._interactive_lock:
            self._processes[process_id] = self.stdio_process_class(proc, channel)
        return None

    def m_exec_stdio_wait(self, params: dict[str, Any]) -> Any:
        process = self._process(params)
        outcome = super().m_exec_stdio_wait(params)
        if isinstance(process, ChannelStdioProcess):
            process.end_output()  # the channel ends before the answer
            self.release_channel(process.channel)
        with self._interactive_lock:
            self._processes.pop(params["process_id"], None)
        return outcome

    # -- PTY sessions ----------------------------------------------------------------------------

    def m_pty_open(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        pty_id = params["pty_id"]
        request = self.channel_request("pty/open", params)
        options = params["options"]
        if not isinstance(options, dict) or not isinstance(options.get("size"), dict) or "env" not in options:
            raise invalid_params("pty/open", "options must carry size and env")
        channel = self.open_channel(request, accepts_input=True)
        try:
            session = self._open_pty(sandbox, pty_id, options)
        except BaseException:
            self.abandon_channel(channel)
            raise
        output = threading.Thread(target=self._pump_pty_output, args=(session, channel), daemon=True)
        with self._interactive_lock:
            self._pty_channels[pty_id] = ChannelPty(channel, output)
        channel.pump_input(lambda data: _write_all(session, data))
        output.start()
        return None

    @staticmethod
    def _pump_pty_output(session: PtySession, channel: PluginChannel) -> None:
        try:
            while not session.closed:
                data = session.read()
                if data is None:
                    break
                if data:
                    channel.send(STDOUT, data)
            channel.finish()
        except (BackendError, OSError, ValueError):
            pass  # the host went away, or the terminal was torn down under the read

    def _pty_ended(self, pty_id: str, session: PtySession) -> None:
        """The PTY's process is gone and its terminal still open: its last output and the eof go out
        before the terminal closes (and before ``pty/close`` answers)."""
        with self._interactive_lock:
            entry = self._pty_channels.pop(pty_id, None)
        if entry is None:
            return
        entry.output.join(timeout=OUTPUT_END_WAIT_S)
        try:
            entry.channel.finish()
        except BackendError:
            pass
        self.release_channel(entry.channel)

    # -- logs ------------------------------------------------------------------------------------

    def m_logs_follow(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        stream_id = params["stream_id"]
        source = params["source"]
        if source not in ("provision", "entrypoint"):
            raise invalid_params("logs/follow", "source: unknown variant, expected provision or entrypoint")
        request = self.channel_request("logs/follow", params)
        stream = self._reserve_stream(stream_id)  # a duplicate is refused before any channel opens
        try:
            channel = self.open_channel(request, accepts_input=False)
            with self.serving(channel):
                channel.pump_input(on_violation=lambda error: stream.cancelled.set())
                self._follow_logs(sandbox, stream, source, lambda data: channel.send(STDOUT, data))
        finally:
            self._release_stream(stream_id)
        return None

    # -- helpers ---------------------------------------------------------------------------------

    def abandon_channel(self, channel: PluginChannel) -> None:
        """An operation that failed after its channel opened: the eof still goes out before the answer."""
        try:
            channel.finish()
        except BackendError:
            pass
        self.release_channel(channel)


def _write_all(session: PtySession, data: bytes) -> None:
    """Terminal input, blocking while the terminal's input queue is full (the host's frames wait)."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(session.master, view):]
    except OSError:
        pass  # the terminal closed: input for it has nowhere to go

