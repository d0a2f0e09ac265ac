"""What every transport does with one raw client message: gateway checks, parsing, then the session.
Shared by the WebSocket endpoint and the WebRTC data channel so both apply the same rules."""

from __future__ import annotations

import functools
import logging
from typing import Any

from sub250.gateway import KeyLimiter, Principal, Refusal
from sub250.protocol import ProtocolError, new_id, parse_client_event


def new_session(shared: Any, transport: Any, model: str | None) -> Any:
    """The session for a new connection: ``RealtimeSession(shared, transport, model=...)``, started by the
    caller. Looked up here, at call time, so that unit tests of the transports can put a fake in its place."""
    from sub250.session.session import RealtimeSession

    return RealtimeSession(shared, transport, model=model)


def session_for(shared: Any, transport: Any, model: str | None, principal: Principal,
                limiter: KeyLimiter | None = None) -> Any:
    """:func:`new_session`, configured with the session object of the client secret it was opened with, and
    told its key's limits (``rate_limits.updated`` at each response)."""
    session = new_session(shared, transport, model)
    if (configured := principal.session_object()) is not None:
        session.configure(configured)  # validated when the secret was minted
    if limiter is not None:
        session.rate_limits = functools.partial(limiter.rate_limits, principal.key_id)
    return session


def refusal_error(refusal: Refusal, *, event_id: str | None = None) -> ProtocolError:
    return ProtocolError(refusal.code, refusal.message, event_id=event_id, type=refusal.type)


def admit_message(limiter: KeyLimiter, principal: Principal, raw: str | bytes) -> ProtocolError | None:
    """The gateway's verdict on one frame as it arrives, whatever its type: every frame (binary ones too)
    counts against the key's message rate and size limits; binary frames are then refused."""
    refusal = limiter.check_message(principal.key_id, len(raw))
    if refusal is not None:
        return refusal_error(refusal)
    if not isinstance(raw, str):
        return ProtocolError("invalid_event", "binary frames are not supported; send JSON text")
    return None


async def handle_message(session: Any, limiter: KeyLimiter, principal: Principal, raw: str,
                         received_ns: int) -> None:
    """Parse an admitted text frame and hand it to ``session``; a refusal becomes an ``error`` event."""
    try:
        event = parse_client_event(raw)
    except ProtocolError as err:
        session.error(err)
        return
    if event.audio:
        refusal = limiter.check_audio(principal.key_id, session.input_seconds(len(event.audio)))
        if refusal is not None:
            session.error(refusal_error(refusal, event_id=event.event_id))
            return
    await session.handle(event, received_ns)


async def dispatch_message(session: Any, limiter: KeyLimiter, principal: Principal,
                           raw: str | bytes, received_ns: int) -> None:
    """Hand one client message to ``session``; every refusal becomes an ``error`` event, never an exception."""
    err = admit_message(limiter, principal, raw)
    if err is not None:
        session.error(err)
        return
    assert isinstance(raw, str)
    await handle_message(session, limiter, principal, raw, received_ns)


def internal_error(log: logging.Logger, what: str, *args: object) -> ProtocolError:
    """Log the exception being handled under a fresh error id and return the ``server_error`` the client
    gets: the id only, never the exception's text."""
    error_id = new_id("err")
    log.exception("[%s] " + what, error_id, *args)
    return ProtocolError("server_error", f"internal error (id {error_id}); the server log has the details",
                         type="server_error")
