"""The WebSocket endpoint ``/v1/realtime`` (OpenAI Realtime GA shape) on ``aiohttp``'s WebSocketResponse.

The handshake (Host, Origin, key, readiness) is decided in ``http.py`` before the upgrade; this module
runs an accepted connection:

- a reader task reads every frame as it arrives (``received_ns`` is taken then): text and binary frames
  pass the gateway (size and message rate, binary frames included) and are queued, in order, for the
  dispatcher; client PINGs are answered; PONGs resolve the pings this side sent;
- a dispatcher task hands the queued frames to the session one at a time (the queue is short, so a
  client sending faster than the session handles is slowed down by TCP, not buffered without end);
- a writer task drains the bounded :class:`~app.transport.outbox.Outbox`;
- a keepalive task pings every :data:`PING_INTERVAL_S` and closes a peer that does not answer within
  :data:`PING_TIMEOUT_S` (as ``websockets``' ping_interval/ping_timeout did).

RTT (``measure_rtt``) is an honest round trip: aiohttp's automatic ping handling is off (``autoping=False``);
a ping with a unique payload is written and the time taken until the reader sees the PONG carrying that
payload is the RTT. Reading PONGs in the reader task, not the dispatcher, keeps it honest while the
session is busy with an event.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import WSMsgType, web

from sub250.gateway import GatewayLimits, KeyLimiter, Principal
from sub250.metrics import prometheus
from sub250.metrics.timeline import now_ns
from sub250.protocol import ProtocolError, error_event
from sub250.protocol.server_events import audio_delta
from sub250.transport import dispatch
from sub250.transport.dispatch import admit_message, handle_message, internal_error, refusal_error
from sub250.transport.outbox import OVERFLOW_CLOSE_CODE, OVERFLOW_REASON, Outbox

log = logging.getLogger(__name__)

REALTIME_PATH = "/v1/realtime"
#: Keepalive: a ping this often; a peer whose PONG has not come back this long after is closed with
#: :data:`KEEPALIVE_CLOSE_CODE` (1008, policy violation: the peer is not reading or is gone; 1011 would say
#: the server failed).
PING_INTERVAL_S = 20.0
PING_TIMEOUT_S = 20.0
KEEPALIVE_CLOSE_CODE = 1008
#: How long ``measure_rtt`` waits for its PONG before reporting the RTT as unknown.
RTT_TIMEOUT_S = 5.0
#: Frames read but not yet handled by the session (each at most ``max_event_bytes``).
INBOX_FRAMES = 32
#: How long a close handshake may take before the socket is simply dropped.
CLOSE_TIMEOUT_S = 5.0

#: The message types that end a connection's reading (aiohttp's).
WS_DONE = (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR)


def websocket_response(protocol: str | None, limits: GatewayLimits) -> web.WebSocketResponse:
    """The response that upgrades one accepted handshake. ``protocol``: the subprotocol to echo (chosen per
    request, see :func:`~app.gateway.auth.select_subprotocol`). Frames over ``max_frame_bytes`` are refused
    by aiohttp itself (close 1009); invalid UTF-8 in a text frame closes with 1007."""
    return web.WebSocketResponse(protocols=(protocol,) if protocol else (), autoping=False, compress=False,
                                 max_msg_size=limits.max_frame_bytes, timeout=CLOSE_TIMEOUT_S)


class WebSocketTransport:
    """The session's view of one WebSocket: ordered, bounded, purgeable sends; RTT by ping/pong."""

    audio_in_events = True  # response.output_audio.delta, in the session's output format

    def __init__(self, ws: web.WebSocketResponse, *, max_outbox_bytes: int | None = None,
                 abort: Callable[[], None] | None = None) -> None:
        """``abort``: drops the TCP connection at once (the request's transport), for a peer that does not take
        a close handshake because it does not read."""
        self.ws = ws
        self._abort = abort
        kwargs = {} if max_outbox_bytes is None else {"max_bytes": max_outbox_bytes}
        self.outbox = Outbox(on_overflow=self._overflowed, **kwargs)
        self._pings: dict[bytes, asyncio.Future[int]] = {}  # payload -> when its PONG was read
        self._ping_ids = itertools.count(1)
        self._closing: asyncio.Task[None] | None = None
        #: The session this connection carries, once it runs (draining asks it whether a turn is in flight).
        self.session: Any = None

    @property
    def closing(self) -> bool:
        """A close has begun (:meth:`close_soon`)."""
        return self._closing is not None

    @property
    def idle(self) -> bool:
        """Nothing in flight: no turn being spoken, transcribed or answered, and every event written."""
        return self.session is None or (not self.session.in_flight and len(self.outbox) == 0)

    # --- the session's transport ---------------------------------------------------------------------

    def send(self, event: dict[str, Any], *, tag: str | None = None,
             on_sent: Callable[[int], None] | None = None) -> None:
        self.outbox.send(event, tag=tag, on_sent=on_sent)

    def send_audio(self, pcm16: bytes | memoryview, *, response_id: str, item_id: str,
                   on_sent: Callable[[int], None] | None = None) -> None:
        """Reply audio (PCM16 mono at OUTPUT_RATE) as one ``response.output_audio.delta``, tagged with the
        response so that barge-in (``purge``) and a slow client (the outbox limit) can drop it."""
        self.outbox.send(audio_delta(response_id, item_id, pcm16), tag=response_id, on_sent=on_sent, audio=True)

    def audio_done(self, response_id: str) -> None:
        """Nothing to do on a WebSocket: the client learns the end from ``response.output_audio.done``."""

    def purge(self, tag: str) -> int:
        return self.outbox.purge(tag)

    def pause_audio(self, response_id: str, paused: bool) -> None:
        """Nothing to do: the client plays what it was sent (the paused reply sends nothing new meanwhile)."""

    def clear_audio(self, response_id: str | None) -> bool:
        return False  # the client plays (and clears) its own audio

    async def measure_rtt(self) -> float | None:
        """Round trip of one ping/pong in ms, or None (no PONG within :data:`RTT_TIMEOUT_S`, or closed)."""
        return await self.ping(RTT_TIMEOUT_S)

    # --- ping/pong -----------------------------------------------------------------------------------

    async def ping(self, timeout: float) -> float | None:
        payload = next(self._ping_ids).to_bytes(8, "big")
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        sent = now_ns()
        self._pings[payload] = waiter

        async def round_trip() -> int:
            await self.ws.ping(payload)  # may wait for the socket to drain: inside the timeout
            return await waiter

        try:
            received = await asyncio.wait_for(round_trip(), timeout)
        except (TimeoutError, ConnectionError, RuntimeError):
            return None  # timed out, or the socket is closing/closed: the RTT is unknown
        finally:
            self._pings.pop(payload, None)
        return (received - sent) / 1e6

    def pong_received(self, payload: bytes | bytearray, received_ns: int) -> None:
        """The reader saw a PONG: it answers the ping that carried the same payload (others are ignored:
        unsolicited PONGs are allowed by RFC 6455)."""
        waiter = self._pings.pop(bytes(payload), None)
        if waiter is not None and not waiter.done():
            waiter.set_result(received_ns)

    # --- closing -------------------------------------------------------------------------------------

    def close_soon(self, code: int, reason: str) -> None:
        if self._closing is None and not self.ws.closed:
            log.info("realtime connection closing (%d %s)", code, reason)
            self._closing = asyncio.ensure_future(self._close(code, reason))

    async def _close(self, code: int, reason: str) -> None:
        try:
            await asyncio.wait_for(self.ws.close(code=code, message=reason.encode()), CLOSE_TIMEOUT_S)
        except TimeoutError:
            # A peer that does not read never takes the close frame (it waits behind what it did not read):
            # drop the connection, so its socket and kernel buffers are freed now, not when the peer goes.
            log.info("realtime connection: close handshake timed out; connection aborted")
            if self._abort is not None:
                self._abort()

    async def closed(self) -> None:
        """Wait for a close started by :meth:`close_soon`."""
        if self._closing is not None:
            await self._closing

    def _overflowed(self) -> None:
        self.close_soon(OVERFLOW_CLOSE_CODE, OVERFLOW_REASON)


async def serve_realtime(ws: web.WebSocketResponse, principal: Principal, shared: Any, limiter: KeyLimiter, *,
                         model: str | None = None, max_outbox_bytes: int | None = None,
                         on_open: Callable[[WebSocketTransport], None] | None = None,
                         on_closed: Callable[[WebSocketTransport], None] | None = None,
                         abort: Callable[[], None] | None = None,
                         session_for: Callable[[WebSocketTransport], Any] | None = None,
                         label: str = "websocket") -> None:
    """One prepared realtime connection, from the first event to close. ``session_for``: what the connection's
    events go to (a new session by default; a running call's for an app that controls it: app/telephony/control.py),
    ``label``: its ``transport`` in the metrics."""
    transport = WebSocketTransport(ws, max_outbox_bytes=max_outbox_bytes, abort=abort)
    if on_open is not None:
        on_open(transport)
    try:
        refusal = limiter.open_session(principal.key_id)
        if refusal is not None:
            # Over the key's session limit: an ``error`` event, then close 1008 (the handshake was fine).
            await ws.send_json(error_event(refusal_error(refusal)))
            transport.close_soon(1008, refusal.code)
            await transport.closed()
            return
        open_sessions = prometheus.SESSIONS_OPEN.labels(transport=label)
        open_sessions.inc()
        try:
            session = (session_for(transport) if session_for is not None
                       else dispatch.session_for(shared, transport, model, principal, limiter))
            await _run_session(ws, transport, session, principal, limiter)
        finally:
            open_sessions.dec()
            limiter.close_session(principal.key_id)
    finally:
        if on_closed is not None:
            on_closed(transport)


async def _run_session(ws: web.WebSocketResponse, transport: WebSocketTransport, session: Any,
                       principal: Principal, limiter: KeyLimiter) -> None:
    inbox: asyncio.Queue[tuple[str | ProtocolError, int]] = asyncio.Queue(INBOX_FRAMES)
    transport.session = session
    session.start()
    tasks = [asyncio.ensure_future(c) for c in (
        _read(ws, transport, inbox, limiter, principal),
        _dispatch(session, inbox, limiter, principal),
        transport.outbox.run(ws.send_str),
        _keepalive(transport),
    )]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            exc = None if task.cancelled() else task.exception()
            if isinstance(exc, ConnectionError):
                log.info("realtime connection: write failed (%s)", exc)
            elif exc is not None:
                log.error("realtime connection failed", exc_info=exc)
                transport.close_soon(1011, "internal error")
    finally:
        reader, dispatcher, writer, keepalive = tasks
        for task in (reader, dispatcher, keepalive):
            task.cancel()
        try:
            await asyncio.gather(reader, dispatcher, keepalive, return_exceptions=True)
            await session.close()
        finally:
            transport.outbox.close()  # the writer stops after the write in hand
            # Close before the writer is cancelled: a write blocked on a full socket shares aiohttp's drain
            # waiter with the close, so cancelling it first would cancel the close too (the peer would see
            # 1006). The close is bounded and ends in an abort, which also ends a blocked write.
            transport.close_soon(1000, "")
            await transport.closed()
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)


async def _read(ws: web.WebSocketResponse, transport: WebSocketTransport,
                inbox: asyncio.Queue[tuple[str | ProtocolError, int]], limiter: KeyLimiter,
                principal: Principal) -> None:
    while True:
        msg = await ws.receive()
        received = now_ns()
        kind = msg.type
        if kind is WSMsgType.TEXT or kind is WSMsgType.BINARY:
            err = admit_message(limiter, principal, msg.data)
            await inbox.put((msg.data if err is None else err, received))
        elif kind is WSMsgType.PING:
            await ws.pong(msg.data)
        elif kind is WSMsgType.PONG:
            transport.pong_received(msg.data, received)
        elif kind in WS_DONE:
            if kind is WSMsgType.ERROR:
                log.info("realtime connection: %s (closed %s)", msg.data, ws.close_code)
            return


async def _dispatch(session: Any, inbox: asyncio.Queue[tuple[str | ProtocolError, int]], limiter: KeyLimiter,
                    principal: Principal) -> None:
    while True:
        item, received = await inbox.get()
        if isinstance(item, ProtocolError):
            session.error(item)
            continue
        try:
            await handle_message(session, limiter, principal, item, received)
        except Exception:  # a bug in one event must not end the connection: logged with an id, reported
            session.error(internal_error(log, "realtime connection: failed to handle an event"))


async def _keepalive(transport: WebSocketTransport) -> None:
    while True:
        await asyncio.sleep(PING_INTERVAL_S)
        if await transport.ping(PING_TIMEOUT_S) is None and not transport.ws.closed:
            prometheus.SLOW_CLIENT_CLOSES.labels(reason="ping_timeout").inc()
            transport.close_soon(KEEPALIVE_CLOSE_CODE, "keepalive ping timeout")
            return
