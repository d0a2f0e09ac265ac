"""The secret a Twilio stream carries: minted at the signed webhook, checked at the stream's ``start``.

Twilio's WebSocket to ``/v1/telephony/twilio/stream`` brings no key of ours, and the URL alone must open
nothing. So the webhook - whose ``X-Twilio-Signature`` was checked with the account's auth token - puts a token
into the TwiML as a ``<Parameter>``; Twilio hands it back in ``start.customParameters``. The token is an HMAC
(SHA-256, keyed by the auth token) of the call's ``CallSid`` and an expiry: it opens that one call's stream,
only within :data:`TOKEN_TTL_S` of the webhook, and cannot be made without the auth token.
"""

from __future__ import annotations

import hashlib
import hmac
import time

#: A parameter name of the TwiML ``<Stream>``.
PARAMETER = "sub250_token"
#: From the webhook's answer to the stream's ``start`` (Twilio connects within a second or two).
TOKEN_TTL_S = 60


def _mac(secret: str, call_sid: str, expires: int) -> str:
    msg = f"sub250-twilio-stream\n{call_sid}\n{expires}".encode()
    return hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()


def mint(secret: str, call_sid: str, *, now: float | None = None) -> str:
    expires = int(time.time() if now is None else now) + TOKEN_TTL_S
    return f"{expires}.{_mac(secret, call_sid, expires)}"


def check(secret: str, call_sid: str, token: str | None, *, now: float | None = None) -> str | None:
    """None if ``token`` opens ``call_sid``'s stream now; else why not."""
    if not token:
        return f"no {PARAMETER} parameter in start.customParameters"
    expires_text, _, mac = token.partition(".")
    if not expires_text.isdigit() or not mac:
        return f"{PARAMETER} is malformed"
    expires = int(expires_text)
    if not hmac.compare_digest(mac, _mac(secret, call_sid, expires)):
        return f"{PARAMETER} was not minted for this call"
    late = (time.time() if now is None else now) - expires
    return f"{PARAMETER} expired {int(late)} s ago" if late > 0 else None
