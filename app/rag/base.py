"""The retrieval interface the session uses: a question in, the best passages out (with how the query cache
served it). One real implementation (:class:`app.rag.retriever.Retriever`: query cache, embedder, pgvector)."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sub250.rag.query_cache import QueryCache
    from sub250.rag.store import RetrievedPassage


@dataclass(frozen=True)
class Retrieval:
    passages: list[RetrievedPassage]
    embed_ms: float
    search_ms: float
    #: "exact" | "near" (served by the query cache) | "miss" (searched) | "off" (no cache)
    cache: str = "off"
    #: cosine to the closest cached question (None: no cache, or empty)
    similarity: float | None = None
    #: The question's unit embedding (the cached question's on an exact hit): what the answer's sentence
    #: picker compares with.
    vector: np.ndarray | None = None


class BaseRetriever(abc.ABC):
    #: The query cache a search ahead of the commit fills (None: no cache, so nothing to search ahead for).
    cache: QueryCache | None = None

    @abc.abstractmethod
    async def retrieve(self, query: str, k: int | None = None, *, count: bool = True) -> Retrieval:
        """The top ``k`` passages for ``query``. ``count=False``: a search ahead of time (a partial
        transcript), left out of the cache's hit rate. Raises when the store is unreachable."""
