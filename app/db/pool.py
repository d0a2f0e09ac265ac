"""The asyncpg pool: every connection gets pgvector's binary codec and ``hnsw.ef_search``."""

from __future__ import annotations

from typing import Any

from sub250.errors import DatabaseError


def _describe_dsn(dsn: str) -> str:
    # Never print a password.
    import re

    return re.sub(r"//([^:@/]+):[^@/]*@", r"//\1:***@", dsn)


async def connect(dsn: str, *, timeout: float = 10.0) -> Any:
    import asyncpg

    try:
        return await asyncpg.connect(dsn, timeout=timeout)
    except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise DatabaseError(
            f"cannot reach PostgreSQL at {_describe_dsn(dsn)}: {type(exc).__name__}: {exc}",
            "check DATABASE_URL (host, port, user, password, database) and that the server is up; "
            "unset DATABASE_URL to use the embedded PostgreSQL",
        ) from None


async def create_pool(dsn: str, *, size: int = 4, ef_search: int = 40, timeout: float = 10.0) -> Any:
    """Run migrations, then open the pool. Raises DatabaseError with a fix when PostgreSQL is unusable."""
    import asyncpg
    from pgvector.asyncpg import register_vector

    from sub250.db.migrate import migrate

    conn = await connect(dsn, timeout=timeout)
    try:
        try:
            await migrate(conn)
        except asyncpg.exceptions.FeatureNotSupportedError as exc:
            raise DatabaseError(f"PostgreSQL at {_describe_dsn(dsn)} lacks pgvector: {exc}",
                                "install the pgvector extension on that server") from None
        except asyncpg.exceptions.UndefinedFileError as exc:
            raise DatabaseError(f"PostgreSQL at {_describe_dsn(dsn)} lacks pgvector: {exc}",
                                "install the pgvector extension on that server") from None
    finally:
        await conn.close()

    async def init(c: Any) -> None:
        await register_vector(c)
        await c.execute(f"SET hnsw.ef_search = {int(ef_search)}")

    # Every connection opened here, at start (min_size = max_size): a turn's search never waits for a connect
    # when sessions overlap, and the server's open files stay the same under load (asyncpg keeps the floor's
    # connections open when idle, and reopens one that a restart of PostgreSQL closed at its next acquire).
    return await asyncpg.create_pool(dsn, min_size=size, max_size=size, init=init, timeout=timeout)
