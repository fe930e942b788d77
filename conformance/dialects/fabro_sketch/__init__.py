"""Dialect ``fabro-sketch``: the early fabro provider-plugin sketch, as the forkd plugin speaks it.

camelCase handshake (``protocolVersion``, ``displayName``), ``exec {args, timeout_secs}`` with string
output, ``-32001`` and a fixed sentence for anything unsupported, and often one sandbox per process.
"""

from conformance.dialects.fabro_sketch.adapter import FabroSketchAdapter
from conformance.dialects.fabro_sketch.rules import (
    NAME,
    UNSUPPORTED_CODE,
    UNSUPPORTED_MESSAGE,
    SketchRules,
    capability_flags,
    looks_like,
)

__all__ = ["NAME", "UNSUPPORTED_CODE", "UNSUPPORTED_MESSAGE", "FabroSketchAdapter", "SketchRules",
           "capability_flags", "looks_like"]
