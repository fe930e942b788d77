"""JSON Schema validation of every message, per dialect (draft 2020-12, resolved offline)."""

from __future__ import annotations

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


@cache
def _validator(ref: str) -> Draft202012Validator:
    return StrictValidator({"$ref": ref}, registry=registry(), format_checker=FormatChecker())


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
    """The schema problems of ``instance`` against the schema at ``ref``; empty when it is valid."""
    validator = _validator(ref)
    errors = list(validator.iter_errors(instance))
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
