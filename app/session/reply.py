"""One reply: an explicit state machine over the reply's stages, writing to its :class:`ReplyOutput`.

States (``ReplyState``): a reply starts ``HELD`` (prepared at the caller's first pause, nothing sent) or
``LIVE``. A held reply is ``adopt``-ed at the commit (it becomes live, its held events go out in order) or
``discard``-ed when the caller goes on speaking. A live reply ends ``DONE``, ``CANCELLED`` (barge-in, the
client, the connection) or ``FAILED``. Whatever happens to its task — even a cancel before it ever ran — the
reply reaches exactly one end state and sends exactly one ``response.done``, so the session's response slot
(``active``) is never left taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import numpy as np

from sub250 import logs
from sub250.asr.base import Need
from sub250.protocol import server_events as ev
from sub250.protocol.events import ProtocolError, new_id
from sub250.session import answer_plan, reply_end, stages
from sub250.session.conversation import FunctionCall, Item
from sub250.session.delivery import Delivery
from sub250.session.output import ReplyOutput
from sub250.session.reply_context import ReplyContext, ReplyOptions
from sub250.session.turn import UserTurn, Words
from sub250.tools import ToolCall
from sub250.tts.base import SpeechNeed

log = logging.getLogger(__name__)


class ReplyState(enum.Enum):
    HELD = "held"
    LIVE = "live"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"
    DISCARDED = "discarded"


ACTIVE = (ReplyState.HELD, ReplyState.LIVE)
#: The wire's ``response.status`` of each end state.
STATUS = {ReplyState.DONE: "completed", ReplyState.CANCELLED: "cancelled", ReplyState.FAILED: "failed"}


class Reply:
    def __init__(self, context: ReplyContext, turn: UserTurn, options: ReplyOptions, output: ReplyOutput, *,
                 audio: np.ndarray | None = None, started_ns: int = 0, idle: bool = False) -> None:
        """``audio``: the caller's speech still to transcribe (None: ``turn.transcript`` is the question).
        ``output`` held: the reply is speculative until :meth:`adopt`. ``idle``: the nudge after the caller's
        long silence (``idle_timeout_ms``), not an answer."""
        self.id, self.item_id = output.response_id, output.item_id
        self.context, self.turn, self.options, self.output = context, turn, options, output
        self.stack, self.tuning, self.stats = context.stack, context.tuning, context.stats
        self.conversation = context.conversation
        self.audio = audio
        self.started_ns = started_ns
        self.idle = idle
        #: Set once ``response.done`` is out (a held reply that is discarded never finishes).
        self.finished = asyncio.Event()
        self.state = ReplyState.HELD if output.held else ReplyState.LIVE
        self.cancel_reason = "client_cancelled"
        self.engine_request_id = f"{self.id}-{new_id('req')[-6:]}"
        self.task: asyncio.Task | None = None
        #: The caller's words this reply answers: a text turn's at once, a spoken one's once transcribed.
        self.words = Words(None if audio is not None else turn.transcript)
        #: What of the reply reached the client.
        self.delivery = Delivery(options.audio, turn.timeline)
        self._speaker: stages.Speaker | None = None
        #: Paused with ``[interruption] hold_speech``: the speaker synthesizes nothing new until resumed.
        self._speech_held = False
        #: The tool call this reply made instead of speaking (its output item), if any.
        self._call: FunctionCall | None = None
        #: The item the reply follows in the conversation: the question, or the last tool output it answers from.
        self._after = turn.item_id
        #: Set when the stages end: (status, error). The reply is finished once that is told to the client.
        self._ended: tuple[str, BaseException | None] | None = None
        self._final_reported = False
        #: The answer has started (any path), its output item announced (a reply to silence has none): from here
        #: the turn gets a final latency report.
        self._answering = False
        self._waiting_rtt = False

    @property
    def question(self) -> str | None:
        """The caller's words this reply answers, if known yet (``words.wait`` waits for them)."""
        return self.words.text

    # --- lifecycle (the session calls these) ---------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def completed(self) -> bool:
        return self.state is ReplyState.DONE

    def start(self, spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task]) -> None:
        self._say(ev.response_created(ev.response_object(
            self.id, self.context.conversation_id, "in_progress", output_modalities=list(self.options.modalities),
            metadata=self.options.metadata)))
        self.task = spawn(self._run())
        self.task.add_done_callback(self._task_done)

    def cancel(self, reason: str) -> None:
        """Stop a live reply now: unsent audio and text are dropped, the engine request is aborted."""
        if self.state is not ReplyState.LIVE:
            return
        self.state = ReplyState.CANCELLED
        self.cancel_reason = reason
        dropped = self.output.stop()
        log.debug("cancel %s (%s): %d queued events dropped", self.id, reason, dropped)
        if self.task is not None:
            self.task.cancel()

    def pause(self) -> None:
        """A suspected interruption: nothing more leaves (and, on WebRTC, its queued audio stops playing)
        until :meth:`resume` or :meth:`interrupted`; the generation goes on meanwhile, and so does speech
        synthesis unless ``[interruption] hold_speech`` holds it (the check of the sound gets the core)."""
        if self.state is ReplyState.LIVE:
            self.output.pause()
            if self.tuning.interruption.hold_speech:
                self._speech_held = True
                if self._speaker is not None:
                    self._speaker.hold()

    def resume(self) -> None:
        """It was not an interruption: play on from where the pause stopped the reply (and if its stages ended
        meanwhile, it is done now)."""
        self._speech_held = False
        if self._speaker is not None:
            self._speaker.release()
        self.output.resume()
        if self.state is ReplyState.LIVE and self._ended is not None:
            self._finish()

    def interrupted(self) -> None:
        """It was one: the reply is cancelled - even if its stages ended while it was paused, since the caller
        did not hear the rest - and what it had not sent is dropped."""
        if self.state is ReplyState.LIVE:
            self.cancel("turn_detected")
            if self._ended is not None:
                self._finish()
        else:
            self.output.stop()

    def discard(self) -> None:
        """The caller went on speaking: throw the held reply away; nothing of it was ever sent."""
        if self.state is not ReplyState.HELD:
            return
        self.state = ReplyState.DISCARDED
        self.output.discard()
        self.stats.speculation_discarded()
        if self.task is not None:
            self.task.cancel()

    def adopt(self, commit_ns: int) -> None:
        """The turn is committed as it was at the pause: the held reply becomes the reply, released at once."""
        if self.state is not ReplyState.HELD:
            return
        self.state = ReplyState.LIVE
        self.turn.timeline.rebase_to_commit(commit_ns, self.started_ns)
        self.stats.speculation_adopted()
        if self.turn.transcript is not None:
            self.conversation.set_transcript(self.turn.item_id, self.turn.transcript)
        self.output.release()
        if self._ended is not None:
            self._finish()  # it was ready before the commit

    # --- the stages ----------------------------------------------------------------------------------

    async def _run(self) -> None:
        logs.TURN_ID.set(self.turn.timeline.turn_id)  # this task's log lines, and its stages'
        status, error = "completed", None
        try:
            if self.idle:
                await self._nudge()
            elif question := await self._question():
                await self._answer(question)
        except asyncio.CancelledError:
            status = "cancelled"
        except Exception as exc:
            status, error = "failed", exc
        finally:
            if self._speaker is not None:
                self._speaker.stop()  # a cancelled or failed reply speaks no more
            if status == "cancelled" and self.turn.timeline.has("llm_submit"):
                try:
                    await self.stack.llm.abort(self.engine_request_id)
                except Exception:
                    log.warning("reply %s: aborting engine request %s failed", self.id, self.engine_request_id,
                                exc_info=True)
            self._end(status, error)

    # How urgent this reply's transcript and first audio are: the caller waits once live; speculative while held.
    def _need(self) -> Need:
        return Need.FINAL if self.state is ReplyState.LIVE else Need.AHEAD

    def _speech_need(self) -> SpeechNeed:
        return SpeechNeed.FIRST if self.state is ReplyState.LIVE else SpeechNeed.AHEAD

    async def _question(self) -> str:
        """The caller's words: transcribed now (a spoken turn) or already known (text)."""
        turn = self.turn
        if self.audio is None:
            return turn.transcript or ""
        try:
            text = await stages.transcribe(self.stack.asr, self.audio, turn.timeline, self.options.transcription_prompt,
                                           need=self._need)
        except stages.TranscriptionFailed as exc:
            self._say(ev.transcription_failed(turn.item_id, exc.message))
            raise
        turn.transcript = text
        self.words.heard(text)
        # Held: the conversation gets it when the commit adopts the reply; the events go out in the same order.
        item = self.conversation.set_transcript(turn.item_id, text) if self.state is ReplyState.LIVE else \
            Item(turn.item_id, "user", "input_audio", text)
        if item is not None:
            for event in ev.transcript_done(item.to_wire(), text, turn.audio_end_ms / 1000):
                self._say(event)
        return text.strip()

    async def _answer(self, question: str) -> None:
        answerer = self._answerer()
        answer = await answer_plan.decide(self.context, self.options, self.turn, question, answerer,
                                          heard=self.audio is not None, request_id=self.engine_request_id)
        if answer.retrieval_failed:
            self._say(ev.error(ProtocolError("retrieval_unavailable", "the knowledge base is unavailable; answering "
                                             "without it", type="server_error")))
        if answer.call is not None:
            self._call_tool(answer.call)
            return
        self._after = answer.after or self._after
        if answer.sources is not None:
            self.output.send(ev.sources(self.id, self.turn.item_id, answer.sources))
        await self._speak(answerer, answer.plan)

    def _answerer(self) -> Any:
        policy = self.tuning.answer if self.options.grounding else self.tuning.answer.ungrounded()
        return stages.answerer(self.stack, self.tuning, policy)

    async def _nudge(self) -> None:
        answerer = self._answerer()
        plan = await answerer.plan_idle(self.options.instructions, self.conversation.for_prompt(exclude=self.turn.item_id),
                                        self.turn.timeline)
        await self._speak(answerer, plan)

    async def _speak(self, answerer: Any, plan: Any) -> None:
        """The reply's message item, its text as the plan gives it, and its audio."""
        tl, opts = self.turn.timeline, self.options
        part: ev.PartType = "output_audio" if opts.audio else "output_text"
        item = ev.message_item(self.item_id, "assistant", "in_progress", [])
        self._answering = True
        self.output.send(ev.output_item_added(self.id, item))
        self.output.send(ev.item_added(item, self.conversation.last_id))
        self.output.send(ev.content_part_added(self.id, self.item_id, ev.content_part(part, "")))
        self._speaker = speaker = stages.Speaker(self.stack.tts, tl, self._send_audio,
                                                 first_clause=self.tuning.first_clause,
                                                 first_need=self._speech_need,
                                                 playback_left_ms=self.delivery.playback_left_ms) if opts.audio else None
        if speaker is not None and self._speech_held:
            speaker.hold()
        async with contextlib.aclosing(answerer.speak(plan, self.engine_request_id, opts.max_tokens, tl)) as texts:
            async for text in texts:
                self._put_text(text, speaker)
        if speaker is not None:
            await speaker.finish()

    def _call_tool(self, call: ToolCall) -> None:
        """The reply is a ``function_call`` item: the client runs the tool, sends its output, asks again."""
        tl = self.turn.timeline
        tl.mark("first_token")  # the call is ready: the first thing of this response the client gets
        self._call = fc = FunctionCall(self.item_id, new_id("call"), call.name, call.arguments, status="in_progress")
        self._answering = True
        self.output.send(ev.output_item_added(self.id, fc.to_wire()))
        self.output.send(ev.item_added(fc.to_wire(), self.conversation.last_id))
        self.output.send(ev.function_call_arguments_delta(self.id, fc.id, fc.call_id, fc.arguments),
                         on_sent=self._call_sent)
        self.output.send(ev.function_call_arguments_done(self.id, fc.id, fc.call_id, fc.name, fc.arguments))

    def _call_sent(self, ns: int) -> None:
        self.turn.timeline.mark("first_token_sent", ns)
        if self._call is not None:
            self._call.sent_ns = ns
        self._report_final_if_ready()

    def _put_text(self, text: str, speaker: stages.Speaker | None) -> None:
        self.delivery.queue_text(text)
        self.output.send(ev.text_delta(self.id, self.item_id, text, audio=self.options.audio),
                         on_sent=self._text_sent(text))
        if speaker is not None:
            speaker.put(text)

    # --- what reached the client ---------------------------------------------------------------------

    def _text_sent(self, text: str) -> Callable[[int], None]:
        def sent(ns: int) -> None:
            self.delivery.text_sent(text, ns)
            self._report_final_if_ready()

        return sent

    def _send_audio(self, pcm: memoryview, words: float = 0.0) -> None:
        ms = self.delivery.queue_audio(len(pcm))

        def sent(ns: int) -> None:
            if self.delivery.audio_sent(ms, words, ns) and not self._report_final_if_ready():
                # the first report, as soon as the caller can hear something
                self._say(ev.turn_latency(self.id, self.turn.timeline.report(final=False)))

        self.output.send_audio(pcm, on_sent=sent)

    # --- the end -------------------------------------------------------------------------------------

    def _say(self, event: dict[str, Any]) -> None:
        """A lifecycle event: never purged by a barge-in (held like the rest while the reply is speculative)."""
        self.output.send(event, keep=True)

    def _task_done(self, task: asyncio.Task) -> None:
        """However the task ended — even cancelled before it ever ran — the reply ends."""
        if self._ended is None:
            error = None if task.cancelled() else task.exception()
            self._end("cancelled" if error is None else "failed", error)

    def _end(self, status: str, error: BaseException | None) -> None:
        if self._ended is not None:
            return
        self._ended = (status, error)
        if self.state is ReplyState.CANCELLED or (self.state is ReplyState.LIVE and not self.output.paused):
            self._finish()
        # HELD: finished when adopted; LIVE but paused: when resumed or interrupted; DISCARDED: never told

    def _finish(self) -> None:
        if self.finished.is_set() or self._ended is None:
            return
        self.finished.set()
        status, error = self._ended
        if self.state is ReplyState.CANCELLED:
            status = "cancelled"
        self.state = {"completed": ReplyState.DONE, "cancelled": ReplyState.CANCELLED}.get(status, ReplyState.FAILED)
        tl = self.turn.timeline
        tl.mark("response_done")
        tl.outcome = STATUS[self.state]
        if status == "cancelled":
            self.stats.cancelled += 1
        completed = self.state is ReplyState.DONE
        if self._call is not None:
            events, in_history, wire_item = reply_end.call(self.id, self._call, completed=completed), completed, \
                self._call.to_wire()
            if completed:
                self.conversation.add(self._call, after=self.turn.item_id)
        else:
            item, wire_item, events = reply_end.message(self.id, self.item_id, self.delivery, completed=completed,
                                                        announced=self._answering)
            in_history = item is not None
            if item is not None:  # it answers the caller's item, even if the caller spoke again meanwhile
                self.conversation.add(item, after=self._after)
                self.delivery.item = item
        for event in events:
            self._say(event)
        details: dict[str, Any] | None = {"type": "cancelled", "reason": self.cancel_reason} \
            if self.state is ReplyState.CANCELLED else None
        if self.state is ReplyState.FAILED:
            self.stats.errors += 1
            err = reply_end.failure(self.id, error)
            self._say(ev.error(err))
            details = {"type": "failed", "error": {"type": err.type, "code": err.code, "message": err.message}}
        self._say(ev.response_done(ev.response_object(
            self.id, self.context.conversation_id, STATUS[self.state], status_details=details,
            output=[wire_item] if in_history else [], output_tokens=tl.tokens, metadata=self.options.metadata)))
        if self.options.audio:
            self.output.audio_done()
        self._report_final_if_ready()

    def _report_final_if_ready(self) -> bool:
        """Send the final latency report once the reply is finished and, when it completed, once what it queued
        first has reached the client and the turn's round trip is measured (bounded by the ping timeout)."""
        tl = self.turn.timeline
        if not self.finished.is_set() or self._final_reported or not self._answering:
            return False
        rtt = self.turn.rtt
        if rtt is not None and not rtt.done():
            if not self._waiting_rtt:
                self._waiting_rtt = True
                # (cancelled: the session is closing, nobody is left to report to)
                rtt.add_done_callback(lambda t: None if t.cancelled() else self._report_final_if_ready())
            return False
        if self.state is ReplyState.DONE and not self.delivery.reached(called=self._call is not None):
            return False
        self._final_reported = True
        self._say(ev.turn_latency(self.id, tl.report(final=True)))
        self.stats.turn_reported(tl)
        return True
