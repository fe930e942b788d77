"""The upstream parity map (conformance/data/upstream-parity.yaml) names each of upstream's 57 conformance checks
once, in upstream's order, and maps each to scenarios that exist, or says why none does; and upstream's rule that
a volume create refused for the credential is a skip holds."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conformance.errors import ApplicationErrorAnswer
from conformance.reporting.catalogue import all_scenarios
from steps._shared import lacks_volume_permission
from tests import inprocess

MAP = Path(__file__).resolve().parents[1] / "conformance" / "data" / "upstream-parity.yaml"

# Upstream's battery in its report order (anchor-sandbox-driver-conformance.md §1.10; 34-37 are the four git checks).
UPSTREAM_CHECKS = (
    "provider_identity_and_list", "create_describe_delete", "delete_is_idempotent", "provider_deletes_by_id",
    "attach_unknown_id_is_not_found", "activate_passes_bash_probe", "working_directory_is_effective",
    "runtime_directory_is_private", "relative_working_dir_resolves", "exec_reports_exit_codes",
    "exec_env_vars_apply", "bash_helper_ignores_a_caller_bash_env", "exec_argv_is_literal",
    "exec_output_is_binary_safe", "exec_output_sanitization_is_consistent", "exec_stdin_round_trips",
    "exec_timeout_terminates", "exec_term_terminates", "exec_kill_terminates", "exec_term_does_not_escalate",
    "exec_stop_grace_escalates_a_timeout", "exec_stop_grace_escalates_a_term", "exec_reports_a_foreign_signal",
    "exec_reports_environment", "exec_streams_stdin", "exec_streaming_is_honest",
    "exec_streams_large_output_in_order", "exec_output_keeps_a_partial_last_line",
    "preview_url_reaches_a_listening_port", "exec_retention_accounting_is_consistent",
    "concurrent_streams_do_not_starve_each_other", "fs_round_trips", "search_greps_directories_and_single_files",
    "git_round_trip", "git_clone_pins_a_tag", "git_ambient_credentials_apply", "git_verbs_report_typed_results",
    "unsupported_actions_say_so", "pause_resume_cycle", "fork_preserves_live_process_state",
    "snapshot_modes_are_honest", "stdio_process_round_trips", "pty_is_bidirectional",
    "logs_follow_streams_and_cancels", "attach_and_list_by_label", "create_emits_terminal_events",
    "services_match_capabilities", "services_wait_for_ports_and_list_them", "ssh_access_matches_capabilities",
    "shell_command_access_matches_capabilities", "exec_rejects_undeclared_stdin_and_stop",
    "fs_range_and_append_round_trip", "background_services_round_trip", "provider_health_answers",
    "volume_round_trip", "one_shot_shares_the_sandbox_world", "fs_missing_file_is_not_found",
)
KEYS = {"check", "scenarios", "none", "note"}


def _entries() -> list[dict]:
    return yaml.safe_load(MAP.read_text(encoding="utf-8"))["checks"]


def _scenario_ids() -> set[str]:
    """Every scenario id of the registry, an outline's examples as id[example], and each outline's own id."""
    ids = {scenario.id for scenario in all_scenarios()}
    return ids | {sid.split("[", 1)[0] for sid in ids}


def test_the_map_names_all_57_upstream_checks_once_in_upstream_order() -> None:
    assert len(UPSTREAM_CHECKS) == 57 and len(set(UPSTREAM_CHECKS)) == 57
    names = [entry.get("check") for entry in _entries()]
    assert names == list(UPSTREAM_CHECKS), [name for name in names if name not in UPSTREAM_CHECKS] or \
        [name for name in UPSTREAM_CHECKS if names.count(name) != 1] or "the map's order is not upstream's"


def test_no_entry_is_empty_and_each_says_scenarios_or_why_none() -> None:
    for entry in _entries():
        assert set(entry) <= KEYS, f"{entry.get('check')}: unknown keys {sorted(set(entry) - KEYS)}"
        scenarios, none = entry.get("scenarios"), entry.get("none")
        assert (scenarios is None) != (none is None), f"{entry['check']}: give either scenarios or none, not both"
        if scenarios is not None:
            assert isinstance(scenarios, list) and scenarios, f"{entry['check']}: an empty list of scenarios"
            assert len(scenarios) == len(set(scenarios)), f"{entry['check']}: a scenario is named twice"
        else:
            assert isinstance(none, str) and none.strip(), f"{entry['check']}: none without a reason"
        if "note" in entry:
            assert isinstance(entry["note"], str) and entry["note"].strip(), f"{entry['check']}: an empty note"


def test_every_scenario_the_map_names_exists() -> None:
    known = _scenario_ids()
    unknown = {entry["check"]: sorted(set(entry.get("scenarios") or ()) - known) for entry in _entries()}
    assert not {check: ids for check, ids in unknown.items() if ids}, unknown


def test_a_volume_create_refused_for_the_credential_is_a_skip_saying_so(tmp_path) -> None:
    """Upstream's volume_round_trip: kind auth (or a provider error coded 401/403) means the credential lacks
    volume permissions, which is not the provider failing the scenario."""
    provider = inprocess.plugin(mutant="volume-create-refused-for-credential")
    scenarios = ("volume-persists-across-sandboxes", "volume-lifecycle")
    run = inprocess.run_suite(provider, tmp_path / "reports", scenarios=scenarios)
    for result in [s for s in run.results["scenarios"] if s["id"] in scenarios]:
        assert result["outcome"] == "skipped", run.output[-2000:]
        assert "the credential lacks volume permissions" in result["message"], result["message"]


def test_a_sandbox_naming_no_runtime_directory_is_skipped_saying_so(tmp_path) -> None:
    """Upstream passes runtime_directory_is_private when there is no runtime directory; here a scenario whose
    subject never happened skips, and says why."""
    provider = inprocess.plugin(mutant="runtime-directory-none")
    run = inprocess.run_suite(provider, tmp_path / "reports", scenarios=("runtime-directory-private",))
    [result] = [s for s in run.results["scenarios"] if s["id"] == "runtime-directory-private"]
    assert result["outcome"] == "skipped", run.output[-2000:]
    assert result["message"].startswith("no runtime directory: "), result["message"]


@pytest.mark.parametrize("code", ["401", "403", "500"])
def test_a_provider_error_coded_401_or_403_is_a_lack_of_permission_and_others_are_not(code) -> None:
    error = ApplicationErrorAnswer(method="volume/create", code=-32000, message="refused", kind="provider",
                                   detail={"provider": {"provider": "cloud", "code": code}})
    assert lacks_volume_permission(error) is (code != "500")


def test_a_provider_that_predates_stop_grace_skips_the_term_grace_saying_so(tmp_path) -> None:
    """Section 8.4: a plugin built before stop_grace_ms ignores it and keeps raw stops (upstream's v2 host of
    the interop tier is one). Its gentle stop then never escalates, which is legal: the scenario probes the
    timeout ladder, sees the field ignored there too, and skips saying so; a plugin that honours the field at a
    timeout but not after a term still fails (term-grace-ignored, in the catalogue)."""
    provider = inprocess.plugin(mutant="v2b1_stop_grace_ignored", call_timeout_s=10)
    run = inprocess.run_suite(provider, tmp_path / "reports", scenarios=("v2-exec-stop-grace-term",))
    [result] = [s for s in run.results["scenarios"] if s["id"] == "v2-exec-stop-grace-term"]
    assert result["outcome"] == "skipped", run.output[-2000:]
    assert "predates stop_grace_ms" in result["message"], result["message"]
