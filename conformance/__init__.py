"""sandbox-conformance: the executable conformance suite for sandbox providers."""

__version__ = "0.1.0"
