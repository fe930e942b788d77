"""Broken variants of the v2 reference plugin's file transfers: contents across frames, ranges, missing
files, declared lengths and parent directories."""

from __future__ import annotations

import subprocess
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, BinaryIO

from conformance.reference.data_channel import PluginChannel
from conformance.reference.host_backend import BackendError
from conformance.reference.host_plugin_v2 import HostPluginV2
from tests.mutants import mutant

# -- file contents ----------------------------------------------------------------------------------------


@mutant("file-read-drops-last-byte")
class FileReadDropsLastByte(HostPluginV2):
    """Sends every file it reads but the last byte."""

    def send_file(self, channel: PluginChannel, path: Path, display_path: str, offset: int,
                  length: int | None) -> None:
        if path.is_file():
            available = max(0, path.stat().st_size - offset)
            length = max(0, min(available, available if length is None else length) - 1)
        super().send_file(channel, path, display_path, offset, length)


@mutant("ranged-read-one-byte-late")
class RangedReadOneByteLate(HostPluginV2):
    """Starts a read that names an offset or a length one byte after the offset."""

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        if params.get("offset") is not None or params.get("length") is not None:
            params = {**params, "offset": (params.get("offset") or 0) + 1}
        return super().m_fs_read(params)


@mutant("zero-length-reads-to-end")
class ZeroLengthReadsToEnd(HostPluginV2):
    """Takes a length of 0 as no length at all, reading to the end of the file."""

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        if params.get("length") == 0:
            params = {**params, "length": None}
        return super().m_fs_read(params)


@mutant("missing-file-is-io")
class MissingFileIsIo(HostPluginV2):
    """Reports a missing file as an I/O failure, as version 1 allowed."""

    def send_file(self, channel: PluginChannel, path: Path, display_path: str, offset: int,
                  length: int | None) -> None:
        try:
            super().send_file(channel, path, display_path, offset, length)
        except BackendError as error:
            if error.kind != "not_found":
                raise
            raise BackendError("io", f"read: {display_path}: no such file", io_context="read") from None


@mutant("content-length-ignored")
class ContentLengthIgnored(HostPluginV2):
    """Writes whatever bytes arrive before the host's eof, whatever length the write declared."""

    def m_fs_write(self, params: dict[str, Any]) -> Any:
        return super().m_fs_write({key: value for key, value in params.items() if key != "content_length"})


@mutant("parents-made-by-shell")
class ParentsMadeByShell(HostPluginV2):
    """Creates a write's missing parent directories with `mkdir -p` in a shell, the path unquoted."""

    def destination(self, path: Path, mode: str) -> AbstractContextManager[BinaryIO]:
        subprocess.run(["bash", "-c", f"mkdir -p {path.parent}"], cwd=self.backend.root, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            return path.open(mode)  # type: ignore[return-value]
        except OSError as exc:
            raise BackendError("io", f"write: {exc}", io_context="write") from None
