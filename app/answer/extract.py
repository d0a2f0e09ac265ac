"""The extractive path: the sentence(s) of the retrieved passages closest to the question, chosen with the
embedder the retrieval already runs (MiniLM: the question's vector is the retrieval's own).

A passage's sentences are embedded once and kept (least recently used out) by chunk id and content, so a
passage costs one batch of embeddings the first time it answers anything and nothing after.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sub250.rag.question import FUNCTION_WORDS

#: A sentence ends at ., ! or ? followed by a space and a capital letter or digit (the KB's prose; "0.1
#: microns" and "U.S." stay whole).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
#: How an extract of several sentences is laid around the best one: ``following`` - the best and those after
#: it; ``around`` - of the runs of consecutive sentences that hold the best one, the closest to the question
#: on average (a sentence that sets up the answer comes along; docs/BENCHMARKS.md §27).
SPANS = ("following", "around")
#: A first pick shorter than this many words gets its next sentence too ("Yes." alone answers nothing).
MIN_WORDS = 6
_WORD = re.compile(r"[a-z0-9]+")


def content_stems(text: str) -> set[str]:
    """The text's subject words, each cut to its first five letters ("weighs" and "weigh" meet)."""
    return {w[:5] for w in _WORD.findall(text.lower()) if w not in FUNCTION_WORDS}


def lexical_overlap(question: set[str], sentence: str) -> float:
    """Share of the question's subject words the sentence has (0 when the question has none)."""
    return len(question & content_stems(sentence)) / len(question) if question else 0.0


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


@dataclass(frozen=True)
class Extract:
    text: str
    #: cosine of the question to the chosen sentence
    score: float
    chunk_id: int
    sentences: tuple[int, ...]


class SentencePicker:
    """``embed`` turns a list of texts into unit vectors (n, dim), off the event loop."""

    def __init__(self, embed: Callable[[list[str]], Awaitable[np.ndarray]], *, max_passages: int = 1024) -> None:
        self._embed = embed
        self._cache: OrderedDict[tuple[int, str], tuple[list[str], np.ndarray]] = OrderedDict()
        self.max_passages = max_passages

    async def sentences(self, passage: Any) -> tuple[list[str], np.ndarray]:
        """The passage's sentences and their unit vectors (n, dim): embedded at its first use, then kept."""
        key = (passage.chunk_id, passage.content)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        sentences = split_sentences(passage.content)
        vectors = await self._embed(sentences) if sentences else np.zeros((0, 0), dtype=np.float32)
        self._cache[key] = (sentences, vectors)
        while len(self._cache) > self.max_passages:
            self._cache.popitem(last=False)
        return sentences, vectors

    async def warm(self, passages: Sequence[Any]) -> int:
        """Embed the sentences of ``passages`` now (up to the cache's size), so no caller waits for a passage's
        first use; returns how many passages are held."""
        for passage in list(passages)[: self.max_passages]:
            await self.sentences(passage)
        return len(self._cache)

    async def pick(self, question_vector: np.ndarray, passages: Sequence[Any], *, sentences: int = 1,
                   passages_searched: int = 1, question: str = "", lexical_weight: float = 0.0,
                   span: str = "following") -> Extract | None:
        """The best sentence among the first ``passages_searched`` passages, with others of its passage up to
        ``sentences`` in all, laid as ``span`` says (:data:`SPANS`; in the passage's order, as it reads), or
        None when there is nothing to pick.
        A sentence's score is its cosine to the question plus ``lexical_weight`` times the share of the
        question's subject words it contains (:func:`lexical_overlap`)."""
        if span not in SPANS:
            raise ValueError(f"span {span!r} is not one of {SPANS}")
        best: tuple[float, Any, list[str], int, np.ndarray] | None = None
        stems = content_stems(question) if lexical_weight else set()
        for passage in passages[:max(passages_searched, 1)]:
            texts, vectors = await self.sentences(passage)
            if not texts:
                continue
            scores = vectors @ question_vector
            if stems:
                scores = scores + lexical_weight * np.array([lexical_overlap(stems, t) for t in texts])
            i = int(np.argmax(scores))
            if best is None or scores[i] > best[0]:
                best = (float(scores[i]), passage, texts, i, scores)
        if best is None:
            return None
        score, passage, texts, i, scores = best
        n = min(max(sentences, 1), len(texts))
        if span == "around":
            # the runs of n sentences holding i start from i - n + 1 to i (within the passage); the first
            # of the closest on average
            starts = range(max(0, i - n + 1), min(i, len(texts) - n) + 1)
            first = max(starts, key=lambda a: (float(scores[a:a + n].mean()), -a))
        else:
            first = i
        take = list(range(first, min(first + n, len(texts))))
        if sum(len(texts[j].split()) for j in take) < MIN_WORDS and take[-1] + 1 < len(texts):
            take.append(take[-1] + 1)
        return Extract(" ".join(texts[j] for j in take), score, passage.chunk_id, tuple(take))
