"""Versioned schema migrations: ``app/db/migrations/NNNN_name.sql``, applied in order, once each.

Each migration runs in its own transaction under an advisory lock, so two servers starting at once
do not race; applied versions are recorded in ``schema_migrations``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_LOCK_KEY = 250_250_250


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations(folder: Path = MIGRATIONS_DIR) -> list[Migration]:
    out = []
    for path in sorted(folder.glob("*.sql")):
        m = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", path.name)
        if not m:
            raise ValueError(f"migration file name {path.name!r} is not NNNN_name.sql")
        out.append(Migration(int(m.group(1)), m.group(2), path.read_text()))
    versions = [m.version for m in out]
    if len(set(versions)) != len(versions):
        raise ValueError(f"duplicate migration versions in {folder}")
    return out


async def migrate(conn: Any, migrations: list[Migration] | None = None) -> list[int]:
    """Apply pending migrations on an asyncpg connection; return the versions applied now."""
    migrations = load_migrations() if migrations is None else migrations
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    applied_now: list[int] = []
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for m in migrations:
            if m.version in done:
                continue
            async with conn.transaction():
                await conn.execute(m.sql)
                await conn.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name)
            applied_now.append(m.version)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    return applied_now
