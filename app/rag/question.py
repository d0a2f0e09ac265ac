"""A caller's question as retrieval should see it: the fillers of speech out, informal contractions spelled out.

"um, so how much is the Aero gonna cost me?" is searched as "How much is the Aero going to cost me?". The
words that carry the question stay as they are; only hesitations ("um", "uh", "hmm", "er"), discourse
openers ("so", "well", "okay" at the start), filler "like" (after a comma, at the start, after "so" or "and"
- never "what does it look like") and spoken contractions ("gonna", "gotta", "wanna", "kinda", "outta") are
changed. Measured on the answer benchmark (docs/BENCHMARKS.md §27).
"""

from __future__ import annotations

import re

__all__ = ["FUNCTION_WORDS", "clean_question"]

#: Words of a question that say nothing of its subject (fillers of spoken questions included).
FUNCTION_WORDS = frozenset("""
a an the and or but if so of to in on at for from by with about as is are was were be been do does did can
could should would will shall may might must i me my we our you your it its this that these those there here
what which who whom whose when where why how much many long often any some there's it's i'm what's how's
uh um er like just really gonna wanna kinda okay ok well hey hi please tell know need get got have has had
""".split())


_HESITATION = re.compile(r"(?i)(?<![\w'])(?:u+m+|u+h+|e+r+m*|h+m+|u+g+h+|you know|i mean)(?![\w'])[,.]?\s*")
_OPENER = re.compile(r"(?i)^\s*(?:so|well|okay|ok|hey|right)\b,?\s+")
_FILLER_LIKE = re.compile(r"(?i)(?:^|(?<=,)|(?<=\bso)|(?<=\band))\s*like\b,?\s*")
_SPOKEN = [(re.compile(rf"(?i)\b{a}\b"), b) for a, b in (
    ("gonna", "going to"), ("gotta", "have to"), ("wanna", "want to"), ("kinda", "kind of"), ("outta", "out of"),
    ("gimme", "give me"))]
_COMMA_LIKE = re.compile(r"(?i),\s*like\s*,\s*")
_SPACES = re.compile(r"\s+")
_DOUBLE_COMMA = re.compile(r",\s*,")


def clean_question(text: str) -> str:
    """``text`` without the fillers of speech (see the module); the text itself when nothing would be left."""
    t = _COMMA_LIKE.sub(" ", _HESITATION.sub("", text))
    for _ in range(2):  # "so like, ..." / "um, so ..."
        t = _OPENER.sub("", t)
        t = _FILLER_LIKE.sub(" ", t)
    for pattern, spelled in _SPOKEN:
        t = pattern.sub(spelled, t)
    t = _SPACES.sub(" ", _DOUBLE_COMMA.sub(",", t)).lstrip(" ,.?!").rstrip(" ,")
    return t or text
