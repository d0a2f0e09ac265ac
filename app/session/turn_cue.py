"""The transcript cue of turn detection: words a turn does not end on.

A caller who pauses after "how far from the", "…and", or in the middle of a number is not done, whatever the
silence or the end-of-turn model's reading of their voice says. The session reads the transcript of the reply it
holds at the pause (``app/session/speculation.py``) and, when it ends on one of these words, waits longer before
it commits the turn (``[vad] hold_open_ms``). Measured in docs/BENCHMARKS.md §34 (``scripts/bench_endpointing.py``,
whose ``+cue`` rules use this very test).
"""

from __future__ import annotations

_NUMBERS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
            "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred "
            "thousand million point")
#: Words after which a turn is taken to go on: conjunctions, articles, prepositions, possessives, a copula, a
#: filler, and number words (a number still being read).
CONTINUATION_WORDS = frozenset(
    "and or but so because if the a an of to for with from in on at by about my your our their this that is "
    "are was um uh".split() + _NUMBERS.split())


def ends_open(text: str) -> bool:
    """Whether a (partial) transcript ends on a word a turn does not end on; digits count as number words (Whisper
    writes "four five" as "45", "4.5" or "4-5")."""
    words = [w.strip(".,?!;:\"'-").lower() for w in text.split()]
    words = [w for w in words if w]
    if not words:
        return False
    last = words[-1]
    return last in CONTINUATION_WORDS or last.replace(",", "").replace(".", "").replace("-", "").isdigit()


def as_said(text: str) -> str:
    """A transcript as the caller said it, for a model to judge whether the turn is over: without the punctuation
    Whisper puts at its end (it writes "How far from the?" as readily as "Where is it?")."""
    return text.strip().rstrip(".,?!;:…-").rstrip()
