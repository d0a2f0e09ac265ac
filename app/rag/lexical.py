"""BM25 over the knowledge base's passages, for the reranker's lexical term.

The store's full-text leg (``ts_rank_cd`` in the fused search) counts how often and how close the question's
words occur, not how rare they are: "E7" in "the screen says E7" weighs no more than "fan", so the E1
"fan motor stalled" passage outranks the E7 one. BM25 weighs each word by its inverse document frequency over
the whole knowledge base (bm25s, Lucene's variant, k1 = 1.2, b = 0.75). Words are compared as the vocabulary
compares them (:func:`app.rag.vocabulary.subject_stems`: first five letters, fillers and function words out).

The index is built from every stored passage at start (``Stack.warm_answers``, off the event loop); a passage
stored after that scores 0 until the next start. Measured on the answer benchmark (docs/BENCHMARKS.md §29).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import bm25s
import numpy as np

from sub250.rag.vocabulary import subject_stems

__all__ = ["LexicalIndex"]


class LexicalIndex:
    def __init__(self, passages: Sequence[Any], *, k1: float = 1.2, b: float = 0.75) -> None:
        """``passages``: anything with ``chunk_id``, ``title`` and ``content`` (the store's rows)."""
        self._row = {p.chunk_id: i for i, p in enumerate(passages)}
        self._bm25 = bm25s.BM25(k1=k1, b=b)
        corpus = [subject_stems(f"{p.title} {p.content}") for p in passages]
        self._empty = not any(corpus)
        if not self._empty:
            self._bm25.index(corpus, show_progress=False)

    def __len__(self) -> int:
        return len(self._row)

    def scores(self, question: str, passages: Sequence[Any]) -> list[float]:
        """The BM25 score of each of ``passages`` for ``question``, in the order given (0 for a passage the
        index does not hold, or a question with no subject word)."""
        stems = subject_stems(question)
        if self._empty or not stems:
            return [0.0] * len(passages)
        every = np.asarray(self._bm25.get_scores(stems))
        return [float(every[i]) if (i := self._row.get(p.chunk_id)) is not None else 0.0 for p in passages]
