"""Query -> top-k passages: the query cache first (exact, then near-duplicate by embedding), else embed the
query (in a thread) and search pgvector."""

from __future__ import annotations

import time

from app.rag.base import BaseRetriever, Retrieval
from app.rag.embedder import Embedder
from app.rag.query_cache import QueryCache
from app.rag.store import VectorStore

__all__ = ["Retrieval", "Retriever"]


class Retriever(BaseRetriever):
    def __init__(self, embedder: Embedder, store: VectorStore, k: int = 3, cache: QueryCache | None = None, *,
                 hybrid: bool = False, text_weight: float = 1.0) -> None:
        self.embedder, self.store, self.k = embedder, store, k
        self.cache = cache
        #: Full-text search fused with the vectors (``VectorStore.hybrid_search``), else vectors alone.
        self.hybrid = hybrid
        #: How much the full-text ranking counts against the vectors' in the fusion.
        self.text_weight = text_weight

    async def retrieve(self, query: str, k: int | None = None, *, count: bool = True) -> Retrieval:
        """``count=False``: a search ahead of time (a partial transcript), left out of the hit rate."""
        k = k or self.k
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
        passages = await (self.store.hybrid_search(vec, query, k, text_weight=self.text_weight) if self.hybrid else self.store.search(vec, k))
        t2 = time.perf_counter()
        if cache is not None:
            cache.put(query, vec, passages, (t2 - t1) * 1000)
        return Retrieval(passages, (t1 - t0) * 1000, (t2 - t1) * 1000,
                         cache="miss" if cache is not None else "off", similarity=similarity, vector=vec)
