"""docs/protocol-cheatsheet.md is what ``conformance.cheatsheet`` generates from the schemas, the dialects'
tables and the requirement registries, byte for byte: a change to any of them shows here until the sheet is
regenerated. The other tests pin that what it renders comes from those sources, not from words of its own."""

from __future__ import annotations

import difflib
import json

from conformance import cheatsheet, schemas
from conformance.dialects.sandbox_driver_v2 import rules as v2_rules
from conformance.schema_shapes import ShapeWriter, part
from tests.helpers import REPO

SHEET = REPO / "docs" / "protocol-cheatsheet.md"


def test_the_committed_cheatsheet_is_the_generated_one() -> None:
    generated = cheatsheet.render()
    committed = SHEET.read_text(encoding="utf-8") if SHEET.exists() else ""
    if committed != generated:
        diff = "".join(list(difflib.unified_diff(committed.splitlines(keepends=True), generated.splitlines(keepends=True),
                                                 "committed", "generated", n=1))[:60])
        raise AssertionError(f"docs/protocol-cheatsheet.md is stale; regenerate it with `{cheatsheet.REGENERATE}` "
                             f"(or `make cheatsheet`) and commit it:\n{diff}")


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def test_every_method_schema_of_each_version_has_its_row() -> None:
    text = cheatsheet.render()
    for version in cheatsheet.versions():
        section = _section(text, version.title)
        for path in schemas.files(version.folder):
            if path.parent.name == "methods":
                method = json.loads(path.read_text())["title"]
                assert f"| `{method}` |" in section, f"{method} missing from {version.title}"


def test_a_member_is_optional_exactly_where_the_schema_does_not_require_it() -> None:
    shape = ShapeWriter().expr(part(schemas.schema_path(v2_rules.FOLDER, "methods", "exec.stream.json"), "params"))
    assert shape.startswith("{") and "sandbox_id: ResourceId" in shape and "stdin?: boolean" in shape, shape
    assert "channel: ChannelRequest" in shape  # required in v2: no question mark


def test_the_v2_handle_shape_and_error_kinds_come_from_the_schemas_and_rules() -> None:
    section = _section(cheatsheet.render(), cheatsheet.versions()[0].title)
    assert "**HandleInfo**" in section and "| `working_directory` | `string` |" in section
    for kind in v2_rules.ERROR_KINDS:
        assert f"| `{kind}` | {v2_rules.VOCABULARY.application_error_code} |" in section, kind
    assert "| `unsupported` | -32000 | `{capability: string}` |" in section  # ErrorData's condition for it


def test_a_gated_method_names_its_operation_rows_capability() -> None:
    section = _section(cheatsheet.render(), cheatsheet.versions()[0].title)
    assert "| `sandbox/pause` | `lifecycle.pause` |" in section
    assert "| `pty/close` | `pty` |" in section  # what pty/open opened: the opener's capability
    assert "| `exec/stream` | `exec.stdin` to run with stdin |" in section  # a core call: one use is gated
