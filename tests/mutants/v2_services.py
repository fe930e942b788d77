"""Broken variants of the v2 reference plugin's optional services (features/v2/services.feature): the
sandbox's environment and preview URLs, and native git clones and snapshot build logs on controls that have
them (the reference has neither)."""

from __future__ import annotations

import base64
import threading
from typing import Any

from conformance.reference.data_channel import STDERR, STDOUT
from conformance.reference.host_backend import HostSandbox, invalid_spec
from conformance.reference.host_plugin import application_error
from conformance.reference.host_plugin_v2 import ExecStops, HostPluginV2
from conformance.reference.stdio_server import RpcFailure
from tests.mutants import mutant

# -- the sandbox's environment ------------------------------------------------------------------------------


@mutant("environment-without-sandbox-env")
class EnvironmentWithoutSandboxEnv(HostPluginV2):
    """Reports the environment commands inherit from the plugin, without the sandbox's own variables."""

    def m_sandbox_environment(self, params: dict[str, Any]) -> Any:
        own = self.backend.get(params["sandbox_id"]).env
        environment = super().m_sandbox_environment(params)["environment"]
        return {"environment": {name: value for name, value in environment.items() if name not in own}}


# -- preview URLs -----------------------------------------------------------------------------------------------


@mutant("preview-url-wrong-port")
class PreviewUrlWrongPort(HostPluginV2):
    """Answers a preview URL for the port after the one asked for."""

    def m_access_preview_url(self, params: dict[str, Any]) -> Any:
        return super().m_access_preview_url({**params, "port": (params["port"] + 1) % 0x10000})


@mutant("preview-release-unasked-refused")
class PreviewReleaseUnaskedRefused(HostPluginV2):
    """Refuses to release a preview port it holds no URL for: never asked for, or released already."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._previews: set[tuple[str, int]] = set()
        self._previews_lock = threading.Lock()

    def m_access_preview_url(self, params: dict[str, Any]) -> Any:
        answer = super().m_access_preview_url(params)
        with self._previews_lock:
            self._previews.add((params["sandbox_id"], params["port"]))
        return answer

    def m_access_preview_release(self, params: dict[str, Any]) -> Any:
        with self._previews_lock:
            held = (params["sandbox_id"], params["port"]) in self._previews
            self._previews.discard((params["sandbox_id"], params["port"]))
        if not held:
            raise invalid_spec("port", "no preview URL is held for this port")
        return super().m_access_preview_release(params)


# -- native git clones (the reference has none: a control that clones with the sandbox's git, and faults in it) --


def _git_failure(kind: str, message: str) -> RpcFailure:
    return application_error("git", message, {"git": {"operation": "clone", "kind": kind}})


@mutant("control-native-git-clone")
class ControlNativeGitClone(HostPluginV2):
    """Honest (control): declares git native and clones with the sandbox's own git: fetches exactly the pinned
    commit or tag (or the branch's head) into a new repository and checks it out, so an unavailable pin never
    leaves the branch head behind; credentials go to that one fetch's command line, never into the repository."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["git"] = {"supported": True, "native": True}
        return capabilities

    def git(self, sandbox: HostSandbox, *argv: str) -> None:
        run = self.backend.run(sandbox, "", {}, argv=["git", *argv], timeout_s=120.0, cancel=ExecStops(None))
        if run.exit_code != 0:
            said = run.stderr.decode(errors="replace").strip()
            kind = "ref_not_found" if "not our ref" in said or "couldn't find remote ref" in said else "unclassified"
            raise _git_failure(kind, f"git exited {run.exit_code}: {said.splitlines()[-1] if said else 'no message'}")

    def pinned_ref(self, options: dict[str, Any]) -> str:
        if options.get("commit"):
            return options["commit"]
        if options.get("tag"):
            return f"refs/tags/{options['tag']}"  # fully qualified: a branch of the same name is never taken
        return options.get("branch") or "HEAD"

    def fetch(self, sandbox: HostSandbox, target: str, url: str, ref: str, options: dict[str, Any]) -> None:
        credentials = options.get("credentials")
        config = []
        if credentials and url.startswith(("http://", "https://")):
            basic = base64.b64encode(f"{credentials['username']}:{credentials['password']}".encode()).decode()
            config = ["-c", f"http.extraHeader=Authorization: Basic {basic}"]
        depth = [f"--depth={options['depth']}"] if options.get("depth") else []
        self.git(sandbox, *config, "-C", target, "fetch", "-q", *depth, url, ref)

    def m_git_clone(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"])
        options = params.get("options") or {}
        target = str(self.backend.resolve(sandbox, params["target_path"]))
        self.git(sandbox, "init", "-q", target)
        self.fetch(sandbox, target, params["url"], self.pinned_ref(options), options)
        checkout = ["-B", options["branch"]] if options.get("branch") else ["--detach"]
        self.git(sandbox, "-C", target, "checkout", "-q", *checkout, "FETCH_HEAD")
        self.git(sandbox, "-C", target, "remote", "add", "origin", params["url"])
        return None


@mutant("clone-pin-falls-back-to-branch-head")
class ClonePinFallsBackToBranchHead(ControlNativeGitClone):
    """Clones the branch head when the pinned commit or tag cannot be fetched."""

    def fetch(self, sandbox: HostSandbox, target: str, url: str, ref: str, options: dict[str, Any]) -> None:
        try:
            super().fetch(sandbox, target, url, ref, options)
        except RpcFailure:
            super().fetch(sandbox, target, url, options.get("branch") or "HEAD", options)


@mutant("clone-keeps-credentials")
class CloneKeepsCredentials(ControlNativeGitClone):
    """Writes the clone's credentials into the new repository's configuration, for later fetches."""

    def m_git_clone(self, params: dict[str, Any]) -> Any:
        answer = super().m_git_clone(params)
        credentials = (params.get("options") or {}).get("credentials")
        if credentials:
            sandbox = self.backend.get(params["sandbox_id"])
            basic = base64.b64encode(f"{credentials['username']}:{credentials['password']}".encode()).decode()
            self.git(sandbox, "-C", str(self.backend.resolve(sandbox, params["target_path"])), "config",
                     "http.extraHeader", f"Authorization: Basic {basic}")
        return answer


CHECKOUT_LATE_S = 0.5


@mutant("clone-answers-before-checkout")
class CloneAnswersBeforeCheckout(ControlNativeGitClone):
    """Answers a clone once the fetch is done, and checks the files out half a second later."""

    def git(self, sandbox: HostSandbox, *argv: str) -> None:
        if "checkout" in argv:
            threading.Timer(CHECKOUT_LATE_S, self._late_checkout, args=(sandbox, *argv)).start()
            return
        super().git(sandbox, *argv)

    def _late_checkout(self, sandbox: HostSandbox, *argv: str) -> None:
        try:
            super().git(sandbox, *argv)
        except Exception:  # noqa: BLE001 - the scenario may have deleted the sandbox by now; nobody waits for it
            pass


# -- a snapshot's build log (the reference copies snapshots and builds none: a control that reports the copy) --


@mutant("control-snapshot-build-logs")
class ControlSnapshotBuildLogs(HostPluginV2):
    """Honest (control): declares build logs and reports how a snapshot came to be as its build log, in stdout
    frames on the follow's channel, then the end of file, then the answer."""

    log_frame_kind = STDOUT

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["snapshots"]["build_logs"] = True
        return capabilities

    def build_log(self, snapshot: dict[str, Any]) -> list[bytes]:
        return [f"snapshot {snapshot['id']}: copied the sandbox's workspace\n".encode(), b"snapshot ready\n"]

    def m_snapshot_build_logs(self, params: dict[str, Any]) -> Any:
        snapshot = self.backend.find_snapshot(params["snapshot_id"])
        channel = self.open_channel(self.channel_request("snapshot/build_logs", params), accepts_input=False)
        with self.serving(channel):
            channel.pump_input()
            for line in self.build_log(snapshot):
                channel.send(self.log_frame_kind, line)
        return None


@mutant("build-log-as-stderr-frames")
class BuildLogAsStderrFrames(ControlSnapshotBuildLogs):
    """Sends a snapshot's build log as stderr frames."""

    log_frame_kind = STDERR


# -- one-shot containers (the reference runs none, and no control here can run an image) ----------------------


@mutant("one-shot-declared-without-runtime")
class OneShotDeclaredWithoutRuntime(HostPluginV2):
    """Declares one-shot containers but has no container runtime: every one_shot/run fails."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["one_shot"] = {"build": False}
        return capabilities

    def m_one_shot_run(self, params: dict[str, Any]) -> Any:
        self.backend.get(params["sandbox_id"])
        if "build" in params["spec"]["image"]:
            raise self.unsupported("one_shot/run", "one_shot.build")
        raise application_error("provider", "no container runtime to run a one-shot container in",
                                {"provider": {"provider": self.provider_kind, "code": "no_runtime",
                                              "message": "no container runtime", "retryable": False}})
