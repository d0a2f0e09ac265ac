"""Query -> top-k passages: embed the query (in a thread) and search pgvector."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from app.rag.embedder import Embedder
from app.rag.store import RetrievedPassage, VectorStore


@dataclass(frozen=True)
class Retrieval:
    passages: list[RetrievedPassage]
    embed_ms: float
    search_ms: float


class Retriever:
    def __init__(self, embedder: Embedder, store: VectorStore, k: int = 3) -> None:
        self.embedder, self.store, self.k = embedder, store, k

    async def retrieve(self, query: str, k: int | None = None) -> Retrieval:
        t0 = time.perf_counter()
        vec = await asyncio.to_thread(self.embedder.embed_one, query)
        t1 = time.perf_counter()
        passages = await self.store.search(vec, k or self.k)
        t2 = time.perf_counter()
        return Retrieval(passages, (t1 - t0) * 1000, (t2 - t1) * 1000)
