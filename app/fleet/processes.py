"""Child processes of the fleet: started with their output in a log file, waited for by an HTTP check, stopped
with a signal and a deadline (then killed). Every process started here is stopped here."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def http_status(url: str, timeout: float = 2.0) -> int | None:
    """The HTTP status of ``GET url`` (None: no answer)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return None


@dataclass
class Child:
    """One process of the fleet."""

    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, cwd=self.cwd, env={**os.environ, **self.env}, stdout=out, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True)  # its own process group: a stop reaches its children too
        log.info("fleet: started %s (pid %d), log %s", self.name, self.proc.pid, self.log_path)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    async def wait_http(self, url: str, *, timeout_s: float, want: int = 200) -> float:
        """Wait until ``GET url`` answers ``want``; seconds it took. Raises RuntimeError (with the log's tail) if
        the process exits first or the time runs out."""
        t0 = time.monotonic()
        while True:
            if not self.running:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode if self.proc else '?'}) before "
                                   f"{url} answered {want}:\n{self.tail()}")
            if await asyncio.to_thread(http_status, url) == want:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout_s:
                raise RuntimeError(f"{self.name}: {url} did not answer {want} within {timeout_s:.0f} s:\n{self.tail()}")
            await asyncio.sleep(0.5)

    def send_signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(sig)

    async def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> int | None:
        """Signal it, wait up to ``timeout_s``, then kill its whole process group. Its exit status."""
        if self.proc is None:
            return None
        if self.running:
            self.proc.send_signal(sig)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout_s)
            except TimeoutError:
                log.warning("fleet: %s did not stop within %.0f s of signal %d: killed", self.name, timeout_s, sig)
        self._kill_group()
        if self.running:
            await self.proc.wait()
        return self.proc.returncode

    def _kill_group(self) -> None:
        """Whatever the process left in its group (engine workers) goes too."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
