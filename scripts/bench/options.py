"""What the load scripts (``scripts/slow_client.py``, ``scripts/soak.py``) take from the command line the
way ``scripts/replay.py`` does: ``--corpus`` (synthetic, real, all, a folder of WAVs or a JSON manifest)
and the API key (``--key``, else ``$SUB250_API_KEY``, else the local key ``serve`` created)."""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

from scripts.bench.corpus import Utterance, load_manifest, real_recordings, synthesize_corpus


def add_server_options(parser: argparse.ArgumentParser, *, pid_help: str) -> None:
    """``--url``, ``--key``, ``--no-key`` and ``--pid``: which running server, and how to reach it."""
    parser.add_argument("--url", default=os.environ.get("SUB250_URL", "ws://127.0.0.1:8250/v1/realtime"))
    parser.add_argument("--key", help="API key (default: $SUB250_API_KEY or the local key serve created)")
    parser.add_argument("--no-key", action="store_true", help="send no API key (a server started with "
                        "--dev-no-auth, which refuses keys it does not know)")
    parser.add_argument("--pid", type=int, help=pid_help)


def default_key() -> str | None:
    from sub250.config import Settings

    if os.environ.get("SUB250_API_KEY"):
        return os.environ["SUB250_API_KEY"]
    keys = Settings.from_env().api_keys_file
    if keys.exists():
        for line in keys.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                return line.strip()
    return None


def corpus(spec: str) -> list[Utterance]:
    """The utterances of ``spec`` in the fixed, mixed order the replay uses (by hash of the id)."""
    from sub250.config import Settings

    utts: list[Utterance] = []
    if spec in ("synthetic", "all"):
        utts = synthesize_corpus(Settings.from_env().home / "corpus")
    if spec in ("real", "all"):
        utts += real_recordings()
    if spec not in ("synthetic", "real", "all"):
        utts = load_manifest(Path(spec))
    if not utts:
        raise SystemExit(f"the corpus {spec!r} is empty")
    return sorted(utts, key=lambda u: hashlib.sha1(u.id.encode()).hexdigest())
