"""The v1 filesystem methods over a host-directory sandbox."""

from __future__ import annotations

import base64
import binascii
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from conformance.reference.host_backend import BackendError, HostBackend, invalid_spec, not_found


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


def _io(context: str, exc: OSError) -> BackendError:
    return BackendError("io", f"{context}: {exc.strerror or exc}", io_context=context)


class FilesystemMethods:
    """Mixin for the reference plugin: paths resolve against the sandbox's workspace."""

    backend: HostBackend

    def _path(self, params: dict[str, Any], key: str = "path") -> Path:
        sandbox = self.backend.get(params["sandbox_id"])
        return self.backend.resolve(sandbox, params[key])

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        path = self._path(params)
        offset = params.get("offset") or 0
        length = params.get("length")
        try:
            with path.open("rb") as handle:
                handle.seek(offset)
                data = handle.read() if length is None else handle.read(length)
        except FileNotFoundError:
            raise not_found("file", params["path"]) from None
        except IsADirectoryError:
            raise invalid_spec("path", f"{params['path']} is a directory") from None
        except OSError as exc:
            raise _io("read", exc) from None
        return {"content_b64": base64.b64encode(data).decode("ascii")}

    def m_fs_write(self, params: dict[str, Any]) -> Any:
        path = self._path(params)
        try:
            data = base64.b64decode(params["content_b64"], validate=True)
        except binascii.Error:
            raise invalid_spec("content_b64", "not valid base64") from None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("ab" if params.get("append") else "wb") as handle:
                handle.write(data)
        except OSError as exc:
            raise _io("write", exc) from None
        return None

    def m_fs_delete(self, params: dict[str, Any]) -> Any:
        path = self._path(params)
        recursive = params["recursive"]
        try:
            if path.is_dir() and not path.is_symlink():
                if recursive:
                    shutil.rmtree(path)
                elif any(path.iterdir()):
                    raise invalid_spec("recursive", f"{params['path']} is a non-empty directory")
                else:
                    path.rmdir()
            elif path.exists() or path.is_symlink():
                path.unlink()
        except OSError as exc:
            raise _io("delete", exc) from None
        return None

    def m_fs_exists(self, params: dict[str, Any]) -> Any:
        return {"exists": os.path.lexists(self._path(params))}

    def m_fs_metadata(self, params: dict[str, Any]) -> Any:
        path = self._path(params)
        try:
            info = path.lstat()
        except FileNotFoundError:
            raise not_found("file", params["path"]) from None
        # v1 timestamps are the structural form of a SystemTime (protocol sections 6 and 10); an RFC 3339
        # string is a fatal decode error for upstream's v1 host.
        modified_ns = info.st_mtime_ns
        return {"metadata": {
            "kind": _kind(info.st_mode), "size": info.st_size, "mode": stat.S_IMODE(info.st_mode),
            "modified_at": {"secs_since_epoch": modified_ns // 1_000_000_000,
                            "nanos_since_epoch": modified_ns % 1_000_000_000},
        }}

    def m_fs_list_dir(self, params: dict[str, Any]) -> Any:
        root = self._path(params)
        depth = params["depth"]
        if not root.is_dir():
            raise not_found("file", params["path"])
        entries: list[dict[str, Any]] = []

        def walk(directory: Path, level: int) -> None:
            for child in sorted(directory.iterdir()):
                info = child.lstat()
                kind = _kind(info.st_mode)
                entries.append({"path": str(child.relative_to(root)), "kind": kind,
                                "size": info.st_size if kind == "file" else None})
                if kind == "directory" and level < depth:
                    walk(child, level + 1)

        if depth > 0:
            walk(root, 1)
        return {"entries": entries}

    def m_fs_create_dir(self, params: dict[str, Any]) -> Any:
        try:
            self._path(params).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _io("create_dir", exc) from None
        return None

    def m_fs_rename(self, params: dict[str, Any]) -> Any:
        source = self._path(params, "from")
        target = self._path(params, "to")
        if not os.path.lexists(source):
            raise not_found("file", params["from"])
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
        except OSError as exc:
            raise _io("rename", exc) from None
        return None

    def m_fs_set_permissions(self, params: dict[str, Any]) -> Any:
        path = self._path(params)
        try:
            os.chmod(path, params["mode"])
        except FileNotFoundError:
            raise not_found("file", params["path"]) from None
        except OSError as exc:
            raise _io("set_permissions", exc) from None
        return None
