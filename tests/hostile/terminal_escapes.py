"""A plugin that turns its texts against the terminal and the reports of whoever runs it: escape sequences
(a window title, cursor-up + erase line followed by a fake verdict, an OSC 52 clipboard write), ANSI
colour, NUL, C1 controls, U+FFFE/U+FFFF, lone surrogates and bytes that are not UTF-8, in its error
messages, its stderr and its commands' output.

    python tests/hostile/terminal_escapes.py [--refuse-handshake] [--dialect ...]   (and the reference plugin's)

In process: ``ProviderConfig(in_process=("tests.hostile.terminal_escapes:serve", ...))``. What it does
depends on the command of an ``exec/run``, so a test picks the vector by the scenario:

    ``exit 1``              an error answer whose message carries every planted sequence (JSON escapes,
                            lone surrogates included)
    ``exit 42``             a line that is no JSON, of raw escape sequences, then an answer that is not UTF-8
    ``printf 'to stdout'``  a result whose stdout and stderr are the planted bytes
and every ``exec/run`` logs the planted sequences and an ANSI-coloured line on the plugin's stderr. With
``--refuse-handshake`` it answers ``initialize`` with an error whose message carries them (a run ends with
exit 2 and one line quoting it; ``doctor`` shows it in its verdict line).
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # a plugin gets a scrubbed environment

from conformance.reference.host_plugin import HostPlugin, application_error
from conformance.reference.host_plugin import serve as serve_host

# What a hostile plugin plants: each must never reach a terminal raw, nor break a report.
TITLE = "\x1b]0;PWNED\x07"
HIDE_LINE = "\x1b[1A\x1b[2K"
FAKE_VERDICT = "verdict: PASS"
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4K\x07"
COLOUR = "\x1b[31mERROR\x1b[0m"
PLANTED = (TITLE, HIDE_LINE, CLIPBOARD, COLOUR)
ATTACK = f"{TITLE}{HIDE_LINE}{FAKE_VERDICT} {CLIPBOARD}{COLOUR} nul\x00 bel\x07 csi\x9b2J del\x7f cr\roverwritten"
# A line of its own in a CI log that GitHub Actions would take for a command, after a line feed.
WORKFLOW_COMMAND = "::warning::planted by the plugin"
# Only JSON can carry these to the suite as text: a lone surrogate and the two noncharacters XML refuses.
JSON_ONLY = "\ud800 \udc80 \ufffe \uffff"
# Only raw bytes can carry these: not UTF-8, an ESC outside any JSON escape.
RAW_BYTES = b"\xff\xfe\xc3(\x1b[2K\x1b]0;PWNED\x07"
NOT_UTF8 = b"\xff\xfe\xc3("


class TerminalEscapes(HostPlugin):
    def handle_line(self, raw: bytes) -> bool:
        try:
            message = json.loads(raw)
        except ValueError:
            message = None
        if not (isinstance(message, dict) and message.get("method") == "exec/run"):
            return super().handle_line(raw)
        self._log_planted()
        command = ((message.get("params") or {}).get("spec") or {}).get("command") or ""
        request_id = message["id"]
        if command.strip() == "exit 1":
            self.write_message({"jsonrpc": "2.0", "id": request_id,
                                "error": {"code": -32000, "message": f"{ATTACK} {JSON_ONLY}",
                                          "data": {"report": {"kind": "internal", "message": ATTACK}}}})
            return True
        if command.strip() == "exit 42":
            line = (ATTACK.encode("utf-8") + RAW_BYTES + b"\n"
                    + b'{"jsonrpc":"2.0","id":%d,"result":{"note":"' % request_id + NOT_UTF8 + b'"}}\n')
            with self._write_lock:
                self.stdout.write(line)
                self.stdout.flush()
            return True
        if "to stdout" in command:
            planted = ATTACK.encode("utf-8") + RAW_BYTES
            self.respond(request_id, {"stdout_b64": _b64(planted), "stderr_b64": _b64(planted), "exit_code": 0,
                                      "signal": None, "termination": "exited", "duration_ms": 1})
            return True
        return super().handle_line(raw)

    def _log_planted(self) -> None:
        """An ordinary coloured log line, then the attack; as bytes (not UTF-8 included) where stderr is a
        real file, as text where the plugin is served in process."""
        text = f"{COLOUR} exec/run received\n{ATTACK}\n"
        binary = getattr(self.stderr, "buffer", None)
        try:
            if binary is not None:
                binary.write(text.encode("utf-8") + RAW_BYTES + b"\n")
                binary.flush()
            else:
                self.stderr.write(text)
                self.stderr.flush()
        except (OSError, ValueError):
            pass


class RefusingHandshake(TerminalEscapes):
    def m_initialize(self, params: dict[str, Any]) -> Any:
        self._log_planted()
        raise application_error("internal", f"{ATTACK} {JSON_ONLY}\n{WORKFLOW_COMMAND}")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def serve(argv: list[str], stdin: Any, stdout: Any, stderr: Any, environ: Any, exit_now: Any = None) -> int:
    refuse = "--refuse-handshake" in argv
    argv = [arg for arg in argv if arg != "--refuse-handshake"]
    return serve_host(argv, stdin, stdout, stderr, environ, exit_now=exit_now,
                      plugin_class=RefusingHandshake if refuse else TerminalEscapes)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr, os.environ))
