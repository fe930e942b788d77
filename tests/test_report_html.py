"""``report.html``: the self-contained HTML report, built from the results document of a small in-process
run against a mutant that fails one MUST scenario (``delete-unknown``) and echoes the secret it was handed,
beside a pass and a dialect skip — and of a passing run against the reference plugin.

The fast tests read the HTML as text (escaping, no external fetch, no secret). The browser tests render it
in a real headless Chromium (Debian's ``chromium``, driven by playwright; one launch for the module): no
console or page error, no request but the page itself, the verdict, the failure with its requirement text,
transcript and reproduce command visible, the filters hiding what they should, the copy button working.
Without Chromium they skip, saying so — except under ``SANDBOX_CONFORMANCE_REQUIRE_BROWSER=1`` (set by
``.ci/run``), where its absence fails. The failing report's screenshot is kept as
``reports/test-artefacts/report-html.png``.
"""

from __future__ import annotations

import copy
import html
import json
import os
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conformance import requirements as registry
from conformance.reporting import html as html_report
from tests import inprocess

REPO = Path(__file__).resolve().parent.parent
SCREENSHOT = REPO / "reports" / "test-artefacts" / "report-html.png"
REQUIRE_BROWSER = "SANDBOX_CONFORMANCE_REQUIRE_BROWSER"

FAILING = "delete-unknown"  # the mutant's one failure, a MUST (SDP1-059)
PASSING = "delete-twice"
SKETCH_ONLY = "sketch-exec-timeout"  # skipped on v1: another dialect's scenario
SDP1_059 = "Deleting a sandbox is idempotent: deleting an id the plugin does not know, or one already being deleted"
CANARY = f"canary-{secrets.token_hex(12)}"  # handed to the plugin with --env; the mutant echoes it
HOSTILE = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2"></pre>'


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory: pytest.TempPathFactory) -> inprocess.InProcessRun:
    provider = inprocess.plugin(mutant="secret-echoing", env={"CANARY_TOKEN": CANARY})
    return inprocess.run_suite(provider, tmp_path_factory.mktemp("failing") / "reports",
                               scenarios=(FAILING, PASSING, SKETCH_ONLY))


@pytest.fixture(scope="module")
def passing_run(tmp_path_factory: pytest.TempPathFactory) -> inprocess.InProcessRun:
    return inprocess.run_suite(inprocess.plugin(), tmp_path_factory.mktemp("passing") / "reports",
                               scenarios=(FAILING, PASSING))


def _written_document(run: inprocess.InProcessRun) -> dict:
    return json.loads((run.report_dir / "results.json").read_text(encoding="utf-8"))


def _report(run: inprocess.InProcessRun) -> str:
    return (run.report_dir / "report.html").read_text(encoding="utf-8")


def _hostile_document(run: inprocess.InProcessRun) -> dict:
    """The failing run's document with markup planted where a provider's words land: the message, the
    transcript, the stderr tail."""
    document = copy.deepcopy(_written_document(run))
    failure = next(s for s in document["scenarios"] if s["id"] == FAILING)
    failure["message"] = f"the provider said {HOSTILE}"
    failure["transcript"].append(f"   9.999s provider  ← {HOSTILE}")
    failure["stderr"] += HOSTILE
    return document


@dataclass
class _Elements(HTMLParser):
    """What an HTML text would make a browser build: the elements by tag, and every URL it could fetch."""

    tags: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "action", "srcset", "poster", "data", "formaction") and value is not None:
                self.urls.append(value)
            if name == "style" and value and "url(" in value:
                self.urls.append(value)


def _elements(text: str) -> _Elements:
    parser = _Elements()
    parser.feed(text)
    parser.close()
    return parser


def external_references(text: str) -> list[str]:
    """Every URL the page would fetch: any src/href/... that is not an anchor within the page."""
    return [url for url in _elements(text).urls if not url.startswith("#")]


# -- the report as text --------------------------------------------------------------------------


def test_every_run_writes_report_html_built_from_its_document_alone(failing_run) -> None:
    assert failing_run.exit_code == 1
    assert failing_run.outcomes()[FAILING] == "failed" and failing_run.outcomes()[PASSING] == "passed"
    written = _report(failing_run)
    assert written == html_report.render_html(_written_document(failing_run)), \
        "report.html says something results.json does not"
    shown = html.unescape(written)
    failure = next(s for s in _written_document(failing_run)["scenarios"] if s["id"] == FAILING)
    for expected in (SDP1_059, failure["message"], failure["transcript"][0], failure["reproduce"],
                     failure["stderr"].splitlines()[0], "Then the delete succeeds"):
        assert expected in shown, expected


def test_the_requirement_view_lists_the_dialects_rules_with_their_covering_scenarios(failing_run) -> None:
    """Of a full run, every rule of the dialect's registry and the gaps; of a narrow one, the rules its
    scenarios verify and how many others there are."""
    written = _report(failing_run)
    assert 'id="req-SDP1-059"' in written and 'id="req-GAP-3"' not in written, "no scenario run verifies GAP-3"
    assert 'id="req-SKETCH-011"' not in written, "a sketch rule does not judge a v1 provider"
    block = written.split('id="req-SDP1-059"', 1)[1].split('class="requirement"', 1)[0]
    assert f"<code>{FAILING}</code>" in block and f"<code>{PASSING}</code>" in block
    assert "in this run: 1 failed, 1 passed" in block or "in this run: 1 passed, 1 failed" in block
    every = len(registry.load("sandbox-driver-v1")) + len(registry.load(registry.GAPS))
    blocks = written.count('<div class="requirement"')
    assert f"{every - blocks} others not shown" in written
    document = copy.deepcopy(_written_document(failing_run))
    document["scenarios"] = [s for s in document["scenarios"] if s["outcome"] != "disabled"]
    full = html_report.render_html(document)  # as if these were every scenario of the suite
    assert 'id="req-GAP-3"' in full and "not shown" not in full and 'id="left-out"' not in full


def test_a_narrow_runs_page_holds_only_what_it_ran(failing_run) -> None:
    """Issue 25: a one-scenario run's report.html was 1.16 MB, every scenario of the suite embedded."""
    written = _report(failing_run)
    document = _written_document(failing_run)
    selected = [s["id"] for s in document["scenarios"] if s["outcome"] != "disabled"]
    assert len(selected) == 3 and written.count('<details class="entry scenario') == 3
    left_out = document["summary"]["total"] - 3
    assert f"{left_out} scenarios of the suite not selected for this run, not shown" in written
    assert len(written.encode()) < 100_000, len(written.encode())
    # a scenario the run selected but never reached (interrupted) is no scenario left out: it is shown
    document["scenarios"][0].update(outcome="disabled", message="not reached: the run was interrupted")
    assert f'id="scenario-{html_report._anchor("scenario", document["scenarios"][0]["id"])[9:]}"' in \
        html_report.render_html(document)


def test_a_document_of_another_suite_version_still_renders(failing_run) -> None:
    """A scenario these features do not define shows without steps; a dialect without a registry falls
    back to the registries the scenarios cite."""
    document = copy.deepcopy(_written_document(failing_run))
    document["provider"]["dialect"] = "some-future-dialect"
    next(s for s in document["scenarios"] if s["outcome"] != "disabled")["id"] = "no-such-scenario"
    written = html_report.render_html(document)
    assert "not in the feature files of this suite version" in written
    assert "<h3>sandbox-driver-v1</h3>" in written and "<h3>fabro-sketch</h3>" in written


def test_the_runs_own_troubles_are_shown(failing_run) -> None:
    """What the verdict reads besides outcomes — a baseline, flaky scenarios, leaked sandboxes, repeats —
    is on the page, and an expected failure opens like a failure."""
    document = copy.deepcopy(_written_document(failing_run))
    document["run"]["repeat"] = 3
    document["sandboxes"]["leaked"] = ["sbx-left-behind"]
    document["flaky"] = [{"id": PASSING, "outcomes": ["passed", "failed", "passed"]}]
    document["baseline"] = {"source": "known-failures.yaml", "entries": [
        {"id": FAILING, "reason": "upstream issue 12", "status": "holds", "scenarios": [FAILING]}]}
    failure = next(s for s in document["scenarios"] if s["id"] == FAILING)
    failure["outcome"], failure["outcomes"] = "xfail", ["failed", "failed", "failed"]
    failure["transcript_omitted"] = 7
    shown = html.unescape(html_report.render_html(document))
    for expected in ("repeated</th><td>3 times", "sandboxes leaked</th><td>sbx-left-behind",
                     f"<code>{PASSING}</code> (passed → failed → passed)", "<code>known-failures.yaml</code>",
                     f"baseline entry {FAILING}</th><td>holds: upstream issue 12",
                     "outcomes per repetition: failed → failed → failed",
                     "7 messages in the middle left out",
                     f'<details class="entry scenario o-xfail" id="scenario-{FAILING}"'):
        assert expected in shown, expected
    assert shown.split(f'id="scenario-{FAILING}"', 1)[1].split(">", 1)[0].endswith(" open")


def test_a_secret_handed_to_the_provider_never_appears(failing_run) -> None:
    written = _report(failing_run)
    assert "[REDACTED]" in written, "the leak happened and the report shows it — redacted"
    assert CANARY not in written and CANARY not in html.unescape(written)
    assert '--env "CANARY_TOKEN=${CANARY_TOKEN:?export CANARY_TOKEN first}"' in html.unescape(written)


def test_document_text_is_escaped(failing_run) -> None:
    written = html_report.render_html(_hostile_document(failing_run))
    built = _elements(written)
    assert built.tags.count("script") == 1, "only the report's own script runs"
    assert "img" not in built.tags
    assert html.escape(HOSTILE) in written


def test_the_escaping_check_catches_an_unescaped_message(failing_run, monkeypatch) -> None:
    """Control: the same document rendered without escaping builds the planted elements, and the checks of
    ``test_document_text_is_escaped`` see them."""
    monkeypatch.setattr(html_report, "_e", lambda value: "" if value is None else str(value))
    built = _elements(html_report.render_html(_hostile_document(failing_run)))
    assert built.tags.count("script") > 1 and "img" in built.tags


def test_the_report_fetches_nothing(failing_run) -> None:
    written = _report(failing_run)
    assert external_references(written) == []
    assert f'content="{html.escape(html_report.CONTENT_SECURITY_POLICY)}"' in written
    assert "default-src 'none'" in html_report.CONTENT_SECURITY_POLICY


def test_the_fetch_check_catches_external_references() -> None:
    page = ('<a href="#scenarios">in page</a><img src="http://cdn.example/x.png">'
            '<link rel="stylesheet" href="//cdn.example/x.css"><script src="app.js"></script>')
    assert external_references(page) == ["http://cdn.example/x.png", "//cdn.example/x.css", "app.js"]


# -- in headless Chromium ------------------------------------------------------------------------


def _without_browser(why: str) -> None:
    """Skip, visibly — or fail, where the environment requires the browser tests to run."""
    if os.environ.get(REQUIRE_BROWSER) == "1":
        pytest.fail(f"no headless Chromium: {why} ({REQUIRE_BROWSER}=1 requires one)", pytrace=False)
    pytest.skip(f"no headless Chromium: {why}")


def test_a_missing_browser_skips_unless_required(monkeypatch) -> None:
    monkeypatch.delenv(REQUIRE_BROWSER, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no headless Chromium: because"):
        _without_browser("because")
    monkeypatch.setenv(REQUIRE_BROWSER, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_BROWSER}=1 requires one"):
        _without_browser("because")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One headless Chromium for the module: Debian's ``chromium``, never a downloaded one."""
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        _without_browser("the playwright package is not installed (pip install -e '.[dev]')")
    executable = shutil.which("chromium")
    if executable is None:
        _without_browser("no chromium on PATH (Debian: apt-get install chromium)")
    with sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(executable_path=executable)
        except Error as error:
            _without_browser(f"{executable} does not start: {str(error).splitlines()[0]}")
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class _OpenReport:
    page: object
    url: str  # the report's own address, the one request it may make
    problems: list[str]  # console errors and uncaught page errors
    requests: list[str]  # every URL the page asked for, itself first

    def visible_scenarios(self) -> list[str]:
        return self.page.eval_on_selector_all(
            ".entry.scenario:not([hidden])", "els => els.map(e => e.id.replace('scenario-', ''))")

    def visible_requirements(self) -> list[str]:
        return self.page.eval_on_selector_all(
            ".requirement:not([hidden])", "els => els.map(e => e.id.replace('req-', ''))")


@pytest.fixture
def open_report(browser) -> Iterator:
    pages = []

    def load(path: Path, init_script: str | None = None) -> _OpenReport:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        pages.append(page)
        page.set_default_timeout(30_000)  # a local file, but a 1 MB report and a full-page screenshot on a busy CI runner
        if init_script is not None:
            page.add_init_script(init_script)
        opened = _OpenReport(page, path.resolve().as_uri(), [], [])
        page.on("console", lambda message: opened.problems.append(f"console: {message.text}")
                if message.type == "error" else None)
        page.on("pageerror", lambda error: opened.problems.append(f"page error: {error}"))
        page.on("request", lambda request: opened.requests.append(request.url))
        page.goto(opened.url)
        return opened

    yield load
    for page in pages:
        page.close()


def test_the_failing_report_in_chromium(failing_run, open_report) -> None:
    report = open_report(failing_run.report_dir / "report.html")
    page = report.page
    assert page.locator("#verdict").is_visible() and page.locator("#verdict").inner_text() == "FAIL"
    assert report.visible_scenarios() == [PASSING, FAILING, SKETCH_ONLY], "the run's scenarios, none left out"
    card = page.locator(f"#scenario-{FAILING}")
    assert card.is_visible()
    failure = next(s for s in _written_document(failing_run)["scenarios"] if s["id"] == FAILING)
    for shown in (card.locator(".req-text"), card.locator("pre.transcript"), card.locator("pre.stderr"),
                  card.locator(".reproduce code"), card.locator(".step-failed")):
        assert shown.is_visible()
    card_text = card.inner_text()
    assert SDP1_059 in card_text
    assert "sandbox/delete" in card.locator("pre.transcript").inner_text()
    assert card.locator(".reproduce code").inner_text() == failure["reproduce"]
    must_row = page.locator("#counts tr", has_text="MUST").inner_text().split("\t")
    # passed, failed, errors, xfail, xpass, skipped, not for this dialect (the sketch's scenario)
    assert must_row[:8] == ["MUST", "1", "1", "0", "0", "0", "0", "1"], must_row

    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)

    page.select_option("#filter-outcome", "failed")
    assert report.visible_scenarios() == [FAILING]
    assert page.locator(f"#scenario-{PASSING}").is_hidden()
    assert report.visible_requirements() == ["SDP1-059"]
    assert page.locator("#shown-count").inner_text().startswith("1 of ")

    page.select_option("#filter-outcome", "selected")
    page.fill("#filter-text", "second time")
    assert report.visible_scenarios() == [PASSING]
    page.fill("#filter-text", "conformance-never-issued")  # words of the failure's message only
    assert report.visible_scenarios() == [FAILING] and report.visible_requirements() == ["SDP1-059"]
    page.fill("#filter-text", "DELETING AN ID THE PLUGIN")  # a requirement's words, in any case
    assert report.visible_scenarios() == [PASSING, FAILING] and report.visible_requirements() == ["SDP1-059"]
    page.fill("#filter-text", "no scenario has these words")
    assert report.visible_scenarios() == [] and page.locator("#no-match").is_visible()
    page.fill("#filter-text", "")
    assert page.locator("#filter-level option").all_inner_texts() == ["all", "MUST"], "every scenario run is a MUST"
    page.select_option("#filter-feature", "exec.feature")
    assert report.visible_scenarios() == [SKETCH_ONLY]

    page.select_option("#filter-feature", "all")
    passing_card = page.locator(f"#scenario-{PASSING}")
    assert passing_card.get_attribute("open") is None, "a pass starts closed"
    page.locator(f"#req-SDP1-059 a[href='#scenario-{PASSING}']").click()
    assert passing_card.get_attribute("open") is not None, "a link to a scenario opens its card"
    assert passing_card.locator("pre.gherkin").is_visible()

    assert report.problems == []
    assert report.requests == [report.url], "the report fetched something besides itself"


# How the page's clipboard behaves: as Chromium gives it to a local file, refusing to write, or missing.
CLIPBOARDS = {
    "granted": (None, "copied"),
    "refused": ("navigator.clipboard.writeText = () => Promise.reject(new DOMException('denied', 'NotAllowedError'));",
                "selected: press Ctrl+C"),
    "absent": ("Object.defineProperty(Navigator.prototype, 'clipboard', {get: () => undefined});",
               "selected: press Ctrl+C"),
}


@pytest.mark.parametrize("clipboard", sorted(CLIPBOARDS))
def test_the_copy_button_copies_or_selects_the_reproduce_command(failing_run, open_report, clipboard: str) -> None:
    init_script, answer = CLIPBOARDS[clipboard]
    report = open_report(failing_run.report_dir / "report.html", init_script)
    card = report.page.locator(f"#scenario-{FAILING}")
    button = card.locator("button.copy")
    button.click()
    report.page.wait_for_function("b => b.textContent !== 'copy'", arg=button.element_handle())
    assert button.inner_text() == answer
    if answer.startswith("selected"):  # the fallback: the command is selected for the reader's Ctrl+C
        assert report.page.evaluate("window.getSelection().toString()") == card.locator(".reproduce code").inner_text()
    assert report.problems == []


def test_planted_markup_stays_text_in_chromium(failing_run, open_report, tmp_path: Path) -> None:
    path = html_report.write_html(tmp_path, _hostile_document(failing_run))
    report = open_report(path)
    assert report.page.evaluate("window.__pwned") is None, "planted script ran"
    assert HOSTILE in report.page.locator(f"#scenario-{FAILING} pre.message").inner_text()
    assert report.problems == [] and report.requests == [report.url]


def test_the_passing_report_in_chromium(passing_run, open_report) -> None:
    assert passing_run.exit_code == 0, passing_run.stdout[-2000:]
    report = open_report(passing_run.report_dir / "report.html")
    page = report.page
    assert page.locator("#verdict").inner_text() == "PASS"
    assert page.locator("#failures").inner_text().endswith("No scenario failed.")
    assert sorted(report.visible_scenarios()) == [PASSING, FAILING]
    assert page.locator("pre.transcript").count() == 0, "a pass carries no diagnostics"
    page.select_option("#filter-outcome", "all")  # the scenarios not selected are counted, not embedded
    assert len(report.visible_scenarios()) == _written_document(passing_run)["summary"]["selected"] == 2
    assert page.locator("#left-out").is_visible()
    assert report.problems == [] and report.requests == [report.url]
