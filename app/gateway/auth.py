"""API keys: from ``SUB250_API_KEYS`` (comma-separated) and/or a keys file (one per line).

Clients send ``Authorization: Bearer <key>`` (the ``openai`` client does), or - for browsers, which
cannot set headers on a WebSocket - the subprotocol ``openai-insecure-api-key.<key>``, or ``?api_key=``.
Keys are compared in constant time and only their SHA-256 is kept in memory.

A page must not hold a long-lived key: ``POST /v1/realtime/client_secrets`` (with a key) mints a
short-lived client secret ``ek_...`` that opens sessions (WebSocket or WebRTC) for the same key until it
expires. Secrets are HMAC-signed with a per-process random key, so they need no storage and die with a
restart.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

KEY_PREFIX = "sk-sub250-"
SUBPROTOCOL_PREFIX = "openai-insecure-api-key."
TOKEN_PREFIX = "ek_"
#: Lifetime of a client secret unless the request asks for another (10 s .. 2 h).
TOKEN_TTL_S = 600
TOKEN_TTL_RANGE = (10, 7200)


@dataclass(frozen=True)
class Principal:
    key_id: str  # first 8 hex of the key's hash: safe to log and to label metrics with
    dev: bool = False
    #: A client secret minted with a ``session`` object: that object (JSON text), which every session the
    #: secret opens starts with; None otherwise.
    session: str | None = None

    def session_object(self) -> dict | None:
        return None if self.session is None else json.loads(self.session)


#: Client secrets that carry a session object, kept by the server until they expire (at most this many).
MAX_SECRET_SESSIONS = 10_000


class TooManySecrets(Exception):
    """MAX_SECRET_SESSIONS unexpired secrets with a session exist already: no more until some expire."""


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class ApiKeys:
    def __init__(self, keys: list[str] | None = None, *, allow_anonymous: bool = False) -> None:
        self._digests = [_digest(k) for k in (keys or []) if k]
        self.allow_anonymous = allow_anonymous
        self._token_key = secrets.token_bytes(32)
        #: nonce -> (session object as JSON text, expiry): a secret's session stays here, not in the token (a
        #: token must fit a header or a WebSocket subprotocol; instructions may be 32 KiB).
        self._secret_sessions: dict[str, tuple[str, int]] = {}

    @classmethod
    def load(cls, env_keys: str, keys_file: Path | None, *, allow_anonymous: bool = False) -> ApiKeys:
        keys = [k.strip() for k in env_keys.split(",") if k.strip()]
        if keys_file is not None and keys_file.exists():
            keys += [line.strip() for line in keys_file.read_text().splitlines()
                     if line.strip() and not line.startswith("#")]
        return cls(keys, allow_anonymous=allow_anonymous)

    @staticmethod
    def create_local_key(keys_file: Path) -> str:
        """Create (once) and return a key for this machine's user, stored with mode 0600."""
        if keys_file.exists():
            for line in keys_file.read_text().splitlines():
                if line.strip() and not line.startswith("#"):
                    return line.strip()
        key = KEY_PREFIX + secrets.token_urlsafe(24)
        keys_file.parent.mkdir(parents=True, exist_ok=True)
        keys_file.write_text(f"# sub250 API keys, one per line\n{key}\n")
        keys_file.chmod(0o600)
        return key

    def __len__(self) -> int:
        return len(self._digests)

    def mint(self, principal: Principal, ttl_s: int = TOKEN_TTL_S, *, now: float | None = None,
             session: dict | None = None) -> tuple[str, int]:
        """A client secret for ``principal`` and its expiry (unix seconds); ``session``: the (validated)
        session object every session it opens starts with."""
        lo, hi = TOKEN_TTL_RANGE
        if not lo <= ttl_s <= hi:
            raise ValueError(f"expires_after.seconds must be between {lo} and {hi}")
        t = time.time() if now is None else now
        exp = int(t + ttl_s)
        claims: dict = {"k": principal.key_id, "d": principal.dev, "e": exp}
        if session is not None:
            self._secret_sessions = {n: v for n, v in self._secret_sessions.items() if v[1] >= t}  # expired go
            if len(self._secret_sessions) >= MAX_SECRET_SESSIONS:
                raise TooManySecrets(f"too many unexpired client secrets with a session (at most {MAX_SECRET_SESSIONS}); "
                                     "try again when some have expired")
            nonce = secrets.token_urlsafe(12)
            self._secret_sessions[nonce] = (json.dumps(session, separators=(",", ":")), exp)
            claims["s"] = nonce
        body = base64.urlsafe_b64encode(json.dumps(claims, separators=(",", ":")).encode()).rstrip(b"=")
        sig = base64.urlsafe_b64encode(hmac.digest(self._token_key, body, "sha256")[:18])
        return f"{TOKEN_PREFIX}{body.decode()}.{sig.decode()}", exp

    def _verify_token(self, token: str, now: float | None = None) -> Principal | None:
        body, _, sig = token[len(TOKEN_PREFIX):].partition(".")
        want = base64.urlsafe_b64encode(hmac.digest(self._token_key, body.encode(), "sha256")[:18]).decode()
        if not sig or not hmac.compare_digest(sig, want):
            return None
        try:
            claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except ValueError:
            return None
        if claims.get("e", 0) < (time.time() if now is None else now):
            return None
        session = None
        if claims.get("s") is not None:
            kept = self._secret_sessions.get(str(claims["s"]))
            if kept is None:
                return None
            session = kept[0]
        return Principal(str(claims["k"]), dev=bool(claims.get("d")), session=session)

    def authenticate(self, key: str | None) -> Principal | None:
        if not key:
            return Principal("anonymous", dev=True) if self.allow_anonymous else None
        if key.startswith(TOKEN_PREFIX):
            return self._verify_token(key)
        d = _digest(key)
        ok = False
        for known in self._digests:
            ok |= hmac.compare_digest(d, known)
        if ok:
            return Principal(d.hex()[:8])
        return None


def offered_subprotocols(headers: Mapping[str, str]) -> list[str]:
    """The subprotocols a WebSocket handshake offers (``Sec-WebSocket-Protocol``), in the client's order."""
    value = headers.get("Sec-WebSocket-Protocol") or ""
    return [p.strip() for p in value.split(",") if p.strip()]


def extract_key(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The key (API key or client secret) a request carries, from the first of: ``Authorization: Bearer``,
    the subprotocol ``openai-insecure-api-key.<key>`` (browsers' WebSockets), ``?api_key=`` (URL-decoded).

    The one place every entry point (WebSocket handshake, HTTP endpoints) reads a key from."""
    scheme, _, credentials = (headers.get("Authorization") or "").strip().partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    for proto in offered_subprotocols(headers):
        if proto.startswith(SUBPROTOCOL_PREFIX) and len(proto) > len(SUBPROTOCOL_PREFIX):
            return proto[len(SUBPROTOCOL_PREFIX):]
    return query.get("api_key") or None


def select_subprotocol(headers: Mapping[str, str]) -> str | None:
    """The subprotocol the server echoes: ``realtime`` when offered, else the ``openai-insecure-api-key.*``
    one (a browser that offered only that one expects it back), else none."""
    offered = offered_subprotocols(headers)
    if "realtime" in offered:
        return "realtime"
    return next((p for p in offered if p.startswith(SUBPROTOCOL_PREFIX)), None)


def is_client_secret(key: str | None) -> bool:
    """Whether ``key`` is a client secret (``ek_...``) rather than an API key."""
    return key is not None and key.startswith(TOKEN_PREFIX)
