"""Phrase loops in a reply ("high-end, high-end, high-end", "A: Queen of Clothes" four times): the check the
answer benchmark scores with (``repeats=3``), and the stricter one a streaming reply is stopped by
(``repeats=2``: the caller hears a phrase at most twice)."""

from __future__ import annotations

import re
from collections import Counter

_WORD = re.compile(r"[a-z0-9']+")

#: Longest unit (in words) looked for back to back.
MAX_UNIT = 8
#: A phrase this many words long repeated anywhere in a reply counts, not only back to back.
PHRASE_WORDS = 4


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def find_loop(text: str, *, repeats: int = 3) -> str | None:
    """The repeated phrase when ``text`` loops, else None: a unit of 2-8 words ``repeats`` times back to back
    (one word: at least three times, "very, very" is speech), or a ``PHRASE_WORDS``-word phrase ``repeats``
    times anywhere."""
    if repeats < 2:
        raise ValueError("repeats must be at least 2")
    w = words(text)
    n = len(w)
    for size in range(1, MAX_UNIT + 1):
        times = max(repeats, 3) if size == 1 else repeats
        for start in range(0, n - size * times + 1):
            unit = w[start:start + size]
            if all(w[start + k * size:start + (k + 1) * size] == unit for k in range(1, times)):
                return " ".join(unit)
    grams = Counter(tuple(w[i:i + PHRASE_WORDS]) for i in range(n - PHRASE_WORDS + 1))
    for gram, count in grams.items():
        if count >= repeats:
            return " ".join(gram)
    return None
