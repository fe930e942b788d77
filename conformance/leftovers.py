"""Processes a run left behind, found by the mark every process it starts carries in its environment.

Each plugin process gets ``SANDBOX_CONFORMANCE_RUN=<run id>#<token>`` (the token tells apart runs that share
a run id, such as two shards of one CI job on one machine), and so do xdist workers. A process the plugin
starts inherits it, however it detaches: ``setsid``, a double fork, a daemon that closed its stdio. Killing
the plugin's process group cannot reach those; this scan can. At the end of a run nothing carrying the mark
should still run: what does is reported (pid and command line) and ended. The suite started these processes
(they carry its own mark), so ending them is its job, as a service manager ends a unit's strays; a process
that empties its environment (``env -i``) is out of reach, and so is any process where there is no
``/proc`` (the check is Linux-only and says so when it could not run).
"""

from __future__ import annotations

import os
import select
import signal
import time
from dataclasses import dataclass

MARK_VARIABLE = "SANDBOX_CONFORMANCE_RUN"
COMMAND_CHARS = 200  # a command line is cut to this many characters in reports
# A marked process that is already on its way out (SIGKILLed with its plugin's group a moment ago) is given
# this long to go before it counts as left behind; only a process still running afterwards is reported.
SETTLE_S = 0.5
TERM_GRACE_S = 1.0  # after SIGTERM, before SIGKILL
KILL_WAIT_S = 2.0
ROUNDS = 3  # a leftover may start another as it is ended (a supervisor): scan again, this many times at most


def mark_value(run_id: str, token: str) -> str:
    return f"{run_id}#{token}"


def mark_entry(run_id: str, token: str) -> tuple[str, str]:
    """The (name, value) pair a process of the run carries in its environment."""
    return MARK_VARIABLE, mark_value(run_id, token)


@dataclass(frozen=True)
class Leftover:
    pid: int
    command: str  # printable, cut to COMMAND_CHARS
    fate: str  # "ended by SIGTERM", "killed with SIGKILL", or "could not be ended: ..."

    def as_dict(self) -> dict[str, object]:
        return {"pid": self.pid, "command": self.command, "fate": self.fate}

    def __str__(self) -> str:
        return f"pid {self.pid}: {self.command} ({self.fate})"


def supported() -> bool:
    """Whether this system has what the check reads (Linux's /proc, pidfds)."""
    return os.path.exists("/proc/self/environ") and hasattr(os, "pidfd_open") \
        and hasattr(signal, "pidfd_send_signal")


def end_marked(run_id: str, token: str, exclude: tuple[int, ...] = ()) -> list[Leftover]:
    """Find every process carrying the run's mark (other than this one and ``exclude``), give each
    ``SETTLE_S`` to exit on its own, then end what is still running: SIGTERM to all, then SIGKILL to those
    that ignored it. Returns what was still running, and its fate. Call ``supported()`` first."""
    needle = f"{MARK_VARIABLE}={mark_value(run_id, token)}".encode()
    skip = {os.getpid(), *exclude}
    found: list[Leftover] = []
    for _ in range(ROUNDS):
        marked = _marked(needle, skip)
        if not marked:
            break
        try:
            found += _end(_wait_exits(marked, SETTLE_S))
        finally:
            for _pid, pidfd, _command in marked:
                os.close(pidfd)
        skip |= {pid for pid, _pidfd, _command in marked}
    return found


def _marked(needle: bytes, skip: set[int]) -> list[tuple[int, int, str]]:
    """(pid, pidfd, command line) of each live process whose environment holds ``needle``. The pidfd is
    opened before the environment is read again, so a pid reused meanwhile is never signalled."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        pid = int(entry.name)
        if not _carries(pid, needle):
            continue
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue  # gone
        if not _carries(pid, needle):  # the pid now names another process
            os.close(pidfd)
            continue
        found.append((pid, pidfd, _command_line(pid)))
    return found


def _carries(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return needle in handle.read().split(b"\0")  # a zombie's reads empty
    except OSError:  # gone, or another user's
        return False


def _wait_exits(marked: list[tuple[int, int, str]], timeout_s: float) -> list[tuple[int, int, str]]:
    """Those of ``marked`` still running after up to ``timeout_s`` (woken as each exits, by its pidfd)."""
    pending = {pidfd: item for item in marked for pidfd in (item[1],)}
    deadline = time.monotonic() + timeout_s
    poller = select.poll()
    for pidfd in pending:
        poller.register(pidfd, select.POLLIN)
    while pending:
        left_ms = (deadline - time.monotonic()) * 1000
        if left_ms <= 0:
            break
        for pidfd, _event in poller.poll(left_ms):
            poller.unregister(pidfd)
            pending.pop(pidfd, None)
    return list(pending.values())


def _end(running: list[tuple[int, int, str]]) -> list[Leftover]:
    """SIGTERM to every one, SIGKILL to those still running ``TERM_GRACE_S`` later: all at once, so a
    hundred leftovers that ignore SIGTERM cost one grace, not a hundred."""
    everyone = list(running)
    fates: dict[int, str] = {}
    for sig, wait_s, fate in ((signal.SIGTERM, TERM_GRACE_S, "ended by SIGTERM"),
                              (signal.SIGKILL, KILL_WAIT_S, "killed with SIGKILL")):
        signalled = []
        for item in running:
            pid, pidfd, _command = item
            try:
                signal.pidfd_send_signal(pidfd, sig)
            except ProcessLookupError:
                fates[pid] = "exited before it was signalled"
                continue
            except OSError as exc:
                fates[pid] = f"could not be ended: {exc.strerror or exc}"
                continue
            signalled.append(item)
        running = _wait_exits(signalled, wait_s)
        still = {pid for pid, _pidfd, _command in running}
        fates.update({pid: fate for pid, _pidfd, _command in signalled if pid not in still})
    fates.update({pid: f"could not be ended: still running {KILL_WAIT_S:g}s after SIGKILL"
                  for pid, _pidfd, _command in running})
    return [Leftover(pid, command, fates[pid]) for pid, _pidfd, command in everyone]


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read(COMMAND_CHARS * 4)
    except OSError:
        return "(gone)"
    text = " ".join(part.decode(errors="replace") for part in raw.rstrip(b"\0").split(b"\0")) or "(no command line)"
    return printable(text, COMMAND_CHARS)


def printable(text: str, limit: int) -> str:
    """``text`` with every control or unprintable character escaped (a command line is the plugin's to choose:
    it must not move the user's cursor or recolour their terminal), cut to ``limit`` characters."""
    shown = "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
    return shown if len(shown) <= limit else shown[:limit - 1] + "…"
