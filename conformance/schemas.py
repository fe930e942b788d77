"""JSON Schema validation of every message, per dialect (draft 2020-12, resolved offline)."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable

from conformance import bundle
from conformance.errors import HarnessError

SCHEMA_BASE = "https://schemas.sandbox-conformance.invalid/"


@dataclass(frozen=True)
class SchemaProblem:
    """One way an instance fails its schema: where (a JSON pointer) and why."""

    pointer: str
    reason: str

    def __str__(self) -> str:
        return f"at {self.pointer or '/'}: {self.reason}"


@cache
def registry() -> Registry:
    """Every schema file under ``schemas/``, registered by its ``$id``."""
    resources = []
    for path in sorted(bundle.schemas_dir().rglob("*.json")):
        try:
            contents = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise HarnessError(f"schema {path} is not valid JSON: {exc}") from None
        if "$id" not in contents:
            raise HarnessError(f"schema {path} has no $id")
        resources.append((contents["$id"], Resource.from_contents(contents)))
    return Registry().with_resources(resources)


def _is_strict_integer(checker: object, instance: object) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


# JSON Schema counts 1000.0 as an integer; the protocol's integer fields (ids, *_ms, exit codes) must be
# written without a fraction, as its reference implementation reads them.
StrictValidator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_strict_integer),
)


BASE64_FORMAT = "padded-base64"
FORMATS = FormatChecker()


@FORMATS.checks(BASE64_FORMAT, raises=(binascii.Error, ValueError))
def is_padded_base64(instance: object) -> bool:
    """Standard base64 with padding (RFC 4648 section 4), judged by decoding it once: a regex ``pattern``
    over a megabyte payload costs a hundred times the decode (and its backtracking stack grows with it)."""
    if not isinstance(instance, str):
        return True  # format applies to strings only; "type" judges the rest
    decoded_or_checked(instance)
    return True


def decoded_or_checked(text: str) -> bytes:
    """The bytes of ``text`` if it is standard padded base64; ``binascii.Error`` (or ``ValueError``: not
    ASCII) otherwise. ``validate=True`` refuses any character outside the alphabet (a newline, the URL-safe
    ``-_``) and padding anywhere but the end; the length check refuses what it would otherwise tolerate
    (missing padding is refused by the decoder, surplus ``=`` by the length)."""
    if len(text) % 4:
        raise binascii.Error("the length is not a multiple of 4")
    return base64.b64decode(text, validate=True)


@cache
def _validator(ref: str) -> Draft202012Validator:
    """The validator that explains a failure: the schema as written, errors pointing into it."""
    return StrictValidator({"$ref": ref}, registry=registry(), format_checker=FORMATS)


# Keywords whose value is one schema, a list of schemas, or a map of names to schemas (draft 2020-12).
_ONE_SCHEMA = frozenset({"additionalProperties", "items", "contains", "not", "if", "then", "else", "propertyNames",
                         "unevaluatedItems", "unevaluatedProperties", "additionalItems", "contentSchema"})
_SCHEMA_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_MAP = frozenset({"properties", "patternProperties", "dependentSchemas"})
_NOT_NEEDED = frozenset({"$defs", "$id", "$schema", "$comment", "$anchor", "description", "title", "examples"})


def _inlined(node: Any, resolver: Any, seen: frozenset[int]) -> Any:
    """``node`` with every ``$ref`` replaced by the schema it names (siblings kept beside it in an
    ``allOf``, which is what a 2020-12 ``$ref`` with siblings means): the same verdicts, without a
    registry lookup per ``$ref`` per message (which is most of jsonschema's time on a small message)."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _NOT_NEEDED or key == "$ref":
            continue
        if key in _ONE_SCHEMA:
            out[key] = _inlined(value, resolver, seen)
        elif key in _SCHEMA_LIST and isinstance(value, list):
            out[key] = [_inlined(item, resolver, seen) for item in value]
        elif key in _SCHEMA_MAP and isinstance(value, dict):
            out[key] = {name: _inlined(item, resolver, seen) for name, item in value.items()}
        else:
            out[key] = value
    if isinstance(node.get("$ref"), str):
        resolved = resolver.lookup(node["$ref"])
        if id(resolved.contents) in seen:
            raise RecursionError(f"recursive $ref {node['$ref']}")
        target = _inlined(resolved.contents, resolved.resolver, seen | {id(resolved.contents)})
        if out:
            out["allOf"] = [target, *out.get("allOf", [])]  # beside the schema's own allOf, if it has one
        else:
            out = target
    return out


@cache
def _verdict(ref: str) -> Any:
    """A validator for the fast yes/no: the schema at ``ref`` with its refs inlined (or, for a recursive
    schema, the explaining validator itself)."""
    resolved = registry().resolver().lookup(ref)
    try:
        inlined = _inlined(resolved.contents, resolved.resolver, frozenset({id(resolved.contents)}))
    except RecursionError:
        return _validator(ref)
    return StrictValidator(inlined, format_checker=FORMATS)


def is_valid(ref: str, instance: Any) -> bool:
    """Whether ``instance`` satisfies the schema at ``ref`` (the cheap question; ``problems`` explains)."""
    return _verdict(ref).is_valid(instance)


@cache
def exists(ref: str) -> bool:
    """Whether ``ref`` (a URI with an optional JSON-pointer fragment) names a known schema."""
    try:
        registry().resolver().lookup(ref)
    except Unresolvable:
        return False
    return True


def pointer_of(error: ValidationError) -> str:
    return "".join(f"/{str(p).replace('~', '~0').replace('/', '~1')}" for p in error.absolute_path)


def problems(ref: str, instance: Any, limit: int = 5) -> list[SchemaProblem]:
    """The schema problems of ``instance`` against the schema at ``ref``; empty when it is valid.

    The common case, a valid message, costs one pass of the inlined schema; only a failure is walked
    again by the schema as written, for errors that point into it."""
    if _verdict(ref).is_valid(instance):
        return []
    errors = list(_validator(ref).iter_errors(instance))
    if not errors:
        return []
    best = best_match(errors)
    ordered = [best, *(e for e in errors if e is not best)]
    return [SchemaProblem(pointer_of(e), _reason(e)) for e in ordered[:limit]]


def _reason(error: ValidationError) -> str:
    message = error.message
    if len(message) > 300:
        message = message[:300] + "…"
    return message


def schema_path(dialect_folder: str, *parts: str) -> str:
    return SCHEMA_BASE + "/".join((dialect_folder, *parts))


def files(dialect_folder: str) -> list[Path]:
    return sorted((bundle.schemas_dir() / dialect_folder).rglob("*.json"))
