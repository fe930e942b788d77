"""Broken variants of the reference REST server (``conformance.reference.rest_server``).

Started as ``python -m tests.mutants.launch rest NAME --port P --token-env ENV``; catalogued in
``catalogue/rest.yaml`` with ``transport: rest``.
"""

from __future__ import annotations

import threading
from typing import Any

from conformance.reference.host_backend import BackendError
from conformance.reference.rest_server import EAGAIN_MESSAGE, Answer, Forkd052App, ForkdApp, error
from tests.mutants import mutant


@mutant("rest-delete-unknown-500")
class DeleteUnknownFails(ForkdApp):
    """Answers a delete of an id it never issued with a server error instead of "already gone"."""

    def delete(self, sandbox_id: str) -> Answer:
        try:
            self.backend.get(sandbox_id, include_deleted=True)
        except BackendError:
            raise error(500, f"internal error: no record of {sandbox_id}") from None
        return super().delete(sandbox_id)


@mutant("rest-delete-again-500")
class DeleteAgainFails(ForkdApp):
    """Answers a second delete of a sandbox with a server error: deleting is not idempotent."""

    def delete(self, sandbox_id: str) -> Answer:
        try:
            sandbox = self.backend.get(sandbox_id, include_deleted=True)
        except BackendError:
            return super().delete(sandbox_id)  # never issued: the honest 404
        if sandbox.state == "deleted":
            raise error(500, f"sandbox {sandbox_id} was already torn down")
        return super().delete(sandbox_id)


@mutant("rest-exec-timeout-exit-124")
class TimeoutAsExitCode(ForkdApp):
    """Reports a command that outlived its timeout as 200 with exit code 124, as `timeout(1)` would."""

    def timed_out(self, run: Any, elapsed_s: float, timeout: float) -> Answer:
        return Answer(200, {"stdout": run.stdout.decode("utf-8", errors="replace"),
                            "stderr": "command timed out\n", "exit_code": 124})


@mutant("rest-exec-timeout-late")
class TimeoutAnsweredLate(ForkdApp):
    """Lets a command run well past its timeout_secs, then answers 408 as if it had stopped it in time."""

    GRACE_S = 12

    def exec(self, sandbox_id: str, body: Any) -> Answer:
        if isinstance(body, dict) and isinstance(body.get("timeout_secs"), int | float):
            body = {**body, "timeout_secs": body["timeout_secs"] + self.GRACE_S}
        return super().exec(sandbox_id, body)


@mutant("rest-auth-not-enforced")
class AuthNotEnforced(ForkdApp):
    """Serves every request, with or without the token."""

    def requires_auth(self, method: str, path: str) -> bool:
        return False


@mutant("rest-wrong-token-accepted")
class WrongTokenAccepted(ForkdApp):
    """Checks that a bearer token is present, not that it is the right one."""

    def authorized(self, header: str | None) -> bool:
        scheme, _, presented = (header or "").partition(" ")
        return scheme.lower() == "bearer" and bool(presented.strip())


@mutant("rest-token-read-to-its-length")
class TokenReadToItsLength(ForkdApp):
    """Compares only as many characters of the presented token as the real one has: a token with more
    characters after the real one is let in."""

    def authorized(self, header: str | None) -> bool:
        scheme, _, presented = (header or "").partition(" ")
        return scheme.lower() == "bearer" and presented.strip()[:len(self.token)] == self.token


@mutant("rest-auth-only-on-create")
class AuthOnlyOnCreate(ForkdApp):
    """Guards the create route and nothing else."""

    def requires_auth(self, method: str, path: str) -> bool:
        return method == "POST" and path == "/v1/sandboxes"


@mutant("rest-auth-after-create")
class AuthCheckedAfterCreate(ForkdApp):
    """Creates the sandbox first and only then refuses the request for its missing token."""

    def unauthorized(self, method: str, path: str, body: Any) -> Answer:
        if method == "POST" and path == "/v1/sandboxes":
            self.create(body)
        return super().unauthorized(method, path, body)


@mutant("rest-healthz-needs-token")
class HealthNeedsToken(ForkdApp):
    """Puts the health endpoint behind the token too."""

    def requires_auth(self, method: str, path: str) -> bool:
        return True


@mutant("rest-exec-deleted-exit-127")
class DeletedSandboxExit127(ForkdApp):
    """Answers a command for a deleted sandbox with 200 and exit code 127, as a shell that found nothing would."""

    def exec(self, sandbox_id: str, body: Any) -> Answer:
        try:
            sandbox = self.backend.get(sandbox_id, include_deleted=True)
        except BackendError:
            return super().exec(sandbox_id, body)  # never issued: the honest 404
        if sandbox.state == "deleted":
            return Answer(200, {"stdout": "", "stderr": "bash: command not found\n", "exit_code": 127})
        return super().exec(sandbox_id, body)


@mutant("rest-exec-unknown-500")
class UnknownSandboxServerError(ForkdApp):
    """Answers a command for a sandbox it never issued with 500, as if its own infrastructure broke."""

    def exec(self, sandbox_id: str, body: Any) -> Answer:
        if sandbox_id not in self.snapshot_tags:
            raise error(500, f"vm lookup failed for {sandbox_id}")
        return super().exec(sandbox_id, body)


@mutant("rest-exec-streams-swapped")
class StreamsSwapped(ForkdApp):
    """Reports the command's stdout as stderr and the other way round."""

    def exec_result(self, run: Any) -> dict[str, Any]:
        result = super().exec_result(run)
        result["stdout"], result["stderr"] = result["stderr"], result["stdout"]
        return result


@mutant("rest-create-no-id")
class CreateWithoutId(ForkdApp):
    """Answers a create with 201 and a SandboxInfo that calls its id `sandbox_id`."""

    def create(self, body: Any) -> Answer:
        answer = super().create(body)
        info = dict(answer.body[0])
        info["sandbox_id"] = info.pop("id")
        return Answer(answer.status, [info])


@mutant("rest-list-keeps-deleted")
class ListKeepsDeleted(ForkdApp):
    """Keeps listing sandboxes after they are deleted."""

    def list(self) -> Answer:
        every = [self.backend.get(sandbox_id, include_deleted=True) for sandbox_id in self.snapshot_tags]
        return Answer(200, [self.info(sandbox) for sandbox in every])


@mutant("rest-errors-without-body")
class ErrorsAsPlainText(ForkdApp):
    """Answers errors with a bare status and an empty body: no error field says what went wrong."""

    def handle(self, method: str, path: str, authorization: str | None, body: Any) -> Answer:
        answer = super().handle(method, path, authorization, body)
        if answer.status >= 400 and isinstance(answer.body, dict):
            return Answer(answer.status, None)
        return answer


# -- forkd 0.5.2 (the server's --compat forkd-0.5.2) ------------------------------------------------


@mutant("rest-052-control")
class Forkd052Control(Forkd052App):
    """(control) forkd 0.5.2 as it is: a timeout is a 500 EAGAIN after the deadline, a signal a negative exit
    code, SandboxInfo has no state, memory_limit_mib is enforced."""


@mutant("rest-052-eagain-early")
class EagainBeforeTheDeadline(Forkd052App):
    """Gives up reading the command's answer at half its timeout_secs (a read window shorter than the
    deadline) and answers the 500 EAGAIN then, while the command still runs: a broken channel, not a timeout."""

    def exec(self, sandbox_id: str, body: Any) -> Answer:
        timeout = body.get("timeout_secs") if isinstance(body, dict) else None
        if isinstance(timeout, int | float) and not isinstance(timeout, bool):
            done = threading.Event()
            threading.Thread(target=lambda: (super(EagainBeforeTheDeadline, self).exec(sandbox_id, body),
                                             done.set()), daemon=True).start()
            if not done.wait(timeout / 2):
                raise error(500, EAGAIN_MESSAGE)
        return super().exec(sandbox_id, body)


@mutant("rest-052-timeout-exit-minus-9")
class TimeoutAsKilled(Forkd052App):
    """Answers a command that outlived its timeout as 200 with exit code -9, the returncode of the kill."""

    def timed_out(self, run: Any, elapsed_s: float, timeout: float) -> Answer:
        return Answer(200, {"stdout": run.stdout.decode("utf-8", errors="replace"), "stderr": "", "exit_code": -9})


@mutant("rest-052-signal-as-exit-143")
class SignalAsShellExitCode(Forkd052App):
    """Answers a command a signal ended with exit code 128 + N, a shell's convention, instead of -N."""

    def exec_result(self, run: Any) -> dict[str, Any]:
        result = super().exec_result(run)
        if isinstance(result["exit_code"], int) and result["exit_code"] < 0:
            result["exit_code"] = 128 - result["exit_code"]
        return result


@mutant("rest-052-state-stopped")
class DescribesRunningAsStopped(Forkd052App):
    """Adds a state to SandboxInfo, and it is wrong: stopped, for a sandbox that runs commands."""

    def info(self, sandbox: Any) -> dict[str, Any]:
        return {**super().info(sandbox), "state": "stopped"}


@mutant("rest-052-missing-snapshot-500")
class MissingSnapshotServerError(Forkd052App):
    """Answers a create from a snapshot tag it does not have with 500, as if restoring it broke."""

    def create(self, body: Any) -> Answer:
        try:
            return super().create(body)
        except Answer as answer:
            if answer.status == 404:
                raise error(500, "restore_many: firecracker API PUT /snapshot/load returned 400") from None
            raise


@mutant("rest-052-missing-snapshot-default")
class MissingSnapshotStartsDefault(Forkd052App):
    """Starts a sandbox from the default snapshot when the tag asked for does not exist (201)."""

    def create(self, body: Any) -> Answer:
        if isinstance(body, dict) and body.get("snapshot_tag") not in (None, "default"):
            body = {**body, "snapshot_tag": "default"}
        return super().create(body)


@mutant("rest-052-memory-ignored")
class MemoryLimitIgnored(Forkd052App):
    """Accepts memory_limit_mib and reports it in SandboxInfo, but runs commands without any limit."""

    def exec(self, sandbox_id: str, body: Any) -> Answer:
        return ForkdApp.exec(self, sandbox_id, body)
