"""Dialect ``rest``: a REST provider over HTTP, mapped by a declarative profile (YAML, validated by
``schemas/rest-profile/profile.json``). Built-in profiles live in ``conformance/profiles/``."""

from conformance.dialects.rest.adapter import NAME, RestAdapter, open_rest_adapter, read_token, status_kind
from conformance.dialects.rest.profile import (
           DEFAULT_PROFILE,
           Profile,
           builtin_names,
           load_profile,
           parse_profile,
           profile_path,
)

__all__ = ["DEFAULT_PROFILE", "NAME", "Profile", "RestAdapter", "builtin_names", "load_profile",
           "open_rest_adapter", "parse_profile", "profile_path", "read_token", "status_kind"]
