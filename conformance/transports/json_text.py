"""JSON the suite reads from a peer, with the two ways Python's parser fails on well-formed input named:
nesting deeper than it recurses (``RecursionError``, which would kill a reader thread) and an integer longer
than ``sys.get_int_max_str_digits()`` (a bare ``ValueError``, which looked like the end of the stream).
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

# Lines at least this long are searched for an over-long integer before they are parsed: parsing one costs
# the line decoded to text plus the number's own copy (three times the line in all, where it is alone on it),
# for an answer that is refused anyway. Shorter lines are parsed straight away (the copies cost little).
LONG_INT_SEARCH_FROM = 64 * 1024


# Parsed, but too deep for a check that walks it (a schema's validator recurses further than the parser).
TOO_DEEP_TO_CHECK = "is nested too deeply for the suite to check it"


class UnreadableJson(ValueError):
    """Well-formed JSON, as far as the suite can tell, that it cannot read (the message says why)."""


def loads(data: bytes | bytearray | str) -> Any:
    """``json.loads``, raising ``UnreadableJson`` where the parser fails on nesting depth or integer length
    (``json.JSONDecodeError`` and ``UnicodeDecodeError`` pass as they are)."""
    if not isinstance(data, str) and len(data) >= LONG_INT_SEARCH_FROM:
        digits = _long_integer(data)
        if digits is not None:
            raise UnreadableJson(_too_long(digits))
    try:
        return json.loads(data)
    except RecursionError:
        raise UnreadableJson(too_deep()) from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except ValueError as exc:  # the only other ValueError of json.loads: an integer past the digit limit
        found = re.search(r"value has (\d+) digits", str(exc))
        raise UnreadableJson(_too_long(int(found.group(1)) if found else None)) from None


def too_deep() -> str:
    return (f"is nested too deeply to read (arrays and objects more than about {sys.getrecursionlimit()} "
            f"levels deep)")


def _too_long(digits: int | None) -> str:
    size = f"of {digits} digits" if digits is not None else "too long"
    return f"carries an integer {size}, over the {sys.get_int_max_str_digits()} digits the suite reads"


def _long_integer(data: bytes | bytearray) -> int | None:
    """The length of an integer literal in ``data`` longer than the digit limit, found without copying it;
    None when there is none, or when the line has backslashes before it (whether it sits inside a string
    is then the parser's to tell: it is parsed and fails as usual)."""
    limit = sys.get_int_max_str_digits()
    if not limit:
        return None
    # Any run of more than ``limit`` digits covers a multiple of ``limit``: only the digits found there are
    # looked at (a regex over the whole line took seconds on an 85 MiB legal answer).
    searched_to = 0
    for sample in _DIGIT.finditer(data[::limit]):
        at = sample.start() * limit
        if at < searched_to:
            continue
        end = _DIGITS.match(data, at).end()
        start = at - _DIGITS.match(data[max(0, at - limit):at][::-1]).end()  # back to the run's first digit
        searched_to = end
        if end - start <= limit:
            continue
        if data.find(b"\\", 0, start) >= 0:
            return None
        if data.count(b'"', 0, start) % 2:  # inside a string: text, not a number
            continue
        before, after = data[start - 1:start] if start else b"", data[end:end + 1]
        if before in (b".", b"e", b"E", b"+") or (before == b"-" and data[start - 2:start - 1] in (b"e", b"E")) \
                or after in (b".", b"e", b"E"):
            continue  # a fraction or an exponent: a float, which has no digit limit
        return end - start
    return None


_DIGIT = re.compile(rb"[0-9]")
_DIGITS = re.compile(rb"[0-9]*")
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]]')
_ID_VALUE = re.compile(rb"\s*:\s*(\d{1,19})(?![0-9.eE])")


def top_level_id(data: bytes | bytearray, max_bytes: int = 1024 * 1024) -> int | None:
    """The integer ``id`` member of the object a line holds, found by tracking nesting alone (for a line the
    parser could not read) within its first ``max_bytes``, or None."""
    depth = 0
    for token in _TOKEN.finditer(data, 0, max_bytes):
        text = token.group()
        if text in (b"{", b"["):
            depth += 1
        elif text in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and text == b'"id"':
            value = _ID_VALUE.match(data, token.end())
            if value:  # else the string was a value, not the member's name
                return int(value.group(1))
    return None
