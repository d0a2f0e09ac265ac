"""The pgvector store: nearest passages by cosine distance (HNSW), with light metadata filters.

PostgreSQL going away and coming back (stopped, restarted, a failover) needs no restart of the app: asyncpg's
pool replaces a connection it knows is closed at the next ``acquire``. A read that meets a connection lost
under it (the server went down between acquire and query) expires the pool's connections
(``Pool.expire_connections``) and is tried once more on a fresh one - no sleeps, no loops. Every read is
bounded as a whole (acquire, connect, query): a search gives up after :data:`SEARCH_TIMEOUT_S`, so a dead or
hung server costs a turn its context, never its reply. The pool is made from one DSN: the embedded server's
(a unix socket in its data directory) or ``DATABASE_URL``'s stays the same across a database restart; a
database moved to another address needs sub250 restarted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg
import numpy as np

log = logging.getLogger(__name__)

T = TypeVar("T")

#: A search (acquire, maybe connect, query, maybe the one retry) gives up after this long: the reply goes on
#: without context (``retrieval_unavailable``) instead of waiting on TCP's timeouts. A search takes ~1-5 ms.
SEARCH_TIMEOUT_S = 2.0
#: Hybrid search: how many candidates each ranking (cosine, full text) brings, and reciprocal rank fusion's
#: constant (60, as in Cormack et al. 2009: a passage's score is the sum of 1 / (60 + its rank) over rankings).
HYBRID_CANDIDATES = 20
RRF_K = 60
#: Words of a question the full-text side searches for (any of them).
MAX_QUERY_WORDS = 64
_WORDS = re.compile(r"[^\W_]+")
#: The same bound for the other reads (ingest, ``serve``'s start).
READ_TIMEOUT_S = 30.0
#: A connection that died under a query: the server stopped, restarted or dropped it. Worth one more try on a
#: fresh connection (an unreachable server - ``OSError`` on connect - or a timeout is not: it fails at once).
LOST_CONNECTION = (asyncpg.PostgresConnectionError, asyncpg.exceptions.AdminShutdownError,
                   asyncpg.exceptions.CrashShutdownError, asyncpg.exceptions.CannotConnectNowError)


@dataclass(frozen=True)
class RetrievedPassage:
    chunk_id: int
    source: str
    title: str
    content: str
    distance: float

    def as_source(self) -> dict[str, Any]:
        return {"id": self.chunk_id, "source": self.source, "title": self.title,
                "score": round(1.0 - self.distance, 4)}


class VectorStore:
    def __init__(self, pool: Any, *, search_timeout_s: float = SEARCH_TIMEOUT_S) -> None:
        self.pool = pool
        self.search_timeout_s = search_timeout_s

    async def _read(self, query: Callable[[Any, float], Awaitable[T]], timeout: float) -> T:
        """``await query(connection, seconds left)`` within ``timeout`` in all; once more on a fresh connection
        if the first one was lost under it."""
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            return await self._attempt(query, deadline)
        except LOST_CONNECTION as exc:
            log.warning("PostgreSQL connection lost (%s: %s); retrying once on a fresh connection",
                        type(exc).__name__, exc)
            return await self._attempt(query, deadline)

    async def _attempt(self, query: Callable[[Any, float], Awaitable[T]], deadline: float) -> T:
        loop = asyncio.get_running_loop()
        try:
            async with self.pool.acquire(timeout=max(deadline - loop.time(), 0.001)) as conn:
                return await query(conn, max(deadline - loop.time(), 0.001))
        except (TimeoutError, *LOST_CONNECTION):
            # The pool's other connections may be dead or half-open too: the next acquire makes fresh ones.
            await self.pool.expire_connections()
            raise

    async def hybrid_search(self, embedding: np.ndarray, text: str, k: int = 3, *,
                            candidates: int = HYBRID_CANDIDATES, text_weight: float = 1.0) -> list[RetrievedPassage]:
        """The top ``k`` by reciprocal rank fusion (:data:`RRF_K`) of the ``candidates`` nearest by cosine and
        the ``candidates`` best by full-text rank (``ts_rank_cd`` over the question's words, any of them), in
        one round trip; the full-text ranking counts ``text_weight`` times the vectors'. ``distance`` stays each
        passage's cosine distance (what the answer's gate reads)."""
        sql = """
            WITH q AS (SELECT websearch_to_tsquery('english', $2) AS query),
            v AS (
                SELECT id, row_number() OVER (ORDER BY embedding <=> $1) AS rank
                FROM (SELECT id, embedding FROM chunks ORDER BY embedding <=> $1 LIMIT $3) nearest),
            t AS (
                SELECT id, row_number() OVER (ORDER BY score DESC, id) AS rank
                FROM (SELECT c.id, ts_rank_cd(c.tsv, q.query) AS score FROM chunks c, q
                      WHERE c.tsv @@ q.query ORDER BY score DESC LIMIT $3) matched),
            fused AS (
                SELECT id, sum(w / ($5 + rank)) AS rrf
                FROM (SELECT id, rank, 1.0 AS w FROM v UNION ALL SELECT id, rank, $6::float8 AS w FROM t) ranks
                GROUP BY id)
            SELECT c.id, d.source, c.title, c.content, c.embedding <=> $1 AS distance
            FROM fused f JOIN chunks c ON c.id = f.id JOIN documents d ON d.id = c.document_id
            ORDER BY f.rrf DESC, distance LIMIT $4"""
        # any of the question's words (websearch syntax: "a or b"; never a syntax error, stop words dropped)
        words = " or ".join(_WORDS.findall(text)[:MAX_QUERY_WORDS])
        args = (embedding, words, candidates, k, RRF_K, text_weight)
        rows = await self._read(lambda conn, left: conn.fetch(sql, *args, timeout=left), self.search_timeout_s)
        return [RetrievedPassage(r["id"], r["source"], r["title"], r["content"], float(r["distance"])) for r in rows]

    async def search(self, embedding: np.ndarray, k: int = 3, *, source: str | None = None) -> list[RetrievedPassage]:
        sql = (
            "SELECT c.id, d.source, c.title, c.content, c.embedding <=> $1 AS distance"
            " FROM chunks c JOIN documents d ON d.id = c.document_id"
            + (" WHERE d.source = $3" if source else "")
            + " ORDER BY c.embedding <=> $1 LIMIT $2"
        )
        args: list[Any] = [embedding, k] + ([source] if source else [])
        rows = await self._read(lambda conn, left: conn.fetch(sql, *args, timeout=left), self.search_timeout_s)
        return [RetrievedPassage(r["id"], r["source"], r["title"], r["content"], float(r["distance"])) for r in rows]

    async def passages(self, limit: int = 100_000) -> list[RetrievedPassage]:
        """Every stored passage (``distance`` 0), oldest first, at most ``limit``: what is warmed at start."""
        sql = ("SELECT c.id, d.source, c.title, c.content FROM chunks c JOIN documents d ON d.id = c.document_id"
               " ORDER BY c.id LIMIT $1")
        rows = await self._read(lambda conn, left: conn.fetch(sql, limit, timeout=left), READ_TIMEOUT_S)
        return [RetrievedPassage(r["id"], r["source"], r["title"], r["content"], 0.0) for r in rows]

    async def count(self) -> int:
        return int(await self._read(lambda conn, left: conn.fetchval("SELECT count(*) FROM chunks", timeout=left),
                                    READ_TIMEOUT_S))

    async def document_count(self) -> int:
        return int(await self._read(lambda conn, left: conn.fetchval("SELECT count(*) FROM documents", timeout=left),
                                    READ_TIMEOUT_S))

    async def document_state(self) -> dict[str, tuple[str, str]]:
        rows = await self._read(lambda conn, left: conn.fetch("SELECT source, sha256, embedding_model FROM documents",
                                                              timeout=left), READ_TIMEOUT_S)
        return {r["source"]: (r["sha256"], r["embedding_model"]) for r in rows}

    async def replace_document(self, source: str, title: str, sha256: str, model: str,
                               rows: list[tuple[int, str, str, dict, np.ndarray]]) -> None:
        """Atomically replace a document and all its chunks (ordinal, title, content, metadata, embedding)."""
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("DELETE FROM documents WHERE source = $1", source)
            doc_id = await conn.fetchval(
                "INSERT INTO documents (source, title, sha256, embedding_model) VALUES ($1, $2, $3, $4) RETURNING id",
                source, title, sha256, model,
            )
            await conn.executemany(
                "INSERT INTO chunks (document_id, ordinal, title, content, metadata, embedding)"
                " VALUES ($1, $2, $3, $4, $5::jsonb, $6)",
                [(doc_id, o, t, c, json.dumps(m), e) for o, t, c, m, e in rows],
            )

    async def about(self) -> tuple[str, str] | None:
        """The knowledge base's ``(company, scope)`` (app/rag/about.py), or None when none was ingested."""
        row = await self._read(lambda conn, left: conn.fetchrow("SELECT company, scope FROM kb_about", timeout=left),
                               READ_TIMEOUT_S)
        return None if row is None else (row["company"], row["scope"])

    async def set_about(self, company: str, scope: str) -> None:
        async with self.pool.acquire() as conn:
            await conn.execute("INSERT INTO kb_about (company, scope) VALUES ($1, $2) ON CONFLICT (only_row) DO "
                               "UPDATE SET company = $1, scope = $2, updated_at = now()", company, scope)

    async def delete_missing(self, keep: set[str]) -> list[str]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch("DELETE FROM documents WHERE NOT (source = ANY($1::text[])) RETURNING source",
                                    list(keep))
        return [r["source"] for r in rows]
