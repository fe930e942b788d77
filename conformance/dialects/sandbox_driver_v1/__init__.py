"""Dialect ``sandbox-driver-v1``: the lithoscomputer sandbox-driver plugin protocol, version 1.

snake_case shapes, ``initialize {protocol_version: 1}``, application failures as ``-32000`` with
``data.report.kind`` and ``data.detail``, all bytes as padded base64 in ``*_b64`` fields.
"""

from conformance.dialects.sandbox_driver_v1.adapter import SandboxDriverV1Adapter
from conformance.dialects.sandbox_driver_v1.rules import (
    DEFAULT_BASE_SPEC,
    NAME,
    PROTOCOL_VERSION,
    V1Rules,
    capability_flags,
    looks_like,
)

__all__ = ["DEFAULT_BASE_SPEC", "NAME", "PROTOCOL_VERSION", "SandboxDriverV1Adapter", "V1Rules",
           "capability_flags", "looks_like"]
