"""RealtimeSession: the conductor of one conversation.

It routes client events through a handler table, feeds caller audio through the input buffer, Silero VAD and
the endpointer, and carries out what its parts decide: the pause policy (what a silence means), the arbiter (a
sound over the reply: words, or a cough?), speculation (the reply held at the first pause), the response slot
(:mod:`~sub250.session.responses`), listening (partials, retrieval ahead) and the conversation. It is the only
place they meet; they never call back into it. The caller's state is one :class:`~sub250.session.caller.Caller`.
Wire shapes come from :mod:`app.protocol.server_events`; CPU-heavy work runs on the engines' threads.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sub250 import logs
from sub250.metrics.timeline import now_ns
from sub250.protocol import server_events as ev
from sub250.protocol.events import ClientEvent, ProtocolError, new_id
from sub250.protocol.session_config import SessionConfig
from sub250.session import items
from sub250.session.caller import Caller
from sub250.session.conversation import Conversation
from sub250.session.engines import Engines
from sub250.session.input_buffer import InputBuffer
from sub250.session.output import AsConfigured, Transport
from sub250.session.recognition import AudioRecognition
from sub250.session.reply import Reply
from sub250.session.responses import Responses
from sub250.session.stats import SessionStats
from sub250.session.transcription import Transcriptions
from sub250.session.tuning import PipelineTuning
from sub250.tasks import TaskSet

log = logging.getLogger(__name__)

Handler = Callable[[ClientEvent, int], Awaitable[None]]


class RealtimeSession:
    def __init__(self, stack: Engines, transport: Transport, *, config: SessionConfig | None = None,
                 model: str | None = None) -> None:
        """``stack``: the engines (:class:`app.stack.Stack`); ``model``: the name the client asked for
        (``?model=``), default the profile's served name."""
        self.stack = stack
        self.tuning = PipelineTuning.from_profile(stack.profile, stack.about)
        self.config = config or SessionConfig(id=new_id("sess"), model=model or self.tuning.served_name,
                                              instructions=self.tuning.instructions)
        #: Everything leaves through here, as the client configured it (``include``, the output format).
        self.transport: AsConfigured = AsConfigured(transport, lambda: self.config)
        self.conversation = Conversation()
        self.stats = SessionStats(session_id=self.config.id)
        self.tasks = TaskSet()
        self._gateway_ms: float | None = None
        #: The caller's audio in windows, and the caller's state: the caller's side and the response slot read both.
        self.input, self.caller = InputBuffer(), Caller()
        #: The response slot: starts replies, answers response.create / cancel, nudges a long-silent caller.
        self.responses = Responses(stack, self.transport, self.conversation, self.stats, self.tasks,
                                   input=self.input, caller=self.caller, config=lambda: self.config,
                                   tuning=lambda: self.tuning)
        self.transcriptions = Transcriptions(stack.asr, self.transport, self.conversation)
        #: The caller's side: audio in, turns out (turn detection, pauses, interruptions, speculation).
        self.recognition = AudioRecognition(stack, self.transport, self.conversation, self.stats, self.tasks,
                                            input=self.input, caller=self.caller, responses=self.responses,
                                            transcriptions=self.transcriptions, config=lambda: self.config,
                                            tuning=lambda: self.tuning, gateway_ms=lambda: self._gateway_ms)
        self._handlers: dict[str, Handler] = {  # every client event type this server implements
            "session.update": self._on_session_update, "input_audio_buffer.append": self._on_buffer_append,
            "input_audio_buffer.commit": self._on_buffer_commit, "input_audio_buffer.clear": self._on_buffer_clear,
            "conversation.item.create": self._items(items.create),
            "conversation.item.delete": self._items(items.delete),
            "conversation.item.retrieve": self._items(items.retrieve),
            "conversation.item.truncate": self._items(items.truncate),
            "output_audio_buffer.clear": self._on_output_audio_clear,
            "response.create": self._on_response_create, "response.cancel": self._on_response_cancel}

    @property
    def in_flight(self) -> bool:
        """A turn is under way: the caller is speaking (or a sound over the reply is being checked), a transcript
        is being made, or a reply holds the response slot. A server that drains waits for this to end."""
        return self.reply is not None or self.recognition.busy or self.transcriptions.pending > 0

    @property
    def reply(self) -> Reply | None:
        """The reply holding the session's one response slot (held or live), if any."""
        return self.responses.current

    @property
    def rate_limits(self) -> Callable[[], list[dict[str, Any]]] | None:
        """The key's limits now (``KeyLimiter.rate_limits``), set by the transport: each response begins with a
        ``rate_limits.updated``; None (no gateway, e.g. tests): none is sent."""
        return self.responses.rate_limits

    @rate_limits.setter
    def rate_limits(self, limits: Callable[[], list[dict[str, Any]]] | None) -> None:
        self.responses.rate_limits = limits

    def start(self) -> None:
        self.transport.send(ev.session_created(self.config))

    # --- events in -----------------------------------------------------------------------------------

    async def handle(self, event: ClientEvent, received_ns: int) -> None:
        """Dispatch one parsed client event. ``received_ns``: when its frame was read off the socket."""
        self._gateway_ms = (now_ns() - received_ns) / 1e6
        logs.SESSION_ID.set(self.config.id)  # for the rest of the transport's task, and the tasks it starts
        handler = self._handlers.get(event.type)
        if handler is None:
            self.error(ProtocolError("unsupported_event", f"{event.type!r} is not supported by this server",
                                     param="type", event_id=event.event_id))
            return
        await self._guarded(handler(event, received_ns), event.event_id)

    async def handle_audio(self, pcm16: bytes, rate: int, received_ns: int) -> None:
        """Caller audio from a media track (WebRTC), PCM16 mono at ``rate``: the same path as
        ``input_audio_buffer.append``."""
        self._gateway_ms = (now_ns() - received_ns) / 1e6
        logs.SESSION_ID.set(self.config.id)
        await self._guarded(self.recognition.ingest(pcm16, rate, received_ns), None)

    def dtmf(self, digit: str, received_ns: int) -> None:
        """A key pressed on the caller's phone (a telephony transport): ``input_audio_buffer.dtmf_event_received``;
        what the keys mean to the conversation is the telephony transport's (app/telephony/keypad.py)."""
        self._gateway_ms = (now_ns() - received_ns) / 1e6
        self.transport.send(ev.dtmf_received(digit, int(time.time())))

    async def _guarded(self, work: Awaitable[None], event_id: str | None) -> None:
        """A client mistake gets its ``error``; a fault of ours gets a generic one (details in the log, under
        the id the client sees). Either way the session goes on."""
        try:
            await work
        except ProtocolError as err:
            err.event_id = err.event_id or event_id
            self.error(err)
        except Exception:
            error_id = new_id("err")
            log.exception("session %s: handling an event failed (error id %s)", self.config.id, error_id)
            self.error(ProtocolError("server_error", f"internal error (error id {error_id})", event_id=event_id,
                                     type="server_error"))

    def error(self, err: ProtocolError) -> None:
        self.stats.errors += 1
        self.transport.send(ev.error(err))

    async def _on_session_update(self, event: ClientEvent, received_ns: int) -> None:
        self.configure(event.session or {}, event.event_id)
        self.responses.idle.disarm()  # the next response arms it with the new settings
        self.transport.send(ev.session_updated(self.config))

    def configure(self, session: Any, event_id: str | None = None) -> None:
        """Apply a ``session`` object (``session.update``'s, or the one a WebRTC call or client secret was
        created with); ProtocolError on the first bad field, and then nothing changes."""
        config = self.config.updated(session, event_id)
        td = config.turn_detection
        if td is not None and td.type == "semantic_vad" and self.stack.end_of_turn is None:
            raise ProtocolError("invalid_value", "semantic_vad needs an end-of-turn model, and this server's "
                                f"profile {self.stack.profile.name!r} has none ([turn]): use server_vad",
                                param="session.audio.input.turn_detection.type", event_id=event_id)
        self.config = config
        self.recognition.configure(config)

    def input_seconds(self, nbytes: int) -> float:
        """How long ``nbytes`` of caller audio in the session's input format last (the gateway's audio limit)."""
        return self.config.input_format.seconds(nbytes)

    async def _on_buffer_append(self, event: ClientEvent, received_ns: int) -> None:
        fmt = self.config.input_format
        if len(event.audio) % fmt.sample_bytes:
            raise ProtocolError("invalid_audio", f"PCM16 audio needs an even number of bytes, got {len(event.audio)}",
                                param="audio", event_id=event.event_id)
        await self.recognition.ingest(fmt.decode(event.audio), fmt.rate, received_ns)

    async def _on_buffer_commit(self, event: ClientEvent, received_ns: int) -> None:
        self.recognition.commit(received_ns)

    async def _on_buffer_clear(self, event: ClientEvent, received_ns: int) -> None:
        self.recognition.clear()

    async def _on_output_audio_clear(self, event: ClientEvent, received_ns: int) -> None:
        self.responses.clear_audio()

    # --- the conversation (app/session/items.py) -------------------------------------------------------

    def _items(self, apply: Callable[[Conversation, ClientEvent, int], list[dict[str, Any]]]) -> Handler:
        async def on_event(event: ClientEvent, received_ns: int) -> None:
            for out in apply(self.conversation, event, received_ns):
                self.transport.send(out)
        return on_event

    # --- replies -------------------------------------------------------------------------------------

    async def _on_response_create(self, event: ClientEvent, received_ns: int) -> None:
        turn, options = self.responses.requested(event, received_ns, self._gateway_ms)
        self.responses.start(turn, options=options)

    async def _on_response_cancel(self, event: ClientEvent, received_ns: int) -> None:
        self.responses.cancel(event)

    # --- teardown ------------------------------------------------------------------------------------

    async def close(self) -> None:
        """The connection is gone: stop everything this session started (replies abort their engine
        requests; transcriptions, partials and RTT probes end)."""
        self.responses.idle.disarm()
        await self.tasks.cancel_all()
