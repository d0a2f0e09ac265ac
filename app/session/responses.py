"""The session's one response slot: the one place a reply is wired to the stages, what ``response.create`` and
``response.cancel`` ask of it, and the nudge after the caller's long silence (``idle_timeout_ms``). It returns
what it starts or decides; the session conducts the rest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sub250.metrics.timeline import now_ns
from sub250.protocol import server_events as ev
from sub250.protocol.events import ClientEvent, ProtocolError, new_id
from sub250.protocol.session_config import SessionConfig
from sub250.session import stages
from sub250.session.caller import Caller
from sub250.session.conversation import Conversation, Item
from sub250.session.engines import Engines
from sub250.session.idle import IdleTimer, nudge_after
from sub250.session.input_buffer import InputBuffer
from sub250.session.output import AsConfigured, ReplyOutput
from sub250.session.reply import Reply
from sub250.session.reply_context import ReplyContext, ReplyOptions
from sub250.session.stats import SessionStats
from sub250.session.tuning import PipelineTuning
from sub250.session.turn import UserTurn
from sub250.tasks import TaskSet


class Responses:
    def __init__(self, stack: Engines, transport: AsConfigured, conversation: Conversation, stats: SessionStats,
                 tasks: TaskSet, *, input: InputBuffer, caller: Caller, config: Callable[[], SessionConfig],
                 tuning: Callable[[], PipelineTuning]) -> None:
        """``input``, ``caller``: the session's (a nudge is for a caller who is silent); ``config``, ``tuning``:
        the session's now (either may be replaced)."""
        self.stack, self.transport, self.conversation, self.stats = stack, transport, conversation, stats
        self.input, self.caller, self._config, self._tuning = input, caller, config, tuning
        self._spawn = tasks.spawn
        #: The idle timer (``turn_detection.idle_timeout_ms``), armed when a response's audio will have played.
        self.idle = IdleTimer()
        #: The last reply started (it may have finished).
        self.latest: Reply | None = None
        #: The key's limits now (``KeyLimiter.rate_limits``), set by the transport: each response begins with
        #: a ``rate_limits.updated``; None (no gateway, e.g. tests): none is sent.
        self.rate_limits: Callable[[], list[dict[str, Any]]] | None = None

    @property
    def current(self) -> Reply | None:
        """The reply holding the slot (held or live), if any."""
        return self.latest if self.latest is not None and self.latest.active else None

    def start(self, turn: UserTurn, *, audio: np.ndarray | None = None, held: bool = False,
              options: ReplyOptions | None = None, idle: bool = False) -> Reply:
        """A reply to ``turn`` takes the slot (a reply holding it is cancelled). ``held``: speculative, nothing
        sent until adopted; ``idle``: the nudge after the caller's long silence."""
        if self.current is not None:
            self.current.cancel("turn_detected")
        self.idle.disarm()
        config = self._config()
        context = ReplyContext(self.stack, self._tuning(), self.conversation, self.stats, config.id)
        output = ReplyOutput(self.transport, new_id("resp"), new_id("item"), held=held)
        self.latest = reply = Reply(context, turn, options or ReplyOptions.resolve(config), output, audio=audio,
                                    started_ns=now_ns(), idle=idle)
        reply.start(self._spawn)
        self._spawn(self._after(reply))
        if self.rate_limits is not None:
            output.send(ev.rate_limits_updated(self.rate_limits()), keep=True)  # held with a held reply
        return reply

    # --- the caller's long silence (turn_detection.idle_timeout_ms) ------------------------------------

    async def _after(self, reply: Reply) -> None:
        """Once ``reply`` is finished, the caller's silence is timed (``idle.nudge_after``)."""
        await reply.finished.wait()
        config = self._config()
        delay_s = nudge_after(config.turn_detection, reply, transcription_only=config.transcription_only)
        if delay_s is not None and reply is self.latest:
            self.idle.arm(delay_s, self.input.ms(self.input.end), self._idle_timeout)

    def _idle_timeout(self) -> None:
        if self.current is not None or self.caller.turn is not None:
            return  # something is going on after all
        item_id = new_id("item")
        self.transport.send(ev.timeout_triggered(item_id, self.idle.from_ms, self.input.ms(self.input.end)))
        turn = UserTurn.new(item_id, transcript="")
        turn.timeline.mark("turn_commit")
        item = Item(item_id, "user", "input_audio", "")
        self.transport.send(ev.item_added(item.to_wire(), self.conversation.add(item)))
        self.start(turn, idle=True)

    # --- what the client asks -----------------------------------------------------------------------

    def requested(self, event: ClientEvent, received_ns: int,
                  gateway_ms: float | None) -> tuple[UserTurn, ReplyOptions]:
        """``response.create``: the turn (the last user message) and the options of the reply it asks for;
        ProtocolError when none can be made."""
        config = self._config()
        if config.transcription_only:
            raise ProtocolError("unsupported_event", "a transcription session makes no responses (session.type "
                                "is 'transcription')", param="type")
        if self.current is not None:
            raise ProtocolError("conversation_already_has_active_response",
                                "a response is in progress; cancel it first (response.cancel)")
        options = ReplyOptions.resolve(config, event.response)  # before anything starts: may refuse
        last = self.conversation.last_user_text()
        if last is None:
            raise ProtocolError("no_user_input", "there is no user message to respond to")
        turn = UserTurn.new(last[0], transcript=last[1])
        turn.timeline.mark("turn_commit", received_ns)  # the client's commit event
        turn.timeline.mark("asr_final", received_ns)    # text needs no recognition
        if gateway_ms is not None:
            turn.timeline.measured["gateway"] = gateway_ms
        turn.rtt = self._spawn(stages.measure_rtt(self.transport, turn.timeline))
        return turn, options

    def cancel(self, event: ClientEvent) -> None:
        """``response.cancel``: of the reply in progress (the one named, if any)."""
        rid, reply = event.response_id, self.current
        if reply is None or (rid and rid != reply.id):
            raise ProtocolError("response_not_found", "no response in progress to cancel", param="response_id")
        reply.cancel("client_cancelled")

    def clear_audio(self) -> None:
        """``output_audio_buffer.clear`` (WebRTC): stop the reply audio still queued on the track (the API expects
        a ``response.cancel`` first to stop the generation as well)."""
        if not self.transport.clear_audio(self.latest.id if self.latest is not None else None):
            raise ProtocolError("unsupported_event", "output_audio_buffer.clear is for WebRTC calls: over a "
                                "WebSocket the client holds (and clears) the audio it plays", param="type")
