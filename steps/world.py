"""The ``world`` fixture and the Given steps every feature shares."""

from __future__ import annotations

import pytest
from pytest_bdd import given

from ._shared import World


@pytest.fixture
def world(conformance_provider, conformance_fresh_provider, conformance_faker, conformance_finding) -> World:
    return World(conformance_provider, conformance_fresh_provider, conformance_faker, conformance_finding)


@given("a provider")
def _(world: World) -> None:
    """The shared provider connection (already started and initialized)."""


@given("a sandbox")
def _(world: World) -> None:
    world.create_sandbox()


@given("a freshly started provider")
def _(world: World) -> None:
    world.fresh = world.start_fresh(handshake=False, ahead=True)  # the scenario's first step: nothing done yet


@given("a freshly started provider that has been initialized")
def _(world: World) -> None:
    world.fresh = world.start_fresh(handshake=False, ahead=True)
    world.fresh.handshake(strict=False)
