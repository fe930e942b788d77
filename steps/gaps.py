"""Steps for the four gaps (features/gaps/): snapshots and branches, resource sizing, ran versus infra,
network policies.

A gap has more than one honest answer — do it, or refuse it clearly — and one dishonest one: accept it
and silently not do it. Each verdict step records which honest answer the provider gave
(``world.note_finding``) so the report's gap section can say it.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from pytest_bdd import given, parsers, then, when

from conformance.adapter import (
    NETWORK_FLAGS,
    ExecOutcome,
    ExecRequest,
    NetworkPolicy,
    SandboxHandle,
    SandboxRequest,
)
from conformance.errors import (
    ApplicationErrorAnswer,
    CapabilityNotDeclared,
    NotExpressible,
    ProtocolErrorAnswer,
)

from ._shared import MARKER_FILE, Attempt, World, attempt, cleanup, expect, invalid_spec_naming, run_ok

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
           f"{capability} is not declared, so {what} must be refused as unsupported; it answered: {error}",
           error, "unsupported")
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


# -- GAP 4: network policies ---------------------------------------------------------------------

# The policies a scenario names, in words. The allow-lists hold documentation ranges and names (RFC 5737,
# RFC 2606): nothing is ever sent to them.
NETWORK_POLICIES = {
    "blocked": NetworkPolicy("block"),
    "allow all": NetworkPolicy("allow_all"),
    "a CIDR allow-list": NetworkPolicy("cidr_allow_list", ("192.0.2.0/24", "198.51.100.0/24")),
    "a domain allow-list": NetworkPolicy("domain_allow_list", ("example.com", "example.org")),
    "an empty CIDR allow-list": NetworkPolicy("cidr_allow_list"),
    "an empty domain allow-list": NetworkPolicy("domain_allow_list"),
}
NETWORK_POLICY_NAMES = "|".join(NETWORK_POLICIES)
# JSON-RPC 2.0 answers for params that cannot be decoded: v1 and v2 say -32600 (the reference plugins answer it);
# a plugin built on a JSON-RPC library may answer -32602 invalid params
UNDECODABLE_PARAMS = (-32600, -32602)
IFF_UP = 0x1  # an interface's flags (/sys/class/net/<name>/flags)
RTF_UP = 0x1  # a route's flags (/proc/net/route, /proc/net/ipv6_route)
RTF_REJECT = 0x200  # an unreachable or prohibit route: it leads nowhere


def _network_probe(port: int) -> str:
    """What a sandbox shows of its network, from inside and without sending anything. Files of /proc and /sys
    only (no ``ip``: not every image has it):

    - ``dev NAME``: the interfaces /proc/net/dev lists, always those of the reader's own network namespace
      (``lo`` is in every one: a probe that sees no ``lo`` saw nothing);
    - ``sys NAME FLAGS``: the entries of /sys/class/net with their flags, which may be another namespace's
      (sysfs shows the namespace of whoever mounted it: ``unshare -n``, a sandbox given the host's /sys);
    - ``route DEVICE DESTINATION FLAGS``: the IPv4 and IPv6 routes;
    - ``socket-table``: /proc/net/tcp could be read; ``socket LINE``: its lines (and tcp6's) on ``port``."""
    return (
        'cat /proc/net/dev 2>/dev/null | while read -r line; do case "$line" in *:*) '
        'printf "dev %s\\n" "${line%%:*}";; esac; done; '
        'for d in /sys/class/net/*; do [ -e "$d" ] && printf "sys %s %s\\n" "${d##*/}" '
        '"$(cat "$d/flags" 2>/dev/null)"; done; '
        'cat /proc/net/route 2>/dev/null | while read -r dev dest gateway flags rest; do '
        'printf "route %s %s %s\\n" "$dev" "$dest" "$flags"; done; '
        'cat /proc/net/ipv6_route 2>/dev/null | while read -r dest plen src slen hop metric ref use flags dev; do '
        'printf "route %s %s/%s %s\\n" "$dev" "$dest" "$plen" "$flags"; done; '
        'head -n 1 /proc/net/tcp 2>/dev/null | grep -q local_address && echo socket-table; '
        f'cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -i ":{port:04X} " | while read -r line; do '
        'printf "socket %s\\n" "$line"; done; true'
    )


@dataclass
class NetworkView:
    """A sandbox's network as it sees it: its interfaces (those of /proc/net/dev, by name → flags, None where
    /sys could not be trusted to say), its routes that lead somewhere (up, not unreachable or prohibit, not on
    loopback: device, destination), whether one is a default route, and whether the suite's own listening
    socket is among its namespace's sockets (``sockets_seen``: whether its socket table could be read)."""

    interfaces: dict[str, int | None] = field(default_factory=dict)
    routes: list[tuple[str, str]] = field(default_factory=list)
    default_route: bool = False
    sees_the_suite: bool = False
    sockets_seen: bool = False

    @property
    def blind(self) -> bool:
        """Every network namespace has lo: a view without it is of nothing (/proc/net/dev unreadable)."""
        return "lo" not in self.interfaces

    def others(self) -> list[str]:
        return sorted(name for name in self.interfaces if name != "lo")

    def up(self) -> list[str]:
        """The interfaces besides loopback that are up (IFF_UP), or that carry a route where the flags are
        unknown or say down (a route needs an interface that works)."""
        routed = {device for device, _ in self.routes}
        return [name for name in self.others() if (self.interfaces[name] or 0) & IFF_UP or name in routed]

    def down(self) -> list[str]:
        """The others: down placeholders a kernel module adds to every namespace (tunl0, gre0, sit0, ip6tnl0 …),
        or interfaces whose flags are unknown and that carry no route."""
        up = self.up()
        return [name for name in self.others() if name not in up]

    def networked(self) -> bool:
        return bool(self.sees_the_suite or self.up() or self.routes)


def _route_destination(text: str) -> str:
    """An IPv4 route's destination as an address (the kernel writes it as little-endian hex); IPv6's as written."""
    if len(text) == 8:
        try:
            return socket.inet_ntoa(bytes.fromhex(text)[::-1])
        except ValueError:
            return text
    return text


def _hex(text: str) -> int | None:
    try:
        return int(text, 16)
    except ValueError:
        return None


def _read_view(output: bytes, port: int, inode: int) -> NetworkView:
    view = NetworkView()
    devices: list[str] = []
    sysfs: dict[str, int | None] = {}
    for line in output.decode(errors="replace").splitlines():
        kind, _, rest = line.partition(" ")
        fields = rest.split()
        if kind == "dev" and fields:
            devices.append(fields[0])
        elif kind == "sys" and fields:
            sysfs[fields[0]] = _hex(fields[1]) if len(fields) > 1 else None
        elif kind == "route" and len(fields) == 3 and fields[0] not in ("lo", "Iface"):
            flags = _hex(fields[2])
            if flags is None or not flags & RTF_UP or flags & RTF_REJECT:
                continue  # a header, a route that is not up, or one that leads nowhere
            view.routes.append((fields[0], _route_destination(fields[1])))
            if fields[1] in ("00000000", "0" * 32 + "/00"):  # 0.0.0.0 (a /0 in IPv4's table) or ::/0
                view.default_route = True
        elif kind == "socket-table":
            view.sockets_seen = True
        elif kind == "socket" and len(fields) >= 10:
            # sl local_address rem_address st ... inode: listening (0A) on our port, with our socket's inode
            local_port = fields[1].rpartition(":")[2]
            if local_port.upper() == f"{port:04X}" and fields[3] == "0A" and fields[9] == str(inode):
                view.sees_the_suite = True
    # /sys/class/net is the sandbox's own only where it lists the interfaces /proc/net/dev does; where it lists
    # others (the host's, through a sysfs mounted outside the sandbox's namespace) no flag of it is believed.
    own_sysfs = set(sysfs) == set(devices)
    view.interfaces = {name: sysfs.get(name) if own_sysfs else None for name in devices}
    return view


@contextmanager
def _suite_listener() -> Iterator[tuple[int, int]]:
    """A socket the suite listens on at 127.0.0.1 while a sandbox looks at its network: (port, inode).
    A sandbox on the network of the machine the suite runs on sees it among its sockets, whatever
    interfaces that machine has; nothing ever connects to it."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield listener.getsockname()[1], os.fstat(listener.fileno()).st_ino


def _look_at_network(world: World, sandbox_id: str) -> NetworkView:
    with _suite_listener() as (port, inode):
        output = run_ok(world, sandbox_id, _network_probe(port))
        return _read_view(output, port, inode)


def _require_interfaces(view: NetworkView) -> None:
    """Skips when the sandbox's interfaces could not be seen: there is nothing to judge."""
    if view.blind:
        pytest.skip("the sandbox's network could not be observed: /proc/net/dev is unreadable inside it (every "
                    "network namespace lists lo there)")


def _require_sockets(view: NetworkView) -> None:
    """Skips when the sandbox's sockets could not be seen: there is nothing to judge."""
    if not view.sockets_seen:
        pytest.skip("the sandbox's sockets could not be observed: /proc/net/tcp is unreadable inside it")


def _on_the_suites_network(view: NetworkView) -> str | None:
    """Says so when the sandbox shares the network of the machine the suite runs on: certain, whatever the
    provider's design, since the socket the suite listens on at 127.0.0.1 is among the sandbox's."""
    if view.sees_the_suite:
        return ("a socket the suite listens on at 127.0.0.1 is among its sockets: it runs on the network of the "
                "machine the suite runs on")
    return None


def _not_blocked(view: NetworkView) -> list[str]:
    """How a sandbox that should have no network but loopback shows that it has one (interfaces that are down
    are no network: they are named as information only, by ``_down_note``)."""
    problems = []
    shared = _on_the_suites_network(view)
    if shared:
        problems.append(shared)
    if view.up():
        problems.append(f"it has network interfaces up besides loopback ({', '.join(view.up())})")
    if view.routes:
        problems.append("it has routes (" + ", ".join(f"{dest} via {dev}" for dev, dest in view.routes[:4]) + ")")
    return problems


def _down_note(view: NetworkView) -> str:
    down = view.down()
    return f" (interfaces that are down, or unknown and without a route: {', '.join(down)})" if down else ""


def _create_with_network(world: World, policy: NetworkPolicy, unchecked: bool = False) -> None:
    world.gaps.network = policy
    world.last = attempt(lambda: _create_asking(world, policy, unchecked))


def _create_asking(world: World, policy: NetworkPolicy, unchecked: bool = False) -> SandboxHandle:
    """A sandbox created asking for ``policy``; where the dialect cannot ask, records that the provider declares
    network policies it gives no way to ask for (then skips, as the dialect cannot express it)."""
    # never drawn from the run's seed: a run replayed against a durable provider must not see another's probe
    probe = {"sandbox-conformance.network-probe": f"conformance-network-{secrets.token_hex(8)}"}
    try:
        try:
            world.gaps.network_probe = probe
            return world.create_sandbox(network=policy, unchecked=unchecked, labels=probe)
        except NotExpressible:
            # without the label: where a dialect cannot ask for a network policy, that is what it says
            world.gaps.network_probe = None
            return world.create_sandbox(network=policy, unchecked=unchecked)
    except NotExpressible as gap:
        declared = [flag for flag in NETWORK_FLAGS if world.provider.capabilities.declares(flag)]
        if declared:  # it says it offers network policies its dialect gives no way to ask for
            world.note_finding("GAP-4", "declared but not expressible",
                               f"{gap}; its capabilities declare {', '.join(declared)}")
        raise


def _leftovers(world: World) -> list[str]:
    """The sandboxes a refused create left behind: listed with the label only that create carried (checked here
    too: a provider may ignore the filter), neither deleting nor deleted. Each is recorded, so it is deleted with
    the scenario's own. Empty where the dialect cannot list by label: there is nothing to see."""
    probe = world.gaps.network_probe
    if probe is None:
        return []
    try:
        listed = world.provider.list(probe)
    except NotExpressible:
        return []
    left = [status.id for status in listed if all(status.labels.get(k) == v for k, v in probe.items())
            and status.state not in ("deleting", "deleted")]
    for sandbox_id in left:
        world.provider.ledger.record_created(sandbox_id, world.provider.owner)
    return left


def _expect_nothing_left(left: list[str], what: str) -> None:
    expect(not left, f"{what} was refused, yet it left sandbox(es) {left} behind: a refused create must have no "
                     "effect (a spec is checked before anything is made)")


def _asked_network(world: World) -> NetworkPolicy:
    return world.require(world.gaps.network, "create or change asking for a network policy")


def _refused_naming_network(world: World, what: str) -> bool:
    """True when ``what`` was refused as invalid_spec naming network, by a provider that does not declare the
    policy's flag; fails on any other refusal, and on a refusal of a declared policy."""
    error = world.last.error
    if error is None:
        return False
    policy = _asked_network(world)
    flag = policy.capability
    expect(not (flag and world.provider.capabilities.declares(flag)),
           f"the provider declares {flag}, yet {what} failed: {error}")
    left = _leftovers(world)  # first: whatever the verdict, what a refusal left behind is deleted
    expect(invalid_spec_naming(error, "network"),
           f"{what} must be honoured, or refused as invalid_spec naming network; it answered: {error}")
    _expect_nothing_left(left, what)
    return True


def _status_agrees(world: World, sandbox_id: str, what: str, open_seen: bool = False) -> str:
    """Fails when the sandbox's status reports a network policy other than the one asked; says what it reports.
    ``provider_default`` is schema-legal, and no contradiction for an allow-all sandbox whose network was seen
    open (an interface up, a default route): the provider's default may be just that. For any other policy it
    is: a blocked sandbox or an allow-list that the status calls the default was not applied as asked."""
    policy = _asked_network(world)
    reported = world.provider.describe(sandbox_id).network
    if reported is None:
        return "its status reports no network policy"
    if reported.kind == "provider_default" and policy.kind == "allow_all" and open_seen:
        return "its status reports provider_default, which the open network seen inside agrees with"
    expect(reported.kind == policy.kind and set(reported.allowed) == set(policy.allowed),
           f"{what} was accepted, but the sandbox's status reports the network policy {reported.describe()}, "
           f"not {policy.describe()}")
    return f"its status reports {reported.describe()}"


@when(parsers.re(rf"I create a sandbox whose network policy is (?P<policy>{NETWORK_POLICY_NAMES})$"))
def _(world: World, policy: str) -> None:
    _create_with_network(world, NETWORK_POLICIES[policy])


@when("I create a sandbox whose network policy is the provider's default, named explicitly")
def _(world: World) -> None:
    # a host may write a spec in full, every field at its default: the default policy means no policy asked
    _create_with_network(world, NetworkPolicy("provider_default"))


@then("the sandbox is created, as it is when no network policy is named")
def _(world: World) -> None:
    world.last.expect_success("a create naming the network policy provider_default (the spec's own default)")


@when('I create a sandbox whose network policy is "block_all", the capability\'s name, which is no policy')
def _(world: World) -> None:
    # the capability flag is block_all, the policy block: a provider that reads an unknown name as its
    # default runs with a network the host asked it to block
    _create_with_network(world, NetworkPolicy("block_all"), unchecked=True)


@then("the create is refused as invalid_spec naming network, or as params that cannot be decoded")
def _(world: World) -> None:
    error = world.last.error
    expect(error is not None, "a create naming the network policy 'block_all', which the protocol does not define "
                              "(the policy is 'block'), was accepted: an undefined policy must be refused, never "
                              "read as another one")
    named = invalid_spec_naming(error, "network")
    # a plugin that decodes the spec with upstream's types fails the request's params first
    decoded = isinstance(error, ProtocolErrorAnswer) and error.code in UNDECODABLE_PARAMS
    left = _leftovers(world)
    expect(named or decoded, f"a network policy the protocol does not define must be refused as invalid_spec naming "
                             f"network, or as params that cannot be decoded ({' or '.join(map(str, UNDECODABLE_PARAMS))}); "
                             f"it answered: {error}")
    _expect_nothing_left(left, "a create naming the undefined network policy 'block_all'")
    world.note_finding("GAP-4", "refused", f"an undefined network policy was refused: {error}")


@when(parsers.re(rf"I create a sandbox whose network policy is (?P<policy>{NETWORK_POLICY_NAMES}), which the "
                 r"provider declares$"))
def _(world: World, policy: str) -> None:
    asked = NETWORK_POLICIES[policy]
    if asked.capability and not world.provider.capabilities.declares(asked.capability):
        raise CapabilityNotDeclared(asked.capability)
    _create_with_network(world, asked)


def _block_refused(world: World, what: str) -> bool:
    """True when a create asking for a blocked network was refused as invalid_spec naming network (recorded);
    fails on any other refusal."""
    if _refused_naming_network(world, what):
        world.note_finding("GAP-4", "refused", f"a blocked network was refused: {world.last.error}")
        return True
    return False


def _expect_apart_from_the_suite(world: World, what: str, ignored: str) -> str:
    """Fails when the sandbox shares the suite's network namespace (``ignored`` says what was not done);
    returns what its status reports."""
    sandbox_id = world.require_sandbox().id
    view = _look_at_network(world, sandbox_id)
    _require_sockets(view)
    shared = _on_the_suites_network(view)
    expect(shared is None, f"{what} was accepted, but inside the sandbox {shared}: {ignored}")
    return _status_agrees(world, sandbox_id, what)


def _expect_nothing_up(world: World, what: str, ignored: str) -> str:
    """Fails when anything but loopback is up or routed in the sandbox (``ignored`` says what was not done);
    returns the down interfaces' note and what its status reports."""
    sandbox_id = world.require_sandbox().id
    view = _look_at_network(world, sandbox_id)
    _require_interfaces(view)
    problems = _not_blocked(view)
    expect(not problems, f"{what} was accepted, but inside the sandbox {'; '.join(problems)}{_down_note(view)}: "
                         f"{ignored}")
    return f"{_down_note(view)}, and {_status_agrees(world, sandbox_id, what)}"


@then("the sandbox does not share the network of the machine the suite runs on, or the create was refused as "
      "invalid_spec naming network")
def _(world: World) -> None:
    what = "a create asking for a blocked network"
    if _block_refused(world, what):
        return
    reported = _expect_apart_from_the_suite(world, what, "the policy was silently ignored")
    world.note_finding("GAP-4", "supported", f"a blocked sandbox does not share the suite's network, and {reported}")


@then("the sandbox has nothing up but loopback and no route, or the create was refused as invalid_spec naming "
      "network")
def _(world: World) -> None:
    what = "a create asking for a blocked network"
    if _block_refused(world, what):
        return
    observed = _expect_nothing_up(world, what, "the policy was silently ignored")
    world.note_finding("GAP-4", "supported", f"a blocked sandbox has nothing up but loopback and no route{observed}")


@then("the sandbox has an interface besides loopback that is up, and a default route")
def _(world: World) -> None:
    world.last.expect_success("a create asking for an allow-all network (the provider declares network.allow_all)")
    sandbox_id = world.require_sandbox().id
    view = _look_at_network(world, sandbox_id)
    _require_interfaces(view)
    expect(view.up() and view.default_route,
           f"a create asking for an allow-all network was accepted, but inside the sandbox "
           f"{'no interface besides loopback is up' if not view.up() else 'there is no default route'} "
           f"(interfaces: {', '.join(sorted(view.interfaces))}): it has no usable network")
    reported = _status_agrees(world, sandbox_id, "a create asking for an allow-all network", open_seen=True)
    world.note_finding("GAP-4", "supported", f"an allow-all sandbox has {', '.join(view.up())} up and a default "
                                             f"route, and {reported}")


@then(parsers.re(r"the create is accepted if the provider declares (?P<flag>network\.[a-z_]+), and refused as "
                 r"invalid_spec naming network if not$"))
def _(world: World, flag: str) -> None:
    policy = _asked_network(world)
    if policy.capability != flag:
        raise AssertionError(f"the feature pairs the policy {policy.kind} with {flag}, not {policy.capability}")
    what = f"a create asking for the network policy {policy.describe()}"
    if world.provider.capabilities.declares(flag):
        world.last.expect_success(f"{what} (the provider declares {flag})")
        world.note_finding("GAP-4", "supported", f"{policy.kind} accepted, as {flag} declares")
        return
    expect(world.last.error is not None,
           f"the provider declares {flag} false, yet {what} was accepted: a policy it does not offer must be "
           "refused as invalid_spec naming network, never run some other way")
    _refused_naming_network(world, what)
    world.note_finding("GAP-4", "refused", f"{policy.kind} is not declared and was refused: {world.last.error}")


@then("the create is refused as invalid_spec naming network, whatever the provider declares")
def _(world: World) -> None:
    policy = _asked_network(world)
    error = world.last.error
    expect(invalid_spec_naming(error, "network"),
           f"a create asking for an empty {policy.kind} must be refused as invalid_spec naming network (an empty "
           f"allow-list allows nothing it could name); "
           + (f"it answered: {error}" if error is not None else
              f"it was accepted, as sandbox {getattr(world.last.answer, 'id', world.last.answer)!r}"))
    world.note_finding("GAP-4", "refused", f"an empty {policy.kind} was refused: {error}")


@then("the sandbox is created, and its status reports that allow-list if it reports a network policy")
def _(world: World) -> None:
    policy = _asked_network(world)
    what = f"a create asking for the network policy {policy.describe()}"
    world.last.expect_success(f"{what} (the provider declares {policy.capability})")
    reported = _status_agrees(world, world.require_sandbox().id, what)
    # Which addresses it lets through cannot be seen without sending traffic: the status is what there is.
    world.note_finding("GAP-4", "supported", f"{policy.kind} accepted, and {reported}")


@given("a sandbox on an allow-all network where the provider declares one, else on its default network")
def _(world: World) -> None:
    """A sandbox whose network a block can take away: so that a change that changes nothing shows."""
    if world.provider.capabilities.declares("network.allow_all"):
        _create_asking(world, NETWORK_POLICIES["allow all"])
    else:
        world.create_sandbox()


@when("I block the running sandbox's network")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    before = _look_at_network(world, sandbox_id)  # what a change that changes nothing would leave
    world.gaps.networked_before = None if before.blind else before.networked()
    world.gaps.shared_suite_before = before.sees_the_suite if before.sockets_seen else None
    policy = world.gaps.network = NETWORK_POLICIES["blocked"]
    world.gaps.network_probe = None  # a refused change is no refused create: the sandbox stays, rightly
    world.last = attempt(lambda: world.invoke("update network", sandbox_id, network=policy))


def _change_refused(world: World, what: str) -> bool:
    """True when blocking a running sandbox's network was refused honestly (recorded): as unsupported where
    lifecycle.update_network is not declared, as invalid_spec naming network where network.block_all is not;
    fails on any other refusal."""
    caps = world.provider.capabilities
    if world.last.error is not None and caps.declares("lifecycle.update_network"):
        _refused_naming_network(world, what)
        world.note_finding("GAP-4", "refused", f"network.block_all is not declared, and {what} was refused: "
                                               f"{world.last.error}")
        return True
    if _refused_as_unsupported(world, world.last, "lifecycle.update_network", what):
        world.note_finding("GAP-4", "refused", f"lifecycle.update_network is not declared, and {what} was refused "
                                               f"as unsupported")
        return True
    return False


@then("the sandbox does not share the network of the machine the suite runs on, or the change was refused: as "
      "unsupported where lifecycle.update_network is not declared, as invalid_spec naming network where "
      "network.block_all is not")
def _(world: World) -> None:
    what = "blocking a running sandbox's network"
    if _change_refused(world, what):
        return
    reported = _expect_apart_from_the_suite(world, what, "the change was silently not made")
    before = ("it shared it before the change" if world.gaps.shared_suite_before else
              "it did not share it before the change either")
    world.note_finding("GAP-4", "supported", f"once blocked, the running sandbox does not share the suite's network "
                                             f"({before}), and {reported}")


@then("the sandbox has nothing up but loopback and no route, or the change was refused: as unsupported where "
      "lifecycle.update_network is not declared, as invalid_spec naming network where network.block_all is not")
def _(world: World) -> None:
    what = "blocking a running sandbox's network"
    if _change_refused(world, what):
        return
    if world.gaps.networked_before is False:
        pytest.skip("the sandbox had no network before the change (nothing up but loopback, no route): a change "
                    "that changes nothing could not be told from one that blocks")
    observed = _expect_nothing_up(world, what, "the change was silently not made")
    world.note_finding("GAP-4", "supported", f"once blocked, the running sandbox has nothing up but loopback and no "
                                             f"route{observed}")
