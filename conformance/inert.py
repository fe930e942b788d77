"""Text made inert: what a provider sends (error messages, stderr, command output, ids, versions) can carry
escape sequences that would act on the terminal of whoever runs the suite (hide a FAILED line and print a
fake verdict, retitle the window, write the clipboard) and characters no report format may hold (NUL,
lone surrogates, U+FFFE). Every terminal sink and every report passes provider text through ``inert``
(after redaction: a secret is replaced before its characters are escaped).

One convention everywhere: such a character is shown as the Python escape of its code point, ``\\x1b`` below
U+0100 and ``\\u202e`` above, so ``\\x1b[2K`` reads as what it is and does nothing. Line feeds and tabs stay
(every sink lays text out by lines); CR LF becomes a line feed, and a lone CR, which would let a line
overwrite itself, is escaped. Backslashes are left alone, so ``inert`` is idempotent: a text made inert
twice (a report read back and printed) reads the same.
"""

from __future__ import annotations

import json
import re
from typing import Any

# C0 controls but TAB and LF; DEL and the C1 controls (CSI U+009B, OSC U+009D act like ESC [ and ESC ]);
# surrogates (only a lone one can be in a str; no UTF-8 encoder writes it); the two noncharacters XML forbids;
# bidirectional overrides and marks, which reorder what a line shows; Unicode's own line breaks.
_ACTIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff"
                     "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str) -> str:
    """``text`` with every character a terminal or a report parser would act on shown as its escape."""
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return _ACTIVE.sub(_escape, text)


def inert_line(text: str) -> str:
    """``text`` inert and on one line (line feeds escaped too): for what promises one line per item (an exit-2
    error, a doctor check, a FAIL reason), whose next line a provider must not write: in a CI log a line
    of its own that begins with ``::`` is a workflow command."""
    return inert(text).replace("\n", "\\x0a")


def inert_tree(value: Any) -> Any:
    """A JSON-like value (a document, a provider description) with every string in it, keys included, inert;
    ``value`` itself when nothing in it needs escaping (the common case, told at C speed: a run's document
    has hundreds of scenarios, and walking them in Python costs a tenth of a second)."""
    try:
        if not _ACTIVE_IN_JSON.search(json.dumps(value)):
            return value
    except (TypeError, ValueError):  # not JSON (a set, a circular value): walk it
        pass
    return _walk(value)


# What json.dumps (ASCII) writes for a character ``_ACTIVE`` matches: a short escape or a \u escape. A literal
# backslash before such letters matches too (``C:\\repo``): that costs a walk, never a miss. Kept in step with
# _ACTIVE by tests/test_hostile_escapes.py, which tries every code point.
_ACTIVE_IN_JSON = re.compile(r"\\(?:[bfr]|u(?:00[01][0-9a-f]|007f|00[89][0-9a-f]|d[89a-f][0-9a-f]{2}"
                             r"|fff[ef]|061c|200[ef]|202[89a-e]|206[6-9]))")


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, list | tuple):
        return [_walk(item) for item in value]
    if isinstance(value, dict):
        return {inert(key) if isinstance(key, str) else key: _walk(item) for key, item in value.items()}
    return value
