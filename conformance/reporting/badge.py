"""The run as a badge: ``badge.svg`` (a flat "conformance | N/M MUST" badge to commit or publish) and
``badge.json`` (the same in shields.io's endpoint format, for ``https://img.shields.io/endpoint?url=...``).

N is the MUST scenarios that passed, M the MUST scenarios that were checked (selected and not skipped:
a skip checked nothing). The colour follows the verdict, not the ratio: a run can pass every MUST
scenario and still fail (a leak, an error, a stale baseline), and the badge must not say otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

LABEL = "conformance"
GREEN, RED = "#4c1", "#e05d44"  # shields.io's brightgreen and red
SHIELDS_COLOR = {GREEN: "brightgreen", RED: "red"}
_CHAR_WIDTH = 7  # px per character of 11px Verdana, near enough for short ASCII labels
_PADDING = 10


def badge_fields(document: dict[str, Any]) -> tuple[str, str]:
    """(message, colour) of the document's badge."""
    must = (document["summary"].get("levels") or {}).get("must") or {}
    checked = sum(n for category, n in must.items() if category not in ("disabled", "skipped", "other_dialect"))
    passed = must.get("passed", 0)
    colour = GREEN if (document.get("verdict") or {}).get("passed") else RED
    return f"{passed}/{checked} MUST", colour


def endpoint_json(document: dict[str, Any]) -> dict[str, Any]:
    message, colour = badge_fields(document)
    return {"schemaVersion": 1, "label": LABEL, "message": message, "color": SHIELDS_COLOR[colour]}


def render_svg(document: dict[str, Any]) -> str:
    message, colour = badge_fields(document)
    left = len(LABEL) * _CHAR_WIDTH + _PADDING
    right = len(message) * _CHAR_WIDTH + _PADDING
    width = left + right
    label, value = escape(LABEL), escape(message)
    return f"""<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" role="img" aria-label="{label}: {value}">
  <title>{label}: {value}</title>
  <linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>
  <clipPath id="r"><rect width="{width}" height="20" rx="3" fill="#fff"/></clipPath>
  <g clip-path="url(#r)">
    <rect width="{left}" height="20" fill="#555"/>
    <rect x="{left}" width="{right}" height="20" fill="{colour}"/>
    <rect width="{width}" height="20" fill="url(#s)"/>
  </g>
  <g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="11">
    <text x="{left / 2}" y="15" fill="#010101" fill-opacity=".3">{label}</text>
    <text x="{left / 2}" y="14">{label}</text>
    <text x="{left + right / 2}" y="15" fill="#010101" fill-opacity=".3">{value}</text>
    <text x="{left + right / 2}" y="14">{value}</text>
  </g>
</svg>
"""


def write_badges(report_dir: Path, document: dict[str, Any]) -> None:
    (report_dir / "badge.svg").write_text(render_svg(document), encoding="utf-8")
    (report_dir / "badge.json").write_text(json.dumps(endpoint_json(document)) + "\n", encoding="utf-8")
