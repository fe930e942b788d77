"""Failures grouped by cause: the call that went wrong and how it was answered, with the scenarios under it.

A provider that lacks a few methods fails hundreds of scenarios for a handful of reasons; a list of failures
hides them. Two halves:

- ``observed_cause``: at the point of failure (``conformance/plugin/outcomes.py``), what the failing step's
  exception says as facts: the method of the call, its answer (an error code or kind, no answer, an exit),
  what the rule expected instead, and whether the step was a ``Given`` (the scenario's setup). It reads the
  exception's fields (``ProviderCallError``, ``CallTimeout``, ``ProviderCrashed``, ``WrongAnswer``), never its
  message. A scenario's entry in results.json keeps them as ``cause``.
- ``group_causes``: from the scenarios of a document (so shard and ``--repeat`` merges recompute it), the
  ``causes`` array: one entry per cause key, the basics first (``CORE_RANKS``), then by how many scenarios
  each explains.

A cause's key: ``method → answer`` for a call; every undeclared operation answered otherwise than the
``unsupported`` its rule expects is one cause (the fix is one: refuse what is not declared as unsupported);
a failure behind no call (an assertion on a well-formed answer, a wire violation) is keyed by its
requirements and the failed step's text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from conformance.errors import (
    ApplicationErrorAnswer,
    CallTimeout,
    ProviderCallError,
    ProviderCrashed,
    SchemaViolation,
    WrongAnswer,
)

# The outcomes a cause explains (a stale baseline's xpass is no failure of the provider's).
FAILING = ("failed", "error")
# JSON-RPC's own codes, named as the specification names them.
_CODE_NAMES = {-32700: "parse error", -32600: "invalid request", -32601: "method not found",
               -32602: "invalid params", -32603: "internal error"}
METHOD_NOT_FOUND = "-32601 method not found"
# How far a failure's context chain is followed for the call behind it.
_CHAIN_DEPTH = 4
_STEP_LINE = re.compile(r"\s*\(line \d+\)$")

# The basics first, whatever their counts: a provider whose handshake fails can do nothing else, one that
# cannot create, run and delete is judged on nothing else, and malformed errors hide every other answer.
# A method's rank, then a feature's (for causes behind no call); the rest come after, by count.
CORE_METHODS = {"initialize": 0, "sandbox/create": 1, "exec/run": 1, "sandbox/delete": 1}
CORE_FEATURES = {"handshake.feature": 0, "v2/handshake.feature": 0, "lifecycle.feature": 1, "exec.feature": 1,
                 "delete.feature": 1, "errors.feature": 2}
REST_RANK = 3
# How many methods a cause's title names with their counts.
TITLE_METHODS = 3


def answer_text(error: BaseException) -> str:
    """How a call was answered, in words that stay the same from one scenario to the next (no ids, no
    provider message): ``-32601 method not found``, ``kind unsupported``, ``HTTP 404``, ``no answer``."""
    if isinstance(error, ApplicationErrorAnswer):
        return f"kind {error.kind}"
    if isinstance(error, ProviderCallError):
        if error.http_status is not None:
            return f"HTTP {error.http_status}"
        name = _CODE_NAMES.get(error.code) if isinstance(error.code, int) else None
        return f"{error.code} {name}" if name else f"error {error.code}"
    if isinstance(error, CallTimeout):
        return "no answer within the deadline"
    if isinstance(error, ProviderCrashed):
        return "the provider exited"
    if isinstance(error, SchemaViolation):
        return f"an answer violating its schema at {error.pointer}"
    return type(error).__name__


def _call_behind(exception: BaseException) -> BaseException | None:
    """The failed call a failure is about: the exception itself, the answer a ``WrongAnswer`` carries, or one
    raised on the way (``raise ... from error``, or raised while handling it)."""
    seen: BaseException | None = exception
    for _ in range(_CHAIN_DEPTH):
        if seen is None:
            return None
        if isinstance(seen, WrongAnswer):
            return seen.answer
        if isinstance(seen, ProviderCallError | CallTimeout | ProviderCrashed | SchemaViolation):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def observed_cause(exception: BaseException | None, step_type: str | None, step: str | None) -> dict[str, Any]:
    """The facts a failure's grouping needs, from the exception that ended the scenario and the step it ended
    in: ``method`` and ``answer`` of the call behind it (None for none), what the rule ``expected`` instead,
    ``setup`` (the step was a Given: the scenario's subject never ran) and the ``step`` text."""
    call = _call_behind(exception) if exception is not None else None
    method = getattr(call, "method", None) if call is not None else None
    return {
        "method": method if isinstance(method, str) else None,
        "answer": answer_text(call) if call is not None else None,
        "expected": exception.expected if isinstance(exception, WrongAnswer) else None,
        "setup": step_type == "given",
        "step": _STEP_LINE.sub("", step) if step else None,
    }


def setup_message(cause: dict[str, Any], message: str) -> str:
    """A failure in a Given step whose call failed says what the scenario needed, not that its subject is
    wrong: ``needs fs/write, which failed: …``."""
    if cause.get("setup") and cause.get("method"):
        return f"needs {cause['method']}, which failed: {message}"
    return message


def family(method: str) -> str:
    """A method's group: ``fs`` of ``fs/write`` (a method without one is its own)."""
    return method.split("/", 1)[0]


def cause_key(scenario: dict[str, Any]) -> tuple[str, str | None, str]:
    """``(key, method, title)`` of a failing scenario's cause, from its ``cause`` facts as results.json holds them.

    - an undeclared operation answered otherwise than ``unsupported``: one cause across methods;
    - a method the provider does not know (``-32601``): one cause per method group (``fs/*``), since every one
      of them is the same missing part of the protocol; the title names its methods;
    - another answer: one cause per method and answer;
    - no call behind it: its requirements and the failed step's text."""
    cause = scenario.get("cause") or {}
    method, answer, expected = cause.get("method"), cause.get("answer"), cause.get("expected")
    if expected == "unsupported":
        answered = answer or "success"
        return (f"undeclared → {answered}", None,
                f"undeclared operations answered {answered} instead of kind unsupported")
    if method and answer == METHOD_NOT_FOUND:
        group = family(method)
        return f"{group}/* → {answer}", None, f"{group}/* → {answer}"
    if method:
        return f"{method} → {answer}", method, f"{method} → {answer}"
    requirements = ", ".join(scenario.get("requirements") or []) or "no requirement"
    step = cause.get("step") or _STEP_LINE.sub("", scenario.get("step") or "") or "after its steps"
    what = f"{answer}: " if answer else ""
    return f"{requirements} | {what}{step}", None, f"{requirements}: {what}{step}"


def _rank(entry: dict[str, Any], scenarios: list[dict[str, Any]]) -> int:
    """0 the handshake, 1 create/exec/delete, 2 error answers, 3 the rest (``CORE_METHODS``, ``CORE_FEATURES``)."""
    if entry["methods"]:
        return min(CORE_METHODS.get(method, REST_RANK) for method in entry["methods"])
    return min((CORE_FEATURES.get(s["feature"], REST_RANK) for s in scenarios), default=REST_RANK)


def group_causes(scenarios: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``causes`` of a document: every failed or errored scenario under exactly one cause; the basics
    first, then the causes explaining the most scenarios. ``methods`` lists the calls behind a cause, the
    most frequent first, and the title names the first few with their counts when there are several."""
    groups: dict[str, dict[str, Any]] = {}
    members: dict[str, list[dict[str, Any]]] = {}
    calls: dict[str, Counter[str]] = {}
    for scenario in scenarios:
        if scenario["outcome"] not in FAILING:
            continue
        key, method, title = cause_key(scenario)
        cause = scenario.get("cause") or {}
        entry = groups.setdefault(key, {"key": key, "title": title, "method": method,
                                        "answer": cause.get("answer"), "expected": cause.get("expected"),
                                        "count": 0, "setup": 0, "methods": [], "scenarios": []})
        entry["count"] += 1
        entry["setup"] += 1 if cause.get("setup") and cause.get("method") else 0  # a Given that needed the call
        entry["scenarios"].append(scenario["id"])
        if cause.get("method"):
            calls.setdefault(key, Counter())[cause["method"]] += 1
        members.setdefault(key, []).append(scenario)
    for key, entry in groups.items():
        counted = sorted((calls.get(key) or {}).items(), key=lambda item: (-item[1], item[0]))
        entry["methods"] = [method for method, _ in counted]
        entry["method"] = entry["methods"][0] if len(counted) == 1 else None
        if entry["method"] is not None and entry["expected"] != "unsupported":
            entry["title"] = f"{entry['method']} → {entry['answer']}"
        elif len(counted) > 1:
            named = ", ".join(f"{method} {count}" for method, count in counted[:TITLE_METHODS])
            more = f", {len(counted) - TITLE_METHODS} more" if len(counted) > TITLE_METHODS else ""
            entry["title"] += f" ({named}{more})"
        expected = {(s.get("cause") or {}).get("expected") for s in members[key]}
        entry["expected"] = expected.pop() if len(expected) == 1 else None
    ordered = sorted(groups.values(), key=lambda e: (_rank(e, members[e["key"]]), -e["count"], e["key"]))
    for rank, entry in enumerate(ordered, start=1):
        entry["rank"] = rank
    return ordered


def cause_line(cause: dict[str, Any], width: int = 0) -> str:
    """One cause on one line: ``34  fs → -32601 method not found (fs/write 30, fs/read 4) · 25 in a Given step``."""
    setup = f" · {cause['setup']} needed it in a Given step" if cause["setup"] else ""
    return f"{cause['count']:>{width}}  {cause['title']}{setup}"


def cause_lines(causes: list[dict[str, Any]], shown: int) -> list[str]:
    """The first ``shown`` causes, one line each (``cause_line``), counts aligned."""
    width = len(str(max((c["count"] for c in causes), default=0)))
    return [cause_line(cause, width) for cause in causes[:shown]]
