"""Folding a neutral ``ExecRequest`` (Bash source, a working directory, an environment) into the
argument vector that dialects without a Bash-source exec ask for (the fabro sketch, REST profiles).

One helper so every such dialect folds the same way: the working directory becomes a ``cd`` that
fails with exit code 125 (what ``env`` and ``chroot`` use for "could not even start") before the
script, and the environment becomes ``env NAME=VALUE`` in front of ``bash -c``. What cannot be
folded into an argv at all (stdin, output sanitization) is not expressible.
"""

from __future__ import annotations

import shlex

from conformance.adapter import ExecRequest
from conformance.errors import NotExpressible

CD_FAILED_EXIT_CODE = 125


def bash_argv(request: ExecRequest, dialect: str, *, fold_working_dir: bool = True,
              fold_env: bool = True) -> list[str]:
    """``request`` as ``[env NAME=VALUE ...] bash -c SCRIPT``.

    With ``fold_working_dir`` or ``fold_env`` false the caller sends that part in a field of its own
    and it is left out of the argv.
    """
    if request.argv is not None:
        raise NotExpressible(dialect, "an argument vector run without a shell")
    if request.stop_grace_s is not None:
        raise NotExpressible(dialect, "a stop grace for the provider's own stops")
    if request.minimal_spec:
        raise NotExpressible(dialect, "a command request giving only the command and its environment")
    if request.undefined_fields:
        raise NotExpressible(dialect, "a command request carrying fields the protocol does not define")
    if request.stdin is not None:
        raise NotExpressible(dialect, "a command with stdin")
    if request.sanitization is not None:
        raise NotExpressible(dialect, "output sanitization")
    script = request.command
    if fold_working_dir and request.working_dir is not None:
        script = f"cd -- {shlex.quote(request.working_dir)} || exit {CD_FAILED_EXIT_CODE}\n{script}"
    argv = ["bash", "-c", script]
    if fold_env and request.env:
        argv = ["env", *(f"{name}={value}" for name, value in request.env.items()), *argv]
    return argv


def shell_string(argv: list[str]) -> str:
    """An argv as one POSIX shell command line, for providers that take a command string."""
    return shlex.join(argv)
