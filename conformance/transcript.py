"""Per-scenario transcripts of every message exchanged, and the redaction applied before anyone sees them."""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from conformance import secret_forms

REDACTED = "[REDACTED]"

# Names whose values are secrets wherever they appear (environment variables, headers, JSON keys).
SECRET_NAME = re.compile(r"(?i)(token|secret|password|passwd|api[_-]?key|credential|authorization|private[_-]?key)")


class Redactor:
    """Replaces every known secret value, in each of the forms it can take (``conformance/secret_forms.py``:
    raw, percent-encoded, JSON-escaped, hex, base64), and the value of any secret-looking key, before output."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._lock = threading.Lock()
        self._forms: secret_forms.Forms | None = None

    def add(self, value: str | None) -> None:
        if value and len(value) >= 4:  # shorter strings would shred unrelated text
            with self._lock:
                if value not in self._secrets:
                    self._secrets.add(value)
                    self._forms = secret_forms.Forms(self._secrets)

    def known(self) -> frozenset[str]:
        """The secrets known now (``keep_only`` comes back to them)."""
        with self._lock:
            return frozenset(self._secrets)

    def keep_only(self, secrets: frozenset[str]) -> None:
        """Forget every secret but ``secrets``. A process runs one run, so its secrets only grow; the suite's
        own tests run thousands in one process, and each secret adds its forms to every text's search."""
        with self._lock:
            self._secrets = set(secrets)
            self._forms = secret_forms.Forms(self._secrets) if self._secrets else None

    def add_environment(self, env: dict[str, str]) -> None:
        for name, value in env.items():
            if SECRET_NAME.search(name):
                self.add(value)

    def longest(self) -> int:
        """The length of the longest form of a known secret (0 when none): how far past a cut a secret may
        reach. Its longest form is JSON-escaped (6 characters a byte) or percent-encoded (3 a byte)."""
        with self._lock:
            return max((6 * len(s.encode("utf-8")) for s in self._secrets), default=0)

    def text(self, text: str) -> str:
        with self._lock:
            forms = self._forms
        if forms is None or not text:
            return text
        return forms.redact(text, REDACTED)

    def strings(self, value: Any) -> Any:
        """Every string in a JSON-like value redacted, keys included (a document a provider filled in). The
        secrets are looked for in all of it at once first: most documents hold none, and those that do
        are redacted string by string for only the secrets they hold."""
        with self._lock:
            forms = self._forms
        if forms is None:
            return value
        texts: list[str] = []
        _collect(value, texts)
        joined = "\0".join(texts)
        in_text, in_data = forms.held(joined)
        if not in_text and not in_data:
            return value
        held = secret_forms.Forms(s for s in forms.secrets
                                  if set(secret_forms.all_forms(s)) & {*in_text, *(d.decode() for d in in_data)})
        return _map_strings(value, lambda text: held.redact(text, REDACTED))

    def value(self, value: Any) -> Any:
        """Redact a JSON-like value: known secrets anywhere, and values under secret-looking keys."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            out = {}
            for key, inner in value.items():
                if isinstance(key, str) and SECRET_NAME.search(key) and isinstance(inner, str) and inner:
                    out[key] = REDACTED
                else:
                    out[key] = self.value(inner)
            return out
        return value


def _collect(value: Any, texts: list[str]) -> None:
    if isinstance(value, str):
        texts.append(value)
    elif isinstance(value, list):
        for inner in value:
            _collect(inner, texts)
    elif isinstance(value, dict):
        for key, inner in value.items():
            _collect(key, texts)
            _collect(inner, texts)


def _map_strings(value: Any, change: Any) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [_map_strings(inner, change) for inner in value]
    if isinstance(value, dict):
        return {_map_strings(k, change): _map_strings(v, change) for k, v in value.items()}
    return value


REDACTOR = Redactor()
"""The process-wide redactor. Everything that leaves the suite (reports, terminal, logs) passes through it."""


@dataclass(frozen=True)
class TranscriptEntry:
    at_s: float
    channel: str  # which connection: "provider", "fresh#2", "http", ...
    direction: str  # "sent", "received", "violation", "note"
    text: str

    def render(self) -> str:
        arrow = {"sent": "→", "received": "←", "violation": "✗", "note": "·"}.get(self.direction, "?")
        return f"{self.at_s:8.3f}s {self.channel:<9} {arrow} {self.text}"


class Transcript:
    """The messages of one scenario, bounded: the first and the newest entries are kept, and the count
    of what was left out in between is reported."""

    def __init__(self, head: int = 150, tail: int = 250, max_entry_chars: int = 4000) -> None:
        self._start = time.monotonic()
        self._head: list[TranscriptEntry] = []
        self._tail: deque[TranscriptEntry] = deque(maxlen=tail)
        self._head_limit = head
        self._omitted = 0
        self._max_chars = max_entry_chars
        self._lock = threading.Lock()

    def record(self, channel: str, direction: str, text: str) -> None:
        if len(text) > self._max_chars:
            # Redacted before the cut: a secret the cut went through would otherwise show its first part.
            window = REDACTOR.text(text[: self._max_chars + REDACTOR.longest()])
            text = f"{window[: self._max_chars]}… [{len(text) - self._max_chars} more characters]"
        entry = TranscriptEntry(round(time.monotonic() - self._start, 3), channel, direction, text)
        with self._lock:
            if len(self._head) < self._head_limit:
                self._head.append(entry)
                return
            if len(self._tail) == self._tail.maxlen:
                self._omitted += 1
            self._tail.append(entry)

    def entries(self) -> list[TranscriptEntry]:
        with self._lock:
            return [*self._head, *self._tail]

    @property
    def omitted(self) -> int:
        return self._omitted

    def render(self, redactor: Redactor = REDACTOR) -> list[str]:
        with self._lock:
            head, tail, omitted = list(self._head), list(self._tail), self._omitted
        lines = [redactor.text(e.render()) for e in head]
        if omitted:
            lines.append(f"          … {omitted} messages omitted …")
        lines.extend(redactor.text(e.render()) for e in tail)
        return lines
