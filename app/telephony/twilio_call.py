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
  a paused reply (a suspected interruption) take effect within that much audio. The session's other events have
  no reader on a phone: errors go to the log, and so does each turn's latency ledger (kept in ``turns``).

A frame that is not a Twilio message we can use is logged and dropped (``sub250_telephony_bad_frames_total``);
the call goes on. The call ends - its session stopped, its slot freed - at ``stop``, when Twilio closes the
socket, or when the server closes it (drain, shutdown, ``/v1/realtime/calls/{id}/hangup``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from aiohttp import WSMsgType, web

from sub250.audio.formats import PCMU
from sub250.gateway import KeyLimiter, Principal
from sub250.metrics import prometheus
from sub250.metrics.timeline import now_ns
from sub250.protocol import new_id
from sub250.tasks import TaskSet
from sub250.telephony import keypad as keys
from sub250.telephony import twilio_messages as tw
from sub250.transport import dispatch

log = logging.getLogger(__name__)

#: Twilio sends ``start`` right after ``connected``; a socket without a valid one by then is closed.
START_TIMEOUT_S = 10.0
#: How far ahead of Twilio's playback the reply's audio is sent.
LEAD_MS = 200
FRAME_BYTES = tw.SAMPLE_RATE * 20 // 1000  # 20 ms of μ-law
#: Frames read but not handled yet (Twilio sends 50 a second).
INBOX_FRAMES = 64
#: The session every phone call starts with: G.711 μ-law both ways (what Twilio streams).
PHONE_SESSION = {"type": "realtime", "audio": {"input": {"format": {"type": "audio/pcmu"}},
                                               "output": {"format": {"type": "audio/pcmu"}}},
                 "include": ["sub250.latency"]}  # each turn's ledger: logged, and kept (:attr:`TwilioCall.turns`)
#: The final latency reports a call keeps (its latest turns).
KEPT_TURNS = 32


class TwilioCall:
    """The session's transport for one Twilio stream (the ``Transport`` of app/session/output.py)."""

    audio_in_events = True  # reply audio comes in the session's output format (μ-law) and leaves as ``media``

    def __init__(self, ws: web.WebSocketResponse, start: tw.Start, principal: Principal, shared: Any,
                 limiter: KeyLimiter, *, on_closed: Callable[[TwilioCall], None] | None = None) -> None:
        self.id = new_id("tw")
        self.ws, self.start, self.principal, self.limiter = ws, start, principal, limiter
        self.stream_sid = start.stream_sid
        self._on_closed = on_closed
        self._chunks: deque[list[Any]] = deque()  # [response id, μ-law bytes, on_sent | None]
        self._paused: set[str] = set()
        self._finished: set[str] = set()
        self._marks: dict[str, str] = {}  # mark name -> response id, sent and not played yet
        self._sent: set[str] = set()  # replies some audio of which Twilio was sent
        self._control: deque[str] = deque()  # ``clear`` messages, sent before any more media
        self._wake = asyncio.Event()
        self._mark_ids = 0
        self._played_until = 0.0  # loop time at which Twilio will have played all we sent
        self.keypad = keys.Keypad()
        #: The call's latest final ``sub250.turn.latency`` reports (the ledger a WebSocket client would get).
        self.turns: deque[dict[str, Any]] = deque(maxlen=KEPT_TURNS)
        self._entry_timer: asyncio.TimerHandle | None = None
        self._inbox: asyncio.Queue[tuple[str, Any, int]] = asyncio.Queue(INBOX_FRAMES)
        self._tasks = TaskSet(on_error=self._task_failed)
        self._closing: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()
        self.session = dispatch.session_for(shared, self, None, principal, limiter)
        self.session.configure(PHONE_SESSION)

    # --- the session's transport ---------------------------------------------------------------------

    def send(self, event: dict[str, Any], *, tag: str | None = None,
             on_sent: Callable[[int], None] | None = None) -> None:
        """No one reads events on a phone: an error is logged, and each turn's final latency report (kept in
        :attr:`turns`); ``on_sent`` runs (it is "sent" now)."""
        kind = event.get("type")
        if kind == "error":
            err = event.get("error") or {}
            log.warning("twilio call %s: %s: %s", self.id, err.get("code"), err.get("message"))
        elif kind == "sub250.turn.latency" and event.get("final"):
            self.turns.append(event)
            beside, spans = event.get("beside") or {}, event.get("spans") or {}
            log.info("twilio call %s: turn %s %s: voice_to_voice %s ms, ttft %s ms", self.id, event.get("turn_id"),
                     event.get("outcome"), beside.get("voice_to_voice"), spans.get("ttft"))
        if on_sent is not None:
            asyncio.get_running_loop().call_soon(on_sent, now_ns())

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
        before = len(self._chunks)
        self._chunks = deque(c for c in self._chunks if c[0] != tag)
        self._paused.discard(tag)
        self._finished.discard(tag)
        if tag in self._sent:  # some of it may still be in Twilio's buffer (a paused reply's chunk in hand)
            self._sent.discard(tag)
            self._clear()
        return before - len(self._chunks)

    def pause_audio(self, response_id: str, paused: bool) -> None:
        """No more of the reply is sent while paused (what Twilio buffered, at most :data:`LEAD_MS` and the
        chunk in hand, plays on)."""
        if paused:
            self._paused.add(response_id)
        else:
            self._paused.discard(response_id)
            self._wake.set()

    def clear_audio(self, response_id: str | None) -> bool:
        tags = {response_id} if response_id else {c[0] for c in self._chunks} | self._sent
        for tag in tags:
            self.purge(tag)
        if response_id is None:
            self._clear()
        return True

    async def measure_rtt(self) -> float | None:
        """Unknown: the round trip that matters is Twilio's to the phone, which the stream does not tell."""
        return None

    # --- running -------------------------------------------------------------------------------------

    @property
    def closing(self) -> bool:
        return self._closing is not None

    @property
    def playing(self) -> bool:
        """Reply audio is queued here or sent and not yet played by Twilio."""
        return bool(self._chunks) or bool(self._marks)

    @property
    def idle(self) -> bool:
        return not self.session.in_flight and not self.playing

    async def run(self) -> None:
        """The call, from its ``start`` to its end."""
        prometheus.SESSIONS_OPEN.labels(transport="twilio").inc()
        try:
            self.session.start()
            log.info("twilio call %s: stream %s of call %s", self.id, self.stream_sid, self.start.call_sid)
            self._tasks.spawn(self._dispatch())
            self._tasks.spawn(self._play())
            await self._read()
        finally:
            self.close_soon("stream ended")
            await self.closed.wait()

    async def _read(self) -> None:
        while True:
            msg = await self.ws.receive()
            received = now_ns()
            if msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return
            if msg.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                continue
            refusal = self.limiter.check_message(self.principal.key_id, len(msg.data))
            if refusal is not None:
                bad_frame(f"refused by the gateway: {refusal.message}", self.id)
                continue
            try:
                parsed = tw.parse(msg.data)
            except tw.StreamError as exc:
                bad_frame(str(exc), self.id)
                continue
            if isinstance(parsed, tw.Stop):
                log.info("twilio call %s: stop", self.id)
                return
            await self._inbox.put(("message", parsed, received))

    async def _dispatch(self) -> None:
        while True:
            kind, item, received = await self._inbox.get()
            try:
                if kind == "entry":
                    await self._keyed_in(item, received)
                elif isinstance(item, tw.Media):
                    await self._media(item, received)
                elif isinstance(item, tw.Dtmf):
                    self._dtmf(item.digit, received)
                elif isinstance(item, tw.Mark):
                    self._played(item.name)
                elif isinstance(item, tw.Start):
                    bad_frame("a second start on one stream", self.id)
            except Exception:  # a bug in one frame must not end the call: logged with an id
                dispatch.internal_error(log, "twilio call %s: failed to handle %s", self.id, type(item).__name__)

    async def _media(self, media: tw.Media, received: int) -> None:
        if media.track not in ("inbound", "inbound_track"):
            return  # our own audio, when a stream carries both tracks
        refusal = self.limiter.check_audio(self.principal.key_id, len(media.payload) / tw.SAMPLE_RATE)
        if refusal is not None:
            bad_frame(f"refused by the gateway: {refusal.message}", self.id)
            return
        await self.session.handle_audio(PCMU.decode(media.payload), tw.SAMPLE_RATE, received)

    def _dtmf(self, digit: str, received: int) -> None:
        self.session.dtmf(digit, received)
        if self._entry_timer is not None:
            self._entry_timer.cancel()
            self._entry_timer = None
        entry = self.keypad.press(digit)
        if entry is not None:
            self._inbox.put_nowait(("entry", entry, received))
        elif self.keypad.pending:
            self._entry_timer = asyncio.get_running_loop().call_later(keys.ENTRY_IDLE_S, self._entry_idle)

    def _entry_idle(self) -> None:
        self._entry_timer = None
        entry = self.keypad.finish()
        if entry is not None and not self.closing:
            self._inbox.put_nowait(("entry", entry, now_ns()))

    async def _keyed_in(self, entry: str, received: int) -> None:
        """The keyed-in entry is the caller's words: a user message, then a response to it."""
        log.info("twilio call %s: keyed in %d keys", self.id, len(entry))
        item = {"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": keys.as_words(entry)}]}}
        for event in (item, {"type": "response.create"}):
            await dispatch.handle_message(self.session, self.limiter, self.principal, json.dumps(event), received)

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

    # --- teardown ------------------------------------------------------------------------------------

    def _task_failed(self, exc: BaseException) -> None:
        if not isinstance(exc, ConnectionError):
            log.error("twilio call %s failed", self.id, exc_info=exc)
        self.close_soon(f"transport error: {type(exc).__name__}")

    def close_soon(self, reason: str) -> None:
        if self._closing is None:
            log.info("twilio call %s: closing (%s)", self.id, reason)
            self._closing = asyncio.ensure_future(self._close())

    async def close(self, reason: str = "closed by the server") -> None:
        self.close_soon(reason)
        await self.closed.wait()

    async def _close(self) -> None:
        try:
            if self._entry_timer is not None:
                self._entry_timer.cancel()
            await self.session.close()
            await self._tasks.cancel_all()
            if not self.ws.closed:
                await self.ws.close()
        finally:
            prometheus.SESSIONS_OPEN.labels(transport="twilio").dec()
            if self._on_closed is not None:
                self._on_closed(self)
            self.closed.set()


def bad_frame(why: str, call: str = "-") -> None:
    prometheus.TELEPHONY_BAD_FRAMES.inc()
    log.warning("twilio stream %s: frame dropped: %s", call, why)
