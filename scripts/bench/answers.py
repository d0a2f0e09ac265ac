"""The answer-quality benchmark's pure side: questions, scoring, the gate sweep, the table.

``tests/data/answers/questions.jsonl`` holds the questions (see its README): in-scope ones name the KB
section that answers them and the facts a right answer contains (each fact: accepted spellings, any one
of them), out-of-scope ones have no facts. ``scripts/bench_answers.py`` runs them and calls these.

Scoring, all automatic:
- **right**: every fact appears in the reply (lower case, hyphens as spaces, commas dropped, whole words);
- **declined**: the reply is the fixed decline text, or says it does not know / cannot help (DECLINE_CUES);
- **hit@1 / hit@3**: the answering section is the first / among the first three passages retrieved;
- **loop**: the reply repeats a phrase (app/answer/loops.py, three times);
- **ttft**: from the question (before retrieval) to the reply's first text, in this process.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sub250.answer.loops import find_loop

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = REPO / "tests" / "data" / "answers" / "questions.jsonl"

#: A reply that says one of these declines (the LLM's own way of saying it cannot answer).
DECLINE_CUES = ("i don't know", "i do not know", "i'm not sure", "i am not sure", "i can only help",
                "i can't help", "i cannot help", "not able to help",
                "no information", "don't have information", "do not have information", "not in the context",
                "doesn't say", "does not say", "cannot answer", "can't answer")
OUT_OF_SCOPE = "out_of_scope"


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    kind: str
    source: str | None
    section: str | None
    facts: tuple[tuple[str, ...], ...]

    @property
    def in_scope(self) -> bool:
        return self.kind != OUT_OF_SCOPE


def load_questions(path: Path = QUESTIONS) -> list[Question]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        d = json.loads(line)
        try:
            out.append(Question(d["id"], d["question"], d["kind"], d.get("source"), d.get("section"),
                                tuple(tuple(v) for v in d.get("facts", []))))
        except KeyError as exc:
            raise ValueError(f"{path}:{n}: missing field {exc}") from None
    return out


def normalize(text: str) -> str:
    t = text.lower().replace("\u2019", "'").replace("-", " ").replace("\u2013", " ").replace(",", "")
    return " ".join(t.split())


def has_phrase(text: str, phrase: str) -> bool:
    """``phrase`` in ``text`` as whole words, after :func:`normalize` of both."""
    return re.search(rf"(?<![a-z0-9]){re.escape(normalize(phrase))}(?![a-z0-9])", normalize(text)) is not None


def is_right(q: Question, reply: str) -> bool:
    return bool(q.facts) and all(any(has_phrase(reply, v) for v in fact) for fact in q.facts)


def is_declined(reply: str, decline_text: str) -> bool:
    n = normalize(reply)
    return n == normalize(decline_text) or any(normalize(c) in n for c in DECLINE_CUES)


def score(q: Question, reply: str, titles: list[str], decline_text: str) -> dict[str, Any]:
    """One reply's marks (``titles``: the retrieved passages' section titles, best first)."""
    declined = is_declined(reply, decline_text)
    out: dict[str, Any] = {"right": is_right(q, reply) if q.in_scope else None,
                           "declined": declined, "loop": find_loop(reply) is not None}
    if q.in_scope:
        out["hit1"] = bool(titles) and titles[0] == q.section
        out["hit3"] = q.section in titles[:3]
    return out


def _pct(values: list[bool]) -> float | None:
    return None if not values else 100.0 * sum(values) / len(values)


def _p(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per configuration: in-scope right %, out-of-scope declined %, loops %, hit@1/@3 %, ttft p50/p95, the
    answer paths taken, and right % per kind."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by[r["config"]].append(r)
    out: dict[str, dict[str, Any]] = {}
    for config, rs in by.items():
        ins = [r for r in rs if r["kind"] != OUT_OF_SCOPE]
        oos = [r for r in rs if r["kind"] == OUT_OF_SCOPE]
        ttft = [r["ttft_ms"] for r in rs if r.get("ttft_ms") is not None]
        kinds: dict[str, list[bool]] = defaultdict(list)
        for r in ins:
            kinds[r["kind"]].append(r["right"])
        paths: dict[str, int] = defaultdict(int)
        for r in rs:
            paths[r.get("path") or "?"] += 1
        out[config] = {
            "questions": len(rs), "in_scope": len(ins), "out_of_scope": len(oos),
            "right_pct": _pct([r["right"] for r in ins]),
            "in_scope_declined_pct": _pct([r["declined"] for r in ins]),
            "oos_declined_pct": _pct([r["declined"] for r in oos]),
            "loop_pct": _pct([r["loop"] for r in rs]),
            "hit1_pct": _pct([r["hit1"] for r in ins]), "hit3_pct": _pct([r["hit3"] for r in ins]),
            "ttft_p50_ms": _p(ttft, 50), "ttft_p95_ms": _p(ttft, 95),
            "right_pct_by_kind": {k: _pct(v) for k, v in sorted(kinds.items())},
            "paths": dict(paths),
        }
    return out


def gate_sweep(scores: list[tuple], thresholds: list[float]) -> list[dict[str, float]]:
    """For each threshold: in-scope questions let through, out-of-scope ones stopped. ``scores``: per
    question (its score - a cosine; None counts as 0 -, whether it is in scope[, whether its answer was
    right]); with the third, also the in-scope questions both let through and answered right."""
    ins = [(s[0] or 0.0, s[2] if len(s) > 2 else None) for s in scores if s[1]]
    oos = [s[0] or 0.0 for s in scores if not s[1]]
    rows = []
    for t in thresholds:
        row = {"threshold": t,
               "in_scope_passed_pct": 100.0 * sum(v >= t for v, _ in ins) / max(len(ins), 1),
               "oos_stopped_pct": 100.0 * sum(v < t for v in oos) / max(len(oos), 1)}
        if ins and all(r is not None for _, r in ins):
            row["right_passed_pct"] = 100.0 * sum(v >= t and bool(r) for v, r in ins) / len(ins)
        rows.append(row)
    return rows


def best_gate(sweep: list[dict[str, float]], *, keep_in_scope_pct: float = 98.0) -> dict[str, float] | None:
    """The threshold that stops the most out-of-scope questions while passing at least ``keep_in_scope_pct``
    of the in-scope ones; when several do, the middle one of them (the farthest from both kinds of mistake)."""
    ok = [r for r in sweep if r["in_scope_passed_pct"] >= keep_in_scope_pct]
    if not ok:
        return None
    top = max(r["oos_stopped_pct"] for r in ok)
    best = sorted((r for r in ok if r["oos_stopped_pct"] == top), key=lambda r: r["threshold"])
    return best[(len(best) - 1) // 2]


def _f(v: float | None, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def table(summary: dict[str, dict[str, Any]]) -> str:
    lines = [f"{'config':<22}{'right %':>8}{'oos decl %':>11}{'loops %':>8}{'hit@1':>7}{'hit@3':>7}"
             f"{'ttft p50':>9}{'p95':>7}  paths"]
    for config, s in summary.items():
        paths = ", ".join(f"{k} {v}" for k, v in sorted(s["paths"].items()))
        lines.append(f"{config:<22}{_f(s['right_pct']):>8}{_f(s['oos_declined_pct']):>11}{_f(s['loop_pct']):>8}"
                     f"{_f(s['hit1_pct'], '.0f'):>7}{_f(s['hit3_pct'], '.0f'):>7}{_f(s['ttft_p50_ms'], '.0f'):>9}"
                     f"{_f(s['ttft_p95_ms'], '.0f'):>7}  {paths}")
    return "\n".join(lines)


def kinds_table(summary: dict[str, dict[str, Any]]) -> str:
    kinds = sorted({k for s in summary.values() for k in s["right_pct_by_kind"]})
    lines = [f"{'right % by kind':<22}" + "".join(f"{k:>11}" for k in kinds)]
    for config, s in summary.items():
        lines.append(f"{config:<22}" + "".join(f"{_f(s['right_pct_by_kind'].get(k)):>11}" for k in kinds))
    return "\n".join(lines)


def sweep_table(sweep: list[dict[str, float]], chosen: dict[str, float] | None, *, what: str = "top cosine") -> str:
    right = any("right_passed_pct" in r for r in sweep)
    lines = [f"{'gate (' + what + ')':>24}{'in-scope passed %':>19}{'oos stopped %':>15}"
             + (f"{'right and passed %':>20}" if right else "")]
    for r in sweep:
        mark = "  <- chosen" if chosen is not None and r["threshold"] == chosen["threshold"] else ""
        extra = f"{_f(r.get('right_passed_pct')):>20}" if right else ""
        lines.append(f"{r['threshold']:>24.2f}{r['in_scope_passed_pct']:>19.1f}{r['oos_stopped_pct']:>15.1f}{extra}{mark}")
    return "\n".join(lines)
