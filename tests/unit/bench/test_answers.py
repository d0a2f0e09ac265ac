"""The answer benchmark's scoring, and its data: every fact of every in-scope question is in the KB section
it names (so a right answer is possible from that passage alone)."""

import pytest

from scripts.bench import answers as A
from sub250.rag.kb import SAMPLE_KB, read_folder

QUESTIONS = A.load_questions()


def q(facts, kind="number", section="S"):
    return A.Question("x", "?", kind, "f.md", section, tuple(tuple(f) for f in facts))


def test_the_question_set_is_big_and_mixed_enough():
    ins = [x for x in QUESTIONS if x.in_scope]
    oos = [x for x in QUESTIONS if not x.in_scope]
    assert len(ins) >= 60 and len(oos) >= 15
    assert {"number", "name", "yesno", "procedure", "paraphrase", "spoken"} <= {x.kind for x in ins}
    assert len({x.id for x in QUESTIONS}) == len(QUESTIONS)


def test_every_fact_is_in_the_section_it_names():
    sections = {(d.source, p.title): p.content for d in read_folder(SAMPLE_KB) for p in d.passages}
    for x in QUESTIONS:
        if not x.in_scope:
            assert x.facts == () and x.section is None
            continue
        content = sections.get((x.source, x.section))
        assert content is not None, f"{x.id}: no section {x.section!r} in {x.source}"
        for fact in x.facts:
            assert any(A.has_phrase(content, v) for v in fact), f"{x.id}: {fact} not in {x.section!r}"


def test_a_right_answer_has_every_fact_in_any_spelling_as_whole_words():
    price = q([["three hundred and twenty-nine", "329"]])
    assert A.is_right(price, "It costs three hundred and twenty nine dollars.")
    assert A.is_right(price, "It's $329.")
    assert not A.is_right(price, "It costs thirty-two dollars.")
    assert not A.is_right(price, "It costs 3290 dollars.")  # whole words only
    two = q([["nine months"], ["amber"]])
    assert A.is_right(two, "About nine months; an amber icon lights up.")
    assert not A.is_right(two, "About nine months.")
    assert not A.is_right(q([], kind=A.OUT_OF_SCOPE), "anything")


def test_declines_are_the_fixed_text_or_a_plain_cannot_answer():
    fixed = "Sorry, I can only help with Halden questions."
    assert A.is_declined(fixed, fixed)
    assert A.is_declined("I don't know the answer to that.", fixed)
    assert not A.is_declined("The PetGuard filter won the 2018 World Cup in Africa.", fixed)


def test_score_marks_retrieval_hits_and_loops():
    x = q([["nine months"]], section="When to Replace the Filter")
    s = A.score(x, "nine months, nine months, nine months", ["Other", "When to Replace the Filter"], "no")
    assert s == {"right": True, "declined": False, "loop": True, "hit1": False, "hit3": True}


def test_summary_and_gate_sweep_count_what_was_measured():
    rows = [
        {"config": "c", "kind": "number", "right": True, "declined": False, "loop": False, "hit1": True,
         "hit3": True, "ttft_ms": 10.0, "path": "generative"},
        {"config": "c", "kind": "number", "right": False, "declined": False, "loop": True, "hit1": False,
         "hit3": True, "ttft_ms": 30.0, "path": "generative"},
        {"config": "c", "kind": A.OUT_OF_SCOPE, "right": None, "declined": True, "loop": False, "ttft_ms": 1.0,
         "path": "declined"},
    ]
    s = A.summarize(rows)["c"]
    assert (s["right_pct"], s["oos_declined_pct"], s["hit1_pct"], s["hit3_pct"]) == (50.0, 100.0, 50.0, 100.0)
    assert s["loop_pct"] == pytest.approx(100 / 3) and s["ttft_p50_ms"] == 10.0
    assert s["paths"] == {"generative": 2, "declined": 1}
    sweep = A.gate_sweep([(0.6, True), (0.4, True), (0.2, False), (None, False)], [0.1, 0.3, 0.5])
    assert [(r["in_scope_passed_pct"], r["oos_stopped_pct"]) for r in sweep] == [(100, 50), (100, 100), (50, 100)]
    assert A.best_gate(sweep)["threshold"] == 0.3
    wide = A.gate_sweep([(0.6, True), (0.1, False)], [0.2, 0.3, 0.4, 0.5])
    assert A.best_gate(wide)["threshold"] == 0.3  # the middle of the thresholds that do best
    assert A.best_gate(sweep, keep_in_scope_pct=101) is None
    assert "0.30" in A.sweep_table(sweep, A.best_gate(sweep))
    assert "c" in A.table(A.summarize(rows)) and "number" in A.kinds_table(A.summarize(rows))
