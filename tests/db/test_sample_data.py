"""Sample data goes into a fresh, empty install only (app/rag/sample.py, `sub250 ingest --sample-if-empty`, the
compose `ingest` service at every `up`): the first run loads the sample knowledge base and the support rows, a
user's own documents - a `warranty.md` of their own among them - survive every later run unchanged, and a later
run changes nothing at all. Against the embedded PostgreSQL; a stand-in embedder (no model loaded)."""

import asyncio
import hashlib

import numpy as np
import pytest

from sub250.db.embedded import EmbeddedPostgres
from sub250.db.pool import create_pool
from sub250.db.sample import ORDERS
from sub250.rag.ingest import ingest_folder
from sub250.rag.kb import SAMPLE_KB, read_folder
from sub250.rag.sample import load_sample_if_empty
from sub250.rag.store import VectorStore

MODEL = "test-embedder"
USER_WARRANTY = "# Our warranty\n\n## Coverage\n\nEvery Zephyr fan is covered for five years, parts and labour.\n"
USER_OWN = "# Opening hours\n\n## Shop\n\nThe shop opens at nine and closes at six, Monday to Saturday.\n"


class StandInEmbedder:
    """384-d unit vectors from a hash of the text: deterministic, no model."""

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), 384), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


@pytest.fixture
async def store(tmp_path):
    pg = EmbeddedPostgres(tmp_path / "pgdata")
    pool = await create_pool(await asyncio.to_thread(pg.start), size=2)
    yield VectorStore(pool)
    await pool.close()
    await asyncio.to_thread(pg.stop)


async def snapshot(store: VectorStore) -> dict:
    """Everything the sample or a user's ingest writes, row for row (ids and timestamps included)."""
    async with store.pool.acquire() as c:
        return {
            "documents": [tuple(r) for r in await c.fetch(
                "SELECT id, source, title, sha256, embedding_model, ingested_at FROM documents ORDER BY id")],
            "chunks": [tuple(r) for r in await c.fetch(
                "SELECT id, document_id, ordinal, title, content, metadata, embedding::text FROM chunks ORDER BY id")],
            "about": [tuple(r) for r in await c.fetch("SELECT company, scope, updated_at FROM kb_about")],
            "orders": [tuple(r) for r in await c.fetch("SELECT * FROM support.orders ORDER BY order_number")],
            "claims": [tuple(r) for r in await c.fetch("SELECT * FROM support.warranty_claims ORDER BY id")],
            "handoffs": [tuple(r) for r in await c.fetch("SELECT * FROM support.handoffs ORDER BY id")],
        }


async def test_a_fresh_database_gets_the_sample_and_a_users_documents_survive_every_later_run(store, tmp_path,
                                                                                               caplog):
    embedder = StandInEmbedder()
    caplog.set_level("INFO", logger="sub250.rag.sample")

    # the first `up` on an empty database: the sample knowledge base and the made-up support rows
    first = await load_sample_if_empty(store, embedder, model_id=MODEL)
    assert first.loaded and first.documents_before == 0 and first.support_rows == len(ORDERS)
    sample_docs = read_folder(SAMPLE_KB)
    assert set(await store.document_state()) == {d.source for d in sample_docs}
    assert "warranty.md" in {d.source for d in sample_docs}
    assert await store.about() is not None
    assert "sample data loaded into an empty database" in caplog.text

    # the user's own knowledge base: their warranty.md (not the sample's) and a document of their own
    kb = tmp_path / "user-kb"
    kb.mkdir()
    (kb / "warranty.md").write_text(USER_WARRANTY)
    (kb / "hours.md").write_text(USER_OWN)
    await ingest_folder(kb, store, embedder, model_id=MODEL)
    async with store.pool.acquire() as c:
        # and a row of their own in the support tables (a claim on a sample order)
        await c.execute("INSERT INTO support.warranty_claims (order_number, problem) VALUES ('48213', 'rattles')")
    before = await snapshot(store)
    user_warranty = [r for r in before["chunks"] if "Zephyr" in r[4]]
    assert len(user_warranty) == 1

    # every later `up`: nothing changes, the user's warranty.md included
    caplog.clear()
    for _ in range(2):
        again = await load_sample_if_empty(store, embedder, model_id=MODEL)
        assert not again.loaded and again.support_rows == 0 and again.documents_before == len(before["documents"])
        assert await snapshot(store) == before
    assert "sample data skipped: the database holds" in caplog.text
    async with store.pool.acquire() as c:
        content = await c.fetchval("SELECT c.content FROM chunks c JOIN documents d ON d.id = c.document_id"
                                   " WHERE d.source = 'warranty.md'")
    assert "Zephyr fan is covered for five years" in content


async def test_a_database_that_already_holds_a_users_documents_never_gets_the_sample(store, tmp_path):
    embedder = StandInEmbedder()
    kb = tmp_path / "user-kb"
    kb.mkdir()
    (kb / "warranty.md").write_text(USER_WARRANTY)
    await ingest_folder(kb, store, embedder, model_id=MODEL)
    before = await snapshot(store)

    report = await load_sample_if_empty(store, embedder, model_id=MODEL)
    assert not report.loaded and report.documents_before == 1
    after = await snapshot(store)
    assert after == before
    assert [r[1] for r in after["documents"]] == ["warranty.md"] and after["orders"] == [] and after["about"] == []


async def test_the_support_rows_go_only_into_empty_support_tables(store):
    """A database without documents whose support tables hold a deployment's own rows: the sample knowledge
    base goes in (no documents), the made-up customers do not."""
    async with store.pool.acquire() as c:
        await c.execute("INSERT INTO support.orders (order_number, customer, item, status, ordered_on)"
                        " VALUES ('99999', 'A Real Customer', 'a thing', 'processing', '2026-12-01')")
    report = await load_sample_if_empty(store, StandInEmbedder(), model_id=MODEL)
    assert report.loaded and report.support_rows == 0
    async with store.pool.acquire() as c:
        assert [r["order_number"] for r in await c.fetch("SELECT order_number FROM support.orders")] == ["99999"]


async def test_migrations_alone_add_no_made_up_customers(store):
    async with store.pool.acquire() as c:
        assert await c.fetchval("SELECT count(*) FROM support.orders") == 0
