"""The pgvector store: nearest passages by cosine distance (HNSW), with light metadata filters."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np


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
    def __init__(self, pool: Any) -> None:
        self.pool = pool

    async def search(self, embedding: np.ndarray, k: int = 3, *, source: str | None = None) -> list[RetrievedPassage]:
        sql = (
            "SELECT c.id, d.source, c.title, c.content, c.embedding <=> $1 AS distance"
            " FROM chunks c JOIN documents d ON d.id = c.document_id"
            + (" WHERE d.source = $3" if source else "")
            + " ORDER BY c.embedding <=> $1 LIMIT $2"
        )
        args: list[Any] = [embedding, k] + ([source] if source else [])
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(sql, *args)
        return [RetrievedPassage(r["id"], r["source"], r["title"], r["content"], float(r["distance"])) for r in rows]

    async def count(self) -> int:
        async with self.pool.acquire() as conn:
            return int(await conn.fetchval("SELECT count(*) FROM chunks"))

    async def document_state(self) -> dict[str, tuple[str, str]]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch("SELECT source, sha256, embedding_model FROM documents")
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

    async def delete_missing(self, keep: set[str]) -> list[str]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch("DELETE FROM documents WHERE NOT (source = ANY($1::text[])) RETURNING source",
                                    list(keep))
        return [r["source"] for r in rows]
