"""Steps for the three gaps (features/gaps/): snapshots and branches, resource sizing, ran versus infra.

A gap has more than one honest answer — do it, or refuse it clearly — and one dishonest one: accept it
and silently not do it. Each verdict step records which honest answer the provider gave
(``world.note_finding``) so the report's gap section can say it.
"""

from __future__ import annotations

import pytest
from pytest_bdd import given, parsers, then, when

from conformance.adapter import ExecOutcome, ExecRequest, SandboxHandle, SandboxRequest
from conformance.errors import ApplicationErrorAnswer

from ._shared import MARKER_FILE, Attempt, World, attempt, cleanup, expect, run_ok

BRANCH_ONLY = "conformance-written-in-branch"
SOURCE_ONLY = "conformance-written-in-source-later"
AFTER_SNAPSHOT = "conformance-written-after-the-snapshot"
PID_FILE = "conformance-fork-pid"
HIDDEN_FILE = ".conformance-hidden"
LINK = "conformance-link-to-hidden"
# A shell's conventional codes for "timed out" (coreutils timeout) and "killed" (128 + SIGKILL).
TIMEOUT_EXIT_CODES = (124, 137)
MIB = 1024 * 1024


def _present(world: World, sandbox_id: str, path: str) -> bool:
    return run_ok(world, sandbox_id, f"if [ -e {path} ]; then echo yes; else echo no; fi").strip() == b"yes"


def _names(error: ApplicationErrorAnswer, name: str) -> bool:
    """Does a refusal name ``name``: in its message, or in its detail (an id, a field's value)?"""
    detail = error.detail if isinstance(error.detail, dict) else {}
    return name in error.message or any(name == value or (isinstance(value, str) and name in value)
                                        for value in detail.values())


def _refused_as_unsupported(world: World, outcome: Attempt, capability: str, what: str) -> bool:
    """True when ``outcome`` is an honest refusal of an undeclared capability; fails on a dishonest one."""
    if outcome.error is None:
        return False
    declared = world.provider.capabilities.declares(capability)
    expect(not declared, f"{capability} is declared, but {what} failed: {outcome.error}")
    error = outcome.error
    expect(isinstance(error, ApplicationErrorAnswer) and error.kind == "unsupported",
           f"{capability} is not declared, so {what} must be refused as unsupported; it answered: {error}")
    return True


# -- GAP 1: snapshots and branches ---------------------------------------------------------------


@given("the sandbox holds a hidden file and a symbolic link to it")
def _(world: World) -> None:
    content = world.token("conformance-hidden")
    world.gaps.hidden_file_content = content
    run_ok(world, world.require_sandbox().id, f"printf '%s' '{content}' > {HIDDEN_FILE} && ln -s {HIDDEN_FILE} {LINK}")


@when("I branch the sandbox through a filesystem snapshot")
def _(world: World, request: pytest.FixtureRequest) -> None:
    source = world.require_sandbox()
    name = world.token("conformance-branch")
    world.last = attempt(lambda: world.invoke("snapshot", source.id, include_memory=False, name=name))
    if world.last.error is not None:
        return
    snapshot_id = world.last.answer.id
    cleanup(request, lambda: world.invoke("delete a snapshot", None, snapshot_id=snapshot_id))
    # written after the snapshot and before the branch: a snapshot that is a reference to the live
    # workspace, copied only when a sandbox starts from it, would hand this file to the branch
    run_ok(world, source.id, f"printf after-snapshot > {AFTER_SNAPSHOT}")
    # A host creates from the id the snapshot answered (v1 carries it in source.snapshot.name): a provider
    # that looks it up by display name alone fails here.
    branch = attempt(lambda: world.provider.create(SandboxRequest(from_snapshot=snapshot_id)))
    world.gaps.branch = branch.expect_success(f"creating a sandbox from snapshot {snapshot_id!r} (named {name!r})")


@then("the branch starts with the snapshot's files, and later writes on either side stay on that side, "
      "unless snapshots are not declared and were refused as unsupported")
def _(world: World) -> None:
    if _refused_as_unsupported(world, world.last, "lifecycle.snapshot_sandbox", "a filesystem snapshot"):
        world.note_finding("GAP-1", "refused", "filesystem snapshots are not declared and were refused as unsupported")
        return
    source, branch = world.require_sandbox(), world.require(world.gaps.branch, "branch from a filesystem snapshot")
    marker = world.require(world.common.marker_file_content, "marker file").encode()
    expect(run_ok(world, branch.id, f"cat {MARKER_FILE}") == marker,
           f"the branch {branch.id} should start with the snapshot's {MARKER_FILE}")
    run_ok(world, branch.id, f"printf branch > {BRANCH_ONLY}")
    run_ok(world, source.id, f"printf source > {SOURCE_ONLY}")
    expect(not _present(world, source.id, BRANCH_ONLY),
           f"a file written in the branch ({branch.id}) appeared in its source ({source.id}): they share state")
    expect(not _present(world, branch.id, AFTER_SNAPSHOT),
           f"a file written in the source ({source.id}) after the snapshot, before the branch was created, is in the "
           f"branch ({branch.id}): the snapshot was a reference to the live workspace, not a copy")
    expect(not _present(world, branch.id, SOURCE_ONLY),
           f"a file written in the source ({source.id}) after the snapshot appeared in the branch ({branch.id})")
    world.note_finding("GAP-1", "supported", "a branch from a filesystem snapshot kept the files and its own state")


@then("the branch keeps the hidden file, and the link as a symbolic link to it, unless the snapshot was refused")
def _(world: World) -> None:
    if world.last.error is not None:
        return  # the refusal was judged by the step before
    branch = world.require(world.gaps.branch, "branch from a filesystem snapshot")
    content = world.require(world.gaps.hidden_file_content, "hidden file").encode()
    # A filesystem snapshot captures the filesystem (v1 section 8.3: include_memory false is Filesystem mode):
    # names beginning with a dot are files like any other, and a link is a link, not a copy of its target.
    hidden = run_ok(world, branch.id, f"if [ -e {HIDDEN_FILE} ]; then cat {HIDDEN_FILE}; else printf missing; fi")
    expect(hidden == content,
           f"the branch {branch.id} should hold the snapshot's hidden file {HIDDEN_FILE} containing {content!r}; it "
           f"holds {hidden!r}" + (": files whose names begin with a dot were left out of the snapshot"
                                  if hidden == b"missing" else ""))
    link = run_ok(world, branch.id, f"if [ -L {LINK} ]; then printf 'link to %s' \"$(readlink {LINK})\"; "
                                    f"elif [ -e {LINK} ]; then printf 'not a link'; else printf missing; fi")
    expect(link == f"link to {HIDDEN_FILE}".encode(),
           f"in the branch {branch.id}, {LINK} should still be a symbolic link to {HIDDEN_FILE}, as it was when the "
           f"snapshot was taken; it is {link.decode(errors='replace')!r}"
           + (": the snapshot copied what the link pointed to instead of the link" if link == b"not a link" else ""))


@when("I fork the sandbox while a process runs in it")
def _(world: World) -> None:
    source = world.require_sandbox()
    run_ok(world, source.id, f"(sleep 300 & echo $! > {PID_FILE}) >/dev/null 2>&1; sleep 0.2; cat {PID_FILE}")
    world.last = attempt(lambda: world.invoke("fork", source.id, include_memory=True))


@then("the fork has the source's files and its running process, and keeps its own state, "
      "unless forks are not declared and were refused as unsupported")
def _(world: World) -> None:
    if _refused_as_unsupported(world, world.last, "lifecycle.fork", "a fork"):
        world.note_finding("GAP-1", "refused", "forks are not declared and were refused as unsupported")
        return
    fork = world.last.answer
    source = world.require_sandbox()
    expect(isinstance(fork, SandboxHandle) and fork.id != source.id,
           f"a fork should answer a new sandbox's handle; it answered {fork!r}")
    for who, sandbox_id in (("the source", source.id), ("the fork", fork.id)):
        state = world.provider.describe(sandbox_id).state
        expect(state == "running", f"after a fork, {who} ({sandbox_id}) should be running; it is {state!r}")
    marker = world.require(world.common.marker_file_content, "marker file").encode()
    expect(run_ok(world, fork.id, f"cat {MARKER_FILE}") == marker, f"the fork {fork.id} lost {MARKER_FILE}")
    alive = world.provider.exec(fork.id, ExecRequest(f'kill -0 "$(cat {PID_FILE})"'))
    expect(alive.outcome == "ran" and alive.exit_code == 0,
           f"the process running in the source should still run in the fork; `kill -0` gave {alive.describe()}")
    run_ok(world, fork.id, f"printf fork > {BRANCH_ONLY}")
    expect(not _present(world, source.id, BRANCH_ONLY), "a file written in the fork appeared in its source")
    world.note_finding("GAP-1", "supported", "a fork kept the files and a running process, with its own state")


@when("I create a sandbox from a snapshot that does not exist")
def _(world: World) -> None:
    missing = world.token("conformance-no-such-snapshot")
    world.gaps.missing_snapshot = missing
    world.last = attempt(lambda: world.provider.create(SandboxRequest(from_snapshot=missing)))


def _refused_as_missing(world: World, missing: str, error: Exception) -> str | None:
    """Why the refusal of a create from the missing snapshot is not the dialect's own "this does not exist"
    (its not found or invalid spec, naming the snapshot or the spec field that carries it); None when it is."""
    kinds = world.provider.missing_reference_kinds
    if not (isinstance(error, ApplicationErrorAnswer) and error.kind in kinds):
        return (f"creating a sandbox from snapshot {missing!r}, which does not exist, must be refused as "
                f"{' or '.join(sorted(kinds))} naming it; it failed otherwise: {error} — a provider failure is not "
                "an honest refusal (it may relay the missing snapshot, or something else broke)")
    # A provider that takes no snapshot sources at all refuses the spec field that carries it: honest too.
    field = (error.detail or {}).get("field")
    refused_the_source = error.kind == "invalid_spec" and field in world.provider.snapshot_spec_fields
    if not (_names(error, missing) or refused_the_source):
        return (f"the refusal of a create from snapshot {missing!r} names neither the snapshot nor the spec field "
                f"that carries it: {error}")
    return None


def _create_error(world: World) -> tuple[str, Exception]:
    missing = world.require(world.gaps.missing_snapshot, "create from a snapshot that does not exist")
    error = world.last.error
    expect(error is not None,
           f"creating a sandbox from snapshot {missing!r}, which does not exist, succeeded with sandbox "
           f"{getattr(world.last.answer, 'id', world.last.answer)!r}: the provider started it from something else")
    assert error is not None
    return missing, error


@then("the create is refused with an error, not started from something else")
def _(world: World) -> None:
    missing, error = _create_error(world)
    problem = _refused_as_missing(world, missing, error)
    if problem is None:
        world.note_finding("GAP-1", "refused", f"a create from the missing snapshot {missing!r} was refused: {error}")
    else:  # nothing was started from something else; how it said no is judged by the scenario after this one
        world.note_finding("GAP-1", "refused", f"a create from the missing snapshot {missing!r} failed, though not "
                                               f"as a missing snapshot: {error}")


@then("the refusal says the snapshot is missing: not found or invalid spec, naming it")
def _(world: World) -> None:
    missing, error = _create_error(world)
    problem = _refused_as_missing(world, missing, error)
    expect(problem is None, problem or "")
    world.note_finding("GAP-1", "refused", f"a create from the missing snapshot {missing!r} was refused as missing: "
                                           f"{error}")


# -- GAP 2: resources ----------------------------------------------------------------------------


@when(parsers.parse("I create a sandbox asking for {megabytes:d} MiB of memory"))
def _(world: World, megabytes: int) -> None:
    world.gaps.memory_mb = megabytes
    world.last = attempt(lambda: world.create_sandbox(memory_mb=megabytes))


@when(parsers.parse("I create a sandbox asking for {cores:d} CPU core"))
def _(world: World, cores: int) -> None:
    world.gaps.cpu_cores = cores
    world.last = attempt(lambda: world.create_sandbox(cpu_cores=cores))


def _refused_naming_resources(world: World) -> bool:
    """True when the create was refused as invalid_spec naming resources; fails on any other refusal."""
    error = world.last.error
    if error is None:
        return False
    expect(isinstance(error, ApplicationErrorAnswer) and error.kind == "invalid_spec"
           and str(error.detail.get("field", "")).startswith("resources"),
           f"a create asking for resources must succeed with the limit enforced, or be refused as invalid_spec "
           f"naming resources; it answered: {error}")
    return True


@then("the limit is enforced inside the sandbox, or the create was refused as invalid_spec naming resources")
def _(world: World) -> None:
    if _refused_naming_resources(world):
        world.note_finding("GAP-2", "refused", f"memory sizing refused: {world.last.error}")
        return
    limit = world.require(world.gaps.memory_mb, "create asking for memory")
    hog = 2 * limit
    # Holding twice the limit in a shell variable needs more memory than the sandbox may have.
    outcome = world.run(f'x="$(head -c {hog * MIB} /dev/zero | tr "\\0" a)"; echo "held ${{#x}} bytes"',
                        timeout_s=60.0)
    expect(not (outcome.outcome == "ran" and outcome.termination == "exited" and outcome.exit_code == 0),
           f"the sandbox accepted a {limit} MiB memory limit, then let a command hold {hog} MiB "
           f"({outcome.describe()}): the limit was silently ignored")
    world.note_finding("GAP-2", "supported", f"holding {hog} MiB under a {limit} MiB limit failed: {outcome.describe()}")


CPU_PROBE = (
    "nproc; "
    "if [ -r /sys/fs/cgroup/cpu.max ]; then cat /sys/fs/cgroup/cpu.max; "
    "elif [ -r /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then "
    "echo \"$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)\"; "
    "else echo 'max 100000'; fi"
)


def _cpu_allowance(output: bytes) -> tuple[int, float | None]:
    """(CPUs the scheduler offers, the cgroup's CPU quota in cores or None when unlimited)."""
    lines = output.decode(errors="replace").split()
    cpus = int(lines[0])
    quota, period = (lines[1], lines[2]) if len(lines) >= 3 else ("max", "100000")
    if quota in ("max", "-1"):
        return cpus, None
    return cpus, int(quota) / int(period)


@then("the CPU allowance is enforced inside the sandbox, or the create was refused as invalid_spec naming resources")
def _(world: World) -> None:
    if _refused_naming_resources(world):
        world.note_finding("GAP-2", "refused", f"CPU sizing refused: {world.last.error}")
        return
    cores = world.require(world.gaps.cpu_cores, "create asking for CPU cores")
    outcome = world.run(CPU_PROBE)
    expect(outcome.outcome == "ran" and outcome.exit_code == 0, f"the CPU probe failed: {outcome.describe()}")
    cpus, quota = _cpu_allowance(outcome.stdout)
    enforced = cpus <= cores or (quota is not None and quota <= cores + 0.01)
    expect(enforced, f"the sandbox accepted {cores} CPU core(s), yet offers {cpus} CPUs with "
                     f"{'no quota' if quota is None else f'a quota of {quota:g} cores'}: the size was silently ignored")
    world.note_finding("GAP-2", "supported", f"{cores} core(s) asked: {cpus} CPUs visible, quota {quota}")


# -- GAP 3: ran versus infra ---------------------------------------------------------------------


@then("the command is reported as ran, at stage exec where the dialect reports a stage")
def _(world: World) -> None:
    outcome = world.ran()
    raw = outcome.raw if isinstance(outcome.raw, dict) else {}
    if "outcome_kind" in world.provider.exec_reports and "outcome_kind" in raw:
        expect(raw["outcome_kind"] == "ran", f"a command that ran was reported as {raw['outcome_kind']!r}")
    if "stage" in world.provider.exec_reports and outcome.stage is not None:
        expect(outcome.stage == "exec", f"a command that ran was reported at stage {outcome.stage!r}")


@then("the command timed out, without an exit code pretending to be the program's")
def _(world: World) -> None:
    outcome = world.ran()
    expect(outcome.termination == "timed_out", f"the command outlived its timeout; got {outcome.describe()}")
    expect(outcome.exit_code not in TIMEOUT_EXIT_CODES,
           f"a timeout must not be reported as exit code {outcome.exit_code} (a shell's timeout convention): "
           f"the program never exited with it")


@when("I run a command in a sandbox id that was never issued")
def _(world: World) -> None:
    never_issued = world.token("conformance-never-issued")
    world.gaps.exec_target = "a sandbox id that was never issued"
    world.outcome = world.provider.exec(never_issued, ExecRequest("true"))


@when("I run a command in the deleted sandbox")
def _(world: World) -> None:
    world.gaps.exec_target = "a deleted sandbox"
    world.outcome = world.provider.exec(world.require_sandbox().id, ExecRequest("true"))


@then("the provider answers an error, not an exit code")
def _(world: World) -> None:
    outcome: ExecOutcome | None = world.outcome
    assert outcome is not None
    target = world.gaps.exec_target or "a sandbox that does not exist"
    expect(outcome.outcome == "infra",
           f"{target} ran a command: it could not run, so the provider must answer an error; it reported "
           f"{outcome.describe()}, which a host would read as the command's own verdict")
    world.note_finding("GAP-3", "supported", f"answered an error: {outcome.error}")

