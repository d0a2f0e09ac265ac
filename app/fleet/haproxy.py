"""HAProxy in front of the replicas, for the one-machine topology: the production config itself
(``deploy/haproxy/haproxy.cfg``: readiness checks on ``/readyz``, WebSocket tunnels, a retry elsewhere when a
replica answers 503 because it drains, cookie stickiness), with loopback addresses in place of the compose
network's names and no Docker DNS; and a reader of its stats page's CSV (which replicas HAProxy has up)."""

from __future__ import annotations

import csv
import io
import re
import shutil
import urllib.request
from collections.abc import Sequence
from pathlib import Path

PRODUCTION = Path(__file__).resolve().parents[2] / "deploy" / "haproxy" / "haproxy.cfg"
#: The backend of the replicas in that file.
BACKEND = "sub250"


def binary() -> str | None:
    """The haproxy program (Debian puts it in /usr/sbin, which a user's PATH may lack)."""
    return shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if Path(p).exists()), None)


def config(*, bind: str, servers: Sequence[tuple[str, str, int]], stats_bind: str,
           production: Path = PRODUCTION) -> str:
    """The production config for ``servers`` ((name, host, port), ...) on this machine: the frontend binds
    ``bind`` ("127.0.0.1:8250"), the stats page ``stats_bind``; the ``resolvers`` section and the compose
    network's ``server`` lines go, the replicas' come in their place. Everything else is the file as it is."""
    out: list[str] = []
    section = ""
    for line in production.read_text().splitlines():
        stripped = line.strip()
        if line and not line[0].isspace() and not line.startswith("#"):
            section = stripped
        if section.startswith("resolvers "):
            continue
        if stripped.startswith("bind ") and section.startswith("frontend "):
            line = f"    bind {stats_bind if section == 'frontend stats' else bind}"
        elif section == f"backend {BACKEND}" and stripped.startswith("server "):
            continue
        elif section == f"backend {BACKEND}" and stripped.startswith("default-server "):
            line = re.sub(r"\s+(resolvers \S+|init-addr \S+)", "", line)
            out.append(line)
            out.extend(f"    server {name} {host}:{port} cookie {name}" for name, host, port in servers)
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def server_states(stats_url: str, backend: str = BACKEND) -> dict[str, str]:
    """Each server of ``backend`` and its state as HAProxy sees it (``UP``, ``DOWN``, ``UP 1/2``...), from the
    stats page's CSV (``<stats_url>;csv``)."""
    with urllib.request.urlopen(stats_url + ";csv", timeout=5) as resp:
        text = resp.read().decode()
    rows = csv.DictReader(io.StringIO(text.lstrip("# ")))
    return {row["svname"]: row["status"] for row in rows
            if row["pxname"] == backend and row["svname"] not in ("FRONTEND", "BACKEND")}
