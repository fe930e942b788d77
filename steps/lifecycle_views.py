"""Steps for what each query answers about a sandbox after a lifecycle verb changed it (the list after an
undelete, an attach after a set_labels) and for a create from a snapshot keeping the rest of its spec: two
features meeting, where either alone says nothing."""

from __future__ import annotations

from pytest_bdd import parsers, then, when

from conformance.adapter import SandboxHandle, SandboxRequest

from ._shared import World, attempt, expect, invalid_spec_naming, run_ok


@then("listing by the sandbox's labels finds it again")
def _(world: World) -> None:
    sandbox = world.require_sandbox()
    labels = dict(sandbox.status.labels or {})
    listed = [status.id for status in world.provider.list(labels or None)]
    expect(sandbox.id in listed,
           f"sandbox {sandbox.id} was undeleted and is described again, yet listing by {labels} does not list it "
           f"({listed}): a list leaves out deleted sandboxes only")


@then("the attached handle carries exactly the new labels")
def _(world: World) -> None:
    sandbox_id = world.require_sandbox().id
    handle = world.last.expect_success(f"attach to sandbox {sandbox_id}")
    labels = dict(handle.status.labels or {})
    new_labels = world.require(world.lifecycle.new_labels, "replaced labels")
    expect(labels == new_labels,
           f"after set labels replaced sandbox {sandbox_id}'s labels with {new_labels}, an attach reports {labels}: "
           "a handle carries the sandbox's status as it is, not as it was created")


@when(parsers.re(r'I create a sandbox from that snapshot, labelled with a generated label and with the variable '
                 r'(?P<name>[A-Za-z_][A-Za-z0-9_]*) set to "(?P<value>[^"]*)"$'))
def _(world: World, name: str, value: str) -> None:
    snapshot_id = world.require(world.lifecycle.snapshot_id, "filesystem snapshot")
    label = {"conformance-restored": world.token("restored")}
    world.lifecycle.new_label = label
    # A host creates from the id the snapshot answered (v1 carries it in source.snapshot.name).
    world.last = attempt(lambda: world.provider.create(SandboxRequest(from_snapshot=snapshot_id, labels=label,
                                                                      env={name: value})))
    error = world.last.error
    if error is None:
        world.lifecycle.new_sandbox = world.last.answer
    elif not (invalid_spec_naming(error, "labels") or invalid_spec_naming(error, "env")):
        world.last.expect_success(f"creating a sandbox from snapshot {snapshot_id!r} with labels and env (or a "
                                  "refusal as invalid_spec naming labels or env)")


def _from_snapshot(world: World) -> SandboxHandle | None:
    """The sandbox made from the snapshot; None when the create refused labels or env by name (the rule kept)."""
    if world.last.error is not None:
        return None
    return world.require(world.lifecycle.new_sandbox, "sandbox made from the snapshot")


@then("the sandbox made from the snapshot is described with that label")
def _(world: World) -> None:
    made = _from_snapshot(world)
    if made is None:
        return
    sandbox_id = made.id
    label = world.require(world.lifecycle.new_label, "generated label")
    labels = dict(world.provider.describe(sandbox_id).labels or {})
    expect(labels.items() >= label.items(),
           f"sandbox {sandbox_id} was created from a snapshot with the label {label}, yet it is described with "
           f"{labels}: a create from a snapshot honours the spec's labels, or refuses them naming the field")


@then(parsers.re(r'in the sandbox made from the snapshot (?P<name>[A-Za-z_][A-Za-z0-9_]*) is "(?P<value>[^"]*)"$'))
def _(world: World, name: str, value: str) -> None:
    made = _from_snapshot(world)
    if made is None:
        return
    sandbox_id = made.id
    seen = run_ok(world, sandbox_id, f'printf "%s" "${{{name}-unset}}"')
    expect(seen == value.encode(),
           f"sandbox {sandbox_id} was created from a snapshot with {name}={value!r}, yet its commands see "
           f"{seen!r}: a create from a snapshot honours the spec's env, or refuses it naming the field")


# Two settings no host provider honours: an option no provider defines (provider_config is the plugin's own,
# section 8.2) and deletion once stopped. Whichever it checks first, the refusal names a field of the spec.
TWO_SETTINGS = ("provider_config", "ephemeral")


@when("I create a sandbox asking for an unknown provider option and deletion once stopped")
def _(world: World) -> None:
    option = world.token("conformance-option").replace("-", "_")
    extra = {"provider_config": {option: True}, "ephemeral": True}
    world.last = attempt(lambda: world.provider.create(SandboxRequest(extra=extra)))
    if world.last.error is None:
        world.sandbox = world.last.answer


@then("the create is refused as invalid_spec naming provider_config or ephemeral")
def _(world: World) -> None:
    error = world.last.expect_application_error("a create asking for an unknown provider option and deletion "
                                                "once stopped (no provider defines the option)")
    named = error.detail.get("field") if isinstance(error.detail, dict) else None
    expect(any(invalid_spec_naming(error, field) for field in TWO_SETTINGS),
           f"a create asking for two settings it cannot honour was refused as {error.kind} with detail.field "
           f"{named!r}: the refusal names the field it cannot honour, one of {list(TWO_SETTINGS)}, not a list "
           "or a phrase")


@when("I create two sandboxes without any labels")
def _(world: World) -> None:
    # Without even the run label the sweep looks for: the adapter deletes them by id at teardown all the same.
    world.create_sandbox(extra={"labels": {}})
    world.lifecycle.other_sandbox = world.provider.create(SandboxRequest(extra={"labels": {}}))


@when("I replace the first one's labels with a generated label")
def _(world: World) -> None:
    world.lifecycle.new_labels = {"conformance-new-label": world.token("new")}
    sandbox_id = world.require_sandbox().id
    attempt(lambda: world.invoke("set labels", sandbox_id, labels=world.lifecycle.new_labels)).expect_success(
        "set labels")


@then("the second one is still described without labels")
def _(world: World) -> None:
    other = world.require(world.lifecycle.other_sandbox, "second sandbox created without labels")
    labels = dict(world.provider.describe(other.id).labels or {})
    expect(not labels, f"setting the labels of sandbox {world.require_sandbox().id} gave sandbox {other.id}, created "
                       f"without labels too, the labels {labels}: set labels changes the sandbox it names, only")
