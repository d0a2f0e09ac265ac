"""The retrieval's candidates put in a better order with what the database does not hold: the cosine of the
question to each candidate's best sentence and to its title, beside the passage's own cosine and its place
in the fused (vector + full-text) order, and the question's rare words that the passage holds (BM25).

A passage's score is ``cosine * c + best sentence * s + title * t + fusion / (RRF_K + its place) + lexical *
BM25`` (place 0: first in the fused order). The sentences' vectors are the answer's sentence picker's (embedded
at start and kept, app/answer/extract.py), the titles' are embedded once and kept here, the BM25 index
(app/rag/lexical.py) is built at start: a rerank of ten candidates is a few small matrix products, no model
call once warm. Measured on the answer benchmark: hit@1 83 -> 88 % without the lexical term
(docs/BENCHMARKS.md §27), 88 -> 91 % with it (§29), with the weights of ``RerankWeights``' defaults.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from sub250.errors import ConfigError
from sub250.rag.lexical import LexicalIndex
from sub250.rag.store import RRF_K, RetrievedPassage

__all__ = ["RerankWeights", "Reranker"]


class SentenceSource(Protocol):
    async def sentences(self, passage: Any) -> tuple[list[str], np.ndarray]:
        """A passage's sentences and their unit vectors (n, dim)."""


@dataclass(frozen=True)
class RerankWeights:
    #: the passage's cosine to the question (its title and body, as stored)
    cosine: float = 0.5
    #: the cosine of its sentence closest to the question
    sentence: float = 0.5
    #: its title's cosine
    title: float = 0.25
    #: times 1 / (RRF_K + its place in the fused order)
    fusion: float = 20.0
    #: times the passage's BM25 score for the question (Lucene's scale: ~1-3 a shared rare word)
    lexical: float = 0.05

    def __post_init__(self) -> None:
        if not all(0.0 <= v <= 1000.0 for v in (self.cosine, self.sentence, self.title, self.fusion, self.lexical)):
            raise ConfigError("[embedder] rerank weights must be numbers from 0 to 1000",
                              "fix the profile's [embedder] rerank_weights")

    @classmethod
    def from_config(cls, cfg: Any) -> RerankWeights:
        if cfg is None:
            return cls()
        if not isinstance(cfg, dict) or not set(cfg) <= {"cosine", "sentence", "title", "fusion", "lexical"}:
            raise ConfigError("[embedder] rerank_weights takes cosine, sentence, title, fusion and lexical",
                              "fix the profile's [embedder] rerank_weights")
        try:
            return cls(**{k: float(v) for k, v in cfg.items()})
        except (TypeError, ValueError):
            raise ConfigError("[embedder] rerank weights must be numbers", "fix the profile's [embedder] rerank_weights"
                              ) from None


class Reranker:
    """``embed`` turns a list of texts into unit vectors (n, dim), off the event loop; ``sentences`` gives a
    passage's sentence vectors (the answer's picker)."""

    def __init__(self, embed: Callable[[list[str]], Awaitable[np.ndarray]], sentences: SentenceSource,
                 weights: RerankWeights | None = None, *, max_titles: int = 4096) -> None:
        self._embed = embed
        self._sentences = sentences
        self.weights = weights or RerankWeights()
        self._titles: OrderedDict[str, np.ndarray] = OrderedDict()
        self.max_titles = max_titles
        #: BM25 over the knowledge base (built by :meth:`warm`; None: the lexical term counts 0)
        self.lexical: LexicalIndex | None = None

    async def _title_vectors(self, titles: Sequence[str]) -> list[np.ndarray]:
        missing = list(dict.fromkeys(t for t in titles if t not in self._titles))
        if missing:
            for title, vector in zip(missing, await self._embed(missing), strict=True):
                self._titles[title] = vector
        out = []
        for t in titles:
            self._titles.move_to_end(t)
            out.append(self._titles[t])
        while len(self._titles) > self.max_titles:
            self._titles.popitem(last=False)
        return out

    async def warm(self, passages: Sequence[Any]) -> int:
        """Embed the titles of ``passages`` now (in one batch) and index them all for the lexical term (in a
        thread); returns how many titles are held."""
        await self._title_vectors([p.title for p in passages][: self.max_titles])
        if self.weights.lexical:
            self.lexical = await asyncio.to_thread(LexicalIndex, passages)
        return len(self._titles)

    async def scores(self, vector: np.ndarray, passages: Sequence[RetrievedPassage],
                     question: str = "") -> list[float]:
        """Each passage's score (the module's formula), in the order given (the fused order); ``question``
        (as searched) for the lexical term."""
        w = self.weights
        titles = await self._title_vectors([p.title for p in passages]) if w.title else []
        lexical = (self.lexical.scores(question, passages) if w.lexical and self.lexical is not None and question
                   else None)
        out = []
        for place, p in enumerate(passages):
            score = w.cosine * (1.0 - p.distance) + w.fusion / (RRF_K + place)
            if w.sentence:
                _, vectors = await self._sentences.sentences(p)
                if len(vectors):
                    score += w.sentence * float((vectors @ vector).max())
            if w.title:
                score += w.title * float(titles[place] @ vector)
            if lexical is not None:
                score += w.lexical * lexical[place]
            out.append(score)
        return out

    async def rerank(self, vector: np.ndarray, passages: Sequence[RetrievedPassage],
                     question: str = "") -> list[RetrievedPassage]:
        """``passages`` (in the fused order) best first by :meth:`scores`; a tie keeps the fused order."""
        scores = await self.scores(vector, passages, question)
        order = sorted(range(len(passages)), key=lambda i: (-scores[i], i))
        return [passages[i] for i in order]
