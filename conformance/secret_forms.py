"""The forms a secret takes in text a provider sends back: raw, percent-encoded (any case, ``+`` for a
space), JSON-escaped, hex, and base64 (standard or URL-safe, at each of the three byte alignments it can
have inside a longer base64 text). ``Redactor`` (``conformance/transcript.py``) redacts them all.

A base64 text that decodes cleanly (an ``stdout_b64`` field, a ``data_b64`` chunk) is decoded, redacted
in its bytes and encoded again in its own alphabet, so it stays valid base64 and a reader who decodes it
finds ``[REDACTED]`` where the secret was. What does not decode cleanly (a blob cut short, a secret glued
to other base64 characters) is caught by the secret's base64 forms themselves: the characters that
encode only the secret's bits, at each alignment; the one or two characters at either edge, which also
encode neighbouring bits, carry at most 4 of the secret's bits each and are left.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable

# Encoded forms (hex, base64) shorter than this are not looked for in arbitrary text: a 5-character
# case-sensitive match would shred unrelated words and ids. Raw, percent and JSON forms are always.
MIN_ENCODED_CHARS = 8

# A run of base64 characters (either alphabet) long enough to hide a secret; decoded and redacted inside.
BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")


def _char_forms(char: str) -> list[str]:
    """Regex alternatives for one character: itself, percent-encoded, JSON-escaped."""
    forms = [re.escape(char)]
    percent = "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))
    forms.append(f"(?i:{re.escape(percent)})")
    if char == " ":
        forms.append(r"\+")
    escaped = json.dumps(char)[1:-1]  # ensure_ascii: \u00fc, \", \\, \n ...
    if escaped != char:
        forms.append(f"(?i:{re.escape(escaped)})" if escaped.startswith("\\u") else re.escape(escaped))
    if char == "/":
        forms.append(re.escape("\\/"))  # JSON may escape a solidus
    return forms


def text_form(secret: str) -> str:
    """One regex matching the secret raw, percent-encoded or JSON-escaped, character by character (so a
    text mixing them, ``a%2Fb\\u00fc``, matches too)."""
    parts = []
    for char in secret:
        forms = _char_forms(char)
        parts.append(f"(?:{'|'.join(forms)})" if len(forms) > 1 else forms[0])
    return "".join(parts)


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


def encoded_forms(secret: str) -> list[str]:
    """Regexes for the secret's hex and base64 forms (those long enough to look for)."""
    data = secret.encode("utf-8")
    forms = []
    if 2 * len(data) >= MIN_ENCODED_CHARS:
        forms.append(f"(?i:{data.hex()})")
    forms += [re.escape(core) for core in dict.fromkeys(base64_cores(data))]
    return forms


def compile_forms(secrets: Iterable[str]) -> tuple[re.Pattern[str], re.Pattern[bytes]] | None:
    """One pattern over text and one over bytes (decoded base64) matching every form of every secret,
    longest secrets first; None when there is no secret."""
    alternatives: list[str] = []
    for secret in sorted(set(secrets), key=len, reverse=True):
        alternatives.append(text_form(secret))
        alternatives += encoded_forms(secret)
    if not alternatives:
        return None
    source = "|".join(alternatives)
    return re.compile(source), re.compile(source.encode("utf-8"))


def redact_base64_runs(text: str, in_bytes: re.Pattern[bytes], replacement: bytes) -> str:
    """Every run of base64 characters that decodes to bytes holding a secret form is decoded, redacted
    and encoded again in the same alphabet (padded as it was)."""
    return BASE64_RUN.sub(lambda run: _redacted_run(run.group(0), in_bytes, replacement), text)


def _redacted_run(run: str, in_bytes: re.Pattern[bytes], replacement: bytes) -> str:
    body = run.rstrip("=")
    urlsafe = "-" in body or "_" in body
    if urlsafe and ("+" in body or "/" in body):
        return run  # both alphabets at once: no base64 text
    usable = body[: len(body) - (1 if len(body) % 4 == 1 else 0)]  # a lone trailing character holds no byte
    decode: Callable[[str], bytes] = base64.urlsafe_b64decode if urlsafe else base64.b64decode
    try:
        data = decode(usable + "=" * (-len(usable) % 4))
    except (binascii.Error, ValueError):
        return run
    redacted = in_bytes.sub(replacement, data)
    if redacted == data:
        return run
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    out = encode(redacted).decode("ascii")
    return out if run.endswith("=") else out.rstrip("=")
