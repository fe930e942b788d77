"""Output sanitization (sandbox-driver v1 §5.5/§8.4; v2 §8.4 keeps it), stateful across chunks.

``strip_ansi`` removes ANSI escape sequences — CSI, OSC, DCS/SOS/PM/APC strings and the other ESC
sequences, in their 7-bit and UTF-8-encoded C1 forms — and keeps standalone control characters.
``strip_all`` also removes standalone C0 and C1 controls except TAB, LF and CR. ``raw`` changes nothing.

Output arrives in chunks that may split a sequence anywhere, so the start of a sequence that has not
ended yet is held back until the next chunk (or dropped at the end of the stream): sanitizing chunk by
chunk gives the same bytes as sanitizing the whole stream at once.
"""

from __future__ import annotations

import re

_CSI = rb"(?:\x1b\[|\xc2\x9b)"  # ESC [ or the UTF-8-encoded C1 CSI
_OSC = rb"(?:\x1b\]|\xc2\x9d)"
_STRING = rb"(?:\x1b[PX^_]|\xc2[\x90\x98\x9e\x9f])"  # DCS, SOS, PM, APC
_ST = rb"(?:\x1b\\|\xc2\x9c)"  # string terminator
# One whole sequence. Order matters: the ESC forms with a second byte of their own come before the
# generic ESC + final byte, and a lone ESC (followed by anything else) last.
SEQUENCE = re.compile(
    _CSI + rb"[\x20-\x3f]*[\x40-\x7e]?"  # parameters and intermediates, then a final byte from @ to ~
    + rb"|" + _OSC + rb".*?(?:\x07|" + _ST + rb")"  # an OSC also ends at BEL
    + rb"|" + _STRING + rb".*?" + _ST
    + rb"|\x1b[\x20-\x2f]+[\x30-\x7e]?"  # ESC with intermediates, e.g. a character set designation
    + rb"|\x1b[\x30-\x7e]|\x1b", re.DOTALL)  # two-byte escapes (ESC =); a lone ESC
# A sequence begun but not yet ended at the end of the text seen so far.
UNFINISHED = re.compile(
    rb"(?:\x1b|\xc2)\Z|" + _CSI + rb"[\x20-\x3f]*\Z|\x1b[\x20-\x2f]+\Z"
    + rb"|" + _OSC + rb"(?:(?!\x07|" + _ST + rb").)*\Z"
    + rb"|" + _STRING + rb"(?:(?!" + _ST + rb").)*\Z", re.DOTALL)
# Standalone controls strip_all removes: C0 but TAB, LF and CR; DEL; UTF-8-encoded C1 (U+0080-U+009F).
CONTROLS = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]")


class Sanitizer:
    """One stream's sanitizer: ``feed`` each chunk, ``finish`` at the end of the stream."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.pending = b""

    def feed(self, chunk: bytes) -> bytes:
        if self.mode == "raw":
            return chunk
        text = self.pending + chunk
        unfinished = UNFINISHED.search(text)
        cut = unfinished.start() if unfinished else len(text)
        self.pending = text[cut:]
        return self._clean(text[:cut])

    def finish(self) -> bytes:
        # A sequence the stream never ended is dropped; a lone 0xC2 byte was text after all.
        left, self.pending = self.pending, b""
        return left if left == b"\xc2" else b""

    def _clean(self, text: bytes) -> bytes:
        text = SEQUENCE.sub(b"", text)
        return CONTROLS.sub(b"", text) if self.mode == "strip_all" else text
