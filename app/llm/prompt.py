"""The prompt template: a byte-stable system prompt first (vLLM's prefix cache covers it), then the
retrieved passages, the trimmed history, and the caller's question."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

#: Passage text budget (characters) and history budget (tokens) of one prompt.
PASSAGE_CHARS = 1400
HISTORY_TOKENS = 384


def build_messages(
    instructions: str,
    question: str,
    passages: Sequence[Any],
    history: Sequence[dict[str, str]],
    count_tokens: Callable[[str], int],
    *,
    history_tokens: int = HISTORY_TOKENS,
    passage_chars: int = PASSAGE_CHARS,
) -> list[dict[str, str]]:
    """Chat messages for one turn. ``history`` is oldest-first user/assistant messages (without this question)."""
    context_lines: list[str] = []
    used = 0
    for p in passages:
        line = f"- {p.title}: {p.content}"
        if used + len(line) > passage_chars and context_lines:
            break
        context_lines.append(line)
        used += len(line)
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
    return [{"role": "system", "content": instructions}, *kept, {"role": "user", "content": user}]
