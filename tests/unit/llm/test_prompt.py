from types import SimpleNamespace

from sub250.llm.prompt import build_messages


def P(title, content):
    return SimpleNamespace(title=title, content=content)


def count(text):
    return len(text.split())


def test_system_prompt_first_and_byte_stable():
    a = build_messages("SYS", "q1?", [P("A", "alpha")], [], count)
    b = build_messages("SYS", "q2?", [P("B", "beta")], [], count)
    assert a[0] == b[0] == {"role": "system", "content": "SYS"}
    assert a[-1] == {"role": "user", "content": "Context:\n- A: alpha\n\nQuestion: q1?"}


def test_passages_trimmed_to_the_token_budget_but_never_empty():
    long = [P("A", "x " * 60), P("B", "y " * 60)]
    msgs = build_messages("S", "q", long, [], count, passage_tokens=100)
    assert "- A:" in msgs[-1]["content"] and "- B:" not in msgs[-1]["content"]
    # the best passage alone is over the budget: it is cut to fit, at a word boundary
    msgs = build_messages("S", "q", [P("A", "word " * 5000)], [], count, passage_tokens=40)
    context = msgs[-1]["content"].split("\n\nQuestion:")[0].removeprefix("Context:\n")
    assert context.startswith("- A: word") and context.endswith(" …") and count(context) <= 40
    assert count(context) >= 38  # as much as fits


def test_history_trimmed_to_the_token_budget_newest_first():
    history = [{"role": "user", "content": "one two three"}, {"role": "assistant", "content": "four five"},
               {"role": "user", "content": "six"}, {"role": "assistant", "content": "seven eight"}]
    msgs = build_messages("S", "q", [], history, count, history_tokens=12)
    assert [m["content"] for m in msgs[1:-1]] == ["six", "seven eight"]
    assert build_messages("S", "q", [], history, count, history_tokens=0)[1:-1] == []
    # never start mid-exchange: only the last assistant answer fits in 7 tokens, so nothing is kept
    assert build_messages("S", "q", [], history, count, history_tokens=7)[1:-1] == []
