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
from dataclasses import dataclass
from typing import Any

import numpy as np

from sub250 import logs
from sub250.asr.base import Need
from sub250.audio.rates import OUTPUT_RATE
from sub250.metrics.timeline import now_ns
from sub250.protocol import server_events as ev
from sub250.protocol import tools as t
from sub250.protocol.events import ProtocolError, new_id
from sub250.protocol.session_config import SessionConfig
from sub250.session import stages
from sub250.session.conversation import Conversation, FunctionCall, Item
from sub250.session.output import ReplyOutput
from sub250.session.stats import SessionStats
from sub250.session.tuning import PipelineTuning
from sub250.session.turn import UserTurn
from sub250.tools import ToolArgumentsError, ToolCall
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


@dataclass(frozen=True)
class ReplyOptions:
    """What this reply does, resolved from the session's configuration and a ``response.create``'s overrides."""

    instructions: str
    modalities: tuple[str, ...]
    max_tokens: int
    tools: tuple[t.FunctionTool, ...] = ()
    tool_choice: t.ToolChoice = t.AUTO
    #: The session's transcription prompt for the caller's words this reply transcribes (None: the profile's).
    transcription_prompt: str | None = None
    #: ``response.create``'s ``metadata``, echoed on the response object (clients match their request by it).
    metadata: dict[str, str] | None = None
    #: ``session.sub250.grounding``: False, the client turned the gate and the extract off (the LLM answers freely).
    grounding: bool = True

    @property
    def audio(self) -> bool:
        return "audio" in self.modalities

    @property
    def may_call_tools(self) -> bool:
        return bool(self.tools) and self.tool_choice.mode != "none"

    @classmethod
    def resolve(cls, config: SessionConfig, overrides: Any = None) -> ReplyOptions:
        """The session's settings with a ``response.create``'s overrides (already validated) applied; a
        ``tool_choice`` naming a function that is not among the resulting tools is refused (ProtocolError)."""
        tools = config.tools if overrides is None or overrides.tools is None else overrides.tools
        choice = (overrides and overrides.tool_choice) or config.tool_choice
        t.check_choice(choice, tools, "response.tool_choice", None)
        return cls(instructions=(overrides and overrides.instructions) or config.instructions,
                   modalities=(overrides and overrides.output_modalities) or config.output_modalities,
                   max_tokens=(overrides and overrides.max_output_tokens) or config.max_output_tokens,
                   tools=tools, tool_choice=choice, transcription_prompt=config.transcription_prompt,
                   metadata=overrides.metadata if overrides is not None else None, grounding=config.grounding)


class Reply:
    def __init__(self, turn: UserTurn, options: ReplyOptions, *, stack: Any, tuning: PipelineTuning,
                 conversation: Conversation, output: ReplyOutput, stats: SessionStats, conversation_id: str,
                 audio: np.ndarray | None = None, started_ns: int = 0, idle: bool = False) -> None:
        """``audio``: the caller's speech still to transcribe (None: ``turn.transcript`` is the question).
        ``output`` held: the reply is speculative until :meth:`adopt`. ``idle``: the nudge after the caller's
        long silence (``idle_timeout_ms``), not an answer."""
        self.id, self.item_id = output.response_id, output.item_id
        self.turn, self.options, self.stack, self.tuning = turn, options, stack, tuning
        self.conversation, self.output, self.stats = conversation, output, stats
        self.conversation_id = conversation_id
        self.audio = audio
        self.started_ns = started_ns
        self.idle = idle
        #: Set once ``response.done`` is out (a held reply that is discarded never finishes).
        self.finished = asyncio.Event()
        self.state = ReplyState.HELD if output.held else ReplyState.LIVE
        self.cancel_reason = "client_cancelled"
        self.engine_request_id = f"{self.id}-{new_id('req')[-6:]}"
        self.task: asyncio.Task | None = None
        #: The caller's words this reply answers once transcribed (``transcribed`` is set then); a text turn's at once.
        self.question: str | None = None if audio is not None else turn.transcript
        self.transcribed = asyncio.Event()
        if self.question is not None:
            self.transcribed.set()
        #: Generated text; what of it was written to the client; reply audio handed to / sent by the transport.
        self.text = ""
        self.text_sent = ""
        self.audio_queued_ms = 0.0
        self.audio_sent_ms = 0.0
        #: Words of the reply whose audio has left (on a media track: was played), from the TTS chunks' words.
        self.words_sent = 0.0
        self._text_queued = False
        self._item_added = False  # the reply's output item was announced (a reply to silence has none)
        self._speaker: stages.Speaker | None = None
        #: Paused with ``[interruption] hold_speech``: the speaker synthesizes nothing new until resumed.
        self._speech_held = False
        #: The tool call this reply made instead of speaking (its output item), if any.
        self._call: FunctionCall | None = None
        #: The item the reply follows in the conversation: the question, or the last tool output it answers from.
        self._after = turn.item_id
        #: The reply's item in the conversation once finished: audio leaving later still counts for truncation.
        self._item: Item | None = None
        #: Set when the stages end: (status, error). The reply is finished once that is told to the client.
        self._ended: tuple[str, BaseException | None] | None = None
        self._final_reported = False
        #: The answer has started (any path): from here the turn gets a final latency report.
        self._answering = False
        self._waiting_rtt = False

    async def words(self, timeout_s: float) -> str | None:
        """The caller's words this reply answers, waiting at most ``timeout_s`` for their transcription; None when
        they are not known by then."""
        try:
            await asyncio.wait_for(self.transcribed.wait(), timeout_s)
        except TimeoutError:
            return None
        return self.question

    # --- lifecycle (the session calls these) ---------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def completed(self) -> bool:
        return self.state is ReplyState.DONE

    def start(self, spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task]) -> None:
        self._say(ev.response_created(ev.response_object(
            self.id, self.conversation_id, "in_progress", output_modalities=list(self.options.modalities),
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

    def _need(self) -> Need:
        """How urgent this reply's transcript is: committed work once live, speculative while held."""
        return Need.FINAL if self.state is ReplyState.LIVE else Need.AHEAD

    def _speech_need(self) -> SpeechNeed:
        """How urgent this reply's first audio is: the caller waits for it once live; speculative while held."""
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
        turn.transcript = self.question = text
        self.transcribed.set()
        # Held: the conversation gets it when the commit adopts the reply; the events go out in the same order.
        item = self.conversation.set_transcript(turn.item_id, text) if self.state is ReplyState.LIVE else \
            Item(turn.item_id, "user", "input_audio", text)
        if item is not None:
            for event in ev.transcript_done(item.to_wire(), text, turn.audio_end_ms / 1000):
                self._say(event)
        return text.strip()

    async def _answer(self, question: str) -> None:
        turn, tl, opts = self.turn, self.turn.timeline, self.options
        answerer = self._answerer()
        custom = opts.instructions != self.tuning.instructions  # the client's own: a persona; grounding holds
        results = self.conversation.tool_results(after=turn.item_id)
        if results:  # the client ran the tools this question needed: answer from their outputs
            self._after = results[-1][1].id
            stages.record_tool_results(tl, results)
            plan = await answerer.plan_from_tools(question, results, opts.instructions,
                                                  self.conversation.for_prompt(until=turn.item_id), tl)
            await self._speak(answerer, plan)
            return
        found = await stages.retrieve(self.stack.retriever, question, turn)
        if found.failed:
            self._say(ev.error(ProtocolError(
                "retrieval_unavailable", "the knowledge base is unavailable; answering without it",
                type="server_error")))
        if opts.may_call_tools:
            call = await stages.decide_tool(stages.tool_caller(self.stack, self.tuning), question, found,
                                            opts.tools, opts.tool_choice, self.engine_request_id, tl)
            if call is not None:
                self._call_tool(call)
                return
        self.output.send(ev.sources(self.id, turn.item_id, [p.as_source() for p in found.passages]))
        plan = await answerer.plan(question, found, opts.instructions,
                                   self.conversation.for_prompt(exclude=turn.item_id), tl, custom_instructions=custom,
                                   heard=self.audio is not None)
        await self._speak(answerer, plan)

    def _answerer(self) -> Any:
        policy = self.tuning.answer if self.options.grounding else self.tuning.answer.ungrounded()
        return stages.answerer(self.stack, self.tuning, policy)

    async def _nudge(self) -> None:
        answerer = self._answerer()
        plan = await answerer.plan_idle(self.options.instructions, self.conversation.for_prompt(exclude=self.turn.item_id),
                                        self.turn.timeline)
        await self._speak(answerer, plan)

    def playback_left_ms(self) -> float:
        """How much of the reply's audio the caller has still to hear, counted from its first audio frame leaving
        (a client plays it in real time; 0 for a reply without audio)."""
        first = self.turn.timeline.marks.get("first_audio_sent")
        if first is None:
            return self.audio_queued_ms
        return max(0.0, self.audio_queued_ms - (now_ns() - first) / 1e6)

    async def _speak(self, answerer: Any, plan: Any) -> None:
        """The reply's message item, its text as the plan gives it, and its audio."""
        tl, opts = self.turn.timeline, self.options
        part: ev.PartType = "output_audio" if opts.audio else "output_text"
        item = ev.message_item(self.item_id, "assistant", "in_progress", [])
        self._item_added = True
        self.output.send(ev.output_item_added(self.id, item))
        self.output.send(ev.item_added(item, self.conversation.last_id))
        self.output.send(ev.content_part_added(self.id, self.item_id, ev.content_part(part, "")))
        self._speaker = speaker = stages.Speaker(self.stack.tts, tl, self._send_audio,
                                                 first_clause=self.tuning.first_clause,
                                                 first_need=self._speech_need,
                                                 playback_left_ms=self.playback_left_ms) if opts.audio else None
        if speaker is not None and self._speech_held:
            speaker.hold()
        self._answering = True
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
        self._item_added = True
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
        self.text += text
        self._text_queued = True
        self.output.send(ev.text_delta(self.id, self.item_id, text, audio=self.options.audio),
                         on_sent=self._text_sent(text))
        if speaker is not None:
            speaker.put(text)

    # --- what reached the client ---------------------------------------------------------------------

    def _text_sent(self, text: str) -> Callable[[int], None]:
        def sent(ns: int) -> None:
            self.turn.timeline.mark("first_token_sent", ns)
            self.text_sent += text
            self._report_final_if_ready()

        return sent

    def _send_audio(self, pcm: memoryview, words: float = 0.0) -> None:
        ms = len(pcm) / 2 / OUTPUT_RATE * 1000
        self.audio_queued_ms += ms

        def sent(ns: int) -> None:
            tl = self.turn.timeline
            first = not tl.has("first_audio_sent")
            tl.mark("first_audio_sent", ns)
            self.audio_sent_ms += ms
            self.words_sent += words
            if self._item is not None:
                self._item.audio_ms = self.audio_sent_ms
            if first and not self._report_final_if_ready():
                # the first report, as soon as the caller can hear something
                self._say(ev.turn_latency(self.id, tl.report(final=False)))

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
        in_history, wire_item = self._call_item(completed) if self._call is not None else self._message_item(completed)
        details: dict[str, Any] | None = None
        if self.state is ReplyState.CANCELLED:
            details = {"type": "cancelled", "reason": self.cancel_reason}
        elif self.state is ReplyState.FAILED:
            error_id = new_id("err")
            code, message = "response_failed", f"the response failed (error id {error_id})"
            if isinstance(error, ToolArgumentsError):  # the model's mistake, said as such (no exception text)
                code, message = "tool_arguments_invalid", f"{error} (error id {error_id})"
                log.warning("reply %s: %s (error id %s)", self.id, error, error_id)
            else:
                log.error("reply %s failed (error id %s)", self.id, error_id, exc_info=error)
            self.stats.errors += 1
            self._say(ev.error(ProtocolError(code, message, type="server_error")))
            details = {"type": "failed", "error": {"type": "server_error", "code": code, "message": message}}
        self._say(ev.response_done(ev.response_object(
            self.id, self.conversation_id, STATUS[self.state], status_details=details,
            output=[wire_item] if in_history else [], output_tokens=tl.tokens, metadata=self.options.metadata)))
        if self.options.audio:
            self.output.audio_done()
        self._report_final_if_ready()

    def _message_item(self, completed: bool) -> tuple[bool, dict[str, Any]]:
        """The spoken or written reply joins the conversation; returns (in history, its wire item)."""
        # The conversation keeps what the caller actually got: everything on completion; otherwise the words
        # whose audio left (a media track: was played) or, for a written reply, the text sent.
        kept = self.text if completed else self._heard()
        part: ev.PartType = "output_audio" if self.options.audio else "output_text"
        item = Item(self.item_id, "assistant", part, kept, status="completed" if completed else "incomplete",
                    audio_ms=self.audio_sent_ms)
        in_history = self._item_added and (bool(kept) or completed)
        if in_history:  # it answers the caller's item, even if the caller spoke again meanwhile
            self.conversation.add(item, after=self._after)
            self._item = item
        wire_item = item.to_wire()
        if completed and self._item_added and (self.text or self.options.audio):
            for event in ev.content_done(self.id, self.item_id, self.text, audio=self.options.audio):
                self._say(event)
            self._say(ev.content_part_done(self.id, self.item_id, ev.content_part(part, self.text)))
            self._say(ev.output_item_done(self.id, wire_item))
            self._say(ev.item_done(wire_item))
        return in_history, wire_item

    def _heard(self) -> str:
        if not self.options.audio:
            return self.text_sent
        return " ".join(self.text.split()[:round(self.words_sent)])

    def _call_item(self, completed: bool) -> tuple[bool, dict[str, Any]]:
        """A completed tool call joins the conversation (its output will name it); a cancelled one is dropped."""
        call = self._call
        assert call is not None
        call.status = "completed" if completed else "incomplete"
        if completed:
            self.conversation.add(call, after=self.turn.item_id)
            self._say(ev.output_item_done(self.id, call.to_wire()))
            self._say(ev.item_done(call.to_wire()))
        return completed, call.to_wire()

    def _report_final_if_ready(self) -> bool:
        """Send the final latency report once the reply is finished and, when it completed, once what it queued
        first has reached the client (a media track plays audio in real time, so generation can end first) and
        the turn's round trip is measured (bounded by the transport's ping timeout)."""
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
        if self.state is ReplyState.DONE and (
                ((self._text_queued or self._call is not None) and not tl.has("first_token_sent"))
                or (self.audio_queued_ms and not tl.has("first_audio_sent"))):
            return False
        self._final_reported = True
        self._say(ev.turn_latency(self.id, tl.report(final=True)))
        self.stats.turn_reported(tl)
        return True
