"""What a run shows while it runs: on a terminal, one live line (scenarios done of the selection, elapsed
time, failures so far, the scenario(s) running) with each failure printed above it as it happens; in a CI
log, only the failure lines, one each, as they happen.

The lines are pure functions of ``ProgressState`` and of a scenario entry as results.json holds it
(``ScenarioResult.to_dict``), so they are tested without a terminal; ``LiveDisplay`` and ``PlainDisplay``
only put them somewhere. Whether a run gets the live line is ``terminal.wants_live_display``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any, Self

from rich.console import Console
from rich.live import Live
from rich.text import Text

from conformance.inert import inert, inert_tree
from conformance.reporting.markdown import one_line
from conformance.reporting.terminal import failure_label

# Frames per second of the live line: enough for a ticking clock, little enough to cost nothing.
REFRESH_PER_SECOND = 4
FAILING_OUTCOMES = ("failed", "error")


@dataclass
class ProgressState:
    """Where a run is. ``total`` counts the selected scenarios this provider runs: those written for
    another dialect are left out, known ahead in one process and as their skips arrive under xdist (whose
    controller learns only node ids before they run)."""

    total: int = 0
    done: int = 0
    failed: int = 0  # failed or errored so far (expected failures included: the baseline applies at the end)
    running: list[str] = field(default_factory=list)  # set up and not yet torn down, oldest first
    latest: str | None = None  # the last scenario that finished
    excluded_ahead: set[str] = field(default_factory=set)  # another dialect's ids already left out of total

    def expect(self, total: int, other_dialect: set[str] | None = None) -> None:
        self.excluded_ahead = set(other_dialect or ())
        self.total = total - len(self.excluded_ahead)

    def started(self, scenario_id: str) -> None:
        if scenario_id not in self.running:
            self.running.append(scenario_id)

    def finished(self, scenario_id: str, outcome: str, other_dialect: bool = False) -> None:
        if scenario_id in self.running:
            self.running.remove(scenario_id)
        if other_dialect:  # never this provider's to run: neither done nor expected
            if scenario_id not in self.excluded_ahead:
                self.excluded_ahead.add(scenario_id)
                self.total -= 1
            return
        self.done += 1
        self.latest = scenario_id
        if outcome in FAILING_OUTCOMES:
            self.failed += 1


def fit(line: str, width: int) -> str:
    """``line`` cut to ``width`` terminal cells, an ellipsis marking the cut."""
    text = Text(line, no_wrap=True, overflow="ellipsis")
    text.truncate(max(width, 1), overflow="ellipsis")
    return text.plain


def elapsed_text(seconds: float) -> str:
    minutes, second = divmod(int(seconds), 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours}:{minute:02d}:{second:02d}"


def render_progress(state: ProgressState, width: int, elapsed_s: float) -> str:
    """The live line: ``[done/total] elapsed · N failed · running ids`` (the last finished one between
    scenarios), cut to the terminal's width."""
    digits = len(str(max(state.total, state.done)))
    parts = [f"[{state.done:>{digits}}/{state.total}] {elapsed_text(elapsed_s)}"]
    if state.failed:
        parts.append(f"{state.failed} failed")
    if state.running:
        parts.append(f"running {', '.join(state.running)}")
    elif state.latest is not None:
        parts.append(f"finished {state.latest}")
    return fit(inert(" · ".join(parts)), width)


def failure_line(scenario: dict[str, Any], width: int | None = None, expected: bool = False) -> str:
    """``FAILED <id> [<requirements>] <cause>``: the cause is the first line of the failure message; with
    ``width`` the line is cut to it (a CI log has no width and gets the whole first line). Provider text in it
    is inert: this line goes to the terminal as the failure happens, before any report is written."""
    scenario = inert_tree(scenario)
    label = failure_label(scenario["outcome"], scenario.get("level"), expected)
    requirements = ", ".join(scenario.get("requirements") or [])
    line = f"{label} {scenario['id']} [{requirements}] {one_line(scenario.get('message'), scenario['outcome'])}"
    return fit(line, width) if width is not None else line


class LiveDisplay:
    """The live line on a terminal, failures printed above it. ``stop`` (or leaving it as a context manager,
    however: the run's end, --maxfail, Ctrl-C) erases the line and shows the cursor again."""

    def __init__(self, console: Console, state: ProgressState, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.state = state
        self.clock = clock
        self.started_at = clock()  # the run's scenarios start now, though the line may appear later (xdist)
        # Live must not swap sys.stdout/sys.stderr: pytest's capture swaps them too, around every scenario.
        self.live = Live(console=console, get_renderable=self._frame, refresh_per_second=REFRESH_PER_SECOND,
                         transient=True, redirect_stdout=False, redirect_stderr=False)

    def _frame(self) -> Text:
        return Text(render_progress(self.state, self.console.width, self.clock() - self.started_at), style="dim")

    def start(self) -> None:
        self.live.start()

    def stop(self) -> None:
        self.live.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def failure(self, scenario: dict[str, Any], expected: bool = False) -> None:
        line = failure_line(scenario, self.console.width, expected)
        label, _, rest = line.partition(" ")
        style = "cyan" if expected else "bold red"
        self.console.print(Text(label, style=style), Text(rest), soft_wrap=True)  # Live prints it above itself

    def refresh(self) -> None:
        self.live.refresh()


class PlainDisplay:
    """A CI log: each failure as one whole line, as it happens; nothing else per scenario."""

    def __init__(self, write_line: Callable[[str], None]) -> None:
        self.write_line = write_line

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def failure(self, scenario: dict[str, Any], expected: bool = False) -> None:
        self.write_line(failure_line(scenario, None, expected))

    def refresh(self) -> None:
        return None


def live_console(stream: IO[str]) -> Console:
    """A console on ``stream`` that rich takes for the terminal it is (colours per NO_COLOR and the like)."""
    return Console(file=stream, highlight=False)
