"""The forms a secret takes in text a provider sends back: raw, percent-encoded (any case, ``+`` for a
space), JSON-escaped, hex, and base64 (standard or URL-safe, at each of the three byte alignments it can
have inside a longer base64 text). ``Redactor`` (``conformance/transcript.py``) redacts them all.

A base64 text that decodes cleanly (an ``stdout_b64`` field, a ``data_b64`` chunk) is decoded, redacted
in its bytes and encoded again in its own alphabet, so it stays valid base64 and a reader who decodes it
finds ``[REDACTED]`` where the secret was. What does not decode cleanly (a blob cut short, a secret glued
to other base64 characters) is caught by the secret's base64 forms themselves: the characters that
encode only the secret's bits, at each alignment; the one or two characters at either edge, which also
encode neighbouring bits, carry at most 4 of the secret's bits each and are left.

Every form is a literal string, looked for with ``in`` first: a text holding none (nearly all) costs a
few substring searches per form, not a regex over many alternatives.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import urllib.parse
from collections.abc import Callable, Iterable

# Encoded forms (hex, base64) shorter than this are not looked for in arbitrary text: a 5-character
# case-sensitive match would shred unrelated words and ids. Raw, percent and JSON forms are always.
MIN_ENCODED_CHARS = 8

# A run of base64 characters (either alphabet) long enough to hide a secret; decoded and redacted inside.
BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
_PERCENT = re.compile(r"%[0-9A-F]{2}")

# What percent-encoders leave as it is besides letters, digits and "_.-~": none, a path's "/", and
# JavaScript's encodeURIComponent set.
_URL_SAFE_SETS = ("", "/", "!*'()")


def text_forms(secret: str) -> set[str]:
    """The secret raw, percent-encoded and JSON-escaped, in the variants common encoders produce."""
    forms = {secret}
    for safe in _URL_SAFE_SETS:
        for quoted in (urllib.parse.quote(secret, safe=safe), urllib.parse.quote_plus(secret, safe=safe)):
            forms |= {quoted, _PERCENT.sub(lambda m: m.group(0).lower(), quoted)}
    for escaped in (json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]):
        upper_hex = re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), escaped)
        forms |= {escaped, upper_hex, escaped.replace("/", "\\/")}
    return forms


def base64_cores(data: bytes) -> list[str]:
    """The base64 characters that encode only ``data``'s bits, for each of the three alignments ``data``
    can have in a longer base64 text, in both alphabets."""
    cores: list[str] = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data).decode("ascii").rstrip("=")
        first = -(-8 * offset // 6)  # the first character all of whose 6 bits are data's
        last = (8 * (offset + len(data)) - 6) // 6  # the last such character
        core = encoded[first:last + 1]
        if len(core) >= MIN_ENCODED_CHARS:
            cores.append(core)
            cores.append(core.replace("+", "-").replace("/", "_"))
    return cores


def all_forms(secret: str) -> set[str]:
    """Every form of the secret looked for: the text forms, and the hex and base64 ones long enough."""
    data = secret.encode("utf-8")
    forms = text_forms(secret) | set(base64_cores(data))
    if 2 * len(data) >= MIN_ENCODED_CHARS:
        forms |= {data.hex(), data.hex().upper()}
    return forms


class Forms:
    """The forms of a set of secrets: which a text holds, and that text with them replaced."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = frozenset(secrets)
        self.text = sorted({f for s in self.secrets for f in all_forms(s)}, key=len, reverse=True)
        self.data = [f.encode("utf-8") for f in self.text]

    def held(self, text: str) -> tuple[list[str], list[bytes]]:
        """The forms ``text`` holds as it is, and those its base64 runs hold once decoded."""
        in_text = [form for form in self.text if form in text]
        decoded = b"\0".join(filter(None, (_decode(run) for run in BASE64_RUN.findall(text))))
        in_data = [form for form in self.data if form in decoded] if decoded else []
        return in_text, in_data

    def redact(self, text: str, replacement: str) -> str:
        in_text, in_data = self.held(text)
        if in_data:
            # base64 first: a blob is decoded and redacted inside before a match could cut it
            pattern = re.compile(b"|".join(map(re.escape, in_data)))
            text = BASE64_RUN.sub(lambda run: _redacted_run(run.group(0), pattern, replacement.encode()), text)
            in_text = [form for form in in_text if form in text]
        if in_text:
            text = re.compile("|".join(map(re.escape, in_text))).sub(lambda _: replacement, text)
        return text


def _alphabet(run: str) -> tuple[str, bool] | None:
    """The run without padding, with a lone last character (which holds no byte) left off, and whether it
    is URL-safe; None when it mixes both alphabets (no base64 text)."""
    body = run.rstrip("=")
    urlsafe = "-" in body or "_" in body
    if urlsafe and ("+" in body or "/" in body):
        return None
    return body[: len(body) - (1 if len(body) % 4 == 1 else 0)], urlsafe


def _decode(run: str) -> bytes | None:
    shape = _alphabet(run)
    if shape is None:
        return None
    body, urlsafe = shape
    decode: Callable[[str], bytes] = base64.urlsafe_b64decode if urlsafe else base64.b64decode
    try:
        return decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        return None


def _redacted_run(run: str, in_bytes: re.Pattern[bytes], replacement: bytes) -> str:
    """The run decoded, redacted and encoded again in its alphabet (padded as it was); as it was when it
    holds no form."""
    data = _decode(run)
    if data is None:
        return run
    redacted = in_bytes.sub(lambda _: replacement, data)
    if redacted == data:
        return run
    urlsafe = "-" in run or "_" in run
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    out = encode(redacted).decode("ascii")
    return out if run.endswith("=") else out.rstrip("=")
