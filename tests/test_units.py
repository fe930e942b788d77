"""Small units: output sanitization, tag expressions, redaction, example-row keys."""

from __future__ import annotations

import pytest

from conformance.reference.sanitize import Sanitizer, sanitize
from conformance.scenario_tags import ScenarioTags, TagExpression, example_key
from conformance.transcript import Redactor

COLOURED = b"\x1b[31mred\x1b[0m\x07\x01\n"


@pytest.mark.parametrize(("mode", "expected"), [
    ("raw", COLOURED),
    ("strip_ansi", b"red\x07\x01\n"),
    ("strip_all", b"red\n"),
])
def test_sanitization_modes(mode: str, expected: bytes) -> None:
    assert sanitize(COLOURED, mode) == expected


def test_sanitization_is_the_same_whatever_the_chunking() -> None:
    data = b"a\x1b]0;title\x07b\x1bP1;2q\x1b\\c\xc2\x9b1mdone\t\r\n\x1b[38;5;2mx"
    whole = sanitize(data, "strip_all")
    for size in (1, 2, 3, 7):
        sanitizer = Sanitizer("strip_all")
        pieces = b"".join(sanitizer.feed(data[i:i + size]) for i in range(0, len(data), size)) + sanitizer.finish()
        assert pieces == whole
    assert whole == b"abcdone\t\r\nx"


def test_utf8_text_survives_sanitization() -> None:
    text = "héllo ✓ — ok".encode()
    assert sanitize(text, "strip_all") == text


@pytest.mark.parametrize(("expression", "expected"), [
    ("must", True),
    ("should", False),
    ("must and req:SDP1-059", True),
    ("must and not cap:exec.stdin", True),
    ("should or (req:SDP1-0* and not dialect:fabro-sketch)", True),
    ("not (must or should)", False),
])
def test_tag_expressions(expression: str, expected: bool) -> None:
    tags = ScenarioTags.parse({"id:delete-unknown", "req:SDP1-059", "must"}).tag_set()
    assert TagExpression(expression).matches(tags) is expected


@pytest.mark.parametrize("bad", ["", "must and", "(must", "must)", "and must"])
def test_malformed_tag_expressions_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        TagExpression(bad)


def test_redaction_removes_known_secrets_and_secret_looking_keys() -> None:
    redactor = Redactor()
    redactor.add_environment({"FORKD_TOKEN": "tok-123456", "PLAIN": "visible"})
    assert redactor.text("Bearer tok-123456 and visible") == "Bearer [REDACTED] and visible"
    assert redactor.value({"api_key": "abc", "nested": ["tok-123456"]}) == {"api_key": "[REDACTED]", "nested": ["[REDACTED]"]}


def test_example_keys_are_slugs_of_the_first_cell() -> None:
    assert example_key({"operation": "refresh activity", "capability": "x"}) == "refresh-activity"
    assert example_key({"code": "42"}) == "42"


# -- the results document's self-check ------------------------------------------------------------------------


def test_results_self_check_refuses_a_document_that_breaks_its_schema(tmp_path) -> None:
    """write_document validates before it writes: a scenario that ran, the document's own fields and the one
    left-out scenario entry that stands for all of them are checked; a valid document is written."""
    import copy
    import json

    from conformance.errors import HarnessError
    from conformance.reporting.writer import write_document
    from tests import inprocess

    run = inprocess.run_suite(inprocess.plugin(run_id="self-check"), tmp_path / "run", scenarios=("delete-unknown",))
    document = json.loads((tmp_path / "run" / "results.json").read_text())
    assert sum(s["outcome"] == "disabled" for s in document["scenarios"]) > 1
    assert run.exit_code == 0

    written = write_document(tmp_path / "again", copy.deepcopy(document))
    assert json.loads((tmp_path / "again" / "results.json").read_text()) == written

    ran = copy.deepcopy(document)
    next(s for s in ran["scenarios"] if s["outcome"] == "passed")["outcome"] = "green"
    top = copy.deepcopy(document)
    top["verdict"] = "PASS"
    left_out = copy.deepcopy(document)
    next(s for s in left_out["scenarios"] if s["outcome"] == "disabled")["level"] = "sometimes"
    for broken in (ran, top, left_out):
        with pytest.raises(HarnessError, match="would violate its own schema"):
            write_document(tmp_path / "broken", broken)
    assert not (tmp_path / "broken").exists()


def test_a_sandbox_on_the_suites_own_network_is_seen_even_where_that_network_is_loopback_alone() -> None:
    """GAP 4's observation of a blocked network: a provider that ignores the policy and runs commands on the
    machine the suite runs on is caught by the suite's own listening socket, even on a machine whose only
    interface is loopback (its other interfaces and routes are removed from what the probe saw, here)."""
    import subprocess

    from steps.gaps import _network_probe, _not_blocked, _on_the_suites_network, _read_view, _suite_listener

    with _suite_listener() as (port, inode):
        seen = subprocess.run(["bash", "-c", _network_probe(port)], capture_output=True, check=True).stdout
        loopback_alone = b"\n".join(line for line in seen.splitlines()
                                    if not line.startswith((b"dev", b"sys", b"route"))
                                    or line in (b"dev lo", b"sys lo 0x9"))
        view = _read_view(loopback_alone, port, inode)
    assert view.sees_the_suite and view.sockets_seen and not view.blind
    assert view.others() == [] and view.routes == []
    assert _on_the_suites_network(view) and any("a socket the suite listens on" in p for p in _not_blocked(view))
    # a sandbox of its own, as Docker's --network none leaves it: loopback only, no route, not the suite's socket
    own = _read_view(b"dev lo\nsys lo 0x9\nroute Iface Destination Flags\nsocket-table\n", port, inode)
    assert _not_blocked(own) == [] and _on_the_suites_network(own) is None


# What /proc/net/dev and /sys show in a namespace of its own where the ipip, ip6_tunnel, gre and sit modules are
# loaded: the kernel adds their placeholder devices to every new namespace, down (flags 0x80: IFF_NOARP).
DOWN_PLACEHOLDERS = (b"dev lo\ndev tunl0\ndev ip6tnl0\ndev gre0\ndev sit0\n"
                     b"sys lo 0x9\nsys tunl0 0x80\nsys ip6tnl0 0x80\nsys gre0 0x80\nsys sit0 0x80\nsocket-table\n")


def test_interfaces_that_are_down_are_no_network() -> None:
    from steps.gaps import _down_note, _not_blocked, _read_view

    view = _read_view(DOWN_PLACEHOLDERS, 1234, 1)
    assert _not_blocked(view) == []
    assert view.up() == [] and view.down() == ["gre0", "ip6tnl0", "sit0", "tunl0"]
    assert "tunl0" in _down_note(view)  # named, as information
    # one of them up (0x1 of its flags) is a network; so is one whose flags say down but that carries a route
    up = _read_view(DOWN_PLACEHOLDERS.replace(b"sys tunl0 0x80", b"sys tunl0 0x81"), 1234, 1)
    assert up.up() == ["tunl0"] and any("tunl0" in problem for problem in _not_blocked(up))
    routed = _read_view(DOWN_PLACEHOLDERS + b"route sit0 0000A8C0 0001\n", 1234, 1)
    assert routed.up() == ["sit0"] and len(_not_blocked(routed)) == 2  # the interface, and the route


def test_interfaces_are_those_of_the_sandboxs_own_namespace_not_of_a_sysfs_mounted_outside_it() -> None:
    """/sys/class/net shows the namespace of whoever mounted sysfs (unshare -n, a sandbox given the host's
    /sys): the interfaces are those /proc/net/dev lists, and /sys's flags count only where it lists the same."""
    from steps.gaps import _not_blocked, _read_view

    hosts_sysfs = b"dev lo\nsys docker0 0x1003\nsys eth0 0x1003\nsys lo 0x9\nsocket-table\n"
    view = _read_view(hosts_sysfs, 1234, 1)
    assert view.interfaces == {"lo": None} and _not_blocked(view) == []
    # the namespace's own eth0, with the host's sysfs: its flags are unknown, so its routes decide
    own_eth0 = b"dev lo\ndev eth0\nsys docker0 0x1003\nsys eth0 0x1003\nsys lo 0x9\n"
    assert _read_view(own_eth0, 1234, 1).up() == []
    assert _read_view(own_eth0 + b"route eth0 00000000 0003\n", 1234, 1).up() == ["eth0"]


def test_a_probe_that_saw_nothing_judges_nothing() -> None:
    """A sandbox whose /proc is unreadable prints nothing: that is no evidence of a blocked network, and the
    scenario skips saying the network could not be observed (every namespace lists lo in /proc/net/dev)."""
    from steps.gaps import _read_view, _require_interfaces, _require_sockets

    blind = _read_view(b"sys eth0 0x1003\nsys lo 0x9\n", 1234, 1)
    assert blind.blind and not blind.sockets_seen
    with pytest.raises(pytest.skip.Exception, match="network could not be observed: /proc/net/dev is unreadable"):
        _require_interfaces(blind)
    with pytest.raises(pytest.skip.Exception, match="sockets could not be observed: /proc/net/tcp is unreadable"):
        _require_sockets(blind)
    seeing = _read_view(b"dev lo\nsocket-table\n", 1234, 1)
    _require_interfaces(seeing)
    _require_sockets(seeing)


@pytest.mark.parametrize(("flags", "counted"), [
    ("0003", True),   # RTF_UP | RTF_GATEWAY: a default route
    ("0001", True),   # RTF_UP
    ("0000", False),  # not up
    ("0201", False),  # RTF_UP | RTF_REJECT: ip route add unreachable / prohibit default
    ("0200", False),
])
def test_an_ipv4_route_counts_where_it_is_up_and_leads_somewhere(flags: str, counted: bool) -> None:
    from steps.gaps import _read_view

    view = _read_view(f"dev lo\ndev eth0\nroute Iface Destination Flags\nroute eth0 00000000 {flags}\n".encode(),
                      1234, 1)
    assert (view.routes == [("eth0", "0.0.0.0")]) is counted
    assert view.default_route is counted


def test_the_probe_sees_a_namespace_of_its_own_through_the_hosts_sysfs() -> None:
    """The real thing: `unshare -rn` gives the probe a network namespace of its own (loopback alone, down)
    while /sys/class/net still shows this machine's interfaces; it is judged blocked, and not on the suite's
    network. Needs unprivileged user namespaces."""
    import subprocess

    from steps.gaps import _network_probe, _not_blocked, _read_view, _suite_listener

    if subprocess.run(["unshare", "-rn", "true"], capture_output=True, check=False).returncode != 0:
        pytest.skip("this machine offers no unprivileged user and network namespaces (unshare -rn)")
    with _suite_listener() as (port, inode):
        seen = subprocess.run(["unshare", "-rn", "bash", "-c", _network_probe(port)], capture_output=True,
                              check=True).stdout
    view = _read_view(seen, port, inode)
    assert not view.blind and view.sockets_seen and not view.sees_the_suite
    assert _not_blocked(view) == [], seen.decode()
