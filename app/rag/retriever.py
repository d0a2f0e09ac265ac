"""Query -> top-k passages: the fillers of speech out of the query (``clean``, app/rag/question.py), the query
cache first (exact, then near-duplicate by embedding), else embed the query (in a thread), search pgvector
and put the candidates in order (``reranker``, app/rag/rerank.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sub250.errors import ConfigError
from sub250.rag.base import BaseRetriever, Retrieval
from sub250.rag.embedder import Embedder
from sub250.rag.query_cache import QueryCache
from sub250.rag.question import clean_question
from sub250.rag.rerank import Reranker, RerankWeights
from sub250.rag.store import VectorStore

__all__ = ["Retrieval", "RetrievalOptions", "Retriever"]


@dataclass(frozen=True)
class RetrievalOptions:
    """What a profile's ``[embedder]`` section chooses about retrieval, typed, with the defaults of a profile
    that says nothing."""

    #: Full-text search fused with the vectors (``hybrid``), and how much its ranking counts
    #: (``hybrid_text_weight``).
    hybrid: bool = False
    text_weight: float = 1.0
    #: Search the question without the fillers of speech (``clean_questions``; app/rag/question.py).
    clean: bool = False
    #: Reorder the store's first ``rerank_candidates`` (``rerank``; app/rag/rerank.py, ``rerank_weights``).
    rerank: bool = False
    candidates: int = 10
    weights: RerankWeights = RerankWeights()

    @classmethod
    def from_stage(cls, cfg: dict[str, Any]) -> RetrievalOptions:
        candidates = cfg.get("rerank_candidates", cls.candidates)
        if isinstance(candidates, bool) or not isinstance(candidates, int) or not 3 <= candidates <= 100:
            raise ConfigError(f"[embedder] rerank_candidates = {candidates!r} must be a whole number from 3 to 100",
                              "fix the profile's [embedder] section")
        try:
            text_weight = float(cfg.get("hybrid_text_weight", cls.text_weight))
        except (TypeError, ValueError):
            text_weight = -1.0
        if not 0.0 <= text_weight <= 100.0:
            raise ConfigError("[embedder] hybrid_text_weight must be a number from 0 to 100",
                              "fix the profile's [embedder] section")
        flags = {}
        for key, field in (("hybrid", "hybrid"), ("clean_questions", "clean"), ("rerank", "rerank")):
            value = cfg.get(key, False)
            if not isinstance(value, bool):
                raise ConfigError(f"[embedder] {key} = {value!r} must be true or false",
                                  "fix the profile's [embedder] section")
            flags[field] = value
        return cls(text_weight=text_weight, candidates=candidates,
                   weights=RerankWeights.from_config(cfg.get("rerank_weights")), **flags)


class Retriever(BaseRetriever):
    def __init__(self, embedder: Embedder, store: VectorStore, k: int = 3, cache: QueryCache | None = None, *,
                 options: RetrievalOptions | None = None, reranker: Reranker | None = None) -> None:
        """``options``: how to search (the profile's ``[embedder]``; the defaults: vectors alone, the question as
        given); ``reranker`` reorders the store's first ``options.candidates`` (None: the store's order)."""
        self.embedder, self.store, self.k = embedder, store, k
        self.cache = cache
        self.options = options or RetrievalOptions()
        self.reranker = reranker

    async def retrieve(self, query: str, k: int | None = None, *, count: bool = True) -> Retrieval:
        """``count=False``: a search ahead of time (a partial transcript), left out of the hit rate."""
        k = k or self.k
        opts = self.options
        if opts.clean:
            query = clean_question(query)
        cache = self.cache if k == self.k else None
        if cache is not None and (hit := cache.exact(query, count=count)) is not None:
            return Retrieval(hit.passages, 0.0, 0.0, cache="exact", similarity=1.0, vector=hit.vector)
        t0 = time.perf_counter()
        vec = await self.embedder.run(self.embedder.embed_one, query)
        t1 = time.perf_counter()
        similarity = None
        if cache is not None:
            entry, similarity = cache.near(vec, count=count)
            if entry is not None:
                return Retrieval(entry.passages, (t1 - t0) * 1000, 0.0, cache="near", similarity=similarity,
                                 vector=vec)
        n = max(k, opts.candidates) if self.reranker is not None else k
        passages = await (self.store.hybrid_search(vec, query, n, text_weight=opts.text_weight) if opts.hybrid
                          else self.store.search(vec, n))
        if self.reranker is not None:
            passages = (await self.reranker.rerank(vec, passages, query))[:k]
        t2 = time.perf_counter()
        if cache is not None:
            cache.put(query, vec, passages, (t2 - t1) * 1000)
        return Retrieval(passages, (t1 - t0) * 1000, (t2 - t1) * 1000,
                         cache="miss" if cache is not None else "off", similarity=similarity, vector=vec)
