"""Blind red-team set aimed at the interaction of two features (``bp1_*``; issue 23, part 5).

Written from the protocol digest (section 7 numbers SDP1-NNN for v1, ``§7-NNN`` for the v2 items; sections 2,
5, 8, 9 for what a v1 or v2 plugin must do) and the reference providers' sources only, never from the suite's
checks. Every class is one realistic fault of the reference host plugin (``HostPlugin``) or of the v2 one
(``HostPluginV2``, names ``bp1_v2_*``) that shows only when two features meet: a state and a query, a
setting and another option, an accounting rule below its limit, two sandboxes on one connection, or a rule
honoured on one method and broken on a sibling. Each overrides the smallest piece it can, so the feature alone
still behaves as the honest plugin does; ``tests/redteam/selfcheck_pairs_1.py`` drives each over the wire.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Self

from conformance.reference.host_backend import (
    BackendError,
    HostBackend,
    HostSandbox,
    _signal_group,
    invalid_spec,
    invalid_state,
    not_found,
)
from conformance.reference.host_fs import _io
from conformance.reference.host_plugin import HANDLE_METHODS, UNHONOURED_SPEC_FIELDS, HostPlugin, b64
from conformance.reference.host_plugin_v2 import HostBackendV2, HostPluginV2
from conformance.reference.sanitize import Sanitizer, sanitize
from conformance.reference.v2_limits import optional_count
from tests.redteam import redteam
from tests.redteam.seams import BackendPlugin, sanitizing_backend


def _backend_plugin(backend: type[HostBackend]) -> type[HostPlugin]:
    return type(f"_Plugin_{backend.__name__}", (BackendPlugin,), {"backend_class": backend})


class _BackendPluginV2(HostPluginV2):
    """A v2 plugin over a mutated backend (``backend_class``)."""

    backend_class: type[HostBackendV2] = HostBackendV2

    def make_backend(self) -> HostBackend:
        return self.backend_class(environ=self.environ)


# ================================================================================================
# a sandbox's state meets a query (list / attach / describe / platform_info)
# ================================================================================================


# The list view's state column: the states a summary shows, anything else folded into "running".
_LIST_STATES = {"running": "running", "stopped": "stopped", "archived": "archived", "deleting": "deleting"}


@redteam("bp1_list_paused_state_running", "SDP1-040 SDP1-050 (§8.1: sandbox/list answers each sandbox's "
         "SandboxStatus; §9.2: pause -> paused)",
         "sandbox/list maps states through a summary table that has no 'paused' row, so a paused sandbox is "
         "listed as running while sandbox/describe says paused (pause x list)")
class ListPausedStateRunning(HostPlugin):
    def m_sandbox_list(self, params: dict[str, Any]) -> Any:
        answer = super().m_sandbox_list(params)
        for status in answer["sandboxes"]:
            status["state"] = _LIST_STATES.get(status["state"], "running")
        return answer


class _LabelFilterLiveOnly(HostBackend):
    def list(self, labels: Mapping[str, str] | None = None) -> list[HostSandbox]:
        found = super().list(labels)
        if labels:  # "a label selector picks live sandboxes": the filtered path keeps running ones only
            found = [s for s in found if s.state == "running"]
        return found


@redteam("bp1_label_filter_skips_stopped", "SDP1-050 (§2.2: list filter = the sandboxes that carry all "
         "listed labels; only deleted sandboxes are left out; conformance attach_and_list_by_label)",
         "a label-filtered sandbox/list returns running sandboxes only: a stopped sandbox carrying the labels is "
         "missing from the filtered list although the unfiltered list shows it (stop x label filter)")
class LabelFilterSkipsStopped(_backend_plugin(_LabelFilterLiveOnly)):
    pass


@redteam("bp1_attach_archived_not_found", "SDP1-050 SDP1-045 (§8.1: attach returns HandleInfo; §9.2: attach/"
         "describe fail not_found for a deleted sandbox only)",
         "sandbox/attach answers not_found for an archived sandbox ('restore it first'), while describe and list "
         "still show it as archived (archive x attach)")
class AttachArchivedNotFound(HostPlugin):
    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        if sandbox.state == "archived":
            raise not_found("sandbox", sandbox.id)
        return self.handle_info(sandbox)


class _ListedIndex(HostBackend):
    """Keeps a set of listable ids next to the registry; undelete forgets to put its sandbox back."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._listed: set[str] = set()
        super().__init__(*args, **kwargs)

    def create(self, *args: Any, **kwargs: Any) -> HostSandbox:
        sandbox = super().create(*args, **kwargs)
        self._listed.add(sandbox.id)
        return sandbox

    def delete(self, sandbox_id: str) -> None:
        super().delete(sandbox_id)
        self._listed.discard(sandbox_id)

    def list(self, labels: Mapping[str, str] | None = None) -> list[HostSandbox]:
        return [s for s in super().list(labels) if s.id in self._listed]


@redteam("bp1_undelete_missing_from_list", "SDP1-061 SDP1-050 (§8.3: undelete restores a deleted sandbox; "
         "§9.2: list reads the registry and excludes only deleted sandboxes)",
         "the list index drops a sandbox on delete and undelete never re-adds it: an undeleted sandbox is "
         "running, attachable and described, but sandbox/list never shows it again (undelete x list)")
class UndeleteMissingFromList(_backend_plugin(_ListedIndex)):
    pass


class _LabelIndexAtCreate(HostBackend):
    """Label filtering through an index of the labels each sandbox was created with."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._label_index: dict[str, dict[str, str]] = {}
        super().__init__(*args, **kwargs)

    def create(self, name: str | None, labels: Mapping[str, str], *args: Any, **kwargs: Any) -> HostSandbox:
        sandbox = super().create(name, labels, *args, **kwargs)
        self._label_index[sandbox.id] = dict(labels)
        return sandbox

    def list(self, labels: Mapping[str, str] | None = None) -> list[HostSandbox]:
        everyone = super().list(None)
        wanted = dict(labels or {})
        return [s for s in everyone
                if all(self._label_index.get(s.id, {}).get(k) == v for k, v in wanted.items())]


@redteam("bp1_set_labels_filter_stale", "SDP1-050 (§2.3: set_labels is a full replace; §2.2: the list filter "
         "selects the sandboxes that carry the listed labels)",
         "the label filter matches against an index written at create time that set_labels never updates: after "
         "a relabel, describe shows the new labels but the filter still finds the sandbox by its old ones and "
         "not by its new ones (set_labels x list filter)")
class SetLabelsFilterStale(_backend_plugin(_LabelIndexAtCreate)):
    pass


@redteam("bp1_platform_info_deleted_ok", "SDP1-045 (§8: a per-sandbox call for an unknown sandbox is not_found "
         "resource sandbox; §9.2: a deleted sandbox is not_found to attach/describe)",
         "sandbox/platform_info looks its sandbox up with tombstones included ('the platform is this machine's "
         "anyway'), so it answers for a deleted sandbox that describe reports as not_found (delete x "
         "platform_info)")
class PlatformInfoDeletedOk(HostPlugin):
    def m_sandbox_platform_info(self, params: dict[str, Any]) -> Any:
        self.backend.get(params["sandbox_id"], include_deleted=True)
        return {"platform": {"os": sys.platform.replace("darwin", "macos"), "arch": platform.machine(),
                             "version": platform.release()}}


class _NotFoundCachePlugin(HostPlugin):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gone: set[str] = set()


@redteam("bp1_attach_negative_cache", "SDP1-061 SDP1-050 (§8.3: undelete restores a deleted sandbox and "
         "returns a fresh HandleInfo; §8.1: attach returns HandleInfo for a sandbox that exists)",
         "attach remembers the ids it answered not_found for and answers from that cache; undelete does not "
         "clear it, so a sandbox attached while deleted stays unattachable after its undelete (deleted attach x "
         "undelete)")
class AttachNegativeCache(_NotFoundCachePlugin):
    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        sandbox_id = params["sandbox_id"]
        if sandbox_id in self._gone:
            raise not_found("sandbox", sandbox_id)
        try:
            return super().m_sandbox_attach(params)
        except BackendError as error:
            if error.kind == "not_found":
                self._gone.add(sandbox_id)
            raise


class _ListScansTombstones(HostBackend):
    def list(self, labels: Mapping[str, str] | None = None) -> list[HostSandbox]:
        if not labels:
            return super().list(labels)
        with self._lock:  # the filtered path scans every record, tombstones included
            records = list(self._sandboxes.values())
        return [s for s in records if all(s.labels.get(k) == v for k, v in labels.items())]


@redteam("bp1_label_filter_includes_deleted", "SDP1-050 SDP1-059 (§9.2: list reads registry records, excludes "
         "deleted, filters by labels)",
         "the label-filtered list scans every registry record and forgets to skip tombstones, so a deleted "
         "sandbox carrying the labels is listed (state deleted) while the unfiltered list leaves it out (delete "
         "x label filter)")
class LabelFilterIncludesDeleted(_backend_plugin(_ListScansTombstones)):
    pass


class _SharedNoLabels(HostBackend):
    """Sandboxes created without labels share one empty dict; set_labels replaces the contents in place."""

    _NO_LABELS: ClassVar[dict[str, str]] = {}

    def create(self, name: str | None, labels: Mapping[str, str], *args: Any, **kwargs: Any) -> HostSandbox:
        sandbox = super().create(name, labels, *args, **kwargs)
        if not labels:
            sandbox.labels = self._NO_LABELS
        return sandbox

    def set_labels(self, sandbox: HostSandbox, labels: Mapping[str, str]) -> None:
        with self._lock:
            sandbox.labels.clear()
            sandbox.labels.update(labels)
            self._save(sandbox)


@redteam("bp1_labels_shared_default", "SDP1-050 (§2.3: set_labels replaces the labels of the named sandbox)",
         "sandboxes created without labels share one default dict and set_labels replaces its contents in place, "
         "so relabelling one such sandbox relabels every other sandbox created without labels (set_labels x a "
         "second sandbox)")
class LabelsSharedDefault(_backend_plugin(_SharedNoLabels)):
    pass


# ================================================================================================
# a setting meets another option (create from a snapshot, lifecycle, stdin, validation)
# ================================================================================================


@redteam("bp1_snapshot_restore_drops_labels", "SDP1-051 (§8.2: the plugin validates the spec and must not "
         "silently ignore a requested setting; labels are part of the spec)",
         "a create whose source is a snapshot builds the sandbox from the snapshot's metadata: the spec's labels "
         "are dropped (labels {}) while a host_directory create keeps them (snapshot source x labels)")
class SnapshotRestoreDropsLabels(HostPlugin):
    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        if isinstance(spec, dict) and isinstance(spec.get("source"), dict):
            spec = {**spec, "labels": {}}
        return super().m_sandbox_create({**params, "spec": spec})


@redteam("bp1_snapshot_restore_drops_env", "SDP1-051 (§8.2: must not silently ignore a requested setting; env "
         "is the designated secret channel) (§9.2: exec env = plugin env, then the sandbox's create-time env)",
         "a create from a snapshot drops the spec's env (the restore path copies files only), so commands in "
         "the restored sandbox miss the create-time variables a host_directory create passes (snapshot source x "
         "env)")
class SnapshotRestoreDropsEnv(HostPlugin):
    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        if isinstance(spec, dict) and isinstance(spec.get("source"), dict):
            spec = {**spec, "env": {}}
        return super().m_sandbox_create({**params, "spec": spec})


class _EnvNotPersisted(HostBackend):
    """The record on disk leaves the env out (it holds secrets); start reloads the sandbox from its record."""

    def _save(self, sandbox: HostSandbox) -> None:
        path = self._record_path(sandbox.id)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = sandbox.record()
        record.pop("env", None)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(path)

    def start(self, sandbox: HostSandbox) -> None:
        super().start(sandbox)
        data = json.loads(self._record_path(sandbox.id).read_text())
        sandbox.env = dict(data.get("env", {}))


@redteam("bp1_start_loses_env", "SDP1-051 (§8.2: a requested setting is honoured, never silently dropped) "
         "(§9.2: stop keeps the sandbox; start -> running; exec env includes the create-time env)",
         "the registry record leaves the create-time env out (secrets stay off disk) and start reloads the "
         "sandbox from its record, so after stop + start commands no longer see the env they saw before "
         "(lifecycle start x create-time env)")
class StartLosesEnv(_backend_plugin(_EnvNotPersisted)):
    pass


class _StdinSpawnSandboxEnvOnly(HostBackend):
    def start_process(self, sandbox: HostSandbox, command: str, env: Mapping[str, str], working_dir: str | None,
                      stdin_piped: bool, argv: list[str] | None) -> subprocess.Popen[bytes]:
        if stdin_piped:  # the stdin-fed spawn builds its environment from the sandbox only
            env = {}
        return super().start_process(sandbox, command, env, working_dir, stdin_piped, argv)


@redteam("bp1_stdin_drops_spec_env", "SDP1-075 (§8.4: stdin_b64 is written then closed) (§9.2: exec env = "
         "... then the exec spec.env; conformance exec_env_vars_apply)",
         "a command given stdin_b64 is spawned by a path that passes only the sandbox's env, so the exec's own "
         "spec.env is missing exactly when stdin is supplied (stdin x env)")
class StdinDropsSpecEnv(_backend_plugin(_StdinSpawnSandboxEnvOnly)):
    pass


@redteam("bp1_two_bad_fields_joined", "SDP1-051 SDP1-045 (§8.2/§7: invalid_spec with detail.field naming the "
         "field the plugin cannot honour)",
         "validation reports every unhonoured field at once: with two bad fields detail.field is 'user, region' "
         "(no field of the spec), while a single bad field is named correctly (validation x a second bad field)")
class TwoBadFieldsJoined(HostPlugin):
    def validate_spec(self, spec: dict[str, Any]) -> None:
        bad = [key for key, unset in UNHONOURED_SPEC_FIELDS.items() if key in spec and spec[key] != unset]
        if len(bad) > 1:
            raise invalid_spec(", ".join(bad), "not supported by the host provider")
        super().validate_spec(spec)


# ================================================================================================
# accounting and sanitization meet a second stream, a size below the cap, or another exec kind
# ================================================================================================


@redteam("bp1_tail_ring_unwrapped", "SDP1-105 SDP1-106 (§9: retained copy = head of limit/2 + rolling tail; per "
         "stream retained + omitted = observed; a limit above the output retains all of it)",
         "the rolling tail is a preallocated ring returned whole while it has not wrapped: for output between "
         "limit/2 and limit the retained copy ends in NUL padding and retained_bytes counts the padding "
         "(omitted goes negative); at or over the limit, and under limit/2, it is right (retention x output "
         "below the cap)")
class TailRingUnwrapped(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stream(params)
        limit = params.get("retained_output_limit")
        if not limit:
            return answer
        head_len, ring = limit // 2, limit - limit // 2
        for stream in ("stdout", "stderr"):
            stats = answer[f"{stream}_capture"]
            written = stats["observed_bytes"] - head_len
            if 0 < written < ring:  # the ring's unwritten slots go out too
                key = f"{stream}_b64"
                data = base64.b64decode(answer["result"][key]) + bytes(ring - written)
                answer["result"][key] = b64(data)
                stats["retained_bytes"] = len(data)
                stats["omitted_bytes"] = stats["observed_bytes"] - len(data)
        return answer


class _PerCommandSanitizer(Sanitizer):
    """One sanitizer per command: the backend asks for one per stream and gets the same one twice."""

    _pending = threading.local()

    def __new__(cls, mode: str) -> Self:
        waiting = getattr(cls._pending, "sanitizer", None)
        if waiting is not None and waiting.mode == mode:
            cls._pending.sanitizer = None
            return waiting
        made = super().__new__(cls)
        cls._pending.sanitizer = made
        return made

    def __init__(self, mode: str) -> None:
        if getattr(self, "_ready", False):
            return  # the second stream's request: already set up (and maybe in the middle of a sequence)
        super().__init__(mode)
        self._ready = True


@redteam("bp1_sanitizer_shared_streams", "SDP1-069 SDP1-070 (§5.5: sanitization is applied statefully across "
         "chunks, per stream)",
         "one sanitizer state serves both streams of a command: an escape sequence left open on stdout swallows "
         "stderr text written meanwhile (and a sequence split across the two streams is stripped), while "
         "sanitization of either stream alone is right (sanitization x interleaved stdout/stderr)")
class SanitizerSharedStreams(_backend_plugin(sanitizing_backend(_PerCommandSanitizer))):
    pass


@redteam("bp1_stdio_output_sanitized", "SDP1-071 (§5.5: PTY and bidirectional stdio stay raw)",
         "exec/stdio_output runs each chunk through the exec output path's strip_ansi sanitizer, so escape "
         "sequences a stdio process writes never reach the host (sanitization x stdio processes)")
class StdioOutputSanitized(HostPlugin):
    def m_exec_stdio_output(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stdio_output(params)
        if answer.get("data_b64") is not None:
            answer["data_b64"] = b64(sanitize(base64.b64decode(answer["data_b64"]), "strip_ansi"))
        return answer


@redteam("bp1_stream_signal_missing", "SDP1-072 SDP1-068 (§8.4: signal = the observed ending signal; buffered "
         "and streaming execution behave alike)",
         "the exec/stream result is built from the exit code only: a command killed by a signal reports signal "
         "9 through exec/run but signal null through exec/stream (signal x streaming exec)")
class StreamSignalMissing(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stream(params)
        answer["result"]["signal"] = None
        return answer


@redteam("bp1_cancel_with_timeout_timed_out", "SDP1-074 SDP1-073 (§8.4/§9: a cancellation resolves with "
         "termination cancelled; a timeout with timed_out)",
         "the streaming path reports any stop it made while a deadline was armed as the deadline's: an "
         "exec/cancel of a command that has an explicit timeout_ms resolves timed_out instead of cancelled "
         "(cancel x explicit timeout)")
class CancelWithTimeoutTimedOut(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stream(params)
        if answer["result"]["termination"] == "cancelled" and params["spec"].get("timeout_ms") is not None:
            answer["result"]["termination"] = "timed_out"
        return answer


# ================================================================================================
# operations across two sandboxes on one connection
# ================================================================================================


@redteam("bp1_handle_route_last_create", "SDP1-118 SDP1-111 (§10: route_id echoes the request's value; "
         "Errata: early v1 reports a handle's later operations on the route of its create/attach)",
         "the event route of a handle's later operations is kept per connection, not per handle: the newest "
         "create/attach's route replaces it for every handle, so a stop of the first sandbox is reported on the "
         "second sandbox's route (handle routes x two sandboxes)")
class HandleRouteLastCreate(HostPlugin):
    def remember_handle_route(self, method: str, params: dict[str, Any], result: Any,
                              route: dict[str, Any] | None) -> None:
        super().remember_handle_route(method, params, result, route)
        if method in HANDLE_METHODS and route is not None:
            for sandbox_id in list(self._handle_routes):
                self._handle_routes[sandbox_id] = route


@redteam("bp1_per_call_route_sticks", "SDP1-118 (§10: route_id echoes the request's value) (Errata: a per-call "
         "events object wins for that call; the handle's later calls report on its create/attach route)",
         "a per-call events route (late v1) is remembered as the handle's route: after a stop that carried its "
         "own events, a later start without events is reported on the stop's route instead of the create's "
         "(per-call events x handle route)")
class PerCallRouteSticks(HostPlugin):
    def remember_handle_route(self, method: str, params: dict[str, Any], result: Any,
                              route: dict[str, Any] | None) -> None:
        super().remember_handle_route(method, params, result, route)
        sandbox_id = str(params.get("sandbox_id"))
        if route is not None and method != "sandbox/delete" and sandbox_id in self._handle_routes:
            self._handle_routes[sandbox_id] = route


@redteam("bp1_delete_ends_other_stdio", "SDP1-023 (a declared capability must work: exec.stdio_process) (§9.2: "
         "delete ends the named sandbox; each command runs in its own process group)",
         "sandbox/delete tears down the connection's interactive sessions (stop_interactive) instead of the "
         "deleted sandbox's, so deleting one sandbox kills a stdio process running in another (delete x stdio "
         "process of a second sandbox)")
class DeleteEndsOtherStdio(HostPlugin):
    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        answer = super().m_sandbox_delete(params)
        self.stop_interactive()
        return answer


class _PauseEveryProcess(HostBackend):
    def pause(self, sandbox: HostSandbox) -> None:
        if sandbox.state not in ("running", "paused"):
            raise invalid_state(sandbox.state, "pause")
        with self._lock:  # one process table for the provider: every tracked command is frozen
            everyone = list(self._sandboxes.values())
        for other in everyone:
            for proc in list(other.processes):
                _signal_group(proc, signal.SIGSTOP)
        self._set_state(sandbox, "paused")


@redteam("bp1_pause_freezes_other_sandbox", "SDP1-023 (lifecycle.pause declared: pausing a sandbox pauses that "
         "sandbox) SDP1-109 (one exec must not delay another beyond bounded queuing)",
         "sandbox/pause SIGSTOPs every process the backend tracks, not just the paused sandbox's, and resume "
         "continues only its own: a command running in a second sandbox freezes until its timeout (pause x a "
         "second sandbox's exec)")
class PauseFreezesOtherSandbox(_backend_plugin(_PauseEveryProcess)):
    pass


@redteam("bp1_stdio_id_per_sandbox", "SDP1-076 (§8.4: process_id is host-generated and unique per connection; "
         "a duplicate is rejected invalid_spec field process_id)",
         "the duplicate process_id check is scoped to the sandbox: opening a stdio process under an id that a "
         "live process of another sandbox holds succeeds and replaces it (the first process is orphaned), "
         "while a duplicate inside one sandbox is refused (process ids x two sandboxes)")
class StdioIdPerSandbox(HostPlugin):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._process_owner: dict[str, str] = {}

    def m_exec_stdio_open(self, params: dict[str, Any]) -> Any:
        process_id, sandbox_id = params["process_id"], params["sandbox_id"]
        with self._interactive_lock:
            owner = self._process_owner.get(process_id)
            if owner is not None and owner != sandbox_id:
                self._processes.pop(process_id, None)
        answer = super().m_exec_stdio_open(params)
        with self._interactive_lock:
            self._process_owner[process_id] = sandbox_id
        return answer


# ================================================================================================
# a rule kept on one method and broken on its sibling
# ================================================================================================


@redteam("bp1_fs_read_unknown_sandbox_file", "SDP1-045 (§8: an unknown sandbox id in a per-sandbox call is "
         "not_found resource sandbox; Errata: v1 not_found resources are sandbox/snapshot/volume/plugin)",
         "fs/read takes a fast path that computes the workspace from the id without a registry lookup, so a read "
         "in an unknown sandbox fails not_found resource 'file' (the path) while exec/run and the other fs calls "
         "say resource sandbox (unknown sandbox x fs/read)")
class FsReadUnknownSandboxFile(HostPlugin):
    # The fast path's visible effect, without copying the reference's read: an id the registry does not know
    # is answered as a missing file rather than a missing sandbox; a known one reads as the reference does.
    def m_fs_read(self, params: dict[str, Any]) -> Any:
        try:
            self.backend.get(params["sandbox_id"])
        except BackendError:
            raise not_found("file", params["path"]) from None
        return super().m_fs_read(params)


@redteam("bp1_fs_exists_unknown_sandbox_false", "SDP1-045 (§8: unknown sandbox id -> not_found resource "
         "sandbox, on every per-sandbox call)",
         "fs/exists turns every failure into {exists:false}, so asking about a path in an unknown sandbox "
         "answers 'no such file' instead of not_found sandbox (unknown sandbox x fs/exists)")
class FsExistsUnknownSandboxFalse(HostPlugin):
    def m_fs_exists(self, params: dict[str, Any]) -> Any:
        try:
            return super().m_fs_exists(params)
        except BackendError:
            return {"exists": False}


@redteam("bp1_fs_handle_cache_outlives_delete", "SDP1-045 (§8: a per-sandbox call for a sandbox that is not "
         "there is not_found resource sandbox; §9.2: deleted sandboxes are not_found)",
         "the fs calls resolve the sandbox through a handle cache filled at create/attach that delete never "
         "evicts: fs/write to a deleted sandbox succeeds (its workspace is re-created) while describe and exec "
         "answer not_found (delete x fs)")
class FsHandleCacheOutlivesDelete(HostPlugin):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._handle_cache: dict[str, HostSandbox] = {}

    def handle_info(self, sandbox: HostSandbox) -> dict[str, Any]:
        self._handle_cache[sandbox.id] = sandbox
        return super().handle_info(sandbox)

    def _path(self, params: dict[str, Any], key: str = "path") -> Path:
        sandbox = self._handle_cache.get(params["sandbox_id"]) or self.backend.get(params["sandbox_id"])
        return self.backend.resolve(sandbox, params[key])


# ================================================================================================
# stop and delete meet the long-lived processes
# ================================================================================================


@redteam("bp1_stop_spares_stdio", "SDP1-023 (§9.2: stop -> stopped, ending all the sandbox's process groups)",
         "stdio processes are tracked by the session table only (not among the sandbox's processes), so "
         "sandbox/stop ends the sandbox's commands but leaves its stdio processes running: their output never "
         "reaches EOF (stop x stdio process)")
class StopSparesStdio(HostPlugin):
    def _spawn(self, sandbox: HostSandbox, command: str, env: dict[str, str], working_dir: str | None,
               argv: list[str] | None = None, **streams: Any) -> subprocess.Popen[bytes]:
        proc = super()._spawn(sandbox, command, env, working_dir, argv, **streams)
        if streams.get("stdin") is subprocess.PIPE:  # stdio processes (a PTY passes its terminal instead)
            sandbox.processes.discard(proc)
        return proc


@redteam("bp1_stream_working_dir_plugin_cwd", "SDP1-081 SDP1-068 (§5.5: a relative working_dir resolves against "
         "the sandbox working dir; buffered and streaming execution behave alike)",
         "the exec/stream path normalises working_dir with os.path.abspath (against the plugin's own cwd) before "
         "the backend resolves it, so a relative working_dir works on exec/run but fails invalid_spec "
         "working_dir on exec/stream (relative working_dir x streaming exec)")
class StreamWorkingDirPluginCwd(HostPlugin):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        if isinstance(spec, dict) and spec.get("working_dir"):
            params = {**params, "spec": {**spec, "working_dir": os.path.abspath(spec["working_dir"])}}
        return super().m_exec_stream(params)


@redteam("bp1_attach_cached_handle", "SDP1-050 SDP1-021 (§8.1: attach returns HandleInfo with the sandbox's "
         "SandboxStatus; §2.3: set_labels is a full replace)",
         "attach answers from a handle cache filled at create, so after set_labels (or stop) an attach reports "
         "the labels and state the sandbox had when it was created, while describe and list are current "
         "(set_labels x attach)")
class AttachCachedHandle(HostPlugin):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._created: dict[str, dict[str, Any]] = {}

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_create(params)
        self._created[info["status"]["id"]] = copy.deepcopy(info)
        return info

    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_attach(params)  # the sandbox must still be there
        return copy.deepcopy(self._created.get(params["sandbox_id"], info))


# ================================================================================================
# version 2 (HostPluginV2): the same classes of fault on the v2 plugin
# ================================================================================================


@redteam("bp1_v2_write_unknown_sandbox_created", "§7-129 (v2 §8: an unknown sandbox id is not_found resource "
         "sandbox) (v2 §8.5: fs/write creates parent directories)",
         "fs/write computes the destination from the sandbox id without a registry lookup and creates missing "
         "parents: a write to an unknown sandbox succeeds and makes a phantom workspace, while fs/read and "
         "exec/stream of that id answer not_found sandbox (unknown sandbox x parent creation)")
class V2WriteUnknownSandboxCreated(HostPluginV2):
    _writing = threading.local()

    def m_fs_write(self, params: dict[str, Any]) -> Any:
        self._writing.active = True
        try:
            return super().m_fs_write(params)
        finally:
            self._writing.active = False

    def _path(self, params: dict[str, Any], key: str = "path") -> Path:
        if not getattr(self._writing, "active", False):
            return super()._path(params, key)
        # "the workspace of an id is root/<id>/workspace": no registry lookup on the write path
        workspace = self.backend.root / str(params["sandbox_id"]) / "workspace"
        candidate = Path(params[key])
        return candidate if candidate.is_absolute() else workspace / candidate


class _ExecIdsPerSandbox(HostPluginV2):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._exec_owner: dict[str, Any] = {}
        self._asking = threading.local()

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        self._asking.sandbox = params.get("sandbox_id")
        return super().m_exec_stream(params)

    def register_exec(self, exec_id: str, grace_s: float | None) -> Any:
        sandbox = getattr(self._asking, "sandbox", None)
        with self._execs_lock:
            if exec_id in self._execs and self._exec_owner.get(exec_id) != sandbox:
                self._execs.pop(exec_id)  # "exec ids are scoped to their sandbox": the other one's entry goes
            self._exec_owner[exec_id] = sandbox
        return super().register_exec(exec_id, grace_s)


@redteam("bp1_v2_exec_id_per_sandbox", "§7-127 (v2 §8.4: a duplicate exec_id is invalid_spec 'duplicate "
         "execution id'; exec ids are unique per connection) §7-140 (exec/stop addresses the exec by id)",
         "the duplicate exec_id check is scoped to the sandbox: an exec/stream in a second sandbox under the id "
         "of a running exec in the first is accepted and takes the id over, so exec/stop of that id no longer "
         "reaches the first command (exec ids x two sandboxes)")
class V2ExecIdPerSandbox(_ExecIdsPerSandbox):
    pass


class _StdinSpawnSandboxEnvOnlyV2(HostBackendV2):
    def start_process(self, sandbox: HostSandbox, command: str, env: Mapping[str, str], working_dir: str | None,
                      stdin_piped: bool, argv: list[str] | None) -> subprocess.Popen[bytes]:
        if stdin_piped:
            env = {}
        return super().start_process(sandbox, command, env, working_dir, stdin_piped, argv)


@redteam("bp1_v2_stdin_drops_spec_env", "(v2 §8.4: the argument vector and env reach the process unchanged) "
         "§7-143 (stdin:true is served when exec.stdin/exec.stdin_stream are declared)",
         "an exec/stream with stdin:true is spawned by a path that passes only the sandbox's env: the request's "
         "spec.env is missing exactly when the command reads stdin from the channel (stdin x env)")
class V2StdinDropsSpecEnv(_BackendPluginV2):
    backend_class = _StdinSpawnSandboxEnvOnlyV2


class _TimeoutAfterInput(HostBackendV2):
    def await_exit(self, sandbox: HostSandbox, proc: subprocess.Popen[bytes], cancel: Any,
                   deadline: float | None) -> str:
        if deadline is not None and proc.stdin is not None:
            # "the input phase is the host's time": the clock starts once the command's stdin is complete
            budget = deadline - time.monotonic()
            while (proc.poll() is None and not proc.stdin.closed and not cancel.kill.is_set()
                   and not cancel.term.is_set() and not cancel.own_stop.is_set()):
                try:
                    proc.wait(timeout=0.02)
                except subprocess.TimeoutExpired:
                    pass
            deadline = time.monotonic() + budget
        return super().await_exit(sandbox, proc, cancel, deadline)


@redteam("bp1_v2_timeout_waits_for_stdin_eof", "§7-141 (v2 §9: the plugin's own stops include the timeout; a "
         "timeout reports timed_out; item 74: a timeout resolves the call normally with timed_out)",
         "with stdin:true the timeout clock starts only once the host's stdin eof arrived: a command that waits "
         "on input the host has not finished runs past timeout_ms for as long as the channel stays open (stdin "
         "streaming x timeout)")
class V2TimeoutWaitsForStdinEof(_BackendPluginV2):
    backend_class = _TimeoutAfterInput


@redteam("bp1_v2_read_length_long_streams", "§7-131 (v2 §2.1: senders split at the frame limit) (§8.5: fs/read "
         "length bounds the bytes read; v1 item SDP1-083)",
         "fs/read honours length with one read when it fits a frame; a longer length takes the streaming path, "
         "which sends to end of file: a read of 70000 bytes of a 100 KiB file returns all of it (length x "
         "frame splitting)")
class V2ReadLengthLongStreams(HostPluginV2):
    def send_file(self, channel: Any, path: Path, display_path: str, offset: int, length: int | None) -> None:
        if length is not None and length > channel.max_frame_bytes:
            length = None  # streamed: "read to the end, frame by frame"
        super().send_file(channel, path, display_path, offset, length)


@redteam("bp1_v2_append_ignored_with_length", "§7-136 (v2 §8.5: fs/write append appends; content_length is the "
         "exact byte count) (SDP1-084: append appends when true)",
         "a write that states content_length streams straight into the file opened for writing, ignoring "
         "append: an append with a content_length replaces the file, while an append without one appends "
         "(append x content_length)")
class V2AppendIgnoredWithLength(HostPluginV2):
    def m_fs_write(self, params: dict[str, Any]) -> Any:
        if params.get("content_length") is not None:
            params = {**params, "append": False}
        return super().m_fs_write(params)


@redteam("bp1_v2_sized_write_no_parents", "§7-136 (v2 §8.5: parent directories are created without a shell)",
         "the streamed write path (content_length given, no append) opens the file directly without creating "
         "missing parents, so it fails io where the buffered path (no content_length) creates them (content_"
         "length x missing parent directory)")
class V2SizedWriteNoParents(HostPluginV2):
    def m_fs_write(self, params: dict[str, Any]) -> Any:
        if params.get("content_length") is None or params.get("append"):
            return super().m_fs_write(params)
        request = self.channel_request("fs/write", params)
        path = self._path(params)
        content_length = optional_count("fs/write", params, "content_length")
        channel = self.open_channel(request, accepts_input=True)
        with self.serving(channel):
            try:
                handle = path.open("wb")
            except OSError as exc:
                raise _io("write", exc) from None
            with handle:
                self.receive_exactly(channel, content_length, handle)  # type: ignore[arg-type]
        return None


@redteam("bp1_v2_preview_url_deleted", "§7-138 (v2 §8.8: stop/delete release all ports) (v2 §8: a deleted "
         "sandbox is not_found to per-sandbox calls)",
         "access/preview_url looks its sandbox up with tombstones included, so a deleted sandbox still gets a "
         "preview URL that describe would answer not_found for (delete x preview URLs)")
class V2PreviewUrlDeleted(HostPluginV2):
    def preview_port(self, method: str, params: dict[str, Any]) -> int:
        try:
            return super().preview_port(method, params)
        except BackendError as error:
            if error.kind != "not_found":
                raise
            self.backend.get(params["sandbox_id"], include_deleted=True)  # a tombstone still "has" its ports
            return params["port"]


@redteam("bp1_v2_environment_omits_sandbox_env", "(v2 §2.2: sandbox/environment, gated on exec.environment) "
         "(conformance exec_reports_environment: the map contains the create-time env)",
         "sandbox/environment reports the provider's environment (what every sandbox inherits) without the "
         "sandbox's create-time env, although every command in that sandbox starts with it (create-time env x "
         "environment query)")
class V2EnvironmentOmitsSandboxEnv(HostPluginV2):
    def m_sandbox_environment(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        return {"environment": self.backend.environment(dataclasses.replace(sandbox, env={}), {})}


@redteam("bp1_v2_capture_counts_channel_bytes", "(v2 §9 / §4: per stream retained + omitted = observed; the "
         "plugin's *_capture is its own accounting of each stream) SDP1-106",
         "stdout_capture counts every byte the plugin wrote on the channel, stderr frames included: observed "
         "for stdout is right only when the command writes nothing to stderr (accounting x interleaved "
         "stdout/stderr)")
class V2CaptureCountsChannelBytes(HostPluginV2):
    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec_stream(params)
        out, err = answer["stdout_capture"], answer["stderr_capture"]
        out["observed_bytes"] += err["observed_bytes"]
        out["omitted_bytes"] = out["observed_bytes"] - out["retained_bytes"]
        return answer


class _StdoutOnlySanitizer(Sanitizer):
    """The mode reaches the first reader the backend makes (stdout); the second (stderr) gets the default."""

    _made = threading.local()

    def __init__(self, mode: str) -> None:
        second = getattr(self._made, "pending", False)
        self._made.pending = not second
        super().__init__("raw" if second else mode)


@redteam("bp1_v2_stderr_frames_unsanitized", "(v2 §8.4/§5.5: output_sanitization applies to the command's output "
         "before it is framed and counted) SDP1-070",
         "the sanitization mode is handed to the stdout reader only; stderr frames go out raw, so escape "
         "sequences a command writes to stderr reach the host although strip_ansi was asked for (sanitization "
         "x stderr frames)")
class V2StderrFramesUnsanitized(_BackendPluginV2):
    backend_class = type("_StdoutOnlySanitizingV2", (HostBackendV2,), {"sanitizer_class": _StdoutOnlySanitizer})
