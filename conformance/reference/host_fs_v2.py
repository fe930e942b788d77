"""The v2 file transfers: ``fs/read`` and ``fs/write`` with the bytes on a data channel (v2 §8.5).

The metadata calls (exists, metadata, list_dir, ...) are v1's, unchanged. A file crosses in frames of
at most ``MAX_FRAME_BYTES``: the plugin never holds more of it than one frame, except where the
protocol makes the value a buffered one (a write without ``content_length``, an append), which
``buffered_value_bytes`` bounds.
"""

from __future__ import annotations

import io
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, BinaryIO

from conformance.reference.data_channel import MAX_FRAME_BYTES, STDOUT, PluginChannel
from conformance.reference.host_backend import BackendError, invalid_spec, not_found
from conformance.reference.host_fs import FilesystemMethods, _io
from conformance.reference.v2_limits import invalid_params, limit_exceeded, optional_count


def _file_error(display_path: str, context: str, exc: OSError) -> BackendError:
    if isinstance(exc, FileNotFoundError):
        return not_found("file", display_path)
    if isinstance(exc, IsADirectoryError):
        return invalid_spec("path", f"{display_path} is a directory")
    return _io(context, exc)


class ChannelFilesystemMethods(FilesystemMethods):
    """Mixin for the v2 plugin (which supplies ``channel_request``, ``open_channel``, ``serving``,
    ``collect_input`` and ``limits``).

    Seams: ``send_file(channel, path, display_path, offset, length)`` (a read's bytes),
    ``receive_exactly(channel, length, output)`` (a write's ``content_length`` rule) and
    ``destination(path, mode)`` (where a write lands, parents created).
    """

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        request = self.channel_request("fs/read", params)
        path = self._path(params)  # an unknown sandbox fails before any channel opens
        offset = optional_count("fs/read", params, "offset") or 0
        length = optional_count("fs/read", params, "length")
        channel = self.open_channel(request, accepts_input=False)
        with self.serving(channel):
            channel.pump_input()  # a read channel carries nothing from the host but its eof
            self.send_file(channel, path, params["path"], offset, length)
        return None

    def send_file(self, channel: PluginChannel, path: Path, display_path: str, offset: int,
                  length: int | None) -> None:
        """The file's bytes from ``offset`` (at most ``length`` of them) as ``stdout`` frames, one frame
        in memory at a time."""
        try:
            handle = path.open("rb")
        except OSError as exc:
            raise _file_error(display_path, "read", exc) from None
        with handle:
            remaining = length
            try:
                handle.seek(offset)
                while remaining is None or remaining > 0:
                    chunk = handle.read(MAX_FRAME_BYTES if remaining is None else min(MAX_FRAME_BYTES, remaining))
                    if not chunk or channel.violation is not None:
                        return
                    channel.send_frame(STDOUT, chunk)
                    if remaining is not None:
                        remaining -= len(chunk)
            except OSError as exc:
                raise _file_error(display_path, "read", exc) from None

    def m_fs_write(self, params: dict[str, Any]) -> Any:
        request = self.channel_request("fs/write", params)
        path = self._path(params)
        append = params.get("append") or False
        if not isinstance(append, bool):
            raise invalid_params("fs/write", "append must be a boolean")
        content_length = optional_count("fs/write", params, "content_length")
        buffered = append or content_length is None
        if buffered and content_length is not None and content_length > self.limits.buffered_value_bytes:
            raise limit_exceeded("buffered_value_bytes", self.limits.buffered_value_bytes)
        channel = self.open_channel(request, accepts_input=True)
        with self.serving(channel):
            if buffered:
                if content_length is None:
                    content = self.collect_input(channel, self.limits.buffered_value_bytes)
                else:
                    held = io.BytesIO()
                    self.receive_exactly(channel, content_length, held)
                    content = held.getvalue()
                with self.destination(path, "ab" if append else "wb") as handle:
                    handle.write(content)
            else:
                with self.destination(path, "wb") as handle:
                    self.receive_exactly(channel, content_length, handle)  # type: ignore[arg-type]
        return None

    def destination(self, path: Path, mode: str) -> AbstractContextManager[BinaryIO]:
        """The file to write, its missing parent directories created (by the plugin: no shell needed)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return path.open(mode)  # type: ignore[return-value]
        except OSError as exc:
            raise _io("write", exc) from None

    def receive_exactly(self, channel: PluginChannel, length: int, output: BinaryIO) -> None:
        """Exactly ``length`` content bytes through the host's eof, each frame written as it arrives."""
        remaining = length
        while (data := channel.next_input()) is not None:
            if len(data) > remaining:
                raise invalid_spec("content_length", "file exceeds its declared length")
            remaining -= len(data)
            try:
                output.write(data)
            except OSError as exc:
                raise _io("write", exc) from None
        if remaining:
            raise BackendError("io", "reading file stream: file ended before its declared length",
                               io_context="reading file stream")
        channel.pump_input()  # keeps reading: a frame after the host's eof is still caught
