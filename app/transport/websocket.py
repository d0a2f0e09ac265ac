"""The WebSocket endpoint ``/v1/realtime`` (OpenAI Realtime GA shape) on the ``websockets`` server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from websockets.exceptions import ConnectionClosed

from app.gateway import KeyLimiter, Principal
from app.metrics.timeline import now_ns
from app.protocol import ProtocolError, error_event
from app.session.session import RealtimeSession, Shared
from app.transport.dispatch import dispatch_message
from app.transport.outbox import Outbox

log = logging.getLogger(__name__)

REALTIME_PATH = "/v1/realtime"


class WebSocketTransport:
    """The session's view of one WebSocket: send (ordered, purgeable), RTT by ping/pong."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.outbox = Outbox()

    def send(self, event: dict[str, Any], *, tag: str | None = None, on_sent: Any = None) -> None:
        self.outbox.send(event, tag=tag, on_sent=on_sent)

    def purge(self, tag: str) -> int:
        return self.outbox.purge(tag)

    async def measure_rtt(self) -> float | None:
        try:
            waiter = await self.ws.ping()
            latency = await asyncio.wait_for(waiter, timeout=5.0)
            return float(latency) * 1000.0
        except (ConnectionClosed, asyncio.TimeoutError, RuntimeError):
            return None


async def serve_realtime(ws: Any, principal: Principal, shared: Shared, limiter: KeyLimiter) -> None:
    """One realtime connection, from handshake to close."""
    transport = WebSocketTransport(ws)
    writer = asyncio.ensure_future(transport.outbox.run(ws.send))
    refusal = limiter.open_session(principal.key_id)
    if refusal is not None:
        transport.send(error_event(ProtocolError(refusal.code, refusal.message, type="rate_limit_error")))
        await asyncio.sleep(0.05)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(_drain(transport), 2)
        writer.cancel()
        await ws.close(1008, refusal.code)
        return
    model = ws.request.path.partition("model=")[2].split("&")[0] or None
    session = RealtimeSession(shared, transport, model=model)
    session.start()
    try:
        async for raw in ws:
            await dispatch_message(session, limiter, principal, raw, now_ns())
    except ConnectionClosed:
        pass
    finally:
        limiter.close_session(principal.key_id)
        await session.close()
        transport.outbox.close()
        writer.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await writer


async def _drain(transport: WebSocketTransport) -> None:
    while len(transport.outbox):
        await asyncio.sleep(0.01)
