"""The JSON Schemas accept what the protocol allows and reject what it forbids, proven by examples.

Examples live in ``tests/schema_examples/<schema folder>.yaml``: a mapping from a schema ref written
relative to that folder (``methods/sandbox.create.json#/$defs/params``, ``results.json`` for a root
schema) to ``{valid: [...], invalid: [...]}`` instances. Besides plain YAML, ``!repeat [text, count]``
builds long strings, so the id and kind length limits can be probed at their exact edges.

A v2 method or notification part that is nothing but a ``$ref`` to the same part in the v1 folder (the
shape did not change) inherits v1's examples: they run against the v2 ref, so the reuse is proven, not
assumed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from conformance import bundle, schemas

EXAMPLES_DIR = Path(__file__).resolve().parent / "schema_examples"
DIALECT = "sandbox-driver-v1"
V2 = "sandbox-driver-v2"
SANDBOX_DRIVER = (DIALECT, V2)
DIALECTS = (DIALECT, V2, "fabro-sketch")
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
ENVELOPE_FORMS = ("Request", "Success", "Failure", "Notification", "FromPlugin")
# The shared shapes every message leans on; each needs its own examples, not just coverage through a method.
IMPORTANT_COMMON_DEFS = (
    "Base64", "Duration", "Timestamp", "ResourceId", "ProviderKind", "Capabilities", "SandboxStatus",
    "HandleInfo", "SandboxSpec", "ExecSpec", "ExecResult", "ExecStreamResult", "ErrorObject", "ErrorData",
    "NetworkPolicy", "LifecycleTimers", "FileMetadata", "ProviderHealth",
)
EXPECTATIONS = ("valid", "invalid")


# -- loading the examples ------------------------------------------------------------------------


class _ExampleLoader(yaml.SafeLoader):
    """Safe YAML plus ``!repeat``; a subclass so the tag never leaks into other loaders."""


def _repeat(loader: yaml.SafeLoader, node: yaml.SequenceNode) -> str:
    text, count = loader.construct_sequence(node)
    if not isinstance(text, str) or not isinstance(count, int):
        raise yaml.constructor.ConstructorError(None, None, "!repeat takes [text, count]", node.start_mark)
    return text * count


_ExampleLoader.add_constructor("!repeat", _repeat)


@dataclass(frozen=True)
class Example:
    """One instance and the verdict its schema must give."""

    folder: str
    ref: str  # relative to the folder
    expected: str  # "valid" or "invalid"
    index: int
    instance: Any
    inherited_from: str | None = None  # the folder whose examples file states it, when not ``folder``

    @property
    def absolute_ref(self) -> str:
        return f"{schemas.SCHEMA_BASE}{self.folder}/{self.ref}"

    @property
    def test_id(self) -> str:
        inherited = f" (from {self.inherited_from})" if self.inherited_from else ""
        return f"{self.folder}/{self.ref} {self.expected}[{self.index}]{inherited}"


@cache
def example_files() -> dict[str, dict[str, Any]]:
    """Every examples file, by the schema folder it describes (its stem)."""
    return {
        path.stem: yaml.load(path.read_text(encoding="utf-8"), Loader=_ExampleLoader)  # a SafeLoader subclass
        for path in sorted(EXAMPLES_DIR.glob("*.yaml"))
    }


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _v1_delegations() -> set[str]:
    """The v2 method and notification parts that are exactly a ``$ref`` to the same part in the v1 folder."""
    found = set()
    for path in schemas.files(V2):
        if path.parent.name not in ("methods", "notifications"):
            continue
        relative = path.relative_to(bundle.schemas_dir() / V2).as_posix()
        for part, shape in _load(path).get("$defs", {}).items():
            if shape == {"$ref": f"../../{DIALECT}/{relative}#/$defs/{part}"}:
                found.add(f"{relative}#/$defs/{part}")
    return found


def all_examples() -> list[Example]:
    """Every example of every file, flattened so each gets its own test id; then v1's examples of the parts
    v2 reuses unchanged, run against the v2 refs."""
    found = []
    for folder, entries in example_files().items():
        for ref, verdicts in (entries or {}).items():
            if not isinstance(verdicts, dict):
                continue  # reported by test_every_entry_has_both_verdicts_and_plain_json
            for expected in EXPECTATIONS:
                for index, instance in enumerate(verdicts.get(expected) or []):
                    found.append(Example(folder, ref, expected, index, instance))
    for ref in sorted(_v1_delegations()):
        verdicts = example_files()[DIALECT].get(ref) or {}
        for expected in EXPECTATIONS:
            for index, instance in enumerate(verdicts.get(expected) or []):
                found.append(Example(V2, ref, expected, index, instance, inherited_from=DIALECT))
    return found


EXAMPLES = all_examples()


def _show(instance: Any) -> str:
    """The instance as JSON, so a failure shows exactly what the schema saw."""
    return json.dumps(instance, ensure_ascii=False, indent=2, default=repr)


def _non_json(value: Any, where: str = "") -> Iterator[str]:
    """Where YAML typed a value JSON cannot carry (a date, a set, a non-string key, NaN)."""
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            yield f"{where or '/'}: {value!r} is not a JSON number"
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _non_json(item, f"{where}/{i}")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                yield f"{where or '/'}: key {key!r} is a {type(key).__name__}, not a string"
            yield from _non_json(item, f"{where}/{key}")
    else:
        yield f"{where or '/'}: {value!r} is a {type(value).__name__} (quote it in the YAML)"


# -- the examples hold ---------------------------------------------------------------------------


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.expected == "valid"], ids=lambda e: e.test_id)
def test_valid_example_is_accepted(example: Example) -> None:
    problems = schemas.problems(example.absolute_ref, example.instance)
    assert not problems, (
        f"{example.ref} rejected an example the protocol allows:\n{_show(example.instance)}\nproblems:\n"
        + "\n".join(f"  {p}" for p in problems)
    )


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.expected == "invalid"], ids=lambda e: e.test_id)
def test_invalid_example_is_rejected(example: Example) -> None:
    problems = schemas.problems(example.absolute_ref, example.instance)
    assert problems, f"{example.ref} accepted an example the protocol forbids:\n{_show(example.instance)}"


# -- the examples files are well formed and cover every schema -----------------------------------


def test_every_example_file_names_a_schema_folder() -> None:
    files = example_files()
    assert {*DIALECTS, "report"} <= set(files), f"examples files found: {sorted(files)}"
    for folder in files:
        assert (bundle.schemas_dir() / folder).is_dir(), f"{folder}.yaml describes no folder under schemas/"


@pytest.mark.parametrize("folder", sorted(example_files()))
def test_every_entry_has_both_verdicts_and_plain_json(folder: str) -> None:
    """An entry without an invalid example proves nothing about strictness, and vice versa."""
    bad = []
    for ref, verdicts in example_files()[folder].items():
        if not isinstance(verdicts, dict) or set(verdicts) != set(EXPECTATIONS):
            bad.append(f"{ref}: needs exactly the keys {EXPECTATIONS}, has {sorted(verdicts or {})}")
            continue
        for expected in EXPECTATIONS:
            if not isinstance(verdicts[expected], list) or not verdicts[expected]:
                bad.append(f"{ref}: {expected} must be a non-empty list")
                continue
            for index, instance in enumerate(verdicts[expected]):
                bad += [f"{ref} {expected}[{index}] at {where}" for where in _non_json(instance)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("folder", sorted(example_files()))
def test_every_ref_names_an_existing_schema(folder: str) -> None:
    base = f"{schemas.SCHEMA_BASE}{folder}/"
    missing = [ref for ref in example_files()[folder] if not schemas.exists(base + ref)]
    assert not missing, f"refs in {folder}.yaml that name no schema: {missing}"


def _dialect_refs(dialect: str = DIALECT) -> set[str]:
    """The refs with examples: stated in the dialect's file, or (v2) inherited from v1's."""
    inherited = {e.ref for e in EXAMPLES if e.folder == dialect and e.inherited_from}
    return set(example_files()[dialect]) | inherited


def _relative(path: Path, dialect: str = DIALECT) -> str:
    return path.relative_to(bundle.schemas_dir() / dialect).as_posix()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_method_has_params_and_result_examples(dialect: str) -> None:
    methods = [p for p in schemas.files(dialect) if p.parent.name == "methods"]
    assert methods, "no method schemas found"
    missing = [
        f"{_relative(path, dialect)}#/$defs/{part}"
        for path in methods
        for part in ("params", "result")
        if f"{_relative(path, dialect)}#/$defs/{part}" not in _dialect_refs(dialect)
    ]
    assert not missing, f"method schemas without examples: {missing}"


@pytest.mark.parametrize("dialect", SANDBOX_DRIVER)
def test_every_notification_has_params_examples(dialect: str) -> None:
    notifications = [p for p in schemas.files(dialect) if p.parent.name == "notifications"]
    assert notifications, "no notification schemas found"
    wanted = [f"{_relative(path, dialect)}#/$defs/params" for path in notifications]
    missing = [ref for ref in wanted if ref not in _dialect_refs(dialect)]
    assert not missing, f"notification schemas without examples: {missing}"


def test_every_envelope_form_and_important_common_def_has_examples() -> None:
    wanted = [f"envelope.json#/$defs/{form}" for form in ENVELOPE_FORMS]
    wanted += [f"common.json#/$defs/{name}" for name in IMPORTANT_COMMON_DEFS]
    missing = [ref for ref in wanted if ref not in _dialect_refs()]
    assert not missing, f"shapes without examples: {missing}"
    # v2's common.json holds only what v2 changed, so every shape it defines needs examples of its own.
    v2_common = _load(bundle.schemas_dir() / V2 / "common.json")["$defs"]
    wanted = [f"envelope.json#/$defs/{form}" for form in ENVELOPE_FORMS]
    wanted += [f"common.json#/$defs/{name}" for name in v2_common]
    missing = [ref for ref in wanted if ref not in _dialect_refs(V2)]
    assert not missing, f"v2 shapes without examples: {missing}"
    sketch = [f"envelope.json#/$defs/{form}" for form in ENVELOPE_FORMS]
    sketch += [f"common.json#/$defs/{name}" for name in ("Capabilities", "SandboxId", "ProviderKind", "ErrorObject")]
    missing = [ref for ref in sketch if ref not in _dialect_refs("fabro-sketch")]
    assert not missing, f"sketch shapes without examples: {missing}"


def test_v2_has_no_schema_for_what_it_removed() -> None:
    """v2 removed the base64 methods and their notifications: a schema for one would check a message
    that must not exist (a v2 plugin answers those methods -32601)."""
    removed = {"methods/exec.run.json", "methods/exec.cancel.json", "methods/exec.stdio_input.json",
               "methods/exec.stdio_output.json", "methods/exec.stdio_close_input.json", "methods/pty.input.json",
               "methods/pty.output.json", "notifications/exec.output.json", "notifications/logs.output.json"}
    present = {_relative(path, V2) for path in schemas.files(V2)}
    assert not removed & present
    assert removed <= {_relative(path) for path in schemas.files(DIALECT)}, "the v1 counterparts exist"


def test_the_report_root_has_examples() -> None:
    assert "results.json" in example_files()["report"]


# -- the schema files themselves -----------------------------------------------------------------


SCHEMA_FILES = sorted(bundle.schemas_dir().rglob("*.json"))


def _schema_id(path: Path) -> str:
    return path.relative_to(bundle.schemas_dir()).as_posix()


def test_schema_files_are_found() -> None:
    assert SCHEMA_FILES, f"no schemas under {bundle.schemas_dir()}"
    assert set(schemas.files(DIALECT)) <= set(SCHEMA_FILES)


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=_schema_id)
def test_schema_file_is_a_draft_2020_12_schema_at_its_own_id(path: Path) -> None:
    """The registry resolves refs by ``$id``: an ``$id`` that drifts from its path breaks every ref to it."""
    schema = _load(path)
    assert schema.get("$schema") == DRAFT_2020_12, f"$schema is {schema.get('$schema')!r}"
    assert schema.get("$id") == schemas.SCHEMA_BASE + _schema_id(path), f"$id is {schema.get('$id')!r}"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(map(str, exc.absolute_path)) or "/"
        pytest.fail(f"not a valid draft 2020-12 schema at {where}: {exc.message}")


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=_schema_id)
def test_every_ref_in_a_schema_resolves(path: Path) -> None:
    """A dangling ``$ref`` only fails when an instance reaches it; find it before a provider does."""
    schema = _load(path)
    dangling = [ref for ref in _refs(schema) if not schemas.exists(urljoin(schema["$id"], ref))]
    assert not dangling, f"unresolvable $ref in {_schema_id(path)}: {dangling}"
