"""The checked conversions of what a user types or hands the suite: numbers, run ids, environment variable
names, and JSON or text files. Each refuses bad input with a one-line ``UsageError`` naming the flag and the
problem, so no conversion deep inside Python (an integer of 5000 digits, a timeout past what a clock can
hold, JSON nested 100,000 levels deep, bytes that are not UTF-8) ends the CLI with a traceback."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from conformance.errors import UsageError

# A longer timeout than this is no deadline a person means (and past ~3e8 s, time arithmetic overflows).
MAX_TIMEOUT_S = 7 * 24 * 3600.0
MAX_TIMEOUT_TEXT = "604800 (a week)"
# Digits of a whole number typed anywhere: far beyond any count the suite takes, and far below Python's
# int-from-text limit (4300 digits), past which int() raises a ValueError of its own.
MAX_DIGITS = 30
# Run ids become label values: Kubernetes' rule (which also fits Docker's labels, file names and URL queries):
# at most 63 of [A-Za-z0-9._-], starting and ending with a letter or digit.
RUN_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
MAX_RUN_ID = 63
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# User-given JSON: a creation spec is a few fields; a results.json is six levels deep and some MB.
MAX_JSON_DEPTH = 100
MAX_YAML_BYTES = 16 * 1024**2  # a baseline lists known failures, one line or two each
MAX_RESULTS_BYTES = 1024**3  # a results.json (report merge, sweep --from-results): a full run's is under 1 MB


def whole_number(text: str, flag: str, minimum: int, maximum: int | None = None) -> int:
    """``text`` as a whole number in [minimum, maximum]; ``UsageError`` naming ``flag`` (when not empty)
    otherwise."""
    where = f"{flag}: " if flag else ""
    stripped = text.strip()
    digits = stripped.removeprefix("-").removeprefix("+")
    if not (digits.isascii() and digits.isdigit()):
        raise UsageError(f"{where}not a whole number: {shown(text)}")
    if len(digits) > MAX_DIGITS:
        raise UsageError(f"{where}a number of {len(digits)} digits is out of range ({_range(minimum, maximum)})")
    number = int(stripped)
    if number < minimum or (maximum is not None and number > maximum):
        raise UsageError(f"{where}{_range(minimum, maximum)}, not {number}")
    return number


def _range(minimum: int, maximum: int | None) -> str:
    return f"must be at least {minimum}" if maximum is None else f"must be from {minimum} to {maximum}"


def seconds(value: Any, flag: str) -> float:
    """A timeout: a finite number of seconds above 0 and at most ``MAX_TIMEOUT_S``, from the command line's
    text, argparse's float or a configuration file's number (an int of any size)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise UsageError(f"{flag} must be a positive number of seconds, not {shown(value)}")
    if number > MAX_TIMEOUT_S:
        raise UsageError(f"{flag} must be at most {MAX_TIMEOUT_TEXT} seconds, not {shown(value)}")
    return number


def run_id(value: str, flag: str = "--run-id", suffix: str = "") -> str:
    """A run id as given (it labels sandboxes and containers): ``UsageError`` unless ``value + suffix`` is a
    label value (``suffix``: what --repeat appends, ``-rN``)."""
    if not value.strip():
        raise UsageError(f"{flag} is empty")
    if len(value) + len(suffix) > MAX_RUN_ID:
        room = f", with the {suffix!r} each repetition adds" if suffix else ""
        raise UsageError(f"{flag} is {len(value)} characters long; a label value holds at most {MAX_RUN_ID}{room}")
    if not RUN_ID.fullmatch(value):
        raise UsageError(f"{flag} {shown(value)} must be letters, digits, '.', '_' and '-', starting and ending "
                         "with a letter or digit (it becomes a label value)")
    return value


def env_names(names: list[str] | tuple[str, ...], flag: str) -> tuple[str, ...]:
    """Names of environment variables, each checked as the configuration file checks them."""
    for name in names:
        if not ENV_NAME.fullmatch(name):
            raise UsageError(f"{flag} {shown(name)} is no variable name: letters, digits and _ (not starting "
                             "with a digit)")
    return tuple(names)


def read_text(path: Path, what: str, max_bytes: int) -> str:
    """A file's text (UTF-8) of at most ``max_bytes``; ``UsageError`` naming ``what`` when it cannot be read,
    is larger (``/dev/zero`` never ends) or is not UTF-8."""
    try:
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except IsADirectoryError:
        raise UsageError(f"{what} is a directory") from None
    except OSError as exc:
        raise UsageError(f"{what} cannot be read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise UsageError(f"{what} is larger than {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} is not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})") from None


def load_json(text: str, what: str) -> Any:
    """JSON a user gives the suite; ``UsageError`` naming ``what`` for invalid JSON, a number too long to
    convert, or nesting deeper than ``MAX_JSON_DEPTH`` (which every later recursive walk must survive)."""
    try:
        value = json.loads(text, parse_int=lambda digits: _json_int(digits, what))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        value = None
        depth = MAX_JSON_DEPTH + 1
    else:
        depth = _depth(value)
    if depth > MAX_JSON_DEPTH:
        raise UsageError(f"{what} nests arrays or objects more than {MAX_JSON_DEPTH} levels deep")
    return value


def _json_int(digits: str, what: str) -> int:
    if len(digits.lstrip("-")) > MAX_DIGITS:
        raise UsageError(f"{what} holds a number of {len(digits.lstrip('-'))} digits (at most {MAX_DIGITS})")
    return int(digits)


def _depth(value: Any) -> int:
    """How deeply ``value`` nests lists and dicts (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children)
    return deepest


def shown(value: Any) -> str:
    """A bad value as a message shows it: quoted (a newline stays visible), never long."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."
