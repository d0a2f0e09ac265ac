"""What every phone call is, whatever carries it (a Twilio stream, a SIP call): one normal session, with no one
reading its events.

:class:`PhoneCall` owns the session and the call's inbox (caller audio, keys, and the carrier's own messages,
handled one at a time in arrival order), and does what only a phone needs:

- the session's events have no reader: an ``error`` is logged, and so is each turn's final latency report, which
  the call also keeps (:attr:`PhoneCall.turns`: the ledger a WebSocket client would get);
- a key pressed is ``input_audio_buffer.dtmf_event_received``, and the keys gather into an entry
  (app/telephony/keypad.py) that reaches the conversation as the caller's words, with a response;
- an app may follow and steer the call (app/telephony/control.py: ``/v1/realtime?call_id=``): every event goes to
  its sockets too, and its events reach the session through the call's inbox, in order with the caller's audio;
- the call ends once (:meth:`PhoneCall.close_soon`): the session and every task of the call stop, the carrier
  hangs up (:meth:`PhoneCall.hang_up`), the call's slot is freed.

A carrier subclasses it: it feeds :meth:`PhoneCall.heard` and :meth:`PhoneCall.pressed`, handles its own
messages (:meth:`PhoneCall.handle`) and plays the reply's audio (the session's ``Transport`` methods).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from sub250.gateway import KeyLimiter, Principal
from sub250.metrics import prometheus
from sub250.metrics.timeline import now_ns
from sub250.protocol import new_id
from sub250.tasks import TaskSet
from sub250.telephony import keypad as keys
from sub250.transport import dispatch

log = logging.getLogger(__name__)

#: The final latency reports a call keeps (its latest turns).
KEPT_TURNS = 32
#: Frames and keys read but not handled yet (a phone sends 50 frames a second).
INBOX_FRAMES = 64
#: Every phone call's session asks for its turns' ledgers.
PHONE_INCLUDE = ["sub250.latency"]


class TransferRefused(Exception):
    """The carrier did not take a transfer (its words)."""


class PhoneCall:
    """One call's session and inbox. ``kind``: the carrier (``twilio``, ``sip``: ids, logs, metrics)."""

    def __init__(self, kind: str, principal: Principal, shared: Any, limiter: KeyLimiter, *,
                 session: dict[str, Any], on_closed: Callable[[Any], None] | None = None) -> None:
        self.kind, self.id = kind, new_id(kind[:3])
        self.principal, self.limiter = principal, limiter
        self._on_closed = on_closed
        self.keypad = keys.Keypad()
        #: The call's latest final ``sub250.turn.latency`` reports.
        self.turns: deque[dict[str, Any]] = deque(maxlen=KEPT_TURNS)
        self._entry_timer: asyncio.TimerHandle | None = None
        self._inbox: asyncio.Queue[tuple[str, Any, int]] = asyncio.Queue(INBOX_FRAMES)
        self._tasks = TaskSet(on_error=self._task_failed)
        self._closing: asyncio.Task[None] | None = None
        self._started = False
        self.closed = asyncio.Event()
        #: The apps that control the call (``/v1/realtime?call_id=``, app/telephony/control.py): each gets the
        #: events it asked for.
        self.listeners: set[Any] = set()
        #: The additions the call's session always includes, whatever an app's ``include`` says.
        self.own_include = tuple(PHONE_INCLUDE)
        self.session = dispatch.session_for(shared, self, None, principal, limiter)
        self.session.configure({"type": "realtime", **session, "include": PHONE_INCLUDE})

    # --- events: no reader ---------------------------------------------------------------------------

    def send(self, event: dict[str, Any], *, tag: str | None = None,
             on_sent: Callable[[int], None] | None = None) -> None:
        """An error is logged, and each turn's final latency report (kept in :attr:`turns`); ``on_sent`` runs
        (it is "sent" now). At ``input_audio_buffer.speech_started`` what is still to be heard of any reply is
        cleared, as a client stops its playback then (the event comes once the speech is sure:
        app/session/interruption.py). Without it a reply the session had finished kept playing over the caller
        and the next reply waited behind it (§46, §47: ``jfk.wav``'s last turn heard 9.3 s late)."""
        kind = event.get("type")
        for listener in self.listeners:
            listener.send(event, tag=tag)
        if kind == "input_audio_buffer.speech_started" and self.playing:
            self.clear_audio(None)
        if kind == "error":
            err = event.get("error") or {}
            log.warning("%s call %s: %s: %s", self.kind, self.id, err.get("code"), err.get("message"))
        elif kind == "sub250.turn.latency" and event.get("final"):
            self.turns.append(event)
            beside, spans = event.get("beside") or {}, event.get("spans") or {}
            log.info("%s call %s: turn %s %s: voice_to_voice %s ms, ttft %s ms", self.kind, self.id,
                     event.get("turn_id"), event.get("outcome"), beside.get("voice_to_voice"), spans.get("ttft"))
        if on_sent is not None:
            asyncio.get_running_loop().call_soon(on_sent, now_ns())

    async def measure_rtt(self) -> float | None:
        """Unknown unless the carrier says (the round trip that matters is the phone network's)."""
        return None

    # --- in ------------------------------------------------------------------------------------------

    def start(self) -> None:
        """The call is up: its session starts, its inbox is read."""
        prometheus.SESSIONS_OPEN.labels(transport=self.kind).inc()
        self._started = True
        self.session.start()
        self._tasks.spawn(self._dispatch())

    async def heard(self, pcm16: bytes, rate: int, received_ns: int) -> None:
        """Caller audio, PCM16 mono at ``rate`` (waits while the inbox is full)."""
        await self._inbox.put(("audio", (pcm16, rate), received_ns))

    def heard_nowait(self, pcm16: bytes, rate: int, received_ns: int) -> bool:
        """:meth:`heard` from a carrier that cannot wait (a media clock); False: the inbox is full, dropped."""
        try:
            self._inbox.put_nowait(("audio", (pcm16, rate), received_ns))
        except asyncio.QueueFull:
            return False
        return True

    def pressed(self, digit: str, received_ns: int) -> None:
        """A key on the caller's phone: its event now, and the entry it ends (``#``) or the wait for the next."""
        self.session.dtmf(digit, received_ns)
        if self._entry_timer is not None:
            self._entry_timer.cancel()
            self._entry_timer = None
        entry = self.keypad.press(digit)
        if entry is not None:
            self._enqueue("entry", entry, received_ns)
        elif self.keypad.pending:
            self._entry_timer = asyncio.get_running_loop().call_later(keys.ENTRY_IDLE_S, self._entry_idle)

    async def control(self, event: Any, received_ns: int) -> None:
        """A parsed client event from an app that controls the call, for the session in arrival order."""
        await self._inbox.put(("event", event, received_ns))

    async def message(self, item: Any, received_ns: int) -> None:
        """One of the carrier's own messages, for :meth:`handle` in arrival order."""
        await self._inbox.put(("message", item, received_ns))

    async def handle(self, item: Any, received_ns: int) -> None:
        """A carrier's message (see :meth:`message`)."""

    def _enqueue(self, kind: str, item: Any, received_ns: int) -> None:
        try:
            self._inbox.put_nowait((kind, item, received_ns))
        except asyncio.QueueFull:
            self._tasks.spawn(self._inbox.put((kind, item, received_ns)))

    def _entry_idle(self) -> None:
        self._entry_timer = None
        entry = self.keypad.finish()
        if entry is not None and not self.closing:
            self._enqueue("entry", entry, now_ns())

    async def _dispatch(self) -> None:
        while True:
            kind, item, received = await self._inbox.get()
            try:
                if kind == "audio":
                    await self.session.handle_audio(item[0], item[1], received)
                elif kind == "entry":
                    await self._keyed_in(item, received)
                elif kind == "event":
                    await self.session.handle(item, received)
                else:
                    await self.handle(item, received)
            except Exception:  # a bug in one frame must not end the call: logged with an id
                dispatch.internal_error(log, "%s call %s: failed to handle %s", self.kind, self.id, kind)

    async def _keyed_in(self, entry: str, received: int) -> None:
        """The keyed-in entry is the caller's words: a user message, then a response to it - one that calls the
        session's ``keypad_tool`` when it has one among its tools (``session.sub250.keypad_tool``)."""
        tool = keys.keypad_tool(self.session.config)
        log.info("%s call %s: keyed in %d keys%s", self.kind, self.id, len(entry), f" for {tool}" if tool else "")
        item = {"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": keys.as_words(entry)}]}}
        respond: dict[str, Any] = {"type": "response.create"}
        if tool:
            respond["response"] = {"tool_choice": {"type": "function", "name": tool}}
        for event in (item, respond):
            await dispatch.handle_message(self.session, self.limiter, self.principal, json.dumps(event), received)

    # --- the end -------------------------------------------------------------------------------------

    @property
    def closing(self) -> bool:
        return self._closing is not None

    @property
    def playing(self) -> bool:
        """Reply audio is still to be heard (the carrier says)."""
        return False

    def clear_audio(self, response_id: str | None) -> bool:
        """What is still to be heard of the reply (of every reply with None) goes (the carrier's)."""
        return False

    async def refer(self, target_uri: str) -> str:
        """Hand the caller to ``target_uri`` (``sip:…`` or ``tel:+…``): returns once the carrier took the transfer
        (what it said), raises :class:`TransferRefused` when it did not. The call ends when the caller is through."""
        raise TransferRefused(f"{self.kind} calls cannot be transferred")

    @property
    def idle(self) -> bool:
        return not self.session.in_flight and not self.playing

    def spawn(self, coro: Any) -> asyncio.Task:
        """A task of the call's: cancelled when it ends; one that fails ends the call."""
        return self._tasks.spawn(coro)

    def _task_failed(self, exc: BaseException) -> None:
        if not isinstance(exc, ConnectionError):
            log.error("%s call %s failed", self.kind, self.id, exc_info=exc)
        self.close_soon(f"transport error: {type(exc).__name__}")

    def close_soon(self, reason: str) -> None:
        if self._closing is None:
            log.info("%s call %s: closing (%s)", self.kind, self.id, reason)
            self._closing = asyncio.ensure_future(self._close())

    async def close(self, reason: str = "closed by the server") -> None:
        self.close_soon(reason)
        await self.closed.wait()

    async def hang_up(self) -> None:
        """The carrier's part of the end (close the stream, send BYE)."""

    async def _close(self) -> None:
        try:
            if self._entry_timer is not None:
                self._entry_timer.cancel()
            await self.session.close()
            await self._tasks.cancel_all()
            await self.hang_up()
        finally:
            if self._started:
                prometheus.SESSIONS_OPEN.labels(transport=self.kind).dec()
            if self._on_closed is not None:
                self._on_closed(self)
            self.closed.set()
