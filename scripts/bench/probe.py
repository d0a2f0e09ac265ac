"""What a benchmark reads about the server while it runs: its ``/metrics`` (the process gauges of
``app/metrics/prometheus.py`` and prometheus_client's ``process_*``) and, given the server's pid, ``/proc``.

Load generators here are for a server on this machine: :func:`require_loopback` refuses any other address.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import time
from typing import Any
from urllib.parse import urlsplit

#: The figures a sample holds, and where ``/metrics`` has them (sums over labels).
FIGURES = {
    "rss_bytes": "process_resident_memory_bytes",
    "open_fds": "process_open_fds",
    "asyncio_tasks": "sub250_asyncio_tasks",
    "sessions_open": "sub250_sessions_open",
    "dropped_audio": "sub250_outbox_dropped_audio_total",
    "slow_closes": "sub250_slow_client_closes_total",
}
#: Closes of slow clients by reason (``sub250_slow_client_closes_total{reason}``).
CLOSE_REASONS = ("outbox_full", "ping_timeout")


def require_loopback(url: str) -> None:
    """Raise ``SystemExit`` unless ``url`` names this machine (a loopback address or ``localhost``)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise SystemExit(f"{url}: load generators run against a server on this machine only "
                     f"(127.0.0.1, ::1 or localhost), not {host!r}")


def http_base(url: str) -> str:
    """``ws://host:port/v1/realtime`` -> ``http://host:port`` (``wss`` -> ``https``)."""
    parts = urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    return f"{scheme}://{parts.netloc}"


def socket_address(url: str) -> tuple[int, tuple[Any, ...]]:
    """(address family, sockaddr) of the host and port in ``url``, for a socket made by hand."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme in ("wss", "https") else 80)
    family, _, _, _, addr = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)[0]
    return family, addr


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> ``{"name" or 'name{a="x",b="y"}': value}`` (labels sorted)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = float(sample.value)
    return out


def metric_sum(metrics: dict[str, float], name: str, **labels: str) -> float | None:
    """The sum of every series of ``name`` that carries ``labels`` (None when there is none)."""
    want = [f'{k}="{v}"' for k, v in labels.items()]
    values = [v for key, v in metrics.items()
              if (key == name or key.startswith(name + "{")) and all(w in key for w in want)]
    return sum(values) if values else None


def server_figures(metrics: dict[str, float]) -> dict[str, float | None]:
    figures = {key: metric_sum(metrics, name) for key, name in FIGURES.items()}
    for reason in CLOSE_REASONS:
        figures[f"slow_closes_{reason}"] = metric_sum(metrics, FIGURES["slow_closes"], reason=reason)
    return figures


#: ``/proc/<pid>/status`` lines read, and the figure each becomes (kB lines in bytes)
STATUS_FIGURES = {"VmRSS": "rss_bytes", "RssAnon": "rss_anon_bytes", "RssFile": "rss_file_bytes",
                  "Threads": "threads"}


def proc_figures(pid: int) -> dict[str, float]:
    """RSS (``VmRSS``) and its parts, the heap and stacks (``RssAnon``) and the mapped files' pages in memory
    (``RssFile``: libraries, model files), the threads and open file descriptors of process ``pid``, from
    ``/proc``."""
    out: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in STATUS_FIGURES:
                fields = value.split()
                out[STATUS_FIGURES[name]] = float(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    if "rss_bytes" not in out:
        raise RuntimeError(f"/proc/{pid}/status has no VmRSS line (a zombie?)")
    out["open_fds"] = float(len(os.listdir(f"/proc/{pid}/fd")))
    return out


class Probe:
    """Samples the server: ``await probe.sample()`` -> ``{"t", "wall", figures...}``; ``t`` is seconds since
    the probe was made. With ``pid``, RSS and FDs come from ``/proc`` (``source: "proc"``), the rest from
    ``/metrics``. A failed scrape is kept in the sample as ``error`` (and said on stderr), not hidden."""

    def __init__(self, url: str, pid: int | None = None, *, timeout_s: float = 5.0) -> None:
        self.metrics_url = http_base(url) + "/metrics"
        self.pid = pid
        self.timeout_s = timeout_s
        self.t0 = time.monotonic()
        self._http: Any = None

    async def __aenter__(self) -> "Probe":
        import aiohttp

        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.close()

    async def sample(self) -> dict[str, Any]:
        import aiohttp

        out: dict[str, Any] = {"t": round(time.monotonic() - self.t0, 3), "wall": time.time()}
        try:
            async with self._http.get(self.metrics_url) as resp:
                resp.raise_for_status()
                out.update(server_figures(parse_metrics(await resp.text())))
            out["source"] = "metrics"
        except (aiohttp.ClientError, TimeoutError) as exc:
            out["error"] = f"{self.metrics_url}: {type(exc).__name__}: {exc}"
            print(f"probe: {out['error']}", file=sys.stderr)
        if self.pid is not None:
            try:
                out.update(proc_figures(self.pid))
                out["source"] = "proc"
            except (OSError, RuntimeError) as exc:
                out["error"] = f"/proc/{self.pid}: {exc}"
                print(f"probe: {out['error']}", file=sys.stderr)
        return out


def mib(value: float | None) -> str:
    return "-" if value is None else f"{value / (1 << 20):.1f}"
