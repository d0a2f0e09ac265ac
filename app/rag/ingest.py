"""Ingestion: files -> passages -> embeddings -> pgvector. Idempotent: unchanged files are skipped,
changed files are replaced atomically, files that disappeared are removed (only with ``prune``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sub250.rag.about import About, read_about
from sub250.rag.embedder import Embedder
from sub250.rag.kb import read_folder
from sub250.rag.store import VectorStore


@dataclass
class IngestReport:
    documents: int = 0
    skipped: int = 0
    chunks: int = 0
    removed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: The folder's about.toml, stored (None: the folder has none; what was stored before stays).
    about: About | None = None


async def ingest_folder(
    folder: Path,
    store: VectorStore,
    embedder: Embedder,
    *,
    model_id: str,
    prune: bool = False,
    force: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
    batch: int = 16,
) -> IngestReport:
    import time

    t0 = time.perf_counter()
    docs = await asyncio.to_thread(read_folder, folder)
    about = read_about(folder)  # read first: a bad about.toml stops the ingest before it changes anything
    state = await store.document_state()
    report = IngestReport()
    total = sum(len(d.passages) for d in docs)
    done = 0
    for doc in docs:
        if not force and state.get(doc.source) == (doc.sha256, model_id):
            report.skipped += 1
            done += len(doc.passages)
            if progress:
                progress(done, total, doc.source)
            continue
        rows: list[tuple[int, str, str, dict, Any]] = []
        for i in range(0, len(doc.passages), batch):
            part = doc.passages[i : i + batch]
            vecs = await asyncio.to_thread(embedder.embed, [p.embed_text for p in part])
            rows.extend((p.ordinal, p.title, p.content, p.metadata, v) for p, v in zip(part, vecs, strict=True))
            done += len(part)
            if progress:
                progress(done, total, doc.source)
        await store.replace_document(doc.source, doc.title, doc.sha256, model_id, rows)
        report.documents += 1
        report.chunks += len(rows)
    if prune:
        report.removed = await store.delete_missing({d.source for d in docs})
    if about is not None:
        await store.set_about(about.company, about.scope)
        report.about = about
    report.seconds = time.perf_counter() - t0
    return report
