"""Settings: typed, with documented defaults, read from ``SUB250_*`` environment variables.

Every field can be set as ``SUB250_<FIELD>`` (upper case), e.g. ``SUB250_PORT=9000``;
``DATABASE_URL`` is also read without prefix, as most tools expect.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from sub250.errors import ConfigError


def _default_home() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "sub250"


@dataclass(frozen=True)
class Settings:
    #: Where models, the embedded PostgreSQL data and caches live.
    home: Path = field(default_factory=_default_home)
    #: Model profile: a name from ``models/`` (``cpu-base``) or a path to a profile TOML file.
    profile: str = "cpu-base"
    #: PostgreSQL with pgvector to use; empty means: start the embedded one under ``home/pgdata``.
    database_url: str = ""
    #: HNSW search breadth per query (``hnsw.ef_search``): recall vs. latency.
    hnsw_ef_search: int = 40
    #: Connections in the asyncpg pool.
    db_pool_size: int = 4
    #: Address the server listens on.
    host: str = "127.0.0.1"
    port: int = 8250
    #: Passages retrieved per question.
    rag_top_k: int = 3
    #: Override the profile's LLM ``enforce_eager`` (``""`` = keep the profile's choice).
    llm_enforce_eager: str = ""
    #: Remote LLM backend (``backend = "openai"``): server URL and key, overriding the profile's.
    llm_base_url: str = ""
    llm_api_key: str = ""
    #: Remote LLM backend: the model name to ask the server for, overriding the profile's ``served_name``.
    llm_served_name: str = ""
    #: Read models from here instead of ``<home>/models`` (e.g. a shared, pre-filled volume).
    models_home: str = ""
    #: Override the profile's KV-cache size in whole GiB (0 = keep the profile's).
    llm_kv_cache_gib: int = 0

    #: API keys (comma-separated) accepted besides those in ``<home>/api_keys``.
    api_keys: str = ""
    #: Allowed browser Origins, comma-separated; ``*`` allows any. Empty: this server's own URLs.
    origins: str = ""
    #: Host names (comma-separated, ``*``: any) requests may name in ``Host`` besides the bind host,
    #: localhost and IP literals (DNS-rebinding defence). Bound to 0.0.0.0 behind a name: list the name.
    hosts: str = ""
    #: Gateway limits (see app/gateway/limits.py).
    max_sessions_per_key: int = 8
    messages_per_s: float = 500.0
    max_event_bytes: int = 1 << 20
    max_audio_rate: float = 16.0
    #: WebRTC: the addresses the server offers as ICE host candidates, comma-separated. Empty: every
    #: non-loopback address (aioice's default), or 127.0.0.1 on a machine that has no other.
    ice_hosts: str = ""
    #: Phone calls through Twilio Media Streams (app/telephony): the account's auth token, which checks each
    #: webhook's X-Twilio-Signature and keys the stream tokens. Empty: the telephony routes answer 404.
    twilio_auth_token: str = ""
    #: The server's public URL as Twilio (or any caller from outside) reaches it, e.g. https://voice.example.com:
    #: the URL Twilio signs. Empty: rebuilt from each request (X-Forwarded-Proto, Host).
    public_url: str = ""
    #: Twilio's REST API (a transfer updates the call's TwiML there). Empty: https://api.twilio.com; set it for a
    #: proxy or a stand-in.
    twilio_api_url: str = ""
    #: Phone calls: the app's URL that gets a POST for each call that comes in (app/telephony/call_webhook.py), so it
    #: can follow and steer the call (``/v1/realtime?call_id=``). Empty: none is sent.
    call_webhook_url: str = ""
    #: The secret that signs each call webhook (``X-Sub250-Signature: sha256=…``). Empty: unsigned.
    call_webhook_secret: str = ""
    #: SIP: where the server answers INVITEs, host:port (UDP and TCP), e.g. 0.0.0.0:5060. Empty: no SIP.
    sip_listen: str = ""
    #: SIP: the addresses and networks whose INVITEs are answered (a trunk's, a PBX's), comma-separated.
    sip_allow: str = "127.0.0.1"
    #: glibc malloc arenas the server may open (``mallopt(M_ARENA_MAX)``, see app/native_memory.py);
    #: 0 keeps glibc's default (8 per core), which let RSS climb under concurrent sessions.
    malloc_arena_max: int = 2
    #: Seconds between ``malloc_trim(0)`` calls (on a worker thread) that give freed heap pages back; 0: never.
    malloc_trim_s: float = 30.0
    #: Seconds between full collections of Python's cyclic garbage, once the loaded engines' objects are frozen
    #: (app/garbage.py); 0: neither (CPython's own schedule, which let RSS climb under sessions).
    gc_collect_s: float = 30.0
    #: The process's allocator: ``auto`` (jemalloc when libjemalloc is installed, else glibc with the levers
    #: above), ``jemalloc`` (required) or ``glibc``. See app/native_memory.py.
    allocator: str = "auto"

    #: SIGTERM: seconds the turns in flight get to finish before every connection is closed with 1001
    #: (``/readyz`` answers 503 from the signal on, new sessions are refused; see docs/DEPLOY.md).
    drain_s: float = 10.0
    #: This server's name in a fleet: the ``replica`` label of every Prometheus metric, a field of every JSON
    #: log line, an attribute of every trace. Empty: the host name.
    replica: str = ""
    #: Log lines: ``text`` (for a terminal) or ``json`` (one object a line, with session and turn ids).
    log_format: str = "text"
    #: Per-turn traces: ``off`` or ``otlp`` (OpenTelemetry, exported to ``OTEL_EXPORTER_OTLP_ENDPOINT``).
    traces: str = "off"

    @property
    def replica_name(self) -> str:
        """:attr:`replica`, or the host name when it is empty."""
        return self.replica or socket.gethostname()

    @property
    def api_keys_file(self) -> Path:
        return self.home / "api_keys"

    @property
    def models_dir(self) -> Path:
        return Path(self.models_home).expanduser() if self.models_home else self.home / "models"

    @property
    def pgdata_dir(self) -> Path:
        return self.home / "pgdata"

    @property
    def vllm_cache_dir(self) -> Path:
        return self.home / "vllm-cache"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: object) -> Settings:
        env = dict(os.environ if env is None else env)
        values: dict[str, object] = {}
        for f in dataclasses.fields(cls):
            raw = env.get(f"SUB250_{f.name.upper()}")
            if raw is None and f.name == "database_url":
                raw = env.get("DATABASE_URL")
            if raw is None:
                continue
            values[f.name] = _coerce(f.name, f.type, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def _coerce(name: str, typ: object, raw: str) -> object:
    typ = str(typ)
    try:
        if typ in ("int", "<class 'int'>"):
            return int(raw)
        if typ in ("float", "<class 'float'>"):
            return float(raw)
        if typ in ("Path", "<class 'pathlib.Path'>"):
            return Path(raw).expanduser()
    except ValueError:
        raise ConfigError(
            f"SUB250_{name.upper()}={raw!r} is not a valid {typ}",
            f"set SUB250_{name.upper()} to a number, or unset it to use the default",
        ) from None
    return raw
