"""Broken variants of the v1 host plugin's filesystem methods (fs/*).

Each models a bug a real provider could ship: a text encoding on the byte path, a flag read by
truthiness, an option ignored, a stat that follows links, a path resolved against the wrong place.
"""

from __future__ import annotations

import base64
import datetime
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from conformance.reference.host_backend import invalid_spec, not_found
from conformance.reference.host_fs import _io
from conformance.reference.host_plugin import HostPlugin, b64
from tests.mutants import mutant

# -- contents --------------------------------------------------------------------------------------


@mutant("fs-write-through-text")
class FsWriteThroughText(HostPlugin):
    """Decodes written content as UTF-8 text (replacing what does not decode) before storing it."""

    def m_fs_write(self, params: dict[str, Any]) -> Any:
        data = base64.b64decode(params["content_b64"])
        text = data.decode("utf-8", errors="replace")
        return super().m_fs_write({**params, "content_b64": b64(text.encode("utf-8"))})


@mutant("fs-read-one-buffer")
class FsReadOneBuffer(HostPlugin):
    """Answers a read without a length with a single 64 KiB buffer, dropping the rest of a larger file."""

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        if params.get("length") is None:
            params = {**params, "length": 64 * 1024}
        return super().m_fs_read(params)


@mutant("fs-read-length-defaults-to-zero")
class FsReadLengthDefaultsToZero(HostPlugin):
    """Treats a missing length as 0, so a read that leaves it out returns nothing."""

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        return super().m_fs_read({**params, "length": params.get("length", 0)})


@mutant("fs-write-without-parents")
class FsWriteWithoutParents(HostPlugin):
    """Writes only into directories that already exist."""

    def m_fs_write(self, params: dict[str, Any]) -> Any:
        if not self._path(params).parent.is_dir():
            raise not_found("file", str(Path(params["path"]).parent))
        return super().m_fs_write(params)


# -- read ranges -----------------------------------------------------------------------------------


@mutant("fs-read-offset-ignored")
class FsReadOffsetIgnored(HostPlugin):
    """Always reads from the start of the file."""

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        return super().m_fs_read({key: value for key, value in params.items() if key != "offset"})


@mutant("fs-read-length-ignored")
class FsReadLengthIgnored(HostPlugin):
    """Always reads to the end of the file."""

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        return super().m_fs_read({key: value for key, value in params.items() if key != "length"})


@mutant("fs-read-length-zero-means-all")
class FsReadLengthZeroMeansAll(HostPlugin):
    """Tests the length for truthiness, so length 0 reads to the end."""

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        return super().m_fs_read({**params, "length": params.get("length") or None})


@mutant("fs-read-past-end-errors")
class FsReadPastEndErrors(HostPlugin):
    """Refuses a read whose offset is at or past the end of the file."""

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        path = self._path(params)
        offset = params.get("offset") or 0
        if path.is_file() and offset >= path.stat().st_size:
            raise invalid_spec("offset", f"offset {offset} is at or past the end of {params['path']}")
        return super().m_fs_read(params)


@mutant("fs-read-missing-as-empty")
class FsReadMissingAsEmpty(HostPlugin):
    """Answers a read of a missing file with empty content."""

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        if not self._path(params).exists():
            return {"content_b64": ""}
        return super().m_fs_read(params)


# -- write and append ------------------------------------------------------------------------------


@mutant("fs-append-truncates")
class FsAppendTruncates(HostPlugin):
    """Ignores append: every write replaces the file."""

    def m_fs_write(self, params: dict[str, Any]) -> Any:
        return super().m_fs_write({**params, "append": False})


@mutant("fs-append-requires-existing-file")
class FsAppendRequiresExistingFile(HostPlugin):
    """Appends by opening the file for update, which fails when it does not exist yet."""

    def m_fs_write(self, params: dict[str, Any]) -> Any:
        if params.get("append") and not self._path(params).exists():
            raise not_found("file", params["path"])
        return super().m_fs_write(params)


@mutant("fs-write-keeps-old-tail")
class FsWriteKeepsOldTail(HostPlugin):
    """Overwrites from the start of the file without truncating it, leaving the old tail behind."""

    def m_fs_write(self, params: dict[str, Any]) -> Any:
        path = self._path(params)
        if params.get("append") or not path.is_file():
            return super().m_fs_write(params)
        with path.open("r+b") as handle:
            handle.write(base64.b64decode(params["content_b64"]))
        return None


@mutant("fs-append-when-field-present")
class FsAppendWhenFieldPresent(HostPlugin):
    """Appends whenever the request carries an append field, even append: false."""

    def m_fs_write(self, params: dict[str, Any]) -> Any:
        return super().m_fs_write({**params, "append": "append" in params})


# -- exists and metadata ---------------------------------------------------------------------------


@mutant("fs-exists-always-true")
class FsExistsAlwaysTrue(HostPlugin):
    """Answers exists by checking the parent directory, so every path in an existing directory exists."""

    def m_fs_exists(self, params: dict[str, Any]) -> Any:
        return {"exists": self._path(params).parent.is_dir()}


@mutant("fs-exists-only-directories")
class FsExistsOnlyDirectories(HostPlugin):
    """Answers exists with a directory test, so files never exist."""

    def m_fs_exists(self, params: dict[str, Any]) -> Any:
        return {"exists": self._path(params).is_dir()}


@mutant("fs-metadata-follows-symlinks")
class FsMetadataFollowsSymlinks(HostPlugin):
    """Uses stat instead of lstat, so a symbolic link reports what it points to."""

    def m_fs_metadata(self, params: dict[str, Any]) -> Any:
        answer = super().m_fs_metadata(params)
        path = self._path(params)
        if path.is_symlink() and path.exists():
            target = path.stat()
            kind = ("directory" if stat.S_ISDIR(target.st_mode)
                    else "file" if stat.S_ISREG(target.st_mode) else "other")
            answer["metadata"].update(kind=kind, size=target.st_size, mode=stat.S_IMODE(target.st_mode))
        return answer


@mutant("fs-metadata-directory-as-other")
class FsMetadataDirectoryAsOther(HostPlugin):
    """Knows only files and links: a directory is reported as kind other."""

    def m_fs_metadata(self, params: dict[str, Any]) -> Any:
        answer = super().m_fs_metadata(params)
        if answer["metadata"]["kind"] == "directory":
            answer["metadata"]["kind"] = "other"
        return answer


@mutant("fs-metadata-mode-as-string")
class FsMetadataModeAsString(HostPlugin):
    """Reports the mode as an octal string such as "644"."""

    def m_fs_metadata(self, params: dict[str, Any]) -> Any:
        answer = super().m_fs_metadata(params)
        answer["metadata"]["mode"] = format(answer["metadata"]["mode"], "o")
        return answer


@mutant("fs-metadata-mode-octal-digits")
class FsMetadataModeOctalDigits(HostPlugin):
    """Reads the octal digits of the mode (as `stat -c %a` prints them) as a decimal number: 644 for 0o644."""

    def m_fs_metadata(self, params: dict[str, Any]) -> Any:
        answer = super().m_fs_metadata(params)
        answer["metadata"]["mode"] = int(format(answer["metadata"]["mode"], "o"))
        return answer


# -- directories -----------------------------------------------------------------------------------


@mutant("fs-create-dir-ignored")
class FsCreateDirIgnored(HostPlugin):
    """Answers create_dir successfully without creating anything."""

    def m_fs_create_dir(self, params: dict[str, Any]) -> Any:
        self._path(params)
        return None


@mutant("fs-list-dir-immediate-only")
class FsListDirImmediateOnly(HostPlugin):
    """Lists only the immediate children, whatever depth is asked for."""

    def m_fs_list_dir(self, params: dict[str, Any]) -> Any:
        return super().m_fs_list_dir({**params, "depth": min(params["depth"], 1)})


@mutant("fs-list-dir-unbounded")
class FsListDirUnbounded(HostPlugin):
    """Ignores depth and lists the whole tree."""

    def m_fs_list_dir(self, params: dict[str, Any]) -> Any:
        return super().m_fs_list_dir({**params, "depth": 1_000})


@mutant("fs-list-dir-absolute-paths")
class FsListDirAbsolutePaths(HostPlugin):
    """Gives each entry's absolute path instead of its path relative to the listed directory."""

    def m_fs_list_dir(self, params: dict[str, Any]) -> Any:
        answer = super().m_fs_list_dir(params)
        root = self._path(params)
        for entry in answer["entries"]:
            entry["path"] = str(root / entry["path"])
        return answer


# -- rename and delete -----------------------------------------------------------------------------


@mutant("fs-rename-copies")
class FsRenameCopies(HostPlugin):
    """Copies the file to the new path and keeps the old one."""

    def m_fs_rename(self, params: dict[str, Any]) -> Any:
        source = self._path(params, "from")
        target = self._path(params, "to")
        if not source.is_file():
            return super().m_fs_rename(params)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        return None


@mutant("fs-delete-ignores-recursive-false")
class FsDeleteIgnoresRecursiveFalse(HostPlugin):
    """Deletes directories recursively whatever recursive says (rm -rf for everything)."""

    def m_fs_delete(self, params: dict[str, Any]) -> Any:
        return super().m_fs_delete({**params, "recursive": True})


@mutant("fs-delete-recursive-as-rmdir")
class FsDeleteRecursiveAsRmdir(HostPlugin):
    """Removes a directory with rmdir even when asked to recurse, so a directory with content stays."""

    def m_fs_delete(self, params: dict[str, Any]) -> Any:
        return super().m_fs_delete({**params, "recursive": False})


@mutant("fs-delete-file-with-rmtree")
class FsDeleteFileWithRmtree(HostPlugin):
    """Deletes every path as a directory tree, which fails for a plain file."""

    def m_fs_delete(self, params: dict[str, Any]) -> Any:
        path = self._path(params)
        if path.exists() and not path.is_dir():
            try:
                shutil.rmtree(path)
            except OSError as exc:
                raise _io("delete", exc) from None
        return super().m_fs_delete(params)


@mutant("fs-delete-directory-needs-recursive")
class FsDeleteDirectoryNeedsRecursive(HostPlugin):
    """Deletes like rm without -r: any directory, even an empty one, needs recursive."""

    def m_fs_delete(self, params: dict[str, Any]) -> Any:
        if not params["recursive"] and self._path(params).is_dir():
            raise invalid_spec("recursive", f"{params['path']} is a directory")
        return super().m_fs_delete(params)


# -- permissions -----------------------------------------------------------------------------------


@mutant("fs-set-permissions-ignored")
class FsSetPermissionsIgnored(HostPlugin):
    """Answers set_permissions successfully without changing the mode."""

    def m_fs_set_permissions(self, params: dict[str, Any]) -> Any:
        if not os.path.lexists(self._path(params)):
            raise not_found("file", params["path"])
        return None


# -- paths -----------------------------------------------------------------------------------------


@mutant("fs-relative-to-plugin-cwd")
class FsRelativeToPluginCwd(HostPlugin):
    """Hands relative paths straight to the OS, which resolves them against the plugin process's own
    working directory instead of the sandbox's."""

    def on_start(self) -> None:
        # A private directory inside the backend's root stands in for the plugin's cwd, so the
        # mutant never scatters files into wherever it was started from; relative paths resolve
        # against it exactly as the OS would against a chdir'd process (without changing the cwd of a
        # process this plugin may share with others, as when it is served in-process).
        self.own_cwd = self.backend.root / "plugin-process-cwd"
        self.own_cwd.mkdir(parents=True, exist_ok=True)
        super().on_start()

    def _path(self, params: dict[str, Any], key: str = "path") -> Path:
        self.backend.get(params["sandbox_id"])
        path = Path(params[key] or ".")
        return path if path.is_absolute() else self.own_cwd / path


@mutant("fs-absolute-paths-joined-to-workspace")
class FsAbsolutePathsJoinedToWorkspace(HostPlugin):
    """Glues every path onto the working directory with a string join, mangling absolute paths."""

    def _path(self, params: dict[str, Any], key: str = "path") -> Path:
        sandbox = self.backend.get(params["sandbox_id"])
        return Path(f"{sandbox.workspace}/{params[key]}")


# -- tolerated forms (controls) ------------------------------------------------------------------------


@mutant("control-fs-read-missing-as-io")
class ControlFsReadMissingAsIo(HostPlugin):
    """Legal in v1: a read of a missing file fails with kind io (v1's not_found resources are sandbox,
    snapshot, volume and plugin; not_found naming a file is a v2 rule)."""

    def m_fs_read(self, params: dict[str, Any]) -> Any:
        path = self._path(params)
        if not path.exists():
            raise _io(f"reading {params['path']}", FileNotFoundError(2, "No such file or directory"))
        return super().m_fs_read(params)


@mutant("fs-metadata-modified-rfc3339")
class FsMetadataModifiedRfc3339(HostPlugin):
    """Writes modified_at as an RFC 3339 string, the v2-era form upstream's v1 host cannot decode."""

    def m_fs_metadata(self, params: dict[str, Any]) -> Any:
        answer = super().m_fs_metadata(params)
        at = answer["metadata"]["modified_at"]
        moment = datetime.datetime.fromtimestamp(at["secs_since_epoch"], datetime.UTC)
        answer["metadata"]["modified_at"] = moment.isoformat(timespec="seconds").replace("+00:00", "Z")
        return answer
