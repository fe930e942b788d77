"""Filling a profile's templates and reading answers with JSON pointers.

A body template is any JSON-like value. A string that is exactly one placeholder (``"{command}"``) is
replaced by the placeholder's typed value (a list, a number, an object); with a question mark
(``"{snapshot?}"``) the key or list item holding it is dropped when there is no value. Placeholders
inside longer strings (paths, ``"prefix-{id}"``) are replaced by their text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)(\?)?\}")
_DROP = object()  # an optional placeholder without a value: its key or item disappears


class TemplateError(ValueError):
    """A required placeholder without a value; the message names it."""


def placeholders(template: Any) -> Iterator[tuple[str, bool, str]]:
    """Every placeholder in ``template``: (name, optional, JSON pointer of the string holding it)."""
    yield from _walk(template, "")


def _walk(node: Any, pointer: str) -> Iterator[tuple[str, bool, str]]:
    if isinstance(node, str):
        for match in PLACEHOLDER.finditer(node):
            yield match.group(1), bool(match.group(2)), pointer
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _walk(item, f"{pointer}/{index}")
    elif isinstance(node, dict):
        for key, item in node.items():
            yield from _walk(item, f"{pointer}/{escape(str(key))}")


def names(template: Any) -> set[str]:
    return {name for name, _optional, _pointer in placeholders(template)}


def fill(template: Any, values: Mapping[str, Any]) -> Any:
    """``template`` with every placeholder replaced by its value from ``values`` (``None`` = no value)."""
    filled = _fill(template, values)
    return None if filled is _DROP else filled


def _fill(node: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(node, str):
        whole = PLACEHOLDER.fullmatch(node)
        if whole is not None:
            name, optional = whole.group(1), bool(whole.group(2))
            value = values.get(name)
            if value is None:
                if optional:
                    return _DROP
                raise TemplateError(f"the template needs a value for {{{name}}}")
            return value
        return PLACEHOLDER.sub(lambda m: _text(m, values), node)
    if isinstance(node, list):
        return [item for item in (_fill(i, values) for i in node) if item is not _DROP]
    if isinstance(node, dict):
        out = {}
        for key, item in node.items():
            filled = _fill(item, values)
            if filled is not _DROP:
                out[key] = filled
        return out
    return node


def _text(match: re.Match[str], values: Mapping[str, Any]) -> str:
    value = values.get(match.group(1))
    if value is None:
        if match.group(2):
            return ""
        raise TemplateError(f"the template needs a value for {{{match.group(1)}}}")
    return str(value)


def fill_path(path: str, values: Mapping[str, Any]) -> str:
    """A path template with each placeholder's value percent-encoded as one path segment."""
    return PLACEHOLDER.sub(lambda m: quote(_text(m, values), safe=""), path)


# -- JSON pointers (RFC 6901) --------------------------------------------------------------------


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def resolve(document: Any, pointer: str) -> tuple[bool, Any]:
    """(found, value) of ``pointer`` in ``document``; ``""`` is the whole document."""
    if pointer == "":
        return True, document
    node = document
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            if token not in node:
                return False, None
            node = node[token]
        elif isinstance(node, list):
            if not token.isdigit() or (token != "0" and token.startswith("0")) or int(token) >= len(node):
                return False, None
            node = node[int(token)]
        else:
            return False, None
    return True, node


def first(document: Any, pointers: str | list[str]) -> tuple[str | None, Any]:
    """The first pointer of ``pointers`` that ``document`` has, and its value; ``(None, None)`` if none."""
    for pointer in [pointers] if isinstance(pointers, str) else pointers:
        found, value = resolve(document, pointer)
        if found:
            return pointer, value
    return None, None
