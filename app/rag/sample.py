"""Sample data for a fresh, empty install: the sample knowledge base (kb/: Halden Labs' documents and about.toml)
and the support tools' made-up orders (app/db/sample.py).

Loaded only into a database that holds no documents: once a knowledge base is in (the sample's or a user's), a
later ``serve`` or ``ingest --sample-if-empty`` (compose's ``ingest`` service, at every ``up``) leaves the
database as it is, so a user's own ``warranty.md`` is never replaced by the sample's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sub250.db.sample import load_support_sample
from sub250.rag.ingest import IngestReport, ingest_folder
from sub250.rag.kb import SAMPLE_KB
from sub250.rag.store import VectorStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SampleReport:
    #: Documents the database held before: 0 means a fresh install, the sample went in.
    documents_before: int
    #: The sample knowledge base's ingest (None: skipped).
    ingest: IngestReport | None = None
    #: ``support.orders`` rows added (0: skipped, or those tables held rows already).
    support_rows: int = 0

    @property
    def loaded(self) -> bool:
        return self.ingest is not None


async def load_sample_if_empty(store: VectorStore, embedder: Any, *, model_id: str, folder: Path = SAMPLE_KB,
                               progress: Callable[[int, int, str], None] | None = None) -> SampleReport:
    """Ingest the sample knowledge base and add the support sample rows when the store holds no documents;
    otherwise change nothing. Logs what it did or why it skipped."""
    before = await store.document_count()
    if before:
        log.info("sample data skipped: the database holds %d document(s) already", before)
        return SampleReport(before)
    report = await ingest_folder(folder, store, embedder, model_id=model_id, progress=progress)
    async with store.pool.acquire() as conn:
        rows = await load_support_sample(conn)
    log.info("sample data loaded into an empty database: %d documents (%d chunks) from %s, %s", report.documents,
             report.chunks, folder, f"{rows} support.orders rows" if rows else "support.* kept (it holds rows)")
    return SampleReport(before, report, rows)
