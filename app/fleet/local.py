"""The fleet's topology as processes on this machine: one PostgreSQL (the embedded binaries, as a server of its
own), one vLLM OpenAI-compatible server on CPU with the default model, N app replicas (``serve`` on the
``remote-vllm`` profile, every replica's ``DATABASE_URL`` the same database) and HAProxy in front. The knowledge
base is ingested once, into the shared database, before the replicas start.

``async with LocalFleet(workdir) as fleet:`` starts everything (progress on ``progress``) and stops everything it
started, in reverse order, replicas first with SIGTERM (each drains). Logs: ``<workdir>/logs/<name>.log``."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sub250.errors import Sub250Error
from sub250.fleet import haproxy, vllm_server
from sub250.fleet.processes import Child, free_port

if TYPE_CHECKING:
    from sub250.db.embedded import EmbeddedPostgres

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"


@dataclass
class Replica:
    name: str
    port: int
    child: Child

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


class LocalFleet:
    def __init__(self, workdir: Path, *, replicas: int = 2, port: int = 0, api_key: str = "sk-sub250-fleet-local",
                 replica_profile: str = "remote-vllm", engine_profile: str = "cpu-base",
                 models_home: Path | None = None, vllm_url: str | None = None, kb: Path | None = None,
                 enforce_eager: bool = True, drain_s: float = 10.0, load_timeout_s: float = 900.0,
                 progress: Callable[[str], None] | None = None) -> None:
        """``vllm_url``: an OpenAI-compatible server already running (``http://host:port``); else one is started
        with ``engine_profile``'s LLM. ``models_home``: the prepared models (default: the user's)."""
        from sub250.config import Settings
        from sub250.rag.kb import SAMPLE_KB

        if not 1 <= replicas <= 8:
            raise Sub250Error(f"--replicas {replicas}: between 1 and 8", "")
        self.workdir = workdir.resolve()
        self.n, self.api_key, self.port = replicas, api_key, port or free_port()
        self.replica_profile, self.engine_profile = replica_profile, engine_profile
        self.models_home = Path(models_home) if models_home else Settings.from_env().models_dir
        self.vllm_url, self.kb = vllm_url, kb or SAMPLE_KB
        self.enforce_eager, self.drain_s, self.load_timeout_s = enforce_eager, drain_s, load_timeout_s
        self.progress = progress or (lambda line: log.info("fleet: %s", line))
        self.replicas: list[Replica] = []
        self.database_url = ""
        self.stats_url = ""
        self._pg: EmbeddedPostgres | None = None
        self._children: list[Child] = []  # in start order; stopped in reverse

    # --- where things are --------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The load balancer: what clients use."""
        return f"http://{HOST}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{HOST}:{self.port}/v1/realtime"

    def _log(self, name: str) -> Path:
        return self.workdir / "logs" / f"{name}.log"

    def _app_env(self, home: Path) -> dict[str, str]:
        return {"SUB250_HOME": str(home), "SUB250_MODELS_HOME": str(self.models_home),
                "SUB250_PROFILE": self.replica_profile, "DATABASE_URL": self.database_url,
                "SUB250_LLM_BASE_URL": f"{self.vllm_url}/v1", "SUB250_API_KEYS": self.api_key,
                "SUB250_DB_POOL_SIZE": "2", "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1"}

    # --- start -------------------------------------------------------------------------------------------

    async def __aenter__(self) -> LocalFleet:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        if haproxy.binary() is None:
            raise Sub250Error("haproxy is not installed", "run scripts/install-fleet-tools.sh (Debian's haproxy)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        await self._start_postgres()
        engine = None if self.vllm_url else asyncio.ensure_future(self._start_vllm())
        try:
            await self.ingest(self.kb)
        except BaseException:
            if engine is not None:  # the server it was starting is stopped by the cancel
                engine.cancel()
                await asyncio.gather(engine, return_exceptions=True)
            raise
        if engine is not None:
            await engine
        await self._start_replicas()
        await self._start_haproxy()
        self.progress(f"fleet up in {time.monotonic() - t0:.0f} s: {self.url} -> "
                      + ", ".join(f"{r.name} ({r.url})" for r in self.replicas))

    async def _start_postgres(self) -> None:
        from sub250.db.embedded import EmbeddedPostgres

        self.progress("PostgreSQL + pgvector (the embedded binaries, a server of their own)")
        self._pg = pg = EmbeddedPostgres(self.workdir / "pgdata")
        self.database_url = await asyncio.to_thread(pg.start)

    async def _start_vllm(self) -> None:
        self.progress(f"vLLM OpenAI server on CPU ({self.engine_profile}'s LLM)")
        t0 = time.monotonic()
        child, self.vllm_url = await vllm_server.start(
            self.engine_profile, self.models_home, log_path=self._log("vllm"), cache_dir=self.workdir / "vllm-cache",
            host=HOST, enforce_eager=self.enforce_eager, timeout_s=self.load_timeout_s)
        self._children.append(child)
        self.progress(f"vLLM ready at {self.vllm_url} in {time.monotonic() - t0:.0f} s")

    async def ingest(self, folder: Path) -> None:
        """``python -m sub250 ingest folder`` into the fleet's database (what every replica retrieves from)."""
        home = self.workdir / "ingest"
        child = Child("ingest", [sys.executable, "-m", "sub250", "ingest", str(folder)], self._log("ingest"),
                      env={**self._app_env(home), "SUB250_LLM_BASE_URL": ""}, cwd=REPO)
        self.progress(f"ingesting {folder} into the shared database")
        await child.start()
        assert child.proc is not None
        code = await child.proc.wait()
        if code != 0:
            raise Sub250Error(f"ingest exited with {code}:\n{child.tail()}", f"see {child.log_path}")

    async def _start_replicas(self) -> None:
        for i in range(1, self.n + 1):
            name, port = f"replica-{i}", free_port()
            env = {**self._app_env(self.workdir / name), "SUB250_REPLICA": name, "SUB250_HOST": HOST,
                   "SUB250_PORT": str(port), "SUB250_DRAIN_S": f"{self.drain_s:g}",
                   "SUB250_LLM_ENFORCE_EAGER": "true"}
            child = Child(name, [sys.executable, "-m", "sub250", "serve"], self._log(name), env=env, cwd=REPO)
            await child.start()
            self._children.append(child)
            self.replicas.append(Replica(name, port, child))
        self.progress(f"{self.n} app replica(s) on {self.replica_profile} loading")
        took = await asyncio.gather(*(r.child.wait_http(f"{r.url}/readyz", timeout_s=self.load_timeout_s)
                                      for r in self.replicas))
        self.progress("replicas ready in " + ", ".join(f"{t:.0f} s" for t in took))

    async def _start_haproxy(self) -> None:
        stats_port = free_port()
        self.stats_url = f"http://{HOST}:{stats_port}/stats"
        cfg = self.workdir / "haproxy.cfg"
        cfg.write_text(haproxy.config(bind=f"{HOST}:{self.port}", stats_bind=f"{HOST}:{stats_port}",
                                      servers=[(r.name, HOST, r.port) for r in self.replicas]))
        child = Child("haproxy", [str(haproxy.binary()), "-db", "-f", str(cfg)], self._log("haproxy"))
        await child.start()
        self._children.append(child)
        await child.wait_http(f"{self.url}/readyz", timeout_s=30)
        await self.wait_states({r.name: "UP" for r in self.replicas}, timeout_s=30)
        self.progress(f"HAProxy on {self.url} (stats {self.stats_url}), every replica UP")

    # --- while it runs -----------------------------------------------------------------------------------

    def states(self) -> dict[str, str]:
        """Each replica's state in HAProxy (``UP``, ``DOWN``, ...)."""
        return haproxy.server_states(self.stats_url)

    async def wait_states(self, want: dict[str, str], timeout_s: float) -> float:
        """Wait until HAProxy reports these states (a prefix match: ``DOWN`` matches ``DOWN 1/2``); seconds."""
        t0 = time.monotonic()
        while True:
            states = await asyncio.to_thread(self.states)
            if all(states.get(name, "").startswith(state) for name, state in want.items()):
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout_s:
                raise RuntimeError(f"HAProxy states {states}, wanted {want}")
            await asyncio.sleep(0.1)

    def replica(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    # --- stop --------------------------------------------------------------------------------------------

    async def stop(self) -> None:
        """Stop everything started, last first: replicas drain on SIGTERM (``drain_s`` + a margin)."""
        for child in reversed(self._children):
            grace = self.drain_s + 30 if child.name.startswith("replica-") else 30
            try:
                code = await child.stop(signal.SIGTERM, grace)
            except Exception:  # one that will not stop must not keep the others running
                log.exception("fleet: stopping %s failed", child.name)
                continue
            self.progress(f"stopped {child.name} (exit {code})")
        self._children.clear()
        if self._pg is not None:
            pg, self._pg = self._pg, None
            await asyncio.to_thread(pg.stop)
            self.progress("stopped PostgreSQL")
