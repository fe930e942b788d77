"""Edits of a TOML file by line, so every line the edit does not name stays as the author wrote it
(comments, order, spacing, line endings). ``tomllib`` reads; nothing here re-serializes a document.

What can be edited is deliberately small: a ``key = value`` line of one table (written as a ``[header]``,
or the top level before the first header), replaced in place with its trailing comment kept, inserted,
or removed. Anything else (a dotted key, an inline table, a value spanning lines) is a ``LineEditError``:
the caller says what to write by hand rather than guess.
"""

from __future__ import annotations

import re
import tomllib

from conformance.errors import UsageError


class LineEditError(UsageError):
    """The file is not laid out so that one line can be changed safely."""


_HEADER = re.compile(r"^\s*\[(?!\[)(?P<inner>.*)\]\s*(#.*)?$")
# One value on its line (a basic or literal string, a number, a boolean), then whitespace, a comment, the end.
_VALUE_AND_TAIL = re.compile(r'(?P<value>"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|[^\s#\[{"\']+)(?P<tail>\s*(#[^\n]*)?\r?\n?)',
                             re.DOTALL)


def _header_path(line: str) -> tuple[str, ...] | None:
    """The key path of a ``[table]`` header line (``[providers."my.provider"]``), None for any other line."""
    match = _HEADER.match(line.rstrip("\r\n"))
    if match is None:
        return None
    try:
        node = tomllib.loads(f"[{match['inner']}]\n")
    except tomllib.TOMLDecodeError:
        return None
    path: list[str] = []
    while node:
        (key, node), = node.items()
        path.append(key)
    return tuple(path)


class TomlLines:
    """A TOML text as lines (each with its own line ending), edited one ``key = value`` line at a time."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)
        ending = next((line[len(line.rstrip("\r\n")):] for line in self.lines if line.endswith("\n")), "\n")
        self.newline = ending or "\n"

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def _span(self, table: tuple[str, ...]) -> tuple[int, int] | None:
        """[start, end) of the lines of ``table``'s own keys: after its header up to the next header."""
        start = 0 if table == () else None
        for index, line in enumerate(self.lines):
            path = _header_path(line)
            if path is None and not line.lstrip().startswith("[["):
                continue
            if start is not None:
                return start, index
            if path == table:
                start = index + 1
        return None if start is None else (start, len(self.lines))

    def has_table(self, table: tuple[str, ...]) -> bool:
        return self._span(table) is not None

    def _key_line(self, table: tuple[str, ...], key: str) -> tuple[int, re.Match[str]] | None:
        """The index and match of ``key``'s line in ``table``; None when the table has no such line."""
        span = self._span(table)
        if span is None:
            raise LineEditError(f"no [{'.'.join(table)}] table header")
        pattern = re.compile(rf'^(?P<lead>\s*(?P<q>"?){re.escape(key)}(?P=q)\s*=\s*)(?P<rest>.*)$', re.DOTALL)
        for index in range(*span):
            match = pattern.match(self.lines[index])
            if match is not None:
                return index, match
        return None

    def has_key(self, table: tuple[str, ...], key: str) -> bool:
        return self._key_line(table, key) is not None

    def set(self, table: tuple[str, ...], key: str, value: str, after: tuple[str, ...] = ()) -> None:
        """``key = value`` in ``table``: the value of its line replaced (its comment kept), else the line that
        offers it commented out (``# key = …``) replaced, else a new line after the first of the keys ``after``
        that the table has, else after its last key."""
        found = self._key_line(table, key)
        if found is not None:
            index, match = found
            parts = _VALUE_AND_TAIL.fullmatch(match["rest"])
            if parts is None:
                raise LineEditError(f"the value of '{key}' in [{'.'.join(table)}] is not a one-line value")
            self.lines[index] = f"{match['lead']}{value}{parts['tail']}"
            return
        placeholder = self._commented(table, key)
        if placeholder is not None:  # `# key = …` as a template wrote it: the setting goes where it was offered
            self.lines[placeholder] = f"{key} = {value}{self.newline}"
            return
        at = None
        for other in after:
            neighbour = self._key_line(table, other)
            if neighbour is not None:
                at = neighbour[0] + 1
                break
        if at is None:
            span = self._span(table)
            assert span is not None  # _key_line raised for a table without a header
            start, end = span
            at = start
            for index in range(start, end):
                stripped = self.lines[index].strip()
                if stripped and not stripped.startswith("#"):
                    at = index + 1
        if at > 0 and not self.lines[at - 1].endswith("\n"):
            self.lines[at - 1] += self.newline
        self.lines.insert(at, f"{key} = {value}{self.newline}")

    def _commented(self, table: tuple[str, ...], key: str) -> int | None:
        span = self._span(table)
        pattern = re.compile(rf'^\s*#\s*"?{re.escape(key)}"?\s*=')
        return next((index for index in range(*span) if pattern.match(self.lines[index])), None) if span else None

    def remove(self, table: tuple[str, ...], key: str) -> None:
        found = self._key_line(table, key)
        if found is not None:
            del self.lines[found[0]]

    def append(self, text: str) -> None:
        """Lines at the end, after one blank line."""
        if self.lines and not self.lines[-1].endswith("\n"):
            self.lines[-1] += self.newline
        if self.lines and self.lines[-1].strip():
            self.lines.append(self.newline)
        self.lines += [line + self.newline for line in text.rstrip("\n").split("\n")]


__all__ = ["LineEditError", "TomlLines"]
