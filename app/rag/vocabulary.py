"""The words a knowledge base uses, to tell a question about a subject it never mentions.

"Does Halden offer a student discount?" comes as close to the Care+ passage (cosine 0.43) as real questions
come to theirs (in-scope questions of the answer benchmark go down to 0.39): no cosine tells it apart. Its
word "student" is nowhere in the KB, and that says it asks about something the KB does not cover. The
answer's gate asks such a question for a closer passage (``[answer] min_score_unfamiliar``) than one whose
every subject word the KB uses (docs/BENCHMARKS.md §27).

Words are compared lower case by their first five letters ("weighs" meets "weight"); a shorter word of the
question meets a KB word it begins ("cost" meets "costs"), and one without its plural "s" ("fans" meets "fan").
The fillers of speech are removed first (:func:`app.rag.question.clean_question`), function words never count
(:data:`app.rag.question.FUNCTION_WORDS`), and a negated auxiliary ("isn't", "won't") is a function word.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from sub250.rag.question import FUNCTION_WORDS, clean_question

__all__ = ["Vocabulary", "subject_stems"]

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
STEM = 5


def _words(text: str) -> Iterable[str]:
    for token in _TOKEN.findall(text.lower().replace("\u2019", "'")):
        base, _, suffix = token.partition("'")
        if suffix == "t":  # isn't, didn't, won't: an auxiliary, negated
            continue
        yield base


def subject_stems(text: str) -> list[str]:
    """The subject words of ``text`` as this module compares them: the fillers of speech out, function words
    and negated auxiliaries out, each cut to its first :data:`STEM` letters, in order, repeats kept (what the
    lexical term of the reranker counts, app/rag/lexical.py)."""
    return [w[:STEM] for w in _words(clean_question(text)) if w not in FUNCTION_WORDS]


class Vocabulary:
    def __init__(self, stems: Iterable[str]) -> None:
        self.stems = frozenset(stems)

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> Vocabulary:
        """The stems (first :data:`STEM` letters) of every word of ``texts``, and their shorter beginnings down
        to three letters (what a short word of a question is looked up by)."""
        return cls(w[:n] for text in texts for w in _words(text) for n in range(min(3, len(w)), STEM + 1))

    def knows(self, word: str) -> bool:
        return word[:STEM] in self.stems or (word.endswith("s") and word[:-1][:STEM] in self.stems)

    def __len__(self) -> int:
        return len(self.stems)

    def unknown(self, question: str) -> list[str]:
        """The subject words of ``question`` the knowledge base never uses, in order (empty: all known)."""
        out: list[str] = []
        for w in _words(clean_question(question)):
            if w not in FUNCTION_WORDS and not self.knows(w) and w not in out:
                out.append(w)
        return out
