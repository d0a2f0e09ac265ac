"""What every transport does with one raw client message: gateway checks, parsing, then the session.
Shared by the WebSocket endpoint and the WebRTC data channel so both apply the same rules."""

from __future__ import annotations

from app.gateway import KeyLimiter, Principal
from app.protocol import ProtocolError, parse_client_event
from app.session.session import RealtimeSession


async def dispatch_message(session: RealtimeSession, limiter: KeyLimiter, principal: Principal,
                           raw: str | bytes, received_ns: int) -> None:
    """Hand one client message to ``session``; every refusal becomes an ``error`` event, never an exception."""
    if isinstance(raw, bytes):
        session.error(ProtocolError("invalid_event", "binary frames are not supported; send JSON text"))
        return
    refusal = limiter.check_message(principal.key_id, len(raw))
    if refusal is not None:
        session.error(ProtocolError(refusal.code, refusal.message,
                                    type="rate_limit_error" if refusal.http_status == 429 else
                                    "invalid_request_error"))
        return
    try:
        event = parse_client_event(raw)
    except ProtocolError as err:
        session.error(err)
        return
    if event.audio:
        refusal = limiter.check_audio(principal.key_id, len(event.audio) / 2 / 24000)
        if refusal is not None:
            session.error(ProtocolError(refusal.code, refusal.message, event_id=event.event_id,
                                        type="rate_limit_error"))
            return
    await session.handle(event, received_ns)
