"""Broken variants of the reference REST server (``conformance.reference.rest_server``).

Started as ``python -m tests.mutants.launch rest NAME --port P --token-env ENV``; catalogued in
``catalogue/rest.yaml`` with ``transport: rest``.
"""

from __future__ import annotations

from typing import Any

from conformance.reference.host_backend import BackendError
from conformance.reference.rest_server import Answer, ForkdApp, error
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
