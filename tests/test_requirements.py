"""The requirement registry is complete and well-formed, and its checks catch every kind of gap."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conformance import requirements as registry
from conformance.errors import HarnessError
from conformance.reporting.catalogue import all_scenarios
from conformance.requirements import Requirement, coverage, findings, load, problems
from conformance.scenario_tags import ScenarioTags

V1 = "sandbox-driver-v1"
V2 = "sandbox-driver-v2"

SUITE_DERIVED = {"SDP1-S01", "SDP1-S02", "SDP1-S03", "SDP1-S04", "SDP1-S05", "SDP1-S06", "SDP1-S07", "SDP1-S08",
                 "SDP1-S09", "SDP1-S10", "SDP1-S11", "SDP1-S12", "SDP1-S13", "SDP1-S14", "SDP1-S15", "SDP1-S16", "SDP1-S17",
                 "SDP1-S18", "SDP1-S19", "SDP1-S20", "SDP1-S21", "SDP1-S22", "SDP1-S23",
                 "SDP1-S24", "SDP1-S25"}


def _scenario(sid: str, *tags: str, feature: str = "fake.feature") -> SimpleNamespace:
    """A stand-in with the shape of a catalogue entry."""
    return SimpleNamespace(id=sid, feature=feature, tags=ScenarioTags.parse({f"id:{sid}", "must", *tags}))


def _requirement(rid: str, testability: str = "BB", excluded: str | None = None, carries: tuple[str, ...] = (),
                 registry: str = "") -> Requirement:
    return Requirement(id=rid, level="MUST", section="§0", text="something", testability=testability,
                       excluded=excluded, carries=carries, registry=registry)


# -- the registry itself --------------------------------------------------------------------------


def test_the_registry_loads_and_lives_inside_the_package() -> None:
    requirements = load()
    assert requirements
    assert all(isinstance(r, Requirement) and r.id == rid for rid, r in requirements.items())
    assert (Path(registry.__file__).parent / "sandbox-driver-v1.yaml").is_file()


def test_the_registry_holds_every_numbered_item_once_plus_the_suite_derived_ones() -> None:
    ids = list(load("sandbox-driver-v1"))
    assert len(ids) == len(set(ids))
    numbered = {f"SDP1-{n:03d}" for n in range(1, 127)}
    assert set(ids) == numbered | SUITE_DERIVED


def test_the_v2_registry_follows_the_numbered_list_and_v1_s_derived_ones() -> None:
    """SDP2-NNN is the digest's item NNN as it holds in v2 (1-126 restated, 127-145 v2's own); SDP2-S01..S25 are
    v1's derived rules in v2, S26 on v2's own. The gaps are the rules v2 has no counterpart for."""
    ids = list(load(V2))
    assert len(ids) == len(set(ids))
    numbered = {f"SDP2-{n:03d}" for n in range(1, 146)} - {"SDP2-078"}
    counterparts = {rid.replace("SDP1-", "SDP2-") for rid in SUITE_DERIVED} - {"SDP2-S15"}
    own = {f"SDP2-S{n:02d}" for n in range(26, 52)}
    assert set(ids) == numbered | counterparts | own


def test_every_v1_rule_is_carried_into_v2_or_its_change_is_explained() -> None:
    """A v1 rule without a v2 carrier stops judging v2 providers; that must be a decision a v2 note states."""
    v2 = load(V2)
    carried = {rid for r in v2.values() for rid in r.carries}
    notes = " ".join(r.note or "" for r in v2.values())
    unexplained = [rid for rid in load(V1) if rid not in carried and rid not in notes]
    assert not unexplained, f"v1 rules neither carried into v2 nor explained by a v2 note: {unexplained}"
    # The changes the protocol made are not carried, so their v1 scenarios never judge a v2 plugin.
    changed = {"SDP1-115", "SDP1-067", "SDP1-110", "SDP1-068", "SDP1-099", "SDP1-S15", "SDP1-019", "SDP1-037",
               "SDP1-105", "SDP1-106", "SDP1-107"}
    assert not changed & carried


def test_every_registry_is_merged_and_none_claims_another_s_ids() -> None:
    merged = load()
    assert set(registry.registries()) >= {"sandbox-driver-v1", "sandbox-driver-v2", "fabro-sketch", "gaps"}
    assert {"SKETCH-002", "GAP-1", "GAP-2", "GAP-3", "SDP1-059", "SDP2-059", "SDP2-S26"} <= set(merged)
    assert len(merged) == sum(len(load(name)) for name in registry.registries())


def test_host_and_unobservable_items_say_why_they_are_excluded() -> None:
    for r in load().values():
        if r.testability in ("HOST", "N"):
            assert r.excluded and r.excluded.strip(), r.id


def test_levels_follow_the_protocol_wording() -> None:
    requirements = load()
    assert requirements["SDP1-121"].level == "SHOULD"
    # Derived requirements are MUST, except where the protocol text only suggests the reading: a state
    # after stop (the protocol states none; its host documents start and stop as no-ops) and a symlink
    # reported as the link itself (§8.5 lists only the kinds).
    # …, a retryable flag the host library would set, what upstream answers for ids nothing uses, and
    # Rust's architecture names, no exit code for a process a signal ended, and an event dated by the wall
    # clock (v1's timestamps are informational).
    should = {"SDP1-S18", "SDP1-S19", "SDP1-S20", "SDP1-S21", "SDP1-S23", "SDP1-S24", "SDP1-S25"}
    assert {requirements[rid].level for rid in should} == {"SHOULD"}
    assert all(r.level == "MUST" for r in requirements.values() if r.id in SUITE_DERIVED - should)
    assert {r.level for r in requirements.values()} <= {"MUST", "SHOULD", "MAY", "GAP"}


def _write_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> str:
    """A throwaway registry file; the cache is keyed by name, so each test uses a fresh one."""
    name = f"fake-{tmp_path.name.lower().replace('_', '-')}"
    (tmp_path / f"{name}.yaml").write_text(text, encoding="utf-8")
    monkeypatch.setattr(registry, "HERE", tmp_path)
    return name


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- {id: SDP1-001, level: MUST, section: x, text: y, testability: BB, colour: red}", "SDP1-001: unknown key"),
        ("- {id: SDP1-1, level: MUST, section: x, text: y, testability: BB}", "SDP1-1: id does not match"),
        (("- {id: SDP1-001, level: MUST, section: x, text: y, testability: BB}\n"
          "- {id: SDP1-001, level: MUST, section: x, text: z, testability: BB}"), "SDP1-001 is listed twice"),
        ("- {id: SDP1-001, level: OUGHT, section: x, text: y, testability: BB}", "SDP1-001: level 'OUGHT'"),
        ("- {id: SDP1-001, level: MUST, section: x, text: y, testability: BLACK}", "SDP1-001: testability 'BLACK'"),
        ("- {id: SDP1-001, level: MUST, section: x, text: y, testability: HOST}", "SDP1-001: a HOST requirement"),
        ("- {id: SDP1-002, level: MUST, section: x, testability: N, excluded: why}", "SDP1-002: text is missing"),
        ("{SDP1-001: MUST}", "must be a list"),
    ],
    ids=["unknown-key", "bad-id", "duplicate", "bad-level", "bad-testability", "host-without-reason",
         "missing-text", "not-a-list"],
)
def test_a_bad_registry_is_refused_naming_the_id_and_the_problem(tmp_path, monkeypatch, text, fragment) -> None:
    name = _write_registry(tmp_path, monkeypatch, text)
    with pytest.raises(HarnessError) as raised:
        load(name)
    assert fragment in str(raised.value)


def test_a_good_small_registry_loads(tmp_path, monkeypatch) -> None:
    name = _write_registry(tmp_path, monkeypatch,
                           "- {id: SDP1-S09, level: MAY, section: x, text: y, testability: N, excluded: why}")
    assert load(name)["SDP1-S09"].excluded == "why"
    assert load(name)["SDP1-S09"].registry == name and load(name)["SDP1-S09"].carries == ()


def _write_carried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, carrying: str) -> str:
    """A throwaway carried registry (standing in for v1) and a carrying one; returns the carrying one's name."""
    carried = f"carried-{tmp_path.name.lower().replace('_', '-')}"
    (tmp_path / f"{carried}.yaml").write_text(
        "- {id: SDP1-001, level: MUST, section: x, text: y, testability: BB}\n"
        "- {id: SDP1-002, level: SHOULD, section: x, text: y, testability: BB}\n"
        "- {id: SDP1-003, level: MUST, section: x, text: y, testability: BB}\n", encoding="utf-8")
    monkeypatch.setattr(registry, "CARRIED_REGISTRY", carried)
    return _write_registry(tmp_path, monkeypatch, carrying)


def test_carries_names_one_rule_or_several_separated_by_commas(tmp_path, monkeypatch) -> None:
    name = _write_carried(tmp_path, monkeypatch,
                          "- {id: SDP2-001, level: MUST, section: x, text: y, testability: BB, carries: 'SDP1-001, SDP1-003'}\n"
                          "- {id: SDP2-002, level: SHOULD, section: x, text: y, testability: BB, carries: SDP1-002}\n"
                          "- {id: SDP2-003, level: MUST, section: x, text: y, testability: BB}")
    loaded = load(name)
    assert [loaded[rid].carries for rid in ("SDP2-001", "SDP2-002", "SDP2-003")] == \
        [("SDP1-001", "SDP1-003"), ("SDP1-002",), ()]


@pytest.mark.parametrize(
    ("carrying", "fragment"),
    [
        ("- {id: SDP2-001, level: MUST, section: x, text: y, testability: BB, carries: SDP1-999}",
         "SDP2-001 carries SDP1-999, which"),
        ("- {id: SDP2-001, level: MUST, section: x, text: y, testability: BB, carries: 'SDP1-001, banana'}",
         "SDP2-001: carries names 'banana'"),
        ("- {id: SDP2-001, level: MUST, section: x, text: y, testability: BB, carries: [SDP1-001]}",
         "SDP2-001: carries must be a non-empty string"),
        ("- {id: SDP2-001, level: MUST, section: x, text: y, testability: BB, carries: 'SDP1-001, SDP1-001'}",
         "SDP2-001: carries names an id twice"),
        ("- {id: SDP2-001, level: MUST, section: x, text: y, testability: BB, carries: SDP1-002}",
         "SDP2-001 is MUST but carries SDP1-002, which is SHOULD"),
        (("- {id: SDP2-001, level: MUST, section: x, text: y, testability: BB, carries: SDP1-001}\n"
          "- {id: SDP2-002, level: MUST, section: x, text: y, testability: BB, carries: SDP1-001}"),
         "SDP1-001 is carried by both SDP2-001 and SDP2-002"),
        ("- {id: SDP2-001, level: MUST, section: x, text: y, testability: BB, carries: SDP2-001}",
         "SDP2-001: a requirement cannot carry itself"),
    ],
    ids=["unknown-carried-id", "not-an-id", "a-list", "twice", "other-level", "two-carriers", "itself"],
)
def test_a_bad_carries_is_refused_naming_the_id_and_the_problem(tmp_path, monkeypatch, carrying, fragment) -> None:
    name = _write_carried(tmp_path, monkeypatch, carrying)
    with pytest.raises(HarnessError) as raised:
        load(name)
    assert fragment in str(raised.value)


def test_the_carried_registry_cannot_carry_its_own_rules(tmp_path, monkeypatch) -> None:
    name = _write_registry(tmp_path, monkeypatch,
                           "- {id: SDP1-001, level: MUST, section: x, text: y, testability: BB, carries: SDP1-002}")
    monkeypatch.setattr(registry, "CARRIED_REGISTRY", name)
    with pytest.raises(HarnessError, match="cannot carry its own rules"):
        load(name)


def test_every_carried_id_of_the_real_v2_registry_is_a_v1_rule_at_its_level() -> None:
    v1 = load(V1)
    pairs = [(r, carried) for r in load(V2).values() for carried in r.carries]
    assert pairs
    assert all(carried in v1 and v1[carried].level == r.level for r, carried in pairs)


# -- projection onto a dialect's rules --------------------------------------------------------------


def test_under_v2_a_carried_v1_citation_projects_onto_its_v2_rule() -> None:
    cited = ["SDP1-059", "GAP-1", "SDP2-135", "SDP1-S02"]
    assert registry.cited_under(cited, V2) == ("SDP2-059", "GAP-1", "SDP2-135", "SDP2-S02")


def test_under_v2_a_v1_rule_v2_changed_is_not_a_rule() -> None:
    # BASH_ENV stripping, the terminal event before the response, v1's missing-file io: not v2's rules.
    assert registry.cited_under(["SDP1-067", "SDP1-115", "SDP1-S15"], V2) == ()
    assert registry.cited_under(["SDP1-067", "SDP2-067"], V2) == ("SDP2-067",)


def test_a_rule_cited_directly_and_through_its_carry_counts_once() -> None:
    assert registry.cited_under(["SDP1-059", "SDP2-059"], V2) == ("SDP2-059",)
    assert registry.cited_under(["SDP2-059", "SDP1-059"], V2) == ("SDP2-059",)


def test_other_dialects_are_untouched_by_the_projection() -> None:
    cited = ["SDP1-059", "SDP2-059", "SKETCH-005", "GAP-3"]
    assert registry.cited_under(cited, V1) == ("SDP1-059", "GAP-3")
    assert registry.cited_under(cited, "fabro-sketch") == ("SKETCH-005", "GAP-3")
    assert registry.cited_under(cited, "no-such-dialect") == ("GAP-3",)


def test_level_under_judges_projected_citations() -> None:
    assert registry.level_under("must", registry.cited_under(["SDP1-059", "GAP-1"], V2)) == "must"
    assert registry.level_under("must", registry.cited_under(["SDP1-067", "GAP-1"], V2)) == "gap"
    assert registry.level_under("should", registry.cited_under(["SDP1-S18"], V2)) == "should"


# -- coverage and problems ------------------------------------------------------------------------


def test_coverage_maps_each_requirement_to_the_scenarios_tagging_it() -> None:
    requirements = {rid: _requirement(rid) for rid in ("SDP1-001", "SDP1-002")}
    scenarios = [_scenario("a", "req:SDP1-001"), _scenario("b", "req:SDP1-001", "req:SDP1-002"), _scenario("c")]
    assert coverage(requirements, scenarios) == {"SDP1-001": ["a", "b"], "SDP1-002": ["b"]}


def test_problems_names_a_tag_for_an_unknown_requirement_with_its_scenario_and_feature() -> None:
    requirements = {"SDP1-001": _requirement("SDP1-001")}
    found = problems(requirements, [_scenario("a", "req:SDP1-001"),
                                    _scenario("b", "req:SDP1-999", feature="exec.feature")])
    assert len(found) == 1
    assert "SDP1-999" in found[0] and "b" in found[0] and "exec.feature" in found[0]


@pytest.mark.parametrize("testability", ["BB", "BB+F"])
def test_problems_names_a_black_box_requirement_without_scenario_or_reason(testability) -> None:
    requirements = {"SDP1-001": _requirement("SDP1-001", testability),
                    "SDP1-002": _requirement("SDP1-002", testability, excluded="needs a second host"),
                    "SDP1-003": _requirement("SDP1-003", "HOST", excluded="the host's duty")}
    found = problems(requirements, [])
    assert len(found) == 1 and "SDP1-001" in found[0], found


def test_problems_names_an_excluded_requirement_that_scenarios_nevertheless_tag() -> None:
    requirements = {"SDP1-013": _requirement("SDP1-013", "HOST", excluded="the host's duty")}
    found = problems(requirements, [_scenario("a", "req:SDP1-013"), _scenario("b", "req:SDP1-013")])
    assert len(found) == 1
    assert "SDP1-013" in found[0] and "excluded" in found[0] and "a, b" in found[0]


def test_coverage_counts_a_scenario_citing_a_carried_rule_unless_it_never_runs_under_the_carrier() -> None:
    requirements = {"SDP1-001": _requirement("SDP1-001", registry=V1),
                    "SDP2-001": _requirement("SDP2-001", carries=("SDP1-001",), registry=V2)}
    scenarios = [_scenario("shared", "req:SDP1-001"), _scenario("v1-only", "req:SDP1-001", "dialect:sandbox-driver-v1"),
                 _scenario("v2-only", "req:SDP2-001", "dialect:sandbox-driver-v2"),
                 _scenario("both", "req:SDP1-001", "dialect:sandbox-driver-v1", "dialect:sandbox-driver-v2")]
    assert coverage(requirements, scenarios) == {"SDP1-001": ["shared", "v1-only", "both"],
                                                 "SDP2-001": ["shared", "v2-only", "both"]}


def test_a_carrying_requirement_without_a_scenario_that_runs_under_it_is_uncovered() -> None:
    requirements = {"SDP1-001": _requirement("SDP1-001", registry=V1),
                    "SDP2-001": _requirement("SDP2-001", carries=("SDP1-001",), registry=V2)}
    found = findings(requirements, [_scenario("v1-only", "req:SDP1-001", "dialect:sandbox-driver-v1")])
    assert [(f.kind, f.requirement) for f in found] == [("uncovered", "SDP2-001")]
    assert problems(requirements, [_scenario("v1-only", "req:SDP1-001", "dialect:sandbox-driver-v1")]) == \
        [found[0].text]


def test_a_consistent_registry_has_no_problems() -> None:
    requirements = {"SDP1-001": _requirement("SDP1-001"), "SDP1-002": _requirement("SDP1-002", "N", "unobservable")}
    assert problems(requirements, [_scenario("a", "req:SDP1-001")]) == []


def test_the_real_suite_has_no_requirement_problems() -> None:
    """Fails until every black-box requirement, of every registry, has a scenario or a reason; the list is the
    to-do list."""
    requirements = load()
    blocking = [finding.text for finding in findings(requirements, all_scenarios())]
    assert not blocking, "\n".join(blocking)


# -- command line ---------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "conformance.cli", *args], check=False, capture_output=True,
                          text=True, timeout=120)


def test_list_requirements_json_joins_the_registry_and_the_scenario_tags() -> None:
    listing = _cli("list", "--requirements", "--json")
    assert listing.returncode == 0, listing.stderr
    data = json.loads(listing.stdout)
    rows = {row["id"]: row for row in data["requirements"]}
    assert set(rows) == set(load())
    assert rows["SDP1-059"]["scenarios"] and rows["SDP1-059"]["status"] == "covered"
    assert rows["SDP1-013"]["status"] == "excluded" and rows["SDP1-013"]["excluded"]
    assert sum(data["summary"].values()) == len(rows)
    # Each requirement names its set, and the levels per set add up to the registry.
    assert rows["SDP1-059"]["set"] == "sandbox-driver-v1" and rows["GAP-1"]["set"] == "gaps"
    assert rows["SKETCH-001"]["set"] == "fabro-sketch" and rows["REST-001"]["set"] == "rest"
    # A v2 rule carrying a v1 one is covered by the v1 rule's scenarios that run on v2.
    assert rows["SDP2-059"]["set"] == V2 and rows["SDP2-059"]["carries"] == ["SDP1-059"]
    assert rows["SDP2-059"]["status"] == "covered" and set(rows["SDP2-059"]["scenarios"]) <= set(rows["SDP1-059"]["scenarios"])
    assert rows["SDP2-067"]["carries"] == [] and rows["SDP1-059"]["carries"] == []
    assert sum(sum(levels.values()) for levels in data["levels"].values()) == len(rows)
    assert data["levels"]["gaps"] == {"GAP": len([r for r in rows if r.startswith("GAP-")])}
    assert data["summary"]["uncovered"] == sum(1 for row in rows.values() if row["status"] == "uncovered")


def test_list_requirements_prints_a_table_and_the_counts() -> None:
    listing = _cli("list", "--requirements")
    assert listing.returncode == 0, listing.stderr
    assert "SDP1-S01" in listing.stdout and "excluded:" in listing.stdout
    assert "SDP2-S01" in listing.stdout and "SDP1-S01" in listing.stdout.split("SDP2-S01", 1)[1].splitlines()[0]
    assert "covered:" in listing.stdout.splitlines()[-1] and "uncovered:" in listing.stdout.splitlines()[-1]


def test_lint_prints_each_problem_and_exits_1_or_a_summary_and_exits_0() -> None:
    """Lint reports everything, the rules still awaiting scenarios included."""
    lint = _cli("lint")
    expected = problems(load(), all_scenarios())
    if expected:
        assert lint.returncode == 1, lint.stderr
        assert set(expected) <= set(lint.stdout.splitlines())
    else:
        assert lint.returncode == 0, lint.stdout + lint.stderr
        assert len(lint.stdout.splitlines()) == 1 and "OK" in lint.stdout
    assert "Traceback" not in lint.stderr


def test_problems_names_a_scenario_whose_level_disagrees_with_its_gap_requirements() -> None:
    requirements = {"GAP-3": Requirement(id="GAP-3", level="GAP", section="gaps", text="a proposal", testability="BB"),
                    "SDP1-001": _requirement("SDP1-001")}

    def scenario(sid: str, level: str, *reqs: str) -> SimpleNamespace:
        return SimpleNamespace(id=sid, feature="gaps.feature",
                               tags=ScenarioTags.parse({f"id:{sid}", level, *(f"req:{r}" for r in reqs)}))

    found = problems(requirements, [scenario("only-gap-as-must", "must", "GAP-3"), scenario("only-gap", "gap", "GAP-3"),
                                    scenario("gap-and-rule-as-gap", "gap", "GAP-3", "SDP1-001"),
                                    scenario("gap-and-rule", "must", "GAP-3", "SDP1-001")])
    assert len(found) == 2, found
    assert "only-gap-as-must" in found[0] and "@gap" in found[0]
    assert "gap-and-rule-as-gap" in found[1] and "SDP1-001" in found[1]


def test_gap_requirements_have_the_gap_level_and_only_gap_backed_scenarios_are_gap() -> None:
    assert {r.level for rid, r in load().items() if rid.startswith("GAP-")} == {"GAP"}
    levels = {s.id: s.tags.level for s in all_scenarios()}
    assert levels["exec-deleted-sandbox-is-an-error"] == "gap"
    assert levels["resources-memory"] == levels["exec-nonzero-is-a-result"] == "must"
    listing = json.loads(_cli("list", "--requirements", "--json").stdout)
    assert {row["id"]: row["level"] for row in listing["requirements"]}["GAP-3"] == "GAP"


def _titled(sid: str, title: str, level: str, *reqs: str) -> SimpleNamespace:
    return SimpleNamespace(id=sid, name=title, feature="lint.feature",
                           tags=ScenarioTags.parse({f"id:{sid}", level, *(f"req:{r}" for r in reqs)}))


def test_a_must_scenario_needs_a_must_rule_in_every_registry_it_cites() -> None:
    """Judged at MUST under each dialect whose rules it cites: a registry that gives it only a SHOULD rule would
    turn that rule's failure into a MUST failure (health-status once cited REST-009 so)."""
    requirements = {"SDP1-001": _requirement("SDP1-001", registry=V1),
                    "REST-009": Requirement(id="REST-009", level="SHOULD", section="health", text="health is open",
                                            testability="BB", registry="rest")}
    found = findings(requirements, [_titled("both", "Health", "must", "SDP1-001", "REST-009"),
                                    _titled("should-ok", "Health", "should", "REST-009"),
                                    _titled("v1-only", "Health", "must", "SDP1-001")])
    assert [(f.kind, "both" in f.text, "REST-009 (SHOULD)" in f.text) for f in found] == [("level", True, True)]


def test_a_must_scenario_cites_a_requirement() -> None:
    found = findings({}, [_titled("bare", "Something", "must")])
    assert [f.kind for f in found] == ["unbacked"]


def test_a_requirement_with_a_scope_is_cited_only_by_scenarios_about_that_case() -> None:
    """attach-deleted once cited SDP1-S17, which is about ids the plugin never issued: its title names none."""
    scoped = Requirement(id="SDP1-S17", level="MUST", section="§8.1", text="not_found for an id never issued",
                         testability="BB", registry=V1, scope=("never issued", "unknown"))
    requirements = {"SDP1-S17": scoped}
    found = findings(requirements, [_titled("attach-unknown", "Attaching to an id never issued", "must", "SDP1-S17"),
                                    _titled("attach-deleted", "Attaching to a deleted sandbox", "must", "SDP1-S17")])
    assert [(f.kind, f.requirement, "attach-deleted" in f.text) for f in found] == [("scope", "SDP1-S17", True)]


def test_a_scope_must_be_words() -> None:
    with pytest.raises(HarnessError, match="scope"):
        registry._parse({"id": "SDP1-S99", "level": "MUST", "section": "§1", "text": "x", "testability": "BB",
                         "scope": " , "}, "entry", V1)
