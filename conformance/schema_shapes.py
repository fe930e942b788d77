"""JSON Schemas read back as the shapes a provider author writes: ``{sandbox_id: ResourceId, spec?: ExecSpec}``.

The protocol cheat-sheet (``conformance/cheatsheet.py``) renders every method's params and result from
``schemas/`` with this, so what it shows is what the suite validates. A ``$ref`` to a shared definition
(``common.json#/$defs/HandleInfo``) stays a name, collected so the sheet can spell each one out once; a
``$ref`` with siblings (v2's ``Capabilities`` is v1's plus ``exec.stop`` and ``one_shot``) and one to
another method's ``params``/``result`` are merged in place, since the reader needs the members, not
the way the files reuse each other. Conditional parts (``if``/``then``, ``not``) say what is refused, not
what a shape has: they are left out.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urldefrag, urljoin

from conformance import schemas

NAMED = "$named"  # a flattened node standing for a shared definition, by its absolute URI
INLINED_PARTS = ("params", "result")  # another method's parts: merged where they are reused


@dataclass(frozen=True)
class Member:
    name: str
    required: bool
    type: str
    description: str = ""


def _lookup(uri: str) -> Any:
    return schemas.registry().resolver().lookup(uri).contents


def def_name(uri: str) -> str:
    """``…/common.json#/$defs/HandleInfo`` → ``HandleInfo``."""
    return urldefrag(uri)[1].rsplit("/", 1)[-1]


def def_folder(uri: str) -> str:
    """The dialect folder a definition lives in (``sandbox-driver-v1``)."""
    return urldefrag(uri)[0].removeprefix(schemas.SCHEMA_BASE).split("/", 1)[0]


def _merge(a: Any, b: Any) -> Any:
    """Two schemas that both hold (``allOf``, a ``$ref`` with siblings) as one: members merged by name."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return b if isinstance(b, dict) else a
    out = {**a, **{k: v for k, v in b.items() if k not in ("properties", "required")}}
    if "properties" in a or "properties" in b:
        props = dict(a.get("properties", {}))
        for name, schema in b.get("properties", {}).items():
            props[name] = _merge(props[name], schema) if name in props else schema
        out["properties"] = props
    required = [*a.get("required", []), *(r for r in b.get("required", []) if r not in a.get("required", []))]
    if required:
        out["required"] = required
    return out


def flatten(node: Any, base: str) -> Any:
    """``node`` (from the document at ``base``) with named references kept as ``{NAMED: uri}`` and every
    other reference, ``allOf`` part and extension merged in."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("$ref", "allOf", "if", "then", "else", "not", "$defs", "$id", "$schema", "$comment"):
            continue
        if key == "properties":
            out[key] = {name: flatten(schema, base) for name, schema in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = flatten(value, base)
        elif key in ("oneOf", "anyOf"):
            out[key] = [flatten(schema, base) for schema in value]
        else:
            out[key] = value
    for part in node.get("allOf", []):
        if isinstance(part, dict) and "if" not in part:
            out = _merge(out, flatten(part, base))
    ref = node.get("$ref")
    if isinstance(ref, str):
        uri = urljoin(base, ref)
        own = {k for k in out if k not in ("description", "title")}
        if own or def_name(uri) in INLINED_PARTS:
            out = _merge(flatten(_lookup(uri), urldefrag(uri)[0]), out)
        else:
            out = {NAMED: uri, **({"description": out["description"]} if "description" in out else {})}
    return out


@dataclass
class ShapeWriter:
    """Renders flattened schemas as type expressions, remembering each shared definition it names
    (``named``, in the order first seen) so the sheet can list them; ``labeller`` says how a name is shown
    (a definition of another dialect's folder may need its folder beside it)."""

    named: dict[str, None] = field(default_factory=dict)
    labeller: Callable[[str], str] = def_name

    def label(self, uri: str) -> str:
        return self.labeller(uri)

    def expr(self, node: Any) -> str:
        if node is True or node == {} or not isinstance(node, dict):
            return "any"
        if NAMED in node:
            self.named.setdefault(node[NAMED], None)
            return self.label(node[NAMED])
        if "const" in node:
            return json.dumps(node["const"])
        if "enum" in node:
            return " | ".join(json.dumps(value) for value in node["enum"])
        for key in ("oneOf", "anyOf"):
            if key in node:
                parts: list[str] = []
                for option in node[key]:
                    text = self.expr(_merge({k: v for k, v in node.items() if k not in ("oneOf", "anyOf")},
                                            option))
                    if text not in parts:
                        parts.append(text)
                return " | ".join(parts)
        kinds = node.get("type")
        if kinds is None:
            kinds = "object" if "properties" in node else None
        if kinds is None:
            return "any"
        return " | ".join(self._one_type(kind, node) for kind in ([kinds] if isinstance(kinds, str) else kinds))

    def _one_type(self, kind: str, node: dict[str, Any]) -> str:
        if kind == "array":
            return f"[{self.expr(node['items'])}]" if "items" in node else "[any]"
        if kind == "object":
            members = self.members(node)
            if members:
                return "{" + ", ".join(f"{m.name}{'' if m.required else '?'}: {m.type}" for m in members) + "}"
            extra = node.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                return f"{{string: {self.expr(extra)}}}"
            return "object"
        return kind

    def members(self, node: Any) -> list[Member]:
        """The members of an object shape (required first, each group in the schema's order)."""
        if not isinstance(node, dict):
            return []
        required = node.get("required", [])
        found = [Member(name, name in required, self.expr(schema),
                        schema.get("description", "") if isinstance(schema, dict) else "")
                 for name, schema in node.get("properties", {}).items()]
        return sorted(found, key=lambda m: not m.required)


def part(document_uri: str, name: str) -> Any:
    """A method file's ``params`` or ``result`` (or a notification's ``params``), flattened; None if absent."""
    uri = f"{document_uri}#/$defs/{name}"
    if not schemas.exists(uri):
        return None
    return flatten(_lookup(uri), document_uri)


def definition(uri: str) -> Any:
    """A shared definition, flattened (its own extensions merged in)."""
    return flatten(_lookup(uri), urldefrag(uri)[0])
