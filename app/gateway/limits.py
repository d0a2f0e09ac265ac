"""Per-key limits: concurrent sessions, messages per second (token bucket), audio seconds per second,
and event size. Each refusal is a typed ``Refusal`` the transport turns into an ``error`` event or a
429 at the handshake; none closes a working session."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class GatewayLimits:
    #: Open sessions per API key.
    max_sessions_per_key: int = 8
    #: Sustained client messages per second per key, and the burst allowed above it. A caller streaming 20 ms
    #: frames sends 50 a second, so the default lets every session a key may open (8) stream at once.
    messages_per_s: float = 500.0
    burst: int = 1000
    #: Largest client event accepted (bytes of JSON). 1 s of 24 kHz PCM16 in base64 is ~64 KiB.
    max_event_bytes: int = 1 << 20
    #: Hard cap: frames above this are refused by the WebSocket layer itself (connection closes, 1009).
    max_frame_bytes: int = 16 << 20
    #: Audio seconds accepted per wall-clock second per key (real-time is 1.0; replays may go faster).
    max_audio_rate: float = 16.0
    #: Allowed browser Origins (None: any; WebSocket clients that send no Origin are always allowed).
    origins: tuple[str, ...] | None = None
    #: Host names, besides the bind host, localhost and IP literals, that requests may carry in ``Host``
    #: (``SUB250_HOSTS``; ``*``: any). Refusing other names defeats DNS rebinding; see app/gateway/admission.py.
    hosts: tuple[str, ...] = ()
    #: Serialized server events a connection may have queued but not yet written (a client that does not
    #: read): past it the oldest reply's queued audio is dropped, then the connection closed. See outbox.py.
    max_outbox_bytes: int = 4 << 20


@dataclass(frozen=True)
class Refusal:
    code: str
    message: str
    http_status: int = 429
    #: The OpenAI error ``type`` the refusal is reported with.
    type: str = "rate_limit_error"


class _Bucket:
    __slots__ = ("rate", "capacity", "tokens", "stamp")

    def __init__(self, rate: float, capacity: float) -> None:
        self.rate, self.capacity = rate, capacity
        self.tokens, self.stamp = capacity, time.monotonic()

    def refill(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def state(self, name: str) -> dict[str, float | str]:
        """The GA ``rate_limits`` entry: the burst, what is left of it now, and seconds until it is full."""
        self.refill()
        # whole messages, as the API's integers: what may be sent now without a refusal
        return {"name": name, "limit": int(self.capacity), "remaining": int(self.tokens),
                "reset_seconds": round((self.capacity - self.tokens) / self.rate, 3) if self.rate > 0 else 0.0}

    def take(self, amount: float = 1.0) -> bool:
        self.refill()
        if self.tokens >= amount:
            self.tokens -= amount
            return True
        return False


class KeyLimiter:
    """Limits shared by every session of the same key (one instance per process)."""

    def __init__(self, limits: GatewayLimits) -> None:
        self.limits = limits
        self._sessions: dict[str, int] = {}
        self._messages: dict[str, _Bucket] = {}
        self._audio: dict[str, _Bucket] = {}

    def open_session(self, key_id: str) -> Refusal | None:
        n = self._sessions.get(key_id, 0)
        if n >= self.limits.max_sessions_per_key:
            return Refusal("session_limit", f"this API key already has {n} open sessions "
                                            f"(limit {self.limits.max_sessions_per_key})")
        self._sessions[key_id] = n + 1
        return None

    def close_session(self, key_id: str) -> None:
        n = self._sessions.get(key_id, 0) - 1
        if n > 0:
            self._sessions[key_id] = n
        else:
            self._sessions.pop(key_id, None)

    def check_message(self, key_id: str, size: int) -> Refusal | None:
        if size > self.limits.max_event_bytes:
            return Refusal("event_too_large", f"the event is {size} bytes; the limit is {self.limits.max_event_bytes}",
                           413, "invalid_request_error")
        if not self._message_bucket(key_id).take():
            return Refusal("rate_limit_exceeded",
                           f"more than {self.limits.messages_per_s:g} messages per second; slow down")
        return None

    def _message_bucket(self, key_id: str) -> _Bucket:
        bucket = self._messages.get(key_id)
        if bucket is None:
            bucket = self._messages[key_id] = _Bucket(self.limits.messages_per_s, self.limits.burst)
        return bucket

    def _audio_bucket(self, key_id: str) -> _Bucket:
        bucket = self._audio.get(key_id)
        if bucket is None:
            # A burst of 10 s of audio, then max_audio_rate seconds of audio per second.
            bucket = self._audio[key_id] = _Bucket(self.limits.max_audio_rate, 10.0 * self.limits.max_audio_rate)
        return bucket

    def rate_limits(self, key_id: str) -> list[dict[str, float | str]]:
        """The key's limits as the GA ``rate_limits.updated`` event lists them: ``requests`` (client messages:
        the burst, what remains, the seconds to refill). The API names only ``requests`` and ``tokens``; there
        is no token limit here, and the audio-rate limit has no name in the API, so neither is listed."""
        return [self._message_bucket(key_id).state("requests")]

    def check_audio(self, key_id: str, seconds: float) -> Refusal | None:
        bucket = self._audio_bucket(key_id)
        if not bucket.take(seconds):
            return Refusal("audio_rate_exceeded",
                           f"audio arrives faster than {self.limits.max_audio_rate:g}x real time; frame dropped")
        return None
