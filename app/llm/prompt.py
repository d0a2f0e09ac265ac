"""The prompt template: a byte-stable system prompt first (vLLM's prefix cache covers it), then the
retrieved passages, the trimmed history, and the caller's question."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

#: Budgets of one prompt, in the model's tokens: the retrieved passages, and the history.
PASSAGE_TOKENS = 350
HISTORY_TOKENS = 384


def fit_tokens(text: str, budget: int, count_tokens: Callable[[str], int]) -> str:
    """``text`` cut at a word boundary (marked with "…") so that it counts at most ``budget`` tokens."""
    if count_tokens(text) <= budget:
        return text
    words = text.split(" ")
    lo, hi = 0, len(words)
    while lo < hi:  # the most words that still fit
        mid = (lo + hi + 1) // 2
        if count_tokens(" ".join(words[:mid]) + " …") <= budget:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]) + " …" if lo else ""


def build_messages(
    instructions: str,
    question: str,
    passages: Sequence[Any],
    history: Sequence[dict[str, str]],
    count_tokens: Callable[[str], int],
    *,
    history_tokens: int = HISTORY_TOKENS,
    passage_tokens: int = PASSAGE_TOKENS,
    hint: str | None = None,
) -> list[dict[str, str]]:
    """Chat messages for one turn. ``history`` is oldest-first user/assistant messages (without this question).
    Passages are taken best-first while they fit ``passage_tokens``; the best one is cut to fit if it alone
    does not, so the prompt is never without context nor over its budget. ``hint``: a line put after the
    question (the system prompt stays byte-stable for the prefix cache)."""
    context_lines: list[str] = []
    used = 0
    for p in passages:
        line = f"- {p.title}: {p.content}"
        cost = count_tokens(line)
        if used + cost > passage_tokens:
            if not context_lines and (cut := fit_tokens(line, passage_tokens, count_tokens)):
                context_lines.append(cut)
            break
        context_lines.append(line)
        used += cost
    kept: list[dict[str, str]] = []
    budget = history_tokens
    for msg in reversed(history):
        cost = count_tokens(msg["content"]) + 4
        if cost > budget:
            break
        kept.append(msg)
        budget -= cost
    kept.reverse()
    if kept and kept[0]["role"] == "assistant":
        kept = kept[1:]  # never start the history mid-exchange
    user = f"Context:\n{chr(10).join(context_lines)}\n\nQuestion: {question}" if context_lines else question
    if hint:
        user = f"{user}\n{hint}"
    return [{"role": "system", "content": instructions}, *kept, {"role": "user", "content": user}]
