"""One Twilio Media Streams call: the WebSocket Twilio opened, carrying one normal session.

Twilio connects to ``/v1/telephony/twilio/stream`` (app/telephony/twilio_routes.py) and sends ``connected``
and ``start``; nothing opens before a ``start`` whose token the signed webhook minted for that very call
(app/telephony/stream_token.py), within :data:`START_TIMEOUT_S`. Then the call is a
:class:`~sub250.session.session.RealtimeSession` like any other (the same knowledge base, tools and latency
ledger), its audio G.711 μ-law at 8 kHz both ways:

- in: ``media`` frames are decoded and handed to the session at 8 kHz (the rates path feeds the VAD and Whisper
  at 16 kHz); ``dtmf`` becomes ``input_audio_buffer.dtmf_event_received`` and gathers into a keyed-in entry
  (app/telephony/keypad.py); ``mark`` says Twilio has played our audio up to it; ``stop`` ends the call;
- out: the reply's audio (resampled to 8 kHz and μ-law encoded by the session's output format) leaves as
  ``media`` frames of 20 ms, each chunk followed by a ``mark``. It is paced: Twilio is kept at most
  :data:`LEAD_MS` ahead of what it has played, so that barge-in's ``clear`` (Twilio drops what it buffered) and
  a paused reply (a suspected interruption) take effect within that much audio.

What every phone call does besides (keys, the ledger, the end) is app/telephony/phone_call.py's. A frame that is
not a Twilio message we can use is logged and dropped (``sub250_telephony_bad_frames_total``); the call goes on.
The call ends - its session stopped, its slot freed - at ``stop``, when Twilio closes the socket, or when the
server closes it (drain, shutdown); a transfer (:meth:`TwilioCall.refer`) has Twilio dial the target and stop.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

from aiohttp import WSMsgType, web

from sub250.audio.formats import PCMU
from sub250.gateway import KeyLimiter, Principal
from sub250.metrics import prometheus
from sub250.metrics.timeline import now_ns
from sub250.telephony import twilio_messages as tw
from sub250.telephony.phone_call import PhoneCall, TransferRefused
from sub250.transport.websocket import WS_DONE

log = logging.getLogger(__name__)

#: Twilio sends ``start`` right after ``connected``; a socket without a valid one by then is closed.
START_TIMEOUT_S = 10.0
#: How far ahead of Twilio's playback the reply's audio is sent.
LEAD_MS = 200
FRAME_BYTES = tw.SAMPLE_RATE * 20 // 1000  # 20 ms of μ-law
#: The session every Twilio call starts with: G.711 μ-law both ways (what Twilio streams).
PHONE_SESSION = {"audio": {"input": {"format": {"type": "audio/pcmu"}}, "output": {"format": {"type": "audio/pcmu"}}}}


class TwilioCall(PhoneCall):
    """The session's transport for one Twilio stream (the ``Transport`` of app/session/output.py)."""

    audio_in_events = True  # reply audio comes in the session's output format (μ-law) and leaves as ``media``

    def __init__(self, ws: web.WebSocketResponse, start: tw.Start, principal: Principal, shared: Any,
                 limiter: KeyLimiter, *, on_closed: Callable[[TwilioCall], None] | None = None,
                 rest: tuple[str, str] = ("", "")) -> None:
        """``rest``: the account's auth token and Twilio's API URL ("": api.twilio.com), for :meth:`refer`."""
        self.ws, self.start_message = ws, start
        self._rest = rest
        self.stream_sid, self.call_sid = start.stream_sid, start.call_sid
        self._chunks: deque[list[Any]] = deque()  # [response id, μ-law bytes, on_sent | None]
        self._paused: set[str] = set()
        self._finished: set[str] = set()
        self._marks: dict[str, str] = {}  # mark name -> response id, sent and not played yet
        self._sent: set[str] = set()  # replies some audio of which Twilio was sent
        self._control: deque[str] = deque()  # ``clear`` messages, sent before any more media
        self._wake = asyncio.Event()
        self._mark_ids = 0
        self._played_until = 0.0  # loop time at which Twilio will have played all we sent
        super().__init__("twilio", principal, shared, limiter, session=PHONE_SESSION, on_closed=on_closed)

    # --- the session's transport: the reply's audio ------------------------------------------------------

    def send_audio(self, pcm16: bytes | memoryview, *, response_id: str, item_id: str,
                   on_sent: Callable[[int], None] | None = None) -> None:
        """``pcm16`` is μ-law here (the session encodes it: its output format is ``audio/pcmu``)."""
        if len(pcm16):
            self._chunks.append([response_id, bytes(pcm16), on_sent])
            self._wake.set()

    def audio_done(self, response_id: str) -> None:
        self._finished.add(response_id)

    def purge(self, tag: str) -> int:
        """Barge-in: the reply's queued audio goes, and what Twilio buffered of it is cleared."""
        dropped, sent = self._drop(tag)
        if sent:  # some of it may still be in Twilio's buffer (a paused reply's chunk in hand)
            self._clear()
        return dropped

    def _drop(self, tag: str) -> tuple[int, bool]:
        """Forget ``tag``'s queued audio; (chunks dropped, whether Twilio was sent some of it)."""
        before = len(self._chunks)
        self._chunks = deque(c for c in self._chunks if c[0] != tag)
        self._paused.discard(tag)
        self._finished.discard(tag)
        sent = tag in self._sent
        self._sent.discard(tag)
        return before - len(self._chunks), sent

    def pause_audio(self, response_id: str, paused: bool) -> None:
        """No more of the reply is sent while paused (what Twilio buffered, at most :data:`LEAD_MS` and the
        chunk in hand, plays on)."""
        if paused:
            self._paused.add(response_id)
        else:
            self._paused.discard(response_id)
            self._wake.set()

    def clear_audio(self, response_id: str | None) -> bool:
        """One ``clear`` for all it drops (all of it with None)."""
        tags = {response_id} if response_id else {c[0] for c in self._chunks} | self._sent
        sent = [self._drop(tag)[1] for tag in tags]
        if response_id is None or any(sent):
            self._clear()
        return True

    @property
    def playing(self) -> bool:
        """Reply audio is queued here or sent and not yet played by Twilio."""
        return bool(self._chunks) or bool(self._marks)

    # --- running -------------------------------------------------------------------------------------

    async def run(self) -> None:
        """The call, from its ``start`` to its end."""
        try:
            self.start()
            log.info("twilio call %s: stream %s of call %s", self.id, self.stream_sid, self.call_sid)
            self.spawn(self._play())
            await self._read()
        finally:
            self.close_soon("stream ended")
            await self.closed.wait()

    async def _read(self) -> None:
        async with aclosing(messages(self.ws, self.id, self._admit)) as stream:
            async for parsed, received in stream:
                if isinstance(parsed, tw.Stop):
                    log.info("twilio call %s: stop", self.id)
                    return
                if isinstance(parsed, tw.Media):
                    await self._media(parsed, received)
                elif isinstance(parsed, tw.Dtmf):
                    self.pressed(parsed.digit, received)
                else:
                    await self.message(parsed, received)

    def _admit(self, data: str | bytes) -> str | None:
        refusal = self.limiter.check_message(self.principal.key_id, len(data))
        return None if refusal is None else f"refused by the gateway: {refusal.message}"

    async def handle(self, item: Any, received_ns: int) -> None:
        if isinstance(item, tw.Mark):
            self._played(item.name)
        elif isinstance(item, tw.Start):
            bad_frame("a second start on one stream", self.id)

    async def _media(self, media: tw.Media, received: int) -> None:
        if media.track not in ("inbound", "inbound_track"):
            return  # our own audio, when a stream carries both tracks
        refusal = self.limiter.check_audio(self.principal.key_id, len(media.payload) / tw.SAMPLE_RATE)
        if refusal is not None:
            bad_frame(f"refused by the gateway: {refusal.message}", self.id)
            return
        await self.heard(PCMU.decode(media.payload), tw.SAMPLE_RATE, received)

    # --- the reply's audio out -----------------------------------------------------------------------

    def _clear(self) -> None:
        """Twilio drops the audio it buffered (and echoes the marks in it: they are forgotten here first)."""
        self._marks.clear()
        self._control.append(tw.clear(self.stream_sid))
        self._played_until = 0.0
        self._wake.set()

    def _played(self, name: str) -> None:
        tag = self._marks.pop(name, None)
        if tag is not None and tag in self._finished and tag not in self._marks.values() \
                and not any(c[0] == tag for c in self._chunks):
            self._finished.discard(tag)
            self._sent.discard(tag)
            log.debug("twilio call %s: reply %s played", self.id, tag)

    def _next_chunk(self) -> list[Any] | None:
        return next((c for c in self._chunks if c[0] not in self._paused), None)

    async def _play(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while self._control:
                await self.ws.send_str(self._control.popleft())
            chunk = self._next_chunk()
            wait = None if chunk is None else self._played_until - LEAD_MS / 1000 - loop.time()
            if wait is None or wait > 0:  # nothing to send, or Twilio holds enough: until woken or due
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), wait)
                except TimeoutError:
                    pass
                continue
            assert chunk is not None
            self._chunks.remove(chunk)
            tag, audio, on_sent = chunk
            self._sent.add(tag)
            for i in range(0, len(audio), FRAME_BYTES):
                await self.ws.send_str(tw.media(self.stream_sid, audio[i:i + FRAME_BYTES]))
                if on_sent is not None:
                    on_sent(now_ns())
                    on_sent = None
            self._mark_ids += 1
            name = f"{tag}.{self._mark_ids}"
            self._marks[name] = tag
            await self.ws.send_str(tw.mark(self.stream_sid, name))
            self._played_until = max(loop.time(), self._played_until) + len(audio) / tw.SAMPLE_RATE

    async def refer(self, target_uri: str) -> str:
        """The call's TwiML becomes ``<Dial>`` the target, through Twilio's REST API (app/telephony/twilio_rest.py);
        returns the call's status as Twilio says it. Twilio then stops the stream, which ends this call."""
        from sub250.telephony import twilio_rest

        token, api_url = self._rest
        if not token or not self.start_message.account_sid:
            raise TransferRefused("this call's Twilio account is not known")
        return await twilio_rest.dial(self.start_message.account_sid, token, self.call_sid, target_uri,
                                      api_url=api_url)

    async def hang_up(self) -> None:
        if not self.ws.closed:
            await self.ws.close()


async def messages(ws: web.WebSocketResponse, call: str = "-", admit: Callable[[str | bytes], str | None] | None = None
                   ) -> AsyncGenerator[tuple[tw.Message, int], None]:
    """Twilio's messages off ``ws``, each with when its frame was read, until the socket closes. A frame that is not
    one, or that ``admit`` refuses (it says why), is logged and dropped."""
    while True:
        msg = await ws.receive()
        received = now_ns()
        if msg.type in WS_DONE:
            return
        if msg.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
            continue
        why = admit(msg.data) if admit is not None else None
        if why is not None:
            bad_frame(why, call)
            continue
        try:
            parsed = tw.parse(msg.data)
        except tw.StreamError as exc:
            bad_frame(str(exc), call)
            continue
        yield parsed, received


def bad_frame(why: str, call: str = "-") -> None:
    prometheus.TELEPHONY_BAD_FRAMES.inc()
    log.warning("twilio stream %s: frame dropped: %s", call, why)
