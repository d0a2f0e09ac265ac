"""The WebRTC endpoint (``aiortc``), in the OpenAI Realtime WebRTC shape.

The browser POSTs its SDP offer to ``/v1/realtime/calls`` and gets the answer. Caller audio arrives on
the media track (Opus, 48 kHz), is decoded and resampled to PCM16 mono at ``ASR_RATE`` here at the edge and
fed to the same :class:`~sub250.session.session.RealtimeSession` the WebSocket endpoint uses
(``handle_audio(pcm16, ASR_RATE, received_ns)``). Reply audio (``send_audio``) leaves on the server's
track, paced in real time; every other event (``sub250.turn.latency`` included) travels as JSON on the data
channel ``oai-events``, through a bounded outbox (a peer that stops reading the channel is hung up on).
Barge-in purges the reply audio queued on the track at once.

A call is closed, and everything it started stopped, when the peer connection closes or fails, when the
data channel closes, when the client hangs up (``POST /v1/realtime/calls/{id}/hangup``), or when it never
connects within :data:`CONNECT_TIMEOUT_S`.
"""

from __future__ import annotations

import asyncio
import fractions
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import av
import numpy as np
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

from sub250.audio.rates import ASR_RATE, OUTPUT_RATE
from sub250.gateway import KeyLimiter, Principal
from sub250.metrics import prometheus
from sub250.metrics.timeline import now_ns
from sub250.protocol import ProtocolError, new_id, server_event
from sub250.tasks import TaskSet
from sub250.transport import dispatch
from sub250.transport.dispatch import dispatch_message, internal_error
from sub250.transport.outbox import MAX_QUEUED_BYTES, OVERFLOW_REASON, Outbox

log = logging.getLogger(__name__)

CHANNEL_LABEL = "oai-events"
FRAME_MS = 20
#: A call whose peer connection is not up by then is dropped (an abandoned offer must not leak).
CONNECT_TIMEOUT_S = 30.0
#: How long a turn waits for the call's first RTCP round trip before reporting network_rtt as unknown.
RTT_WAIT_S = 3.0


def configure_ice_hosts(addresses: list[str] | None) -> list[str]:
    """Choose the ICE host candidates this process offers; returns them.

    aioice offers every non-loopback address and never 127.0.0.1, so on a machine whose only interface is
    loopback no call could connect. ``addresses`` (``SUB250_ICE_HOSTS``) replaces the list; without it,
    127.0.0.1 is offered only when there is nothing else (the browser then needs to allow loopback, as
    Chromium's ``--allow-loopback-in-peer-connection`` does). aiortc has no option for this, so the choice
    is made by wrapping aioice's address lookup, once per process."""
    import aioice.ice

    original = getattr(aioice.ice, "_sub250_original_get_host_addresses", aioice.ice.get_host_addresses)
    aioice.ice._sub250_original_get_host_addresses = original  # type: ignore[attr-defined]

    def host_addresses(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        if addresses:
            return [a for a in addresses if (":" in a and use_ipv6) or (":" not in a and use_ipv4)]
        found = original(use_ipv4, use_ipv6)
        return found or (["127.0.0.1"] if use_ipv4 else [])

    aioice.ice.get_host_addresses = host_addresses
    return host_addresses(True, True)


def pcm16_of(frame: av.AudioFrame) -> bytes:
    """The PCM16 bytes of a packed ``s16`` mono frame (what the resampler makes)."""
    return frame.to_ndarray().reshape(-1).astype("<i2", copy=False).tobytes()


class ReplyTrack(MediaStreamTrack):
    """The server's audio track: reply PCM16 (mono, ``OUTPUT_RATE``) queued by response, sent as 20 ms
    frames in real time; silence between replies. ``on_sent`` of a chunk runs when its first frame leaves."""

    kind = "audio"

    def __init__(self, rate: int = OUTPUT_RATE,
                 on_state: Callable[[str, str], None] | None = None) -> None:
        super().__init__()
        self.rate = rate
        self.samples = rate * FRAME_MS // 1000
        self._chunks: deque[list[Any]] = deque()  # [tag, memoryview of PCM16, on_sent | None]
        self._on_state = on_state  # (tag, "started" | "stopped")
        self._playing: str | None = None
        self._finished: set[str] = set()
        self._paused: set[str] = set()  # responses whose queued audio waits (silence plays meanwhile)
        self._t0: float | None = None
        self._pts = 0
        self.frames_sent = 0

    def push(self, tag: str | None, pcm16: bytes | memoryview,
             on_sent: Callable[[int], None] | None = None) -> None:
        if len(pcm16):
            self._chunks.append([tag, memoryview(pcm16).cast("B"), on_sent])

    def finish(self, tag: str) -> None:
        """No more audio will come for ``tag``: report ``stopped`` once what is queued has played (a reply
        that queued no audio, or whose audio was purged, has nothing to report)."""
        if tag == self._playing or any(c[0] == tag for c in self._chunks):
            self._finished.add(tag)

    def pause(self, tag: str, paused: bool) -> None:
        """Stop playing ``tag``'s queued audio where it is (``paused``), or go on with it."""
        if paused:
            self._paused.add(tag)
        else:
            self._paused.discard(tag)

    def purge(self, tag: str) -> int:
        self._paused.discard(tag)
        before = len(self._chunks)
        self._chunks = deque(c for c in self._chunks if c[0] != tag)
        if self._playing == tag:
            self._playing = None
        self._finished.discard(tag)
        return before - len(self._chunks)

    def pending(self) -> list[tuple[str, Any]]:
        """(response id, pcm) of every chunk still queued, oldest first."""
        return [(c[0], c[1]) for c in self._chunks]

    @property
    def queued_ms(self) -> float:
        return sum(len(c[1]) for c in self._chunks) / 2 / self.rate * 1000

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._t0 is None:
            self._t0 = time.monotonic()
        else:
            wait = self._t0 + self._pts / self.rate - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
        need = self.samples * 2
        out = bytearray(need)  # silence unless a reply is queued
        filled = 0
        sent_ns = now_ns()
        while filled < need and self._chunks and self._chunks[0][0] not in self._paused:
            chunk = self._chunks[0]
            tag, view, on_sent = chunk
            if tag != self._playing:
                self._playing = tag
                if tag is not None and self._on_state is not None:
                    self._on_state(tag, "started")
            if on_sent is not None:
                chunk[2] = None
                on_sent(sent_ns)
            take = min(need - filled, len(view))
            out[filled:filled + take] = view[:take]
            filled += take
            if take == len(view):
                self._chunks.popleft()
            else:
                chunk[1] = view[take:]
        if not self._chunks and self._playing is not None and self._playing in self._finished:
            tag, self._playing = self._playing, None
            self._finished.discard(tag)
            if self._on_state is not None:
                self._on_state(tag, "stopped")
        frame = av.AudioFrame.from_ndarray(np.frombuffer(out, dtype=np.int16).reshape(1, -1),
                                           format="s16", layout="mono")
        frame.sample_rate = self.rate
        frame.pts = self._pts
        frame.time_base = fractions.Fraction(1, self.rate)
        self._pts += self.samples
        self.frames_sent += 1
        return frame


class WebRTCCall:
    """One call: a peer connection, its session, and the transport the session talks through."""

    audio_in_events = False  # reply audio goes onto the track (Opus, negotiated), never into events

    def __init__(self, call_id: str, principal: Principal, shared: Any, limiter: KeyLimiter, *,
                 model: str | None = None, on_closed: Callable[[WebRTCCall], None] | None = None,
                 max_outbox_bytes: int = MAX_QUEUED_BYTES) -> None:
        self.id = call_id
        self.principal = principal
        self.limiter = limiter
        self.pc = RTCPeerConnection()
        self.track = ReplyTrack(on_state=self._audio_state)
        self.max_outbox_bytes = max_outbox_bytes
        self.outbox = Outbox(max_bytes=max_outbox_bytes, on_overflow=lambda: self.close_soon(OVERFLOW_REASON))
        self._channel_drained = asyncio.Event()
        self.channel: Any = None
        self._channel_open = asyncio.Event()
        self._inbox: asyncio.Queue[tuple[str, Any, int]] = asyncio.Queue()
        self._tasks = TaskSet(on_error=self._task_failed)
        self._on_closed = on_closed
        self._closing: asyncio.Task | None = None
        self.closed = asyncio.Event()
        self.answer_sdp = ""
        self.session = dispatch.session_for(shared, self, model, principal, limiter)
        prometheus.SESSIONS_OPEN.labels(transport="webrtc").inc()  # open until _close

    # --- the session's transport ---------------------------------------------------------------------

    def send(self, event: dict[str, Any], *, tag: str | None = None,
             on_sent: Callable[[int], None] | None = None) -> None:
        self.outbox.send(event, tag=tag, on_sent=on_sent)

    def send_audio(self, pcm16: bytes | memoryview, *, response_id: str, item_id: str,
                   on_sent: Callable[[int], None] | None = None) -> None:
        """Reply audio goes on the media track, not the data channel (as in the OpenAI WebRTC API);
        ``on_sent`` runs when its first frame leaves."""
        self.track.push(response_id, bytes(pcm16), on_sent)  # a copy only if it is a view: the caller may reuse it

    def audio_done(self, response_id: str) -> None:
        self.track.finish(response_id)

    def purge(self, tag: str) -> int:
        dropped_audio = self.track.purge(tag)
        if dropped_audio:
            self.outbox.send(server_event("output_audio_buffer.cleared", response_id=tag))
        return self.outbox.purge(tag) + dropped_audio

    def pause_audio(self, response_id: str, paused: bool) -> None:
        self.track.pause(response_id, paused)

    def clear_audio(self, response_id: str | None) -> bool:
        tags = [response_id] if response_id else list(dict.fromkeys(c[0] for c in self.track.pending()))
        for tag in tags:
            self.track.purge(tag)
        self.outbox.send(server_event("output_audio_buffer.cleared", response_id=response_id))
        return True

    async def measure_rtt(self) -> float | None:
        """RTT from the latest RTCP receiver report about our audio (the browser sends one every second
        or so); waits up to :data:`RTT_WAIT_S` for the first one of the call, else None."""
        deadline = time.monotonic() + RTT_WAIT_S
        while True:
            try:
                for stats in (await self.pc.getStats()).values():
                    rtt = getattr(stats, "roundTripTime", None)
                    if getattr(stats, "type", "") == "remote-inbound-rtp" and rtt is not None:
                        return float(rtt) * 1000.0
            except Exception as exc:  # a closing peer connection: the turn reports network_rtt as unknown
                log.debug("call %s: no RTCP stats: %s", self.id, exc)
                return None
            if time.monotonic() > deadline or self._closing is not None:
                return None
            await asyncio.sleep(0.2)

    def _audio_state(self, tag: str, state: str) -> None:
        self.outbox.send(server_event(f"output_audio_buffer.{state}", response_id=tag))

    # --- signalling ----------------------------------------------------------------------------------

    async def answer(self, offer_sdp: str) -> str:
        """Apply the browser's offer; return our answer (ICE candidates included)."""
        pc = self.pc
        pc.on("datachannel", self._on_datachannel)
        pc.on("track", self._on_track)
        pc.on("connectionstatechange", self._on_connection_state)
        try:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
        except Exception as exc:  # aiortc reports a malformed offer with asserts and assorted errors
            detail = str(exc) or type(exc).__name__
            raise ProtocolError("invalid_sdp", f"the SDP offer was refused: {detail}") from None
        if any(t.kind == "audio" for t in pc.getTransceivers()):
            pc.addTrack(self.track)
        await pc.setLocalDescription(await pc.createAnswer())
        self._tasks.spawn(self._inbound())
        self._tasks.spawn(self.outbox.run(self._write))
        self._tasks.spawn(self._connect_deadline())
        self.session.start()  # session.created waits in the outbox until the channel opens
        return pc.localDescription.sdp

    def _on_datachannel(self, channel: Any) -> None:
        if channel.label != CHANNEL_LABEL:
            log.info("call %s: ignoring data channel %r (events use %r)", self.id, channel.label, CHANNEL_LABEL)
            return
        self.channel = channel

        @channel.on("message")
        def on_message(message: Any) -> None:
            self._inbox.put_nowait(("event", message, now_ns()))

        @channel.on("close")
        def on_close() -> None:
            self.close_soon("data channel closed")

        channel.bufferedAmountLowThreshold = self.max_outbox_bytes // 2
        channel.on("bufferedamountlow", self._channel_drained.set)
        if channel.readyState == "open":
            self._channel_open.set()
        else:
            channel.on("open", self._channel_open.set)

    def _on_track(self, track: Any) -> None:
        if track.kind == "audio":
            self._tasks.spawn(self._read_audio(track))

    def _on_connection_state(self) -> None:
        state = self.pc.connectionState
        log.debug("call %s: connection %s", self.id, state)
        if state in ("failed", "closed"):
            self.close_soon(f"peer connection {state}")

    async def _connect_deadline(self) -> None:
        await asyncio.sleep(CONNECT_TIMEOUT_S)
        if self.pc.connectionState != "connected" or not self._channel_open.is_set():
            self.close_soon(f"not connected within {CONNECT_TIMEOUT_S:.0f} s")

    # --- data flow -----------------------------------------------------------------------------------

    async def _write(self, text: str) -> None:
        await self._channel_open.wait()
        # aiortc buffers whatever is sent; wait while a peer is far behind so that the outbox (bounded)
        # is where a peer that stops reading shows up
        while self.channel.bufferedAmount > self.max_outbox_bytes and self.channel.readyState == "open":
            self._channel_drained.clear()
            await self._channel_drained.wait()
        if self.channel.readyState != "open":
            raise ConnectionError("data channel closed")
        self.channel.send(text)

    async def _read_audio(self, track: Any) -> None:
        """Opus frames from the browser, decoded by aiortc; resampled once to PCM16 mono at ASR_RATE."""
        resampler = av.AudioResampler(format="s16", layout="mono", rate=ASR_RATE)
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            received = now_ns()
            for out in resampler.resample(frame):
                self._inbox.put_nowait(("audio", pcm16_of(out), received))

    async def _inbound(self) -> None:
        """Events and audio in arrival order, one at a time, as the WebSocket endpoint's read loop does."""
        while True:
            kind, payload, received = await self._inbox.get()
            try:
                if kind == "audio":
                    await self.session.handle_audio(payload, ASR_RATE, received)
                else:
                    await dispatch_message(self.session, self.limiter, self.principal, payload, received)
            except Exception:  # a bug in one event must not kill the call: logged with an id, reported
                self.session.error(internal_error(log, "call %s: failed to handle %s", self.id, kind))

    def _task_failed(self, exc: BaseException) -> None:
        self.close_soon(f"transport error: {type(exc).__name__}")

    # --- teardown ------------------------------------------------------------------------------------

    @property
    def closing(self) -> bool:
        """A hang-up has begun (:meth:`close_soon`)."""
        return self._closing is not None

    @property
    def idle(self) -> bool:
        """Nothing in flight: no turn being spoken, transcribed or answered, every event written and the reply's
        audio played out of the track."""
        return not self.session.in_flight and len(self.outbox) == 0 and self.track.queued_ms == 0

    def close_soon(self, reason: str) -> None:
        if self._closing is None:
            log.info("call %s: closing (%s)", self.id, reason)
            self._closing = asyncio.ensure_future(self._close())

    async def close(self, reason: str = "closed by the server") -> None:
        self.close_soon(reason)
        await self.closed.wait()

    async def _close(self) -> None:
        try:
            await self.session.close()
            self.outbox.close()
            self.track.stop()
            await self._tasks.cancel_all()
            await self.pc.close()
        finally:
            self.limiter.close_session(self.principal.key_id)
            prometheus.SESSIONS_OPEN.labels(transport="webrtc").dec()
            if self._on_closed is not None:
                self._on_closed(self)
            self.closed.set()


async def open_call(principal: Principal, shared: Any, limiter: KeyLimiter, offer_sdp: str, *,
                    model: str | None = None, on_closed: Callable[[WebRTCCall], None] | None = None,
                    max_outbox_bytes: int = MAX_QUEUED_BYTES, session: dict[str, Any] | None = None) -> WebRTCCall:
    """Admit a call (per-key session limit), configure its session (``session``: the GA session object sent
    with the offer), answer its offer. Raises ProtocolError with an HTTP status."""
    refusal = limiter.open_session(principal.key_id)
    if refusal is not None:
        err = ProtocolError(refusal.code, refusal.message, type=refusal.type)
        err.http_status = refusal.http_status  # type: ignore[attr-defined]
        raise err
    try:
        call = WebRTCCall(new_id("rtc"), principal, shared, limiter, model=model, on_closed=on_closed,
                          max_outbox_bytes=max_outbox_bytes)
    except BaseException:
        limiter.close_session(principal.key_id)  # the call never existed: its session slot goes back
        raise
    try:
        if session is not None:
            call.session.configure(session)  # session.created then carries it
        call.answer_sdp = await call.answer(offer_sdp)
    except BaseException:
        await call.close("offer refused")
        raise
    return call


__all__ = ["CHANNEL_LABEL", "ReplyTrack", "WebRTCCall", "open_call"]
