"""Output sanitization as the protocol defines it, stateful across chunks.

``strip_ansi`` removes ANSI escape sequences (CSI, OSC, DCS/SOS/PM/APC strings and the other ESC
sequences, in their 7-bit and UTF-8-encoded C1 forms) and keeps standalone control characters.
``strip_all`` also removes standalone C0 and C1 controls except TAB, LF and CR.
"""

from __future__ import annotations

MODES = ("raw", "strip_ansi", "strip_all")
ESC = 0x1B
BEL = 0x07
_KEEP_CONTROLS = {0x09, 0x0A, 0x0D}
# UTF-8-encoded C1 introducers (0xC2 followed by the C1 byte).
_C1_CSI, _C1_ST, _C1_OSC = 0x9B, 0x9C, 0x9D
_C1_STRING_STARTS = {0x90, 0x98, 0x9E, 0x9F}  # DCS, SOS, PM, APC


class Sanitizer:
    """Feed bytes in any chunking; the output is the same as sanitizing the whole stream at once."""

    def __init__(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown output sanitization {mode!r}")
        self.mode = mode
        self._state = "text"
        self._pending = bytearray()  # bytes of an unfinished sequence (dropped unless it turns out to be text)

    def feed(self, data: bytes) -> bytes:
        if self.mode == "raw":
            return data
        out = bytearray()
        for byte in data:
            self._step(byte, out)
        return bytes(out)

    def finish(self) -> bytes:
        """Flush at end of stream: an unfinished escape sequence is dropped; a lone 0xC2 is text."""
        out = bytearray()
        if self._state == "c2" and self.mode != "raw":
            out.append(0xC2)
        self._state = "text"
        self._pending.clear()
        return bytes(out)

    def _text_byte(self, byte: int, out: bytearray) -> None:
        if self.mode == "strip_all" and (byte < 0x20 or byte == 0x7F) and byte not in _KEEP_CONTROLS:
            return
        out.append(byte)

    def _step(self, byte: int, out: bytearray) -> None:
        state = self._state
        if state == "text":
            if byte == ESC:
                self._state = "esc"
            elif byte == 0xC2:
                self._state = "c2"
            else:
                self._text_byte(byte, out)
        elif state == "c2":
            if byte == _C1_CSI:
                self._state = "csi"
            elif byte == _C1_OSC:
                self._state = "osc"
            elif byte in _C1_STRING_STARTS:
                self._state = "string"
            elif 0x80 <= byte <= 0x9F:
                # another UTF-8-encoded C1 control: strip_all removes it, strip_ansi keeps it
                self._state = "text"
                if self.mode != "strip_all":
                    out.extend((0xC2, byte))
            else:
                self._state = "text"
                out.append(0xC2)
                self._step(byte, out)
        elif state == "esc":
            if byte == ord("["):
                self._state = "csi"
            elif byte == ord("]"):
                self._state = "osc"
            elif byte in (ord("P"), ord("X"), ord("^"), ord("_")):
                self._state = "string"
            elif 0x20 <= byte <= 0x2F:
                self._state = "nf"  # ESC intermediates... final
            elif 0x30 <= byte <= 0x7E:
                self._state = "text"  # a two-byte escape: dropped whole
            elif byte == ESC:
                self._state = "esc"
            else:
                self._state = "text"
                self._text_byte(byte, out)
        elif state == "nf":
            if 0x20 <= byte <= 0x2F:
                return
            self._state = "text"
            if not 0x30 <= byte <= 0x7E:
                self._text_byte(byte, out)
        elif state == "csi":
            if 0x40 <= byte <= 0x7E:
                self._state = "text"
            elif 0x20 <= byte <= 0x3F:
                return
            else:  # not a valid CSI byte: the sequence ends, the byte is text again
                self._state = "text"
                self._step(byte, out)
        elif state in ("osc", "string"):
            if byte == BEL and state == "osc":
                self._state = "text"
            elif byte == ESC:
                self._state = state + "-esc"
            elif byte == 0xC2:
                self._state = state + "-c2"
        elif state in ("osc-esc", "string-esc"):
            base = state.split("-")[0]
            self._state = "text" if byte == ord("\\") else base
        elif state in ("osc-c2", "string-c2"):
            base = state.split("-")[0]
            self._state = "text" if byte == _C1_ST else base


def sanitize(data: bytes, mode: str) -> bytes:
    sanitizer = Sanitizer(mode)
    return sanitizer.feed(data) + sanitizer.finish()
