"""The protocol cheat-sheet (``docs/protocol-cheatsheet.md``), generated from what the suite itself uses.

Every line comes from a source the suite checks providers against: method and notification shapes from
``schemas/``, capability names from each dialect's ``capability_flags`` (fed a declaration with every field
of its schema), which capability gates which method from the dialects' operation tables, which features a
capability gates from the feature files' ``@cap:`` tags, error kinds and codes from the dialects' rules,
the MUST rules from ``conformance/requirements/``. ``tests/test_cheatsheet.py`` regenerates it and fails
when the committed file differs, so it cannot drift.

    python -m conformance.cheatsheet > docs/protocol-cheatsheet.md      (or: make cheatsheet)
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

from conformance import bundle, requirements, schemas
from conformance.adapter import ProviderAdapter, WireVocabulary
from conformance.dialects import fabro_sketch, rest, sandbox_driver_v1, sandbox_driver_v2
from conformance.dialects.fabro_sketch import rules as sketch_rules
from conformance.dialects.fabro_sketch.adapter import OPERATIONS as SKETCH_OPERATIONS
from conformance.dialects.registry import PLUGIN_DIALECTS
from conformance.dialects.rest.profile import DEFAULT_PROFILE, SCHEMA_REF, load_profile
from conformance.dialects.sandbox_driver_v1 import rules as v1_rules
from conformance.dialects.sandbox_driver_v1.operations import OPERATIONS as V1_OPERATIONS
from conformance.dialects.sandbox_driver_v2 import rules as v2_rules
from conformance.dialects.sandbox_driver_v2.facets import OPERATIONS as V2_OPERATIONS
from conformance.reporting.catalogue import CatalogueEntry, all_scenarios
from conformance.scaffold import TEMPLATES
from conformance.schema_shapes import NAMED, ShapeWriter, def_folder, def_name, definition, flatten, part

REGENERATE = "python -m conformance.cheatsheet > docs/protocol-cheatsheet.md"
# A method that works on what an `…open` method opened (pty/input on a pty/open terminal, exec/stdio_wait on
# an exec/stdio_open process) is only ever called once that one succeeded: the opener's capability gates it.
OPENER_SUFFIX = "open"
# The neutral words of the core calls every adapter makes (WireVocabulary.methods): the method behind one is
# never gated as a whole; an operation row naming it gates one use of it ("run with stdin").
CORE_CALLS = ("initialize", "shutdown", "health", "describe", "list", "exec")


@dataclass(frozen=True)
class Gate:
    """A capability an operation row names for a method: for the whole method, or (``use``) for one use."""

    capability: str
    use: str | None = None


@dataclass(frozen=True)
class JsonRpcVersion:
    """One JSON-RPC dialect as the sheet describes it; every field is taken from the dialect's own code."""

    name: str  # the registry's dialect name
    title: str
    folder: str  # under schemas/
    adapter: type[ProviderAdapter]
    vocabulary: WireVocabulary
    rows: Mapping[str, tuple[str, str, tuple[str, ...]]]  # operation → (method, capability, served through)
    capability_flags: Callable[[Any], dict[str, bool]]
    aliases: Mapping[str, tuple[str, ...]]  # canonical capability → other spellings
    error_codes: Mapping[int, str | None]  # code → kind (None: any kind of data.report.kind)
    error_kinds: Iterable[str]
    notifications: tuple[str, ...]


def _v1_rows(table: Mapping[str, Any]) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    return {name: (op.method, op.capability, op.served_through) for name, op in table.items()}


def versions() -> list[JsonRpcVersion]:
    v1_code = {v1_rules.APPLICATION_ERROR: None}
    return [
        JsonRpcVersion(sandbox_driver_v2.NAME, f"sandbox-driver protocol v{v2_rules.PROTOCOL_VERSION}", v2_rules.FOLDER,
                       sandbox_driver_v2.SandboxDriverV2Adapter, v2_rules.VOCABULARY, _v1_rows(V2_OPERATIONS),
                       v2_rules.capability_flags, v2_rules.CAPABILITY_SPELLINGS, v1_code, v2_rules.ERROR_KINDS,
                       v2_rules.NOTIFICATIONS),
        JsonRpcVersion(sandbox_driver_v1.NAME, f"sandbox-driver protocol v{v1_rules.PROTOCOL_VERSION}", v1_rules.FOLDER,
                       sandbox_driver_v1.SandboxDriverV1Adapter, v1_rules.VOCABULARY, _v1_rows(V1_OPERATIONS),
                       v1_rules.capability_flags, v1_rules.CAPABILITY_SPELLINGS, v1_code, v1_rules.ERROR_KINDS,
                       v1_rules.NOTIFICATIONS),
        JsonRpcVersion(fabro_sketch.NAME, "fabro provider-plugin sketch", sketch_rules.FOLDER,
                       fabro_sketch.FabroSketchAdapter, sketch_rules.VOCABULARY,
                       {name: (method, capability, ()) for name, (method, capability, _) in SKETCH_OPERATIONS.items()},
                       sketch_rules.capability_flags,
                       {name: (wire,) for name, wire in sketch_rules.CAPABILITY_ALIASES.items()},
                       sketch_rules.KINDS_BY_CODE, set(sketch_rules.KINDS_BY_CODE.values()), ()),
    ]


# -- markdown ------------------------------------------------------------------------------------


def code(text: str) -> str:
    """Inline code in a table cell: a pipe would end the cell."""
    return "`" + text.replace("|", "\\|") + "`" if text else ""


def table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("\n", " ") for cell in row) + " |" for row in rows]
    return [*lines, ""]


def anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces as dashes."""
    kept = "".join(ch for ch in title.lower() if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


# -- what the scenarios and registries say ---------------------------------------------------------


def runs_under(entry: CatalogueEntry, dialect: str) -> bool:
    """Whether a scenario runs against a provider of ``dialect`` (as the plugin's gating decides: its
    @dialect: tags allow it, and it cites a rule the dialect holds its providers to)."""
    dialects = entry.tags.dialects
    return (not dialects or dialect in dialects) and bool(requirements.cited_under(entry.tags.requirements, dialect))


def gated_features(dialect: str) -> dict[str, list[str]]:
    """Capability → the feature files whose scenarios (running under ``dialect``) it gates."""
    found: dict[str, set[str]] = {}
    for entry in all_scenarios():
        if runs_under(entry, dialect):
            for capability in entry.tags.capabilities:
                found.setdefault(capability, set()).add(entry.feature)
    return {capability: sorted(features) for capability, features in found.items()}


def must_lines(dialect: str) -> list[str]:
    """The MUST rules of the dialect's registry, counted, and where to read them."""
    rules = [r for r in requirements.load(dialect).values() if r.level == "MUST"]
    checked = sum(1 for r in rules if r.testability in requirements.BLACK_BOX)
    return [(f"- Hold to the {len(rules)} MUST rules of `conformance/requirements/{dialect}.yaml` ({checked} of them "
            "checked from outside): `sandbox-conformance list --requirements` lists every rule with the scenarios "
            "checking it, `sandbox-conformance explain ID` says what one asks.")]


# -- JSON-RPC versions ---------------------------------------------------------------------------


def method_files(folder: str, kind: str = "methods") -> dict[str, str]:
    """Method (or notification) name → its schema document's URI."""
    found = {}
    for path in schemas.files(folder):
        if path.parent.name == kind:
            found[json.loads(path.read_text(encoding="utf-8"))["title"]] = schemas.schema_path(folder, kind, path.name)
    return dict(sorted(found.items()))


def method_gates(version: JsonRpcVersion, methods: Iterable[str],
                 described: Mapping[str, str] | None = None) -> dict[str, list[Gate]]:
    """Every gated method's gates: its operation rows' capabilities (a row served through another's capability,
    or naming a core call's method, gates one use), its opener's (OPENER_SUFFIX), else the capability its
    schema's description names (``described``: for a method the suite has no operation row for)."""
    core = {version.vocabulary.methods[word] for word in CORE_CALLS if word in version.vocabulary.methods}
    gates: dict[str, list[Gate]] = {}
    rows_of = Counter(method for method, _, _ in version.rows.values())
    for operation, (method, capability, served_through) in version.rows.items():
        use = operation if method in core or (served_through and rows_of[method] > 1) else None
        gates.setdefault(method, []).append(Gate(capability, use))
    for opener, found in list(gates.items()):
        whole = [gate for gate in found if gate.use is None]
        if opener.endswith(OPENER_SUFFIX) and whole:
            family = opener.removesuffix(OPENER_SUFFIX)
            gates.update({m: whole for m in methods if m.startswith(family) and m not in gates})
    for method, capability in (described or {}).items():
        gates.setdefault(method, [Gate(capability)])
    return gates


# A schema's description names the capability gating its method in parentheses: "Build logs (snapshots.build_logs)".
DESCRIBED_GATE = re.compile(r"\(([a-z_]+(?:\.[a-z_]+)+|[a-z_]+)[;)]")


def described_gates(version: JsonRpcVersion, descriptions: Mapping[str, str]) -> dict[str, str]:
    """Method → the capability flag its description names, where it names one of this dialect's flags."""
    flags = set(version.capability_flags(_full_declaration(capabilities_schema(version))))
    found = {}
    for method, description in descriptions.items():
        named = DESCRIBED_GATE.search(description)
        if named and named.group(1) in flags:
            found[method] = named.group(1)
    return found


def capabilities_schema(version: JsonRpcVersion) -> Any:
    return definition(schemas.schema_path(version.folder, "common.json") + "#/$defs/Capabilities")


def gate_text(gates: list[Gate]) -> str:
    return "; ".join(code(g.capability) + (f" to {g.use}" if g.use else "") for g in gates)


def ungated(gates: Mapping[str, list[Gate]], method: str) -> bool:
    return all(gate.use is not None for gate in gates.get(method, []))


def _full_declaration(node: Any) -> Any:
    """A declaration with every field of a capabilities schema set: booleans true, groups present."""
    if not isinstance(node, dict):
        return None
    if NAMED in node:
        return _full_declaration(definition(node[NAMED]))
    for key in ("oneOf", "anyOf"):
        if key in node:
            options = [o for o in node[key] if isinstance(o, dict) and o.get("type") != "null"]
            return _full_declaration(options[0]) if options else None
    kinds = node.get("type", "object" if "properties" in node else None)
    kinds = [kinds] if isinstance(kinds, str) else kinds or []
    if "enum" in node:
        return node["enum"][0]
    if "boolean" in kinds:
        return True
    if "object" in kinds:
        return {name: _full_declaration(schema) for name, schema in node.get("properties", {}).items()}
    if "array" in kinds:
        return []
    return None


def _declared_values(node: Any, prefix: str = "") -> dict[str, Any]:
    """Declaration fields that are values, not flags (isolation, network.modes): dotted path → schema."""
    found: dict[str, Any] = {}
    for name, schema in (node.get("properties", {}) if isinstance(node, dict) else {}).items():
        path = f"{prefix}{name}"
        if isinstance(schema, dict) and ("enum" in schema or schema.get("type") == "array"):
            found[path] = schema
        elif isinstance(schema, dict) and "properties" in schema:
            found.update(_declared_values(schema, f"{path}."))
    return found


def capability_section(version: JsonRpcVersion, gated: Mapping[str, list[Gate]], writer: ShapeWriter) -> list[str]:
    caps = capabilities_schema(version)
    full = _full_declaration(caps)
    flags = sorted(version.capability_flags(full))
    features = gated_features(version.name)
    by_capability: dict[str, list[str]] = {}
    for method, gates in sorted(gated.items()):
        for gate in gates:
            by_capability.setdefault(gate.capability, []).append(code(method) + (f" to {gate.use}" if gate.use else ""))
    # One row per capability: another spelling's flag and scenarios are the canonical name's.
    canonical = {spelling: name for name, spellings in version.aliases.items() for spelling in spellings}
    for spelling, name in canonical.items():
        features[name] = sorted({*features.get(name, []), *features.pop(spelling, [])})
        by_capability[name] = [*by_capability.get(name, []), *by_capability.pop(spelling, [])]
    adapter = version.adapter
    rows = []
    for name in sorted((set(flags) | set(features) | set(by_capability)) - set(canonical)):
        if name not in flags and name not in adapter.core_capabilities \
                and name not in adapter.capabilities_without_method:
            continue  # gates scenarios, but no provider of this dialect can declare it: they always skip
        spellings = version.aliases.get(name, ())
        if name in adapter.capabilities_without_method:
            how = "no method here: a scenario needing it is skipped"
        elif name in adapter.core_capabilities:
            how = "no flag: core in this dialect, always applies"
        elif version.capability_flags(full).get(name) is False:
            how = "reserved: never declared"
        else:
            how = "also spelled " + ", ".join(code(s) for s in spellings) if spellings else ""
        rows.append((code(name), ", ".join(by_capability.get(name, [])),
                     ", ".join(features.get(name, [])), how))
    values = _declared_values(caps)
    lines = [f"The `capabilities` object of {code('initialize')}'s answer"
             + (" (and of each sandbox's `HandleInfo`)" if "HandleInfo" in _common_defs(version.folder) else "")
             + ". A flag not declared true means: not offered; a scenario gated by it is skipped as "
             "\"capability X not declared\", and a call needing it must be refused as `unsupported`."
             + (" Declared values that are not flags: "
                + ", ".join(f"{code(path)} ({code(writer.expr(schema))})" for path, schema in values.items()) + "."
                if values else ""), ""]
    return lines + table(("Capability", "Gates methods", "Gates scenarios of", "Note"), rows)


def _schema_document(uri: str) -> Any:
    return json.loads((bundle.schemas_dir() / uri.removeprefix(schemas.SCHEMA_BASE)).read_text(encoding="utf-8"))


def _common_defs(folder: str) -> set[str]:
    """The names a dialect folder's common.json defines."""
    return set(_schema_document(schemas.schema_path(folder, "common.json")).get("$defs", {}))


def _error_details(uri: str, writer: ShapeWriter) -> dict[str, str]:
    """Error kind → what ``data.detail`` must carry for it (the ErrorData conditions), its $ref's first."""
    resolved = schemas.registry().resolver().lookup(uri)
    contents = resolved.contents
    base = uri.split("#", 1)[0]
    found: dict[str, str] = {}
    if isinstance(contents.get("$ref"), str):
        found.update(_error_details(urljoin(base, contents["$ref"]), writer))
    for condition in contents.get("allOf", []):
        kind = (condition.get("if", {}).get("properties", {}).get("report", {}).get("properties", {})
                .get("kind", {}).get("const"))
        detail = condition.get("then", {}).get("properties", {}).get("detail")
        if isinstance(kind, str) and detail is not None:
            found[kind] = writer.expr(flatten(detail, base))
    return found


def error_section(version: JsonRpcVersion, writer: ShapeWriter) -> list[str]:
    data_uri = schemas.schema_path(version.folder, "common.json") + "#/$defs/ErrorData"
    if None in version.error_codes.values():
        (app_code,) = version.error_codes
        details = _error_details(data_uri, writer) if schemas.exists(data_uri) else {}
        report = writer.expr(definition(schemas.schema_path(v1_rules.FOLDER, "common.json") + "#/$defs/ErrorReport"))
        lines = [(f"An application failure is the JSON-RPC error `{{code: {app_code}, message, data: {{report, "
                 f"detail}}}}` with `report` {code(report)}; `report.kind` is one of the kinds below (a reader treats "
                 "any other as opaque) and `detail` carries what the kind names. Malformed requests get JSON-RPC's own "
                 "codes (-32700, -32600, -32601, -32602)."), ""]
        rows = [(code(kind), str(app_code), code(details.get(kind, ""))) for kind in sorted(version.error_kinds)]
        return lines + table(("Kind", "Code", "`data.detail` carries"), rows)
    lines = ["Each kind has its own JSON-RPC error code (no `data.report`):", ""]
    rows = [(code(kind), str(number), f"the message is always {code(sketch_rules.UNSUPPORTED_MESSAGE)}"
             if number == sketch_rules.UNSUPPORTED_CODE else "")
            for number, kind in sorted(version.error_codes.items(), reverse=True) if kind is not None]
    return lines + table(("Kind", "Code", "Note"), rows)


def shapes_section(version: JsonRpcVersion, writer: ShapeWriter) -> list[str]:
    """Every shared definition the tables above named, and the ones those name, spelled out by name."""
    shapes: dict[str, Any] = {}
    while pending := [uri for uri in writer.named if uri not in shapes]:
        for uri in pending:
            shape = definition(uri)
            while isinstance(shape, dict) and NAMED in shape:  # an alias of another definition
                shape = definition(shape[NAMED])
            shapes[uri] = shape
            writer.members(shape)  # what its members name joins the list
    lines: list[str] = []
    for uri, shape in sorted(shapes.items(), key=lambda item: writer.label(item[0]).lower()):
        members = writer.members(shape)
        if members and "oneOf" not in shape and "anyOf" not in shape:
            lines += [f"**{writer.label(uri)}**", ""]
            lines += table(("Member", "Type", "Note"), ((code(m.name + ("" if m.required else "?")), code(m.type),
                                                         m.description) for m in members))
        else:
            lines += [f"- **{writer.label(uri)}**: {code(writer.expr(shape))}{_constraints(shape)}", ""]
    return lines


def _constraints(node: Any) -> str:
    if not isinstance(node, dict):
        return ""
    said = [f"{key} {node[key]}" for key in ("minLength", "maxLength", "minimum", "maximum") if key in node]
    if "pattern" in node:
        said.append(f"pattern {code(node['pattern'])}")
    if "format" in node:
        said.append(f"format {node['format']}")
    text = "; ".join(said)
    description = node.get("description", "")
    return (f" ({text})" if text else "") + (f" — {description}" if description else "")


def labeller(version: JsonRpcVersion) -> Callable[[str], str]:
    """How the version's sheet names a definition: a borrowed one whose name this folder also defines reads
    ``v1.Timestamp`` (the borrowing folder's ``Timestamp`` is another shape)."""
    own = _common_defs(version.folder)
    labels = {d.name: d.label for d in PLUGIN_DIALECTS.values()}

    def label(uri: str) -> str:
        folder, name = def_folder(uri), def_name(uri)
        return f"{labels.get(folder, folder)}.{name}" if folder != version.folder and name in own else name

    return label


def version_section(version: JsonRpcVersion) -> list[str]:
    writer = ShapeWriter(labeller=labeller(version))
    methods = method_files(version.folder)
    gated_methods = [*methods, *(method for method, _, _ in version.rows.values())]
    descriptions = {method: _schema_document(uri).get("description", "") for method, uri in methods.items()}
    gates = method_gates(version, gated_methods, described_gates(version, descriptions))
    vocabulary = version.vocabulary
    dialect = PLUGIN_DIALECTS[version.name]
    init_params = methods.get("initialize")
    lines = [f"## {version.title} (`--dialect {version.name}`)", "",
             f"JSON-RPC {vocabulary.jsonrpc} over the plugin's stdin/stdout, one message per line. "
             f"The handshake asks `{vocabulary.version_field}: {vocabulary.protocol_version}`; a sandbox is named by "
             f"`{vocabulary.sandbox_field}`. Schemas: [`schemas/{version.folder}/`](../schemas/{version.folder}/)."
             + (" Byte streams ride per-operation data channels (ARCHITECTURE.md, \"v2 data channels\")."
                if dialect.data_channels else ""), "", "### Methods", "",
             ("`?` marks an optional member; a capitalised type is spelled out under "
             f"[Shapes](#{anchor(version.title + ' shapes')})."), ""]
    rows = []
    for method in sorted({*methods, *gates}):
        if method in methods:
            params, result = part(methods[method], "params"), part(methods[method], "result")
            description = descriptions[method]
            shown = (code(writer.expr(params)) if params is not None else "",
                     code(writer.expr(result)) if result is not None else "")
        else:
            description, shown = "no schema here: the suite checks its effect, not its shape", ("", "")
        rows.append((code(method), gate_text(gates.get(method, [])), *shown, description))
    lines += table(("Method", "Gated by", "Params", "Result", "What"), rows)
    if version.notifications:
        notes = method_files(version.folder, "notifications")
        lines += ["### Notifications (plugin → host)", ""]
        lines += table(("Notification", "Params"), ((code(n), code(writer.expr(part(notes[n], "params"))))
                                                    for n in version.notifications if n in notes))
    lines += ["### Capabilities", "", *capability_section(version, gates, writer)]
    lines += ["### Error kinds", "", *error_section(version, writer)]
    lines += ["### A minimal plugin must", ""]
    core = [m for m in methods if ungated(gates, m)]
    result = part(init_params, "result") if init_params else None
    unsupported = version.error_codes.get(sketch_rules.UNSUPPORTED_CODE) == "unsupported"
    lines += [f"- Answer {code('initialize')} with {code(writer.expr(result))}." if result is not None else "",
              "- Implement every method no capability gates: " + ", ".join(code(m) for m in core) + ".",
              "- Declare only what it offers, and refuse anything else as `unsupported` ("
              + (f"code {sketch_rules.UNSUPPORTED_CODE}, message {code(sketch_rules.UNSUPPORTED_MESSAGE)}"
                 if unsupported else
                 f"code {next(iter(version.error_codes))}, naming the capability in `data.detail.capability`")
              + ").",
              "- Write nothing but protocol messages on stdout (logs go to stderr).",
              *must_lines(version.name), ""]
    lines += [f"### {version.title} shapes", "", *shapes_section(version, writer)]
    return lines


# -- REST ----------------------------------------------------------------------------------------


def rest_section() -> list[str]:
    writer = ShapeWriter()
    profile_schema = flatten(schemas.registry().resolver().lookup(SCHEMA_REF).contents, SCHEMA_REF)
    required = set(profile_schema.get("required", []))
    builtin = load_profile(DEFAULT_PROFILE)
    operations = {name: schema for name, schema in profile_schema["properties"].items()
                  if "path" in schema.get("properties", {})}
    lines = [f"## REST providers (`--rest URL --profile NAME|PATH`, dialect `{rest.NAME}`)", "",
             ("A REST provider has no protocol of its own: a YAML profile maps the suite's neutral operations onto "
             f"its HTTP API (schema: [`schemas/rest-profile/profile.json`](../schemas/rest-profile/profile.json); "
             f"the built-in `{DEFAULT_PROFILE}` profile: "
             f"[`conformance/profiles/{DEFAULT_PROFILE}.yaml`](../conformance/profiles/{DEFAULT_PROFILE}.yaml))."), "",
             "### Operations", ""]
    rows = []
    for name, schema in operations.items():
        op = builtin.raw.get(name)
        example = f"{op.get('method', 'GET')} {op['path']}" if isinstance(op, dict) else ""
        fields = ", ".join(f"{m.name}{'' if m.required else '?'}" for m in writer.members(schema))
        rows.append((code(name), "yes" if name in required else "no", code(fields), code(example),
                     schema.get("description", "")))
    lines += table(("Operation", "Required", "Profile fields", f"`{DEFAULT_PROFILE}`", "What"), rows)
    other = [m for m in writer.members(profile_schema) if m.name not in operations]
    lines += ["Other profile fields: " + ", ".join(code(m.name + ("" if m.required else "?")) for m in other) + ".", ""]
    features = gated_features(rest.NAME)
    lines += ["### Capabilities", "",
              ("A profile declares optional capabilities under `capabilities:` by the suite's dotted names "
              "(absent: nothing optional). Those that gate scenarios a REST provider runs:"), ""]
    lines += table(("Capability", "Gates scenarios of", "Note"),
                   ((code(name), ", ".join(files), rest.RestAdapter.capabilities_without_method.get(name, "")
                     and "no profile operation for it: a scenario needing it is skipped")
                    for name, files in sorted(features.items())))
    by_kind: dict[str, list[int]] = {}
    for status in range(400, 600):
        by_kind.setdefault(rest.status_kind(status), []).append(status)
    lines += ["### Error kinds", "", ("An error answer's status names its kind (a status the operation's `missing` "
              "lists is `not_found`); the message is read at the profile's `errors.message` pointer."), ""]
    lines += table(("Kind", "HTTP statuses"), ((code(kind), _ranges(statuses)) for kind, statuses in by_kind.items()))
    lines += ["### A minimal provider must", "",
              "- Serve the operations the profile requires: " + ", ".join(
                  code(n) for n in operations if n in required) + ", as its profile maps them.",
              ("- Answer an unknown or deleted sandbox's id with a status the operation lists as `missing` or `gone`, "
              "never with an exit code."),
              *must_lines(rest.NAME), ""]
    return lines


def _ranges(numbers: list[int]) -> str:
    spans: list[list[int]] = []
    for n in numbers:
        if spans and spans[-1][1] == n - 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)


# -- the document --------------------------------------------------------------------------------


def render() -> str:
    sections = [version_section(version) for version in versions()]
    titles = [version.title for version in versions()]
    lines = ["# Protocol cheat-sheet", "",
             "<!-- Generated by `" + REGENERATE + "` (or `make cheatsheet`) from schemas/, "
             "conformance/dialects/, conformance/requirements/ and features/. Do not edit by hand: "
             "tests/test_cheatsheet.py fails when it differs. -->", "",
             ("What a provider answers, per dialect: methods with their params and result, the capabilities and what "
             "each gates, error kinds and codes, and what a minimal provider must do. Start a provider from a "
             f"template with `sandbox-conformance init --template {'|'.join(TEMPLATES)}`."), "",
             *(f"- [{title}](#{anchor(title + ' --dialect ' + version.name)})"
               for title, version in zip(titles, versions(), strict=True)),
             f"- [REST providers](#{anchor('REST providers --rest URL --profile NAMEPATH dialect ' + rest.NAME)})", ""]
    for section in sections:
        lines += section
    lines += rest_section()
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def main() -> int:
    print(render(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
